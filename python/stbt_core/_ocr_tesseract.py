"""Running tesseract for ``ocr`` and ``match_text``: the language and version
checks, the resident worker (``python3-tesserocr`` in a child process,
``_ocr_worker.py``) or the ``tesseract`` command, the cache of identical
reads, and the one parser of tesseract's TSV word boxes.

Each read goes to the resident worker: one long-lived child process per test
process, with a timeout; a worker that hangs past it is killed and
restarted, one that dies is restarted. Without ``python3-tesserocr`` each
read runs the ``tesseract`` command (never through a shell), the picture on
its standard input as PNG. Why: docs/migrating-from-stb-tester.md, OCR.
"""

import collections
import functools
import hashlib
import json
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time

from stbt_core import _imgproc_cache
from stbt_core._config import get_config
from stbt_core._errors import ConfigurationError, UITestError
from stbt_core._ocr_text import short

TESSERACT = "tesseract"
DEFAULT_TIMEOUT_SECS = 30.0
_CACHE_SIZE = 64
CONFIG_KEY_RE = re.compile(r"^[A-Za-z0-9_]+$")

# One word of tesseract's TSV (level 5): its box in the picture read, its confidence (0-100) and its
# line, (block, paragraph, line).
Word = collections.namedtuple("Word", "text left top right bottom conf line")


def _cv2():
    import cv2  # pylint: disable=import-outside-toplevel
    return cv2


_LANG_RE = re.compile(r"^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$")
_langs_lock = threading.Lock()
_langs = None
_tessdata = None
_cache = collections.OrderedDict()
_cache_lock = threading.Lock()

# Language data with the legacy engine's models, for OcrEngine.TESSERACT and TESSERACT_AND_LSTM where
# tesseract's own folder has the LSTM models only (Debian's): filled by scripts/setup.sh.
LEGACY_TESSDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tessdata-legacy")


def _installed_langs():
    """The languages tesseract can load (``tesseract --list-langs``, once per process)."""
    global _langs, _tessdata  # pylint: disable=global-statement
    with _langs_lock:
        if _langs is None:
            lines = _run([TESSERACT, "--list-langs"], None, _timeout()).decode("utf-8", "replace").splitlines()
            # The first line names tesseract's folder: List of available languages in "/.../tessdata/" (2):
            folder = re.search(r'"(.*)"', lines[0]) if lines else None
            _tessdata = os.path.normpath(folder.group(1)) if folder else None
            _langs = frozenset(line.strip() for line in lines[1:] if line.strip())
        return _langs


def _tessdata_folder():
    """tesseract's own folder of language data (None when its list does not name one)."""
    _installed_langs()
    return _tessdata


@functools.lru_cache(maxsize=64)
def _has_legacy_models(path):
    """Whether the language data file ``path`` holds the legacy engine's models: in its table of contents
    (a count, then each component's offset, -1 for none), the classifier's templates, component 3. Read once
    per process and path (each read with a legacy engine asks)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4 + 8 * 4)
    except OSError:
        return False
    if len(head) < 4 + 8 * 4 or struct.unpack("<i", head[:4])[0] < 4:
        return False
    return struct.unpack("<q", head[4 + 8 * 3:])[0] != -1


def legacy_tessdata(lang):
    """The folder whose data for each language of ``lang`` holds the legacy engine's models: tesseract's
    own, else LEGACY_TESSDATA; None when neither has them, for a malformed ``lang`` and without tesseract
    (the read then fails as any read would)."""
    if not isinstance(lang, str) or not _LANG_RE.match(lang):
        return None
    try:
        own = _tessdata_folder()
    except UITestError:
        return None
    for folder in (own, LEGACY_TESSDATA):
        if folder and all(_has_legacy_models(os.path.join(folder, part + ".traineddata"))
                          for part in lang.split("+")):
            return folder
    return None


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
                raise UITestError("could not read tesseract's version from %r" % (short(out),))
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
        log("OCR: no resident tesserocr worker (%s): each read runs the tesseract command; install the "
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


def read(grey, params, tsv):
    """tesseract's output for ``grey`` (text, or TSV word boxes), from the cache when it was read before."""
    _check_lang(params.lang)
    words = _words_data(params.user_words, "tesseract_user_words")
    patterns = _words_data(params.user_patterns, "tesseract_user_patterns")
    digest = hashlib.blake2b(grey.tobytes(), digest_size=20)
    digest.update(repr(grey.shape).encode())
    key = (digest.hexdigest(), tsv, params.read_mode, params.lang, params.engine, params.tessdata,
           tuple(sorted(params.config.items())), words, patterns)
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
    if params.tessdata is not None and params.tessdata != _tessdata_folder():
        argv += ["--tessdata-dir", params.tessdata]
    config = dict(params.config, **({"tessedit_create_tsv": "1"} if tsv else {}))
    out = _run_with_lists(argv, config, words, patterns, png.tobytes())
    with _cache_lock:
        _cache[key] = out
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return out


def _run_with_lists(argv, config, words, patterns, png):
    """tesseract's output for ``argv`` with the ``-c`` variables of ``config``: the word lists go through
    files of a private folder, removed when tesseract is done."""
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
        return _run(argv, png, _timeout()).decode("utf-8", "replace")


def log(text):
    """A line in the run's log (nothing outside a run)."""
    try:
        from farmhand import control  # pylint: disable=import-outside-toplevel
        control.log_event(text)
    except Exception:  # pylint: disable=broad-except
        pass


def parse_tsv(out):
    """tesseract's TSV (``tessedit_create_tsv=1``) as Words, in reading order."""
    words = []
    for row in out.splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5":
            continue
        text = "\t".join(cols[11:]).strip()
        if not text:
            continue
        try:
            left, top, width, height = (int(c) for c in cols[6:10])
            conf = float(cols[10])
            line = tuple(int(c) for c in cols[2:5])
        except ValueError:
            continue
        words.append(Word(text, left, top, left + width, top + height, conf, line))
    return words
