"""The record of every check a test makes (match, wait_for_match, ocr,
match_text, wait_for_motion, is_screen_black), so that a failed run shows
why it failed.

Each check becomes one JSON line in ``checks.jsonl`` of the run's result
folder (the test's working directory, or ``FARMHAND_CHECKS_DIR``), with the
frame it looked at saved as ``checks/<n>.jpg`` and a match's template as
``checks/template-<digest>.png``. Recording only happens inside a farmhand
run (``FARMHAND_CONTROL_SOCKET`` set) unless ``FARMHAND_CHECKS_DIR`` is set.

The test's thread only builds the record and puts it on a bounded queue; a
background thread encodes the frames and writes the lines, so a check costs
well under a millisecond more (test/python/test_stbt_checks.py measures it).

The test's thread never waits for the writer (a check adds well under a
millisecond even in a loop of failing checks; bench/stbt-checks-bench.py):

Sampling (a soak run's result stays small):
- every failing check is kept; with its frame when the queue has room,
  else the last ``LAST_FAILING`` such frames are kept until there is room or
  the test ends, and the older ones' records are written without their frame
  (a polling loop of failing checks outruns the JPEG encoder);
- passing checks (and ``ocr``, which neither passes nor fails): the first
  ``FIRST_PASSING``, then one in ``EVERY_PASSING``, dropped when the queue
  is full; and the last ``LAST_PASSING`` not otherwise kept are written
  when the test ends, so the checks just before a failed assertion are there;
- at most ``MAX_FRAMES`` frames and ``MAX_BYTES`` of lines and frames: past
  that, records are still written but without their frame, and past
  ``MAX_BYTES`` of lines nothing more is written.
"""

import atexit
import collections
import hashlib
import json
import os
import queue
import threading
import time

FILE = "checks.jsonl"
FOLDER = "checks"
FIRST_PASSING = 20
EVERY_PASSING = 10
LAST_PASSING = 5
LAST_FAILING = 3
MAX_FRAMES = 300
MAX_BYTES = 64 << 20
QUEUE_SIZE = 16
JPEG_QUALITY = 80
MAX_WORDS = 200

_lock = threading.Lock()
_state = None
_first_pid = os.getpid()


def _enabled_dir():
    d = os.environ.get("FARMHAND_CHECKS_DIR")
    if d:
        return d
    if os.environ.get("FARMHAND_CONTROL_SOCKET"):
        return os.getcwd()
    return None


class _Recorder:
    def __init__(self, root):
        self.root = root
        self.pid = os.getpid()
        # a forked child (multiprocessing) records beside its parent, under names of its own
        self.prefix = "" if self.pid == _first_pid else "p%d-" % self.pid
        self.n = 0
        self.passing = 0
        self.frames = 0
        self.bytes = 0
        self.dropped = 0
        self.templates = set()
        self.last = collections.deque(maxlen=LAST_PASSING)  # passing checks not kept (yet)
        self.last_failing = collections.deque()  # failing checks with their frame, waiting for room
        self.frameless = collections.deque()  # failing checks' records whose frame was let go
        self.queue = queue.Queue(QUEUE_SIZE)
        self.thread = threading.Thread(target=self._work, name="stbt-checks", daemon=True)
        self.thread.start()
        atexit.register(self.close)

    # -- the test's thread ---------------------------------------------------

    def add(self, record, frame, template, ocr_words, later):
        record["n"] = self.n
        self.n += 1
        job = (record, frame, template, ocr_words, later)
        if record.get("passed") is False:
            # always kept, never waited for: queued with its frame when there is room, else held (the
            # last LAST_FAILING) and the older held ones written without their frame
            while self.last_failing:
                try:
                    self.queue.put_nowait(self.last_failing[0])
                except queue.Full:
                    break
                self.last_failing.popleft()
            if not self.last_failing:
                try:
                    self.queue.put_nowait(job)
                    return
                except queue.Full:
                    pass
            self.last_failing.append(job)
            if len(self.last_failing) > LAST_FAILING:
                old = self.last_failing.popleft()
                old[0]["frame_dropped"] = "the writer was behind"
                self.frameless.append((old[0], None) + old[2:])
            return
        self.passing += 1
        if self.passing <= FIRST_PASSING or self.passing % EVERY_PASSING == 0:
            try:
                self.queue.put_nowait(job)
                return
            except queue.Full:
                self.dropped += 1
        self.last.append(job)

    def close(self, timeout=10.0):
        """Write the last passing checks and wait (up to ``timeout``) for the writer."""
        while self.last_failing:
            self.queue.put(self.last_failing.popleft())
        while self.last:
            job = self.last.popleft()
            job[0]["sampled"] = "last"
            self.queue.put(job)
        self.queue.put(None)
        self.thread.join(timeout)

    # -- the writer thread -----------------------------------------------------

    def _work(self):
        while True:
            job = self.queue.get()
            while self.frameless:
                self._write_safely(self.frameless.popleft())
            if job is None:
                return
            self._write_safely(job)

    def _write_safely(self, job):
        try:
            self._write(*job)
        except Exception:  # pylint: disable=broad-except
            pass  # a record lost is better than a test that fails for it

    def _write(self, record, frame, template, ocr_words, later):
        import cv2  # pylint: disable=import-outside-toplevel
        folder = os.path.join(self.root, FOLDER)
        if ocr_words is not None:
            record["words"] = ocr_words()
        if later is not None:
            try:
                record.update(later())
            except Exception:  # pylint: disable=broad-except
                pass  # the record without those fields
        if frame is not None and self.frames < MAX_FRAMES and self.bytes < MAX_BYTES:
            os.makedirs(folder, exist_ok=True)
            name = "%s%d.jpg" % (self.prefix, record["n"])
            ok, data = cv2.imencode(".jpg", _bgr(frame), [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
            if ok:
                with open(os.path.join(folder, name), "wb") as f:
                    f.write(data.tobytes())
                self.frames += 1
                self.bytes += len(data)
                record["frame"] = FOLDER + "/" + name
                record["frame_size"] = [int(frame.shape[1]), int(frame.shape[0])]
        if template is not None:
            digest = hashlib.blake2b(template.tobytes(), digest_size=8)
            digest.update(repr(template.shape).encode())
            name = "template-%s.png" % digest.hexdigest()
            if name not in self.templates and self.bytes < MAX_BYTES:
                os.makedirs(folder, exist_ok=True)
                ok, data = cv2.imencode(".png", template)
                if ok:
                    with open(os.path.join(folder, name), "wb") as f:
                        f.write(data.tobytes())
                    self.templates.add(name)
                    self.bytes += len(data)
            if name in self.templates:
                record["template"] = FOLDER + "/" + name
        line = json.dumps(record, default=_jsonable, separators=(",", ":")) + "\n"
        if self.bytes + len(line) > MAX_BYTES:
            self.dropped += 1
            return
        self.bytes += len(line)
        with open(os.path.join(self.root, FILE), "a", encoding="utf-8") as f:
            f.write(line)


def _bgr(frame):
    import numpy as np  # pylint: disable=import-outside-toplevel
    a = np.asarray(frame)
    if a.ndim == 3 and a.shape[2] == 4:
        a = a[:, :, :3]
    return a


def _jsonable(value):
    if hasattr(value, "_asdict"):
        return value._asdict()
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "name") and hasattr(value, "value"):  # enums
        return value.name
    return repr(value)


def region_dict(region):
    """``{"x", "y", "width", "height"}`` of a Region (None for None or Region.ALL-like infinities)."""
    if region is None:
        return None
    try:
        x, y, w, h = int(region.x), int(region.y), int(region.width), int(region.height)
    except (OverflowError, ValueError, TypeError, AttributeError):
        return None
    return {"x": x, "y": y, "width": w, "height": h}


def record(kind, passed, frame, region=None, params=None, template=None, ocr_words=None, later=None,
           **fields):
    """Record one check; never raises, and does nothing outside a farmhand run.

    ``ocr_words``, when given, is called on the writer thread and returns the
    words (``[{"text", "x", "y", "width", "height", "conf"}]``, frame
    coordinates). ``later``, when given, is called on the writer thread too
    and returns more fields of the record (work the test need not wait
    for)."""
    try:
        global _state  # pylint: disable=global-statement
        with _lock:
            if _state is not None and _state.pid != os.getpid():
                _state = None  # forked: the parent's writer thread is not in this process
            if _state is None:
                root = _enabled_dir()
                if root is None:
                    return
                _state = _Recorder(root)
            rec = {"time": getattr(frame, "time", None), "wall": time.time(), "kind": kind, "passed": passed,
                   "region": region_dict(region), "params": params or {}}
            rec.update(fields)
            _state.add(rec, frame, template, ocr_words, later)
    except Exception:  # pylint: disable=broad-except
        pass


def flush(timeout=10.0):
    """Write what is pending and stop the writer (the next check starts a new one)."""
    global _state  # pylint: disable=global-statement
    with _lock:
        state, _state = _state, None
    if state is not None:
        state.close(timeout)
        atexit.unregister(state.close)
