"""A stand-in for the daemon's side of the run's control socket (the protocol
of src/runner/control.ts), for the stbt tests that need presses and frames
without a whole daemon: the Python side runs its real code path
(farmhand.control over a Unix socket).

Frames are made by a thread at ``fps`` (the header's ``seq`` counts them):
a dark blue picture (RGB 0, 0, 128) with a white 8x8 square at
``x = 4 + 10 * screen``, ``y = 4``; ``KEY_RIGHT`` moves it one step
(``screen += 1``), ``KEY_LEFT`` back.

The ``power`` request (``stbt.PDU``) switches ``outlet``: True (on), False
(off), or None for a node with no outlet configured (refused as the daemon
does for ``power.uri`` "none"); each request is kept in ``power_requests``.
"""

import json
import os
import socket
import tempfile
import threading
import time

KEPT_FRAMES = 256


class FakeDaemon:
    def __init__(self, width=64, height=36, fps=25.0, frames=True):
        self.width, self.height, self.fps = width, height, fps
        self.dir = tempfile.mkdtemp(prefix="stbt-fake-")
        self.path = os.path.join(self.dir, "control.sock")
        self.presses = []  # (key, hold_ms, start, end, released)
        self.logs = []  # (time, text)
        self.draws = []  # (text, duration_secs) of draw_text requests
        self.seq = 0
        # seq -> capture time of the last frames: a loaded machine must not make the test's reader skip one
        # (the daemon keeps 8; the stand-in keeps more, since the test checks frames(), not that bound).
        self.kept = {}
        self.at = None
        self.cond = threading.Condition()
        self.holds = {}
        self.screen = 0
        self.outlet = True
        self.power_requests = []
        self.stopped = threading.Event()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()
        if frames:
            threading.Thread(target=self._capture, daemon=True).start()

    def env(self):
        return {"FARMHAND_CONTROL_SOCKET": self.path}

    def close(self):
        self.stopped.set()
        self.server.close()
        with self.cond:
            self.cond.notify_all()

    def publish(self):
        with self.cond:
            self.seq += 1
            self.at = time.time() * 1000.0
            self.kept[self.seq] = self.at
            self.kept.pop(self.seq - KEPT_FRAMES, None)
            self.cond.notify_all()

    def _capture(self):
        period = 1.0 / self.fps
        due = time.monotonic()
        while not self.stopped.is_set():
            self.publish()
            due += period
            time.sleep(max(0.0, due - time.monotonic()))

    def _accept(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def picture(self, screen):
        """The rgb24 bytes of ``screen``."""
        w, h = self.width, self.height
        rows = []
        x0 = 4 + 10 * screen
        for y in range(h):
            row = bytearray(b"\x00\x00\x80" * w)
            if 4 <= y < 12:
                for x in range(max(0, x0), min(w, x0 + 8)):
                    row[3 * x:3 * x + 3] = b"\xff\xff\xff"
            rows.append(bytes(row))
        return b"".join(rows)

    def _frame(self, rid, seq, at):
        body = self.picture(self.screen)
        header = {"id": rid, "ok": True, "width": self.width, "height": self.height,
                  "format": "rgb24", "bytes": len(body), "seq": seq, "at": at}
        return (json.dumps(header) + "\n").encode() + body

    def _serve(self, conn):
        reader = conn.makefile("rb")
        try:
            for line in reader:
                req = json.loads(line)
                rid, op = req.get("id"), req.get("op")
                if op == "press":
                    out = self._press(req)
                elif op == "release":
                    with self.cond:
                        ev = self.holds.setdefault(req["hold_id"], threading.Event())
                    ev.set()
                    out = {"ok": True}
                elif op == "held":
                    out = {"ok": True, "down": True}
                elif op == "power":
                    out = self._power(req)
                elif op == "log":
                    self.logs.append((time.time(), req["text"]))
                    out = {"ok": True}
                elif op == "draw_text":
                    # As the daemon: the line in the run's log, and the text on the video (here: remembered).
                    secs = req.get("duration_secs", 3)
                    self.logs.append((time.time(), "draw_text: %s (for %s s)" % (req["text"], "%g" % secs)))
                    self.draws.append((req["text"], secs))
                    out = {"ok": True, "drawn": True}
                elif op in ("get_frame", "next_frame"):
                    with self.cond:
                        if self.seq == 0 and op == "get_frame":
                            out = {"ok": False, "error": "device_unavailable", "message": "capture is offline"}
                        else:
                            floor = req.get("after_seq", self.seq if op == "next_frame" else -1)
                            deadline = time.monotonic() + req.get("timeout_ms", 10000) / 1000.0
                            while self.seq <= floor and not self.stopped.is_set():
                                left = deadline - time.monotonic()
                                if left <= 0:
                                    break
                                self.cond.wait(left)
                            seq, at = self.seq, self.at
                            # As the daemon does for a reader that fell behind: the frame after after_seq, while kept.
                            if op == "next_frame" and "after_seq" in req and floor + 1 in self.kept:
                                seq, at = floor + 1, self.kept[floor + 1]
                            out = None if seq > floor else {"ok": True, "none": True}
                    if out is None:
                        conn.sendall(self._frame(rid, seq, at))
                        continue
                else:
                    out = {"ok": False, "error": "invalid_request", "message": "unknown op"}
                out["id"] = rid
                conn.sendall((json.dumps(out) + "\n").encode())
        except (OSError, ValueError):
            pass
        finally:
            conn.close()

    def _power(self, req):
        self.power_requests.append({k: v for k, v in req.items() if k != "id"})
        if self.outlet is None:
            return {"ok": False, "error": "not_found",
                    "message": "this node has no power outlet (power.uri is \"none\")"}
        if "outlet" in req:  # as the daemon with no power.outlets: only the device under test's
            return {"ok": False, "error": "not_found", "message": "no outlet %s on this node" % json.dumps(req["outlet"])}
        if "on" in req:
            if not isinstance(req["on"], bool):
                return {"ok": False, "error": "invalid_request", "message": "\"on\" must be true or false"}
            self.outlet = req["on"]
        return {"ok": True, "on": self.outlet}

    def _press(self, req):
        if req["key"] == "KEY_MISSING":
            return {"ok": False, "error": "not_found", "message": "no key KEY_MISSING"}
        start = time.time()
        if req["key"] == "KEY_RIGHT":
            self.screen += 1
        elif req["key"] == "KEY_LEFT":
            self.screen -= 1
        hold = req.get("hold_ms", 0) / 1000.0
        released = False
        if "hold_id" in req:
            with self.cond:
                ev = self.holds.setdefault(req["hold_id"], threading.Event())
            released = ev.wait(hold)
        elif hold:
            time.sleep(hold)
        self.presses.append((req["key"], req.get("hold_ms", 0), start, time.time(), released))
        return {"ok": True}


class WithDaemon:
    """A unittest mixin: ``self.daemon`` serves this process's control socket for one test."""

    FPS = 25.0
    CAPTURE = True

    def setUp(self):  # pylint: disable=invalid-name
        from farmhand import control  # pylint: disable=import-outside-toplevel
        from stbt_core import _config, _remote  # pylint: disable=import-outside-toplevel

        self.daemon = FakeDaemon(fps=self.FPS, frames=self.CAPTURE)
        self._saved_env = {k: os.environ.get(k) for k in ("FARMHAND_CONTROL_SOCKET", "FARMHAND_CHECKS_DIR")}
        os.environ["FARMHAND_CONTROL_SOCKET"] = self.daemon.path
        # the checks' records (stbt_core/_checks.py) go to the stand-in's folder, not the working directory
        os.environ["FARMHAND_CHECKS_DIR"] = self.daemon.dir
        control._conn = None  # pylint: disable=protected-access
        _remote._last = None  # pylint: disable=protected-access
        _config._reset()  # pylint: disable=protected-access
        if self.CAPTURE:
            with self.daemon.cond:  # the first frame, so get_frame has one
                while self.daemon.seq == 0:
                    self.daemon.cond.wait()

    def tearDown(self):  # pylint: disable=invalid-name
        from farmhand import control  # pylint: disable=import-outside-toplevel
        if control._conn is not None:  # pylint: disable=protected-access
            control._conn.close()  # pylint: disable=protected-access
        control._conn = None  # pylint: disable=protected-access
        from stbt_core import _checks  # pylint: disable=import-outside-toplevel
        _checks.flush()
        self.daemon.close()
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
