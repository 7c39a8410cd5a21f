"""Reading text off the screen: ``ocr``, ``match_text``, ``TextMatchResult``,
``OcrMode``, ``OcrEngine``, ``ocr_eq``, ``apply_ocr_corrections``,
``set_global_ocr_corrections``.

farmhand's own implementation of the behaviour stb-tester documents, on
Debian's tesseract 5 (package ``tesseract-ocr``). Each read goes to a
resident worker: one long-lived child process per test process holding
tesseract in-process through ``python3-tesserocr`` (``_ocr_worker.py``),
with a timeout; a worker that hangs past it is killed and restarted, one
that dies is restarted. Without ``python3-tesserocr`` each read runs the
``tesseract`` command (never through a shell), the picture on its standard
input as PNG. Why, which engine is the default and what the legacy engine
value does: docs/migrating-from-stb-tester.md, section OCR.

Every read is logged in the run's log like ``match`` is. Identical reads
(same pixels, same parameters) are answered from a small cache.
"""

import collections
import enum
import hashlib
import json
import math
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata

from stbt_core import _checks, _imgproc_cache, _ocr_colour
from stbt_core._config import get_config
from stbt_core._errors import ConfigurationError, UITestError
from stbt_core._types import Region

__all__ = ["OcrEngine", "OcrMode", "TextMatchResult", "apply_ocr_corrections", "match_text", "ocr",
           "ocr_eq", "set_global_ocr_corrections"]

TESSERACT = "tesseract"
# upsample=True scales by UPSAMPLE_FACTOR at most: less when the region's smallest line of text is
# already tall, so that it lands near UPSAMPLE_LINE_HEIGHT pixels (tesseract's LSTM model reads best
# there; 40 px text scaled 3x read worse). Never scaled down. Why: docs/stbt-matching.md, OCR accuracy.
UPSAMPLE_FACTOR = 3
UPSAMPLE_LINE_HEIGHT = 50
# A row belongs to a line of text when some pixel differs from the background (median of the crop's
# border) by more than this; runs of such rows shorter than _MIN_LINE_ROWS are rules or noise.
_INK_DIFF = 64
_MIN_LINE_ROWS = 6
DEFAULT_TIMEOUT_SECS = 30.0
_CACHE_SIZE = 64
# text_color (see _text_color_grey): how much a pixel's distance off the background-to-text line (in
# units of that line's length) takes from its share of text, and the weight of chroma against luma in
# that space; both chosen on the training split of test/python/_ocr_corpus.py.
_TEXT_COLOR_OFF_AXIS = 0.5
_TEXT_COLOR_CHROMA_WEIGHT = 0.5
# Below this BGR distance between the region's median colour and the text colour there is no
# background to measure against: a plain ramp of the distance, white at TEXT_COLOR_RAMP.
_TEXT_COLOR_MIN_CONTRAST = 10.0
TEXT_COLOR_RAMP = 200.0
# text_color's second text (see _without_other_colours): a pixel is of another colour when it is
# further than TEXT_COLOR_NEAR from the text colour and than TEXT_COLOR_STRONG from the background (in
# units of their distance) and off the segment between them (the sum of its two squared distances above
# TEXT_COLOR_SEGMENT). Blobs of the share map above TEXT_COLOR_MIN_CUT are dropped when
# TEXT_COLOR_OTHER_SHARE of their pixels are of another colour and they lie within TEXT_COLOR_ZONE line
# heights of a core of such pixels; or when they are thick (TEXT_COLOR_MIN_CORE pixels deep inside)
# and their share never reaches TEXT_COLOR_PEAK. Chosen on the training split of
# test/python/_ocr_corpus.py.
TEXT_COLOR_NEAR = 0.5
TEXT_COLOR_STRONG = 0.5
TEXT_COLOR_SEGMENT = 1.4
TEXT_COLOR_MIN_CUT = 0.2
TEXT_COLOR_OTHER_SHARE = 0.25
TEXT_COLOR_ZONE = 1.0
TEXT_COLOR_MIN_CORE = 3
TEXT_COLOR_PEAK = 0.5
# When text and background differ by TEXT_COLOR_LUMA levels of luma or more, a pixel's share of text is
# its luma's share of the way from the background's to the text's (sharp: a capture's luma is not
# subsampled), times its colour share (above) over TEXT_COLOR_GATE, at most 1: the colour only takes
# out what is far from the text colour. Chosen on the training split.
TEXT_COLOR_LUMA = 25
TEXT_COLOR_GATE = 0.5


def _cv2():
    import cv2  # pylint: disable=import-outside-toplevel
    return cv2


def _np():
    import numpy  # pylint: disable=import-outside-toplevel
    return numpy


class OcrMode(enum.IntEnum):
    """tesseract's page segmentation mode (its ``--psm``): how the region's
    layout is analysed before reading."""
    ORIENTATION_AND_SCRIPT_DETECTION_ONLY = 0
    PAGE_SEGMENTATION_WITH_OSD = 1
    PAGE_SEGMENTATION_WITHOUT_OSD_OR_OCR = 2
    PAGE_SEGMENTATION_WITHOUT_OSD = 3
    SINGLE_COLUMN_OF_TEXT_OF_VARIABLE_SIZES = 4
    SINGLE_UNIFORM_BLOCK_OF_VERTICALLY_ALIGNED_TEXT = 5
    SINGLE_UNIFORM_BLOCK_OF_TEXT = 6
    SINGLE_LINE = 7
    SINGLE_WORD = 8
    SINGLE_WORD_IN_A_CIRCLE = 9
    SINGLE_CHARACTER = 10
    SPARSE_TEXT = 11
    SPARSE_TEXT_WITH_OSD = 12
    RAW_LINE = 13

    def __str__(self):
        return self.name


class OcrEngine(enum.IntEnum):
    """tesseract's engine (its ``--oem``). Debian ships only the LSTM models,
    so ``TESSERACT`` (the legacy engine) and ``TESSERACT_AND_LSTM`` read with
    LSTM: see docs/migrating-from-stb-tester.md."""
    TESSERACT = 0
    LSTM = 1
    TESSERACT_AND_LSTM = 2
    DEFAULT = 3

    def __str__(self):
        return self.name


class TextMatchResult:
    """What ``match_text`` found. True (in ``if`` / ``assert``) when the text
    was found; ``region`` is where (frame coordinates), or ``None``; ``text``
    the text searched for; ``frame`` the frame read, ``time`` its capture
    time."""

    def __init__(self, time, match, region, frame, text):  # pylint: disable=redefined-outer-name
        self.time = time
        self.match = bool(match)
        self.region = region
        self.frame = frame
        self.text = text

    def __bool__(self):
        return self.match

    def __repr__(self):
        return "TextMatchResult(time=%s, match=%r, region=%r, frame=%s, text=%r)" % (
            "None" if self.time is None else "%.3f" % self.time, self.match, self.region,
            _frame_text(self.frame), self.text)


def _frame_text(frame):
    """A frame as the repr shows it, never its pixels: ``<Image(filename=..., dimensions=WxHxC)>``
    for a loaded image, ``<Frame(time=..., dimensions=WxHxC)>`` for a frame."""
    shape = getattr(frame, "shape", None)
    if shape is None or len(shape) < 2:
        return repr(frame)
    dims = "%dx%dx%d" % (shape[1], shape[0], shape[2] if len(shape) == 3 else 1)
    if hasattr(frame, "filename"):
        return "<Image(filename=%r, dimensions=%s)>" % (frame.filename, dims)
    t = getattr(frame, "time", None)
    return "<Frame(time=%s, dimensions=%s)>" % ("None" if t is None else "%.3f" % t, dims)


for _cls in (OcrMode, OcrEngine, TextMatchResult):
    _cls.__module__ = "stbt_core"
del _cls


# ---------------------------------------------------------------------------
# Corrections
# ---------------------------------------------------------------------------

_global_corrections = None


def set_global_ocr_corrections(corrections):
    """Corrections applied by every later ``ocr`` call (after the call's own
    ``corrections``) and by ``apply_ocr_corrections``. ``None`` or ``{}``
    removes them."""
    global _global_corrections  # pylint: disable=global-statement
    _check_corrections(corrections)
    _global_corrections = dict(corrections) if corrections else None


def _check_corrections(corrections):
    if corrections is None:
        return
    if not isinstance(corrections, dict):
        raise TypeError("corrections must be a dict of {text or re.compile(...): replacement}, not %r"
                        % (type(corrections).__name__,))
    for k, v in corrections.items():
        if not isinstance(k, (str, re.Pattern)):
            raise TypeError("a correction's key must be a str or a compiled regex, not %r" % (k,))
        if not isinstance(v, str):
            raise TypeError("a correction's replacement must be a str, not %r" % (v,))


def _apply(text, corrections):
    if not corrections:
        return text
    _check_corrections(corrections)
    # Plain strings first (whole words only), in the dict's order; then the regexes, in order.
    for k, v in corrections.items():
        if isinstance(k, str) and k:
            text = re.sub(r"(?<!\w)" + re.escape(k) + r"(?!\w)", lambda _m, v=v: v, text)
    for k, v in corrections.items():
        if isinstance(k, re.Pattern):
            text = k.sub(v, text)
    return text


def apply_ocr_corrections(text, corrections=None):
    """``text`` with ``corrections`` applied as ``ocr(corrections=)`` does:
    a plain-string key replaces whole words only (``"he saw"`` does not touch
    ``"the saw"``); a compiled regex replaces wherever it matches. Plain
    strings go first, then regexes, each in the dict's order. The global
    corrections (``set_global_ocr_corrections``) are applied after
    ``corrections``."""
    text = _apply(text, corrections)
    return _apply(text, _global_corrections)


# ---------------------------------------------------------------------------
# ocr_eq
# ---------------------------------------------------------------------------

class Replacements(dict):
    """``ocr_eq.replacements``: a dict of ``{text: replacement}`` applied one
    after the other, in the dict's order. A key set later has its
    replacement put through the entries already there first, so
    ``replacements["İ"] = "I"`` makes ``"İ"`` whatever ``"I"`` becomes."""

    def __setitem__(self, key, value):
        super().__setitem__(key, _replace(value, self))


def _replace(text, table):
    for k, v in table.items():
        if k:
            text = text.replace(k, v)
    return text


def _normalize(text):
    """``text`` reduced to what OCR reads reliably: Unicode compatibility
    forms folded, ``ocr_eq.replacements`` applied in order, then spaces and
    punctuation dropped."""
    text = _replace(unicodedata.normalize("NFKC", str(text)), ocr_eq.replacements)
    return "".join(ch for ch in text if not unicodedata.category(ch)[0] in "PZC")


def ocr_eq(a, b):
    """True when ``a`` and ``b`` are the same text as far as OCR can tell:
    characters OCR confuses (0/O/o, 1/l/I/|, 5/S, 8/B, 2/Z, ...) count as
    equal, and spaces and punctuation are ignored; other letters keep their
    case. ``ocr_eq.replacements`` (a ``Replacements`` dict, editable or
    replaceable by any dict) maps each confusable text to its class's
    representative; ``ocr_eq.normalize(text)`` is the reduced form
    compared."""
    return _normalize(a) == _normalize(b)


# Each class of confusable characters goes to one representative; a letter whose capital has the same
# shape goes to one case. The order matters only for entries whose replacement is another's key.
ocr_eq.replacements = Replacements([
    ("O", "o"), ("0", "o"), ("Q", "o"), ("D", "o"),
    ("1", "l"), ("I", "l"), ("|", "l"), ("i", "l"), ("!", "l"),
    ("5", "S"), ("s", "S"), ("$", "S"),
    ("8", "B"), ("&", "B"),
    ("2", "Z"), ("z", "Z"),
    ("6", "G"),
    ("f", "r"),
    ("c", "C"), ("v", "V"), ("w", "W"), ("x", "X"), ("u", "U"), ("p", "P"), ("k", "K"),
])
ocr_eq.normalize = _normalize


# ---------------------------------------------------------------------------
# Running tesseract
# ---------------------------------------------------------------------------

_LANG_RE = re.compile(r"^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$")
_CONFIG_KEY_RE = re.compile(r"^[A-Za-z0-9_]+$")
_langs_lock = threading.Lock()
_langs = None
_cache = collections.OrderedDict()
_cache_lock = threading.Lock()


def _installed_langs():
    """The languages tesseract can load (``tesseract --list-langs``, once per process)."""
    global _langs  # pylint: disable=global-statement
    with _langs_lock:
        if _langs is None:
            out = _run([TESSERACT, "--list-langs"], None, _timeout())
            _langs = frozenset(line.strip() for line in out.decode("utf-8", "replace").splitlines()[1:]
                               if line.strip())
        return _langs


_version = None


def _tesseract_version():
    """tesseract's version as a list of integers (``[5, 3, 0]``), read once per process from
    ``tesseract --version``; a missing tesseract raises as any OCR call would."""
    global _version  # pylint: disable=global-statement
    with _langs_lock:
        if _version is None:
            out = _run([TESSERACT, "--version"], None, _timeout()).decode("utf-8", "replace")
            found = re.search(r"tesseract\s+v?(\d+(?:\.\d+)*)", out)
            if not found:
                raise UITestError("could not read tesseract's version from %r" % (_short(out),))
            _version = [int(n) for n in found.group(1).split(".")]
        return list(_version)


def _debian_package(lang):
    return "tesseract-ocr-" + lang.lower().replace("_", "-")


def _check_lang(lang):
    if not isinstance(lang, str) or not _LANG_RE.match(lang):
        raise ConfigurationError("OCR language %r is not a tesseract language name such as 'eng' or 'eng+deu'"
                                 % (lang,))
    installed = _installed_langs()
    missing = [part for part in lang.split("+") if part not in installed]
    if missing:
        raise ConfigurationError(
            "OCR language %s not installed on this node (installed: %s): install the Debian package%s %s"
            % (", ".join(repr(m) for m in missing) + (" is" if len(missing) == 1 else " are"),
               ", ".join(sorted(installed)) or "none", "" if len(missing) == 1 else "s",
               " ".join(_debian_package(m) for m in missing)))


def _timeout():
    return get_config("ocr", "timeout_secs", DEFAULT_TIMEOUT_SECS, type_=float)


def _run(argv, stdin, timeout):
    """tesseract's standard output for ``argv`` (the command's) with the
    PNG ``stdin``: from the resident worker when it runs, else from the
    command."""
    if stdin is not None and len(argv) > 1 and argv[1] == "stdin" and USE_WORKER:
        out = _worker_read(argv, stdin, timeout)
        if out is not None:
            return out
    return _run_command(argv, stdin, timeout)


# ---------------------------------------------------------------------------
# The resident worker (python3-tesserocr in a child process)
# ---------------------------------------------------------------------------

USE_WORKER = True  # False: every read runs the tesseract command
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ocr_worker.py")
_WORKER_START_SECS = 30.0  # at least; the worker imports numpy, OpenCV and tesserocr
_worker_test_sleep = 0.0  # test hook: the worker sleeps this long before each read
_worker_lock = threading.Lock()
_worker = None  # the running worker's Popen
_worker_missing = False  # python3-tesserocr is not installed: the command it is
_worker_starts = 0  # how many workers this process started
_worker_owner = None  # the process id that started _worker (a forked child starts its own)


def _worker_kill():
    global _worker  # pylint: disable=global-statement
    p, _worker = _worker, None
    if p is None:
        return
    try:
        p.kill()
    except OSError:
        pass
    for f in (p.stdin, p.stdout):
        try:
            f.close()
        except OSError:
            pass
    p.wait()


def _worker_exchange(p, data, timeout):
    """Write ``data`` to the worker and read one answer message within
    ``timeout`` seconds: the decoded JSON, ``None`` on timeout; EOFError when
    the worker is gone."""
    deadline = time.monotonic() + timeout
    out_fd, in_fd = p.stdout.fileno(), p.stdin.fileno() if data else None
    pending = memoryview(data) if data else None
    got = b""
    want = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        writers = [in_fd] if pending is not None and len(pending) else []
        readable, writable, _ = select.select([out_fd], writers, [], left)
        if writable:
            try:
                n = os.write(in_fd, pending[:65536])
            except (BrokenPipeError, ConnectionResetError) as e:
                raise EOFError() from e
            pending = pending[n:]
        if readable:
            chunk = os.read(out_fd, 1 << 20)
            if not chunk:
                raise EOFError()
            got += chunk
            if want is None and len(got) >= 4:
                want = 4 + struct.unpack(">I", got[:4])[0]
            if want is not None and len(got) >= want:
                return json.loads(got[4:want].decode("utf-8"))


def _worker_start():
    """Start the worker; False (logged once) when python3-tesserocr is missing."""
    global _worker, _worker_missing, _worker_starts, _worker_owner  # pylint: disable=global-statement
    env = dict(os.environ)
    env.setdefault("OMP_THREAD_LIMIT", "1")
    p = subprocess.Popen([sys.executable, WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, shell=False, bufsize=0)
    _worker = p
    _worker_owner = os.getpid()
    _worker_starts += 1
    try:
        hello = _worker_exchange(p, None, max(_WORKER_START_SECS, _timeout()))
    except EOFError:
        hello = {"ok": False, "error": "the worker exited on start"}
    if hello is None or not hello.get("ok"):
        _worker_kill()
        _worker_missing = True
        _log("OCR: no resident tesserocr worker (%s): each read runs the tesseract command; install the "
             "Debian package python3-tesserocr" % ("it did not start" if hello is None else hello.get("error")))
        return False
    return True


def _worker_read(argv, png, timeout):
    """The worker's answer, or ``None`` when there is no worker (python3-tesserocr missing)."""
    if _worker_missing:
        return None
    header = json.dumps({"argv": list(argv[3:]), "sleep": _worker_test_sleep}).encode("utf-8")
    data = struct.pack(">I", len(header)) + header + struct.pack(">I", len(png)) + png
    global _worker  # pylint: disable=global-statement
    with _worker_lock:
        if _worker is not None and _worker_owner != os.getpid():
            _worker = None  # a forked child: the worker is its parent's, left alone
        if _worker is None or _worker.poll() is not None:
            _worker_kill()
            if not _worker_start():
                return None
        try:
            answer = _worker_exchange(_worker, data, timeout)
        except EOFError as e:
            status = _worker.poll()
            _worker_kill()
            raise UITestError("the OCR worker (tesserocr) died during the read (exit status %s); it is restarted "
                              "for the next read" % (status,)) from e
        if answer is None:
            _worker_kill()
            raise UITestError("tesseract did not finish within %g s (the [ocr] timeout_secs of stbt.conf)"
                              % timeout)
    if not answer.get("ok"):
        raise UITestError("tesseract failed: %s" % (answer.get("error"),))
    return answer["out"].encode("utf-8")


def _worker_pid():
    """The running worker's process id, or ``None``."""
    p = _worker
    return p.pid if p is not None and _worker_owner == os.getpid() and p.poll() is None else None


def _run_command(argv, stdin, timeout):
    env = dict(os.environ)
    # One thread per tesseract: OpenMP's threads only compete with each other on a shared, loaded machine.
    env.setdefault("OMP_THREAD_LIMIT", "1")
    try:
        p = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, env=env, check=False, shell=False)
    except FileNotFoundError as e:
        raise ConfigurationError("tesseract is not installed on this node: install the Debian packages "
                                 "tesseract-ocr and tesseract-ocr-eng (scripts/setup.sh does)") from e
    except subprocess.TimeoutExpired as e:
        raise UITestError("tesseract did not finish within %g s (the [ocr] timeout_secs of stbt.conf)"
                          % timeout) from e
    if p.returncode != 0:
        err = p.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UITestError("tesseract failed (exit status %s): %s" % (p.returncode, " / ".join(err[-3:])))
    return p.stdout


def _words_data(value, name):
    """The bytes of a --user-words / --user-patterns file: a list is one
    entry a line; a string (or bytes) names a file when there is one by
    that name (relative ones found as ``find_file`` does), else it is one
    entry itself (``tesseract_user_words="192.168.10.1"``)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    if isinstance(value, str) or hasattr(value, "__fspath__"):
        path = os.fspath(value)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not os.path.isabs(path):
            from stbt_core._frames import find_file  # pylint: disable=import-outside-toplevel
            try:
                path = find_file(path)
            except OSError:
                pass
        if os.path.isfile(path):
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as e:
                raise IOError("could not read %s: %s" % (path, e)) from e
        if not isinstance(value, str) or "/" in value:
            raise IOError("could not read %s: no such file" % (path,))
        value = [value]
    lines = [str(w) for w in value]
    if any("\n" in w or "\r" in w for w in lines):
        raise ValueError("%s must not contain line breaks" % name)
    return ("\n".join(lines) + "\n").encode("utf-8")


class _Params:
    """The parameters of one read, with the [ocr] defaults filled in."""

    def __init__(self, mode, lang, tesseract_config, user_words, user_patterns, upsample, text_color,
                 text_color_threshold, engine, char_whitelist):
        self.mode = OcrMode(_enum_value(OcrMode, mode))
        self.read_mode = self.mode  # the mode tesseract is given: see _choose_read_mode
        self.lang = lang if lang is not None else get_config("ocr", "lang")
        self.upsample = bool(upsample if upsample is not None else get_config("ocr", "upsample", type_=bool))
        if text_color is not None:
            from stbt_core._frames import Color  # pylint: disable=import-outside-toplevel
            text_color = tuple(Color(text_color))[:3]
        self.text_color = text_color
        if text_color_threshold is None:
            text_color_threshold = get_config("ocr", "text_color_threshold", type_=float)
        self.text_color_threshold = float(text_color_threshold)
        if engine is None:
            raw = get_config("ocr", "engine")
            try:
                engine = OcrEngine(int(raw)) if raw.strip().isdigit() else OcrEngine[raw.strip().upper()]
            except (KeyError, ValueError) as e:
                raise ConfigurationError("[ocr] engine = %r is not one of %s" % (
                    raw, ", ".join(OcrEngine.__members__))) from e
        requested = OcrEngine(_enum_value(OcrEngine, engine))
        self.requested_engine = requested
        # Debian's language data holds the LSTM models only: the legacy engine cannot load it.
        self.engine = OcrEngine.LSTM if requested in (OcrEngine.TESSERACT, OcrEngine.TESSERACT_AND_LSTM) \
            else requested
        config = dict(tesseract_config or {})
        if char_whitelist is not None:
            config["tessedit_char_whitelist"] = str(char_whitelist)
        for k, v in config.items():
            if not _CONFIG_KEY_RE.match(str(k)):
                raise ValueError("tesseract_config key %r is not a tesseract variable name" % (k,))
            if "\n" in str(v) or "\r" in str(v):
                raise ValueError("tesseract_config value of %s must not contain line breaks" % (k,))
        self.config = {str(k): (str(int(v)) if isinstance(v, bool) else str(v)) for k, v in config.items()}
        self.user_words = user_words
        self.user_patterns = user_patterns
        self.by_words = False  # text_color read as luma, words kept by colour: see _prepare

    def describe(self):
        parts = ["mode=%s" % self.mode.name, "lang=%s" % self.lang, "engine=%s" % self.engine.name]
        if self.read_mode != self.mode:
            parts[0] += " (read as %s: one line of text)" % self.read_mode.name
        if self.requested_engine != self.engine:
            parts[-1] += " (asked %s)" % self.requested_engine.name
        if not self.upsample:
            parts.append("upsample=False")
        if self.text_color is not None:
            parts.append("text_color=#%02x%02x%02x/%g" % (self.text_color[2], self.text_color[1],
                                                        self.text_color[0], self.text_color_threshold))
        if self.config:
            parts.append("config=%s" % ",".join("%s=%s" % kv for kv in sorted(self.config.items())))
        return " ".join(parts)


def _enum_value(cls, value):
    if isinstance(value, str) and value.strip().upper() in cls.__members__:
        return cls[value.strip().upper()]
    return value


_Geometry = collections.namedtuple("_Geometry", "scale line_height lines")


def _line_height(grey):
    """``(height in rows of the shortest line of text, background level,
    number of lines)`` of a grey picture: lines are runs of rows holding a
    pixel far from the background; the height is ``None`` when there is
    none."""
    np = _np()
    border = np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])
    background = int(np.median(border))
    rows = (np.abs(grey.astype(np.int16) - background) > _INK_DIFF).any(axis=1)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], rows.astype(np.int8), [0]])))
    runs = [int(n) for n in edges[1::2] - edges[0::2] if n >= _MIN_LINE_ROWS]
    return (min(runs) if runs else None), background, len(runs)


def _prepare(frame, region, params):
    """``(frame, clipped region or None, grey picture for tesseract,
    _Geometry)``: the region cropped, with ``text_color`` turned into dark
    text on white, and upsampled (see UPSAMPLE_LINE_HEIGHT)."""
    np, cv2 = _np(), _cv2()
    if frame is None:
        from stbt_core._frames import get_frame  # pylint: disable=import-outside-toplevel
        frame = get_frame()
    a = np.asarray(frame)
    if a.dtype != np.uint8 or a.ndim not in (2, 3):
        raise TypeError("the frame to read must be an 8-bit picture, not %s %r" % (a.dtype, a.shape))
    h, w = a.shape[:2]
    if region is None:
        raise TypeError("region=None is not a region to read: give a Region (Region.ALL for the whole frame)")
    clipped = Region.intersect(_fourtuple(region), Region(0, 0, width=w, height=h))
    if clipped is None or clipped.width == 0 or clipped.height == 0:
        raise ValueError("region %r does not overlap the %dx%d frame: there is nothing to read" % (region, w, h))
    crop = a[clipped.y:clipped.bottom, clipped.x:clipped.right]
    if crop.ndim == 3 and crop.shape[2] == 4:
        crop = crop[:, :, :3]
    share = None
    params.by_words = params.text_color is not None and \
        abs(_ocr_colour.luma_contrast(crop, params.text_color)) >= _ocr_colour.LUMA_CONTRAST
    if params.by_words:
        grey = _ocr_colour.text_grey(crop, params.text_color, _line_height(_ocr_colour.luma(crop))[0])
    elif params.text_color is not None:
        share, other = _text_color_share(crop, params.text_color, params.text_color_threshold)
        grey = np.clip((1.0 - share) * 255.0, 0, 255).astype(np.uint8)
    elif crop.ndim == 3:
        grey = cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY)
    else:
        grey = crop
    line_height, _, lines = _line_height(grey)
    factor = 1.0
    if params.upsample:
        factor = float(UPSAMPLE_FACTOR) if line_height is None else \
            min(float(UPSAMPLE_FACTOR), max(1.0, UPSAMPLE_LINE_HEIGHT / line_height))
        factor = round(factor, 2)
    if share is not None:
        grey = _without_other_colours(grey, share, other, line_height)
    if factor != 1.0:
        grey = cv2.resize(grey, None, fx=factor, fy=factor, interpolation=cv2.INTER_CUBIC)
    return frame, clipped, np.ascontiguousarray(grey), _Geometry(factor, line_height, lines)


def _without_other_colours(grey, share, other, line_height):
    """``grey`` without a second text of another colour: the share map is cut at TEXT_COLOR_MIN_CUT
    into blobs, and a blob is made white (with a 2-pixel rim) when enough of its pixels are ``other``
    (of neither the text's colour nor the background's, nor a mix of the two) near a solid patch of
    such pixels, or when it is thick and never near the text colour (a text of an in-between colour).
    A second text's anti-aliased and chroma-subsampled edges pass through the text colour: without
    this, they read as hollow letters."""
    np, cv2 = _np(), _cv2()
    share8 = np.clip(share * 255.0, 0, 255).astype(np.uint8)
    ink = (share8 > 255 * TEXT_COLOR_MIN_CUT).astype(np.uint8)
    n, labels = cv2.connectedComponents(ink, connectivity=8)
    if n <= 1:
        return grey
    flat = labels.ravel()
    size = np.bincount(flat, minlength=n).astype(np.float32)
    kernel = np.ones((3, 3), np.uint8)
    # A thin stroke of text takes some colour of the background's (4:2:0 chroma): only near a core of
    # another colour (other pixels whose neighbours are all other too) are blobs of other pixels
    # another text.
    core = cv2.erode(other.astype(np.uint8), kernel)
    reach = max(1, int(round(line_height * TEXT_COLOR_ZONE))) if line_height else 1
    zone = cv2.dilate(core, kernel, iterations=reach) if core.any() else core
    others = np.bincount(flat, weights=other.ravel().astype(np.float32), minlength=n)
    zoned = np.bincount(flat, weights=zone.ravel().astype(np.float32), minlength=n)
    drop = (others > TEXT_COLOR_OTHER_SHARE * size) & (zoned > 0)
    # A thick blob (some pixels deep inside it) that nowhere gets near the text colour is a text of
    # a colour between the background's and the text's.
    peak = np.zeros(n, np.float32)
    np.maximum.at(peak, flat, share.ravel())
    inner = np.bincount(flat, weights=cv2.erode(ink, kernel).ravel().astype(np.float32), minlength=n)
    drop |= (peak < TEXT_COLOR_PEAK) & (inner >= TEXT_COLOR_MIN_CORE)
    drop[0] = False
    if not drop.any():
        return grey
    gone = cv2.dilate(drop[labels].astype(np.uint8), np.ones((3, 3), np.uint8), iterations=2)
    return np.where(gone > 0, 255, grey).astype(np.uint8)


def _luma_chroma(bgr):
    """BGR colours (..., 3) as (luma, red and blue chroma), the chroma at
    _TEXT_COLOR_CHROMA_WEIGHT; differences only, so without offsets."""
    np = _np()
    w = _TEXT_COLOR_CHROMA_WEIGHT
    y = np.array([0.114, 0.587, 0.299], np.float32)
    m = np.stack([y, w * 0.713 * (np.array([0, 0, 1], np.float32) - y),
                  w * 0.564 * (np.array([1, 0, 0], np.float32) - y)])
    return bgr.astype(np.float32) @ m.T


def _text_color_share(crop, text_color, threshold):
    """``(share, other)`` for ``crop`` (BGR or grey): each pixel's share of text of ``text_color``
    (0 to 1, float32) and whether it is of another colour (bool, see TEXT_COLOR_NEAR).

    Each pixel is placed on the line from the region's background (its median colour) to the text
    colour, 0 at the background and 1 at the text colour, less by its distance off that line (other
    colours) and by how far past the text colour it lies (text brighter or more saturated than
    ``text_color``): its share of text, which is its darkness. That is measured in luma and chroma with
    the chroma at half weight: a capture's chroma is subsampled and blurred, its luma is sharp, so the
    glyphs' edges come from the luma wherever text and background differ in brightness. A ramp of the
    plain BGR distance caps the share (all text within ``threshold``, none at TEXT_COLOR_RAMP). Where
    text and background differ in luma by TEXT_COLOR_LUMA or more, that colour share only gates the
    luma's share (see TEXT_COLOR_GATE). Pixels within ``threshold`` have share 1. docs/migrating-from-stb-tester.md (text_color) has why."""
    np, cv2 = _np(), _cv2()
    bgr = (crop if crop.ndim == 3 else cv2.cvtColor(crop, cv2.COLOR_GRAY2BGR)).astype(np.float32)
    text = np.array(text_color, np.float32)
    dist = np.sqrt(((bgr - text) ** 2).sum(axis=2))
    share = 1.0 - (dist - threshold) / max(1.0, TEXT_COLOR_RAMP - threshold)
    background = np.median(bgr.reshape(-1, 3), axis=0).astype(np.float32)
    if float(np.sqrt(((text - background) ** 2).sum())) >= _TEXT_COLOR_MIN_CONTRAST:
        pixels = _luma_chroma(bgr - background)
        axis = _luma_chroma(text - background)
        length2 = max(float((axis * axis).sum()), 1e-6)
        along = (pixels @ axis) / length2
        off = np.sqrt(np.maximum((pixels * pixels).sum(axis=2) / length2 - along * along, 0.0))
        share = np.minimum(share, 1.0 - np.abs(1.0 - along) - _TEXT_COLOR_OFF_AXIS * off)
        if abs(float(axis[0])) >= TEXT_COLOR_LUMA:
            share = np.minimum(1.0, pixels[:, :, 0] / float(axis[0])) * np.clip(share / TEXT_COLOR_GATE, 0.0, 1.0)
    share[dist <= threshold] = 1.0
    # Pixels of another colour: far from the text colour and off the segment from the background to it
    # (where text's anti-aliased edges lie), in BGR.
    contrast2 = max(float(((text - background) ** 2).sum()), _TEXT_COLOR_MIN_CONTRAST ** 2)
    to_text2 = dist * dist / contrast2
    to_background2 = ((bgr - background) ** 2).sum(axis=2) / contrast2
    other = (to_text2 > TEXT_COLOR_NEAR ** 2) & (to_background2 > TEXT_COLOR_STRONG ** 2) & \
        (to_text2 + to_background2 > TEXT_COLOR_SEGMENT)
    return np.clip(share, 0.0, 1.0).astype(np.float32), other


def _choose_read_mode(params, geometry):
    """The default mode (PAGE_SEGMENTATION_WITHOUT_OSD) on a region holding
    one line of text reads it as SINGLE_LINE: tesseract's layout analysis
    drops short lines ("On", "ITV2") and splits others there. ``[ocr]
    auto_single_line = False`` turns it off; any other mode is kept."""
    if geometry is not None and geometry.lines == 1 and params.mode == OcrMode.PAGE_SEGMENTATION_WITHOUT_OSD \
            and get_config("ocr", "auto_single_line", type_=bool):
        params.read_mode = OcrMode.SINGLE_LINE


def _fourtuple(region):
    """A Region from a Region (or any ``(x, y, right, bottom)`` sequence)."""
    if isinstance(region, Region):
        return region
    x, y, right, bottom = region
    return Region(x, y, right=right, bottom=bottom)


def _tesseract(grey, params, tsv):
    """tesseract's output for ``grey`` (text, or TSV word boxes), from the cache when it was read before."""
    _check_lang(params.lang)
    words = _words_data(params.user_words, "tesseract_user_words")
    patterns = _words_data(params.user_patterns, "tesseract_user_patterns")
    digest = hashlib.blake2b(grey.tobytes(), digest_size=20)
    digest.update(repr(grey.shape).encode())
    key = (digest.hexdigest(), tsv, params.read_mode, params.lang, params.engine, tuple(sorted(params.config.items())),
           words, patterns)
    with _cache_lock:
        if key in _cache and _imgproc_cache.enabled():
            _cache.move_to_end(key)
            return _cache[key]
    cv2 = _cv2()
    ok, png = cv2.imencode(".png", grey, [cv2.IMWRITE_PNG_COMPRESSION, 1])
    if not ok:
        raise UITestError("could not encode the picture for tesseract")
    argv = [TESSERACT, "stdin", "stdout", "--psm", str(int(params.read_mode)), "--oem", str(int(params.engine)),
            "-l", params.lang]
    config = dict(params.config)
    if tsv:
        config["tessedit_create_tsv"] = "1"
    # The word lists go through files of a private folder, removed when tesseract is done.
    with tempfile.TemporaryDirectory(prefix="stbt-ocr-") as tmpdir:
        for option, data, name in (("--user-words", words, "user-words"),
                                   ("--user-patterns", patterns, "user-patterns")):
            if data is not None:
                path = os.path.join(tmpdir, name)
                with open(path, "wb") as f:
                    f.write(data)
                argv += [option, path]
        for k, v in sorted(config.items()):
            argv += ["-c", "%s=%s" % (k, v)]
        out = _run(argv, png.tobytes(), _timeout()).decode("utf-8", "replace")
    with _cache_lock:
        _cache[key] = out
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return out


def _log(text):
    try:
        from farmhand import control  # pylint: disable=import-outside-toplevel
        control.log_event(text)
    except Exception:  # pylint: disable=broad-except
        pass


def _preprocessing(params, geometry):
    steps = ["crop to the region"]
    if params.by_words:
        steps.append("luma, local background taken out (top-hat), text of text_color's polarity dark on white")
    elif params.text_color is not None:
        steps.append("share of text_color #%02x%02x%02x against the region's median colour, threshold %g" % (
            params.text_color[2], params.text_color[1], params.text_color[0], params.text_color_threshold))
        steps.append("blobs of another colour than text_color's and the background's removed")
    else:
        steps.append("greyscale")
    if geometry is not None and params.upsample:
        steps.append("upsample x%g (cubic; shortest line of text %s px, scaled towards %d px, at most x%d)" % (
            geometry.scale, geometry.line_height if geometry.line_height is not None else "not found",
            UPSAMPLE_LINE_HEIGHT, UPSAMPLE_FACTOR))
    if params.by_words:
        steps.append("words read whose ink is of text_color #%02x%02x%02x kept (threshold %g)" % (
            params.text_color[2], params.text_color[1], params.text_color[0], params.text_color_threshold))
    if params.read_mode != params.mode:
        steps.append("one line of text found: read as %s (psm %d)" % (params.read_mode.name, params.read_mode))
    return steps


def _to_frame(geometry, clipped, left, top, right, bottom):
    """A box of the picture tesseract read, in frame coordinates (outwards to whole pixels), clipped to
    the region."""
    s = geometry.scale
    x0 = min(max(0, math.floor(left / s)), clipped.width - 1)
    y0 = min(max(0, math.floor(top / s)), clipped.height - 1)
    x1 = min(max(x0 + 1, math.ceil(right / s)), clipped.width)
    y1 = min(max(y0 + 1, math.ceil(bottom / s)), clipped.height)
    return Region(clipped.x + x0, clipped.y + y0, right=clipped.x + x1, bottom=clipped.y + y1)


def _frame_words(words, clipped, geometry):
    """Tesseract's words in frame coordinates, for the check's record."""
    out = []
    for w in words[:_checks.MAX_WORDS]:
        r = _to_frame(geometry, clipped, w.left, w.top, w.right, w.bottom)
        out.append({"text": w.text, "x": r.x, "y": r.y, "width": r.width, "height": r.height, "conf": w.conf})
    return out


def _record(kind, passed, frame, clipped, region, grey, geometry, params, words=None, **fields):
    def read_words():
        if grey is None:
            return []
        got = words if words is not None else _parse_tsv(_tesseract(grey, params, True))
        return _frame_words(got, clipped, geometry)
    _checks.record(kind, passed, frame, clipped if clipped is not None else region,
                   {"mode": params.mode, "read_mode": params.read_mode, "lang": params.lang, "engine": params.engine,
                    "upsample": params.upsample, "text_color": params.text_color,
                    "text_color_threshold": params.text_color_threshold,
                    "tesseract_config": dict(params.config)},
                   ocr_words=read_words, preprocessing=_preprocessing(params, geometry), **fields)


def _short(text, n=120):
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"


# ---------------------------------------------------------------------------
# ocr and match_text
# ---------------------------------------------------------------------------

def ocr(frame=None, region=Region.ALL, mode=OcrMode.PAGE_SEGMENTATION_WITHOUT_OSD, lang=None,
        tesseract_config=None, tesseract_user_words=None, tesseract_user_patterns=None, upsample=None,
        text_color=None, text_color_threshold=None, engine=None, char_whitelist=None, corrections=None):
    """The text in ``region`` of ``frame`` (default: ``get_frame()``), read
    by tesseract. See docs/test-scripts.md (OCR) for every parameter; the
    ones left ``None`` come from the ``[ocr]`` section of stbt.conf."""
    params = _Params(mode, lang, tesseract_config, tesseract_user_words, tesseract_user_patterns, upsample,
                     text_color, text_color_threshold, engine, char_whitelist)
    _check_corrections(corrections)
    frame, clipped, grey, geometry = _prepare(frame, region, params)
    _choose_read_mode(params, geometry)
    words = None
    if grey is None:
        text = ""
    elif params.by_words:
        kept = _colour_words(frame, clipped, grey, geometry, params)
        words = [_Word(*w[:6]) for w in kept]
        text = _plain_punctuation(_ocr_colour.join(kept)).strip()
    else:
        text = _plain_punctuation(_tesseract(grey, params, False)).strip()
    text = apply_ocr_corrections(text, corrections)
    _log("ocr in %r (%s): %r" % (clipped if clipped is not None else region, params.describe(), _short(text)))
    _record("ocr", None, frame, clipped, region, grey, geometry, params, words, text=text)
    return text


def _colour_words(frame, clipped, grey, geometry, params):
    """The words tesseract reads in ``grey`` whose ink is of ``params.text_color`` (_ocr_colour.Word,
    in the order read)."""
    words = _ocr_colour.parse_tsv(_tesseract(grey, params, True))
    crop = _np().asarray(frame)[clipped.y:clipped.bottom, clipped.x:clipped.right]
    return _ocr_colour.keep(words, crop, geometry.scale, params.text_color, params.text_color_threshold)


_Word = collections.namedtuple("_Word", "text left top right bottom conf")

# What tesseract reads as typographic punctuation, as the plain characters a screen's text is compared
# with: curly quotes, primes, the dashes and hyphens. Ligatures (fi, fl, ...) are split by NFKC.
_PLAIN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
                        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
                        "\u2015": "-", "\u2212": "-"})
_LIGATURES = re.compile("[\ufb00-\ufb06]")


def _plain_punctuation(text):
    """``text`` with typographic quotes and dashes as plain ones and ligatures split."""
    text = _LIGATURES.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)
    return text.translate(_PLAIN)


def _parse_tsv(out):
    words = []
    for line in out.splitlines()[1:]:
        cols = line.split("\t")
        if len(cols) < 12 or cols[0] != "5":
            continue
        text = "\t".join(cols[11:]).strip()
        if not text:
            continue
        try:
            left, top, width, height = (int(c) for c in cols[6:10])
            conf = float(cols[10])
        except ValueError:
            continue
        words.append(_Word(text, left, top, left + width, top + height, conf))
    return words


_PUNCT_EDGES = re.compile(r"^\W+|\W+$")


def _word_key(word, case_sensitive):
    w = unicodedata.normalize("NFKC", _plain_punctuation(word))
    stripped = _PUNCT_EDGES.sub("", w)
    w = stripped or w
    return w if case_sensitive else w.casefold()


def match_text(text, frame=None, region=Region.ALL, mode=OcrMode.PAGE_SEGMENTATION_WITHOUT_OSD, lang=None,
               tesseract_config=None, case_sensitive=False, upsample=None, text_color=None,
               text_color_threshold=None, engine=None, char_whitelist=None):
    """Where ``text`` (one or more words) is in ``region`` of ``frame``:
    a ``TextMatchResult``, true when tesseract read those words one after the
    other. Its ``region`` is the words' bounding box in frame coordinates.
    Case is ignored unless ``case_sensitive``; punctuation at a word's ends
    is ignored. The searched words are added to tesseract's dictionary for
    this read."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if not isinstance(text, str):
        raise TypeError("match_text's text must be a str, not %r" % (type(text).__name__,))
    wanted = [_word_key(w, case_sensitive) for w in text.split()]
    if not wanted:
        raise ValueError("match_text needs some text to look for")
    params = _Params(mode, lang, tesseract_config, text.split(), None, upsample, text_color,
                     text_color_threshold, engine, char_whitelist)
    frame, clipped, grey, geometry = _prepare(frame, region, params)
    _choose_read_mode(params, geometry)
    found, words = None, None
    if grey is not None:
        if params.by_words:
            words = [_Word(*w[:6]) for w in _colour_words(frame, clipped, grey, geometry, params)]
        else:
            words = _parse_tsv(_tesseract(grey, params, True))
        keys = [_word_key(w.text, case_sensitive) for w in words]
        for i in range(len(words) - len(wanted) + 1):
            if keys[i:i + len(wanted)] == wanted:
                found = words[i:i + len(wanted)]
                break
    result_region = None
    if found:
        result_region = _to_frame(geometry, clipped, min(w.left for w in found), min(w.top for w in found),
                                  max(w.right for w in found), max(w.bottom for w in found))
    result = TextMatchResult(getattr(frame, "time", None), found is not None, result_region, frame, text)
    _log("match_text %r in %r (%s): %s" % (
        text, clipped if clipped is not None else region, params.describe(),
        "found at %r" % (result_region,) if found else "not found"))
    _record("match_text", found is not None, frame, clipped, region, grey, geometry, params, words, text=text,
            case_sensitive=case_sensitive, match_region=_checks.region_dict(result_region))
    return result
