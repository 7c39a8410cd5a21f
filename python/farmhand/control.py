"""The client side of the run's control socket (see ``src/runner/control.ts``).

farmhand gives every test run a Unix socket, named by the environment
variable ``FARMHAND_CONTROL_SOCKET``. Requests are JSON lines; each gets one
JSON line back, and ``get_frame`` answers are followed by the frame's raw
bytes. One connection per process, shared by its threads under a lock, and
opened again after a ``fork`` (a child must not read its parent's answers).
"""

import json
import os
import socket
import threading

from farmhand.errors import ControlError, UITestError

__all__ = ["request", "log_event"]

SOCKET_ENV = "FARMHAND_CONTROL_SOCKET"
# Answers to press come once the IR is sent; anything slower means the daemon is stuck.
DEFAULT_TIMEOUT_SECS = 30.0
_MAX_HEADER = 64 * 1024


class _Connection:
    def __init__(self, path):
        self.path = path
        self.pid = os.getpid()
        self.next_id = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.reader = self.sock.makefile("rb", buffering=1 << 16)

    def close(self):
        for c in (self.reader, self.sock):
            try:
                c.close()
            except OSError:
                pass

    def call(self, op, fields, timeout, into):
        self.next_id += 1
        rid = self.next_id
        self.sock.settimeout(timeout)
        line = json.dumps(dict(fields, id=rid, op=op), separators=(",", ":")) + "\n"
        self.sock.sendall(line.encode("utf-8"))
        raw = self.reader.readline(_MAX_HEADER)
        if not raw.endswith(b"\n"):
            raise EOFError("the daemon closed the control connection")
        header = json.loads(raw)
        if header.get("id") != rid:
            raise EOFError("answer %r does not belong to request %d" % (header.get("id"), rid))
        body = None
        if header.get("ok") and "bytes" in header:
            body = into(header)
            self._read_exactly(memoryview(body).cast("B"), header["bytes"])
        return header, body

    def _read_exactly(self, view, n):
        if len(view) != n:
            raise ValueError("buffer of %d bytes for a body of %d" % (len(view), n))
        got = 0
        while got < n:
            k = self.reader.readinto(view[got:])
            if not k:
                raise EOFError("the daemon closed the control connection in the middle of a frame")
            got += k


_lock = threading.Lock()
_conn = None


def _connection():
    global _conn  # pylint: disable=global-statement
    if _conn is not None and _conn.pid == os.getpid():
        return _conn
    path = os.environ.get(SOCKET_ENV)
    if not path:
        raise UITestError(
            "this needs the farmhand daemon: %s is not set (run the test through farmhand)" % SOCKET_ENV
        )
    try:
        _conn = _Connection(path)
    except OSError as e:
        raise UITestError("cannot reach the farmhand daemon at %s: %s" % (path, e)) from e
    return _conn


def request(op, timeout=DEFAULT_TIMEOUT_SECS, into=None, **fields):
    """Send one request; returns ``(header, body)``.

    ``into(header)`` must return a writable buffer of ``header["bytes"]``
    bytes for answers that carry a body. A refusal by the daemon raises
    ``ControlError`` with its code; a lost or stuck connection raises
    ``UITestError`` (the connection is opened again on the next request).
    """
    global _conn  # pylint: disable=global-statement
    with _lock:
        conn = _connection()
        try:
            header, body = conn.call(op, fields, timeout, into or (lambda h: bytearray(h["bytes"])))
        except (OSError, EOFError, ValueError) as e:
            conn.close()
            _conn = None
            why = "no answer within %s s" % timeout if isinstance(e, socket.timeout) else str(e)
            raise UITestError("control request %s failed: %s" % (op, why)) from e
    if not header.get("ok"):
        raise ControlError(str(header.get("error")), str(header.get("message")))
    return header, body


def log_event(text):
    """Write a line about what the test did into the run's log (``farmhand.log``),
    stamped by the daemon with the same clock as the test's output. Never
    raises: a test outside farmhand, or a daemon that is going away, only
    loses the line."""
    try:
        request("log", text=str(text))
    except Exception:  # pylint: disable=broad-except
        pass
