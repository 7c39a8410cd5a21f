"""Finding a template image in a frame (OpenCV's ``matchTemplate`` with
``TM_CCOEFF_NORMED``), once or until it appears."""

import inspect
import math
import os
import time

from farmhand import _deps, control
from farmhand.errors import MatchTimeout, UITestError
from farmhand.frames import Region, fetch_frame, save_frame

__all__ = ["MatchResult", "match", "wait_for_match"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# A failed match saves the frame it searched and the template beside the run's
# other artifacts (the working directory the runner starts the test in is the
# result folder), so the result page shows what was looked for and what was seen.
_RESULT_DIR = os.getcwd()
_FAILURES_DIR = "match-failures"
# At most this many failures are saved per run: a test polling match() in a loop must not fill the disk.
_MAX_SAVED_FAILURES = 20
_saved_failures = 0
# How long wait_for_match waits before asking again when the daemon has no newer frame.
_SAME_FRAME_PAUSE_SECS = 0.02


class MatchResult:
    """The best place of a template in a frame. True (in ``if``/``assert``)
    when ``confidence`` reached the threshold. ``region`` is where the best
    place is, in frame coordinates; ``frame`` the frame searched; ``template``
    the template's name (its path, or ``<array>``)."""

    __slots__ = ("match", "region", "confidence", "frame", "template")

    def __init__(self, match, region, confidence, frame, template):  # pylint: disable=redefined-outer-name
        self.match, self.region, self.confidence = bool(match), region, confidence
        self.frame, self.template = frame, template

    def __bool__(self):
        return self.match

    def __repr__(self):
        return "MatchResult(match=%r, region=%r, confidence=%.4f, template=%r)" % (
            self.match, self.region, self.confidence, self.template)


def _need_cv2():
    cv2 = _deps.cv2()
    if cv2 is None:
        raise UITestError("match needs numpy and OpenCV (Debian packages python3-numpy and python3-opencv)")
    return cv2


def _caller_dir():
    """Folder of the innermost calling file outside this package (the test)."""
    f = inspect.currentframe()
    while f is not None:
        filename = f.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep) and os.path.isfile(filename):
            return os.path.dirname(os.path.abspath(filename))
        f = f.f_back
    return None


def _template_path(name):
    if os.path.isabs(name):
        candidates = [name]
    else:
        root = os.environ.get("FARMHAND_TEST_PACK_DIR") or os.getcwd()
        candidates = [os.path.join(d, name) for d in (_caller_dir(), root) if d]
    for c in candidates:
        if os.path.isfile(c):
            return c
    raise FileNotFoundError("template %s not found (looked for %s)" % (name, ", ".join(candidates)))


def load_template(template):
    """``(BGR array, name)`` of a template given as a path or a numpy array."""
    cv2 = _need_cv2()
    np = _deps.numpy()
    if isinstance(template, np.ndarray):
        image, name = template, "<array>"
    else:
        name = os.fspath(template)
        image = cv2.imread(_template_path(name), cv2.IMREAD_COLOR)
        if image is None:
            raise ValueError("template %s is not an image OpenCV can read" % name)
    if image.ndim == 2:
        image = cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError("template %s must be height x width x 3 uint8 (BGR), not %r %s" % (name, image.shape, image.dtype))
    return image, name


def _match_array(image, name, frame, region, threshold):
    cv2 = _need_cv2()
    height, width = frame.shape[:2]
    area = (region or Region(0, 0, width, height)).clip(width, height)
    th, tw = image.shape[:2]
    if tw > area.width or th > area.height:
        raise ValueError("template %s (%dx%d) is larger than the area searched (%r)" % (name, tw, th, area))
    scores = cv2.matchTemplate(frame[area.y:area.bottom, area.x:area.right], image, cv2.TM_CCOEFF_NORMED)
    _, best, _, (x, y) = cv2.minMaxLoc(scores)
    confidence = best if math.isfinite(best) else 0.0
    return MatchResult(confidence >= threshold, Region(area.x + x, area.y + y, tw, th), confidence, frame, name)


def _record(kind, result, image, region, threshold, **fields):
    """Keep the check in the run's ``checks.jsonl`` as stbt's match does (python/stbt_core/_checks.py:
    the frame saved off the test's thread). This API has one pass (TM_CCOEFF_NORMED) and no confirm pass."""
    try:
        from stbt_core import _checks  # pylint: disable=import-outside-toplevel
    except ImportError:
        return
    _checks.record(
        kind, bool(result), result.frame, region,
        {"api": "farmhand.match", "match_method": "ccoeff-normed", "match_threshold": threshold},
        template=image, image=result.template, match_region=_checks.region_dict(result.region),
        score=result.confidence, threshold=threshold,
        first_pass={"score": result.confidence, "threshold": threshold, "passed": bool(result)},
        confirm={"method": None, "threshold": None, "passed": None}, **fields)


def match(template, frame=None, region=None, threshold=0.9):
    """Look for ``template`` in ``frame`` (default: a new ``get_frame()``),
    within ``region`` when given. ``template`` is a numpy BGR array or an
    image file: a relative path is looked up first in the calling test
    file's folder, then in the test pack's root. Returns a ``MatchResult``,
    true when the best place scores at least ``threshold`` (0 to 1)."""
    image, name = load_template(template)
    if frame is None:
        frame = fetch_frame()[0]
    result = _match_array(image, name, frame, region, threshold)
    saved = "" if result else _save_failure(result, image)
    control.log_event("match %s: %s%s" % (name, _describe(result, threshold), saved))
    _record("match", result, image, region, threshold)
    return result


def _save_failure(result, image):
    """Save the searched frame and the template of a failed match as artifacts;
    the log line's suffix naming them (empty when they could not be saved)."""
    global _saved_failures  # pylint: disable=global-statement
    if _saved_failures >= _MAX_SAVED_FAILURES:
        return "; frame not saved (%d failed matches saved already)" % _MAX_SAVED_FAILURES
    _saved_failures += 1
    stem = "%s/%03d" % (_FAILURES_DIR, _saved_failures)
    try:
        save_frame(result.frame, os.path.join(_RESULT_DIR, stem + "-frame.png"))
        save_frame(image, os.path.join(_RESULT_DIR, stem + "-template.png"))
    except Exception as e:  # pylint: disable=broad-except
        return "; frame not saved (%s)" % e
    return "; saved %s-frame.png %s-template.png" % (stem, stem)


def _describe(result, threshold):
    return "%s (confidence %.3f, threshold %g, at %r)" % (
        "matched" if result else "no match", result.confidence, threshold, result.region)


def wait_for_match(template, timeout_secs=10, region=None, threshold=0.9):
    """Look for ``template`` in each new frame until it matches, and return
    that ``MatchResult``. After ``timeout_secs`` raise ``MatchTimeout`` (a
    ``UITestFailure``: the test fails) holding the last ``MatchResult``."""
    image, name = load_template(template)
    started = time.monotonic()
    deadline = started + timeout_secs
    last_seq, result, closest = None, None, None
    while True:
        frame, seq = fetch_frame()
        if seq is None or seq != last_seq or result is None:
            last_seq = seq
            result = _match_array(image, name, frame, region, threshold)
            if closest is None or result.confidence >= closest.confidence:
                closest = result
            if result:
                control.log_event("wait_for_match %s: %s after %.3f s" % (
                    name, _describe(result, threshold), time.monotonic() - started))
                _record("wait_for_match", result, image, region, threshold, timeout_secs=timeout_secs)
                return result
        elif time.monotonic() < deadline:
            time.sleep(_SAME_FRAME_PAUSE_SECS)
        if time.monotonic() >= deadline:
            control.log_event("wait_for_match %s: timed out after %g s, best %s%s" % (
                name, timeout_secs, _describe(result, threshold), _save_failure(result, image)))
            # the frame that came closest, with its score: what the author needs to see
            _record("wait_for_match", closest, image, region, threshold, timeout_secs=timeout_secs, closest=True)
            raise MatchTimeout(
                "no match for %s within %g s (best confidence %.3f at %r, threshold %g)"
                % (name, timeout_secs, result.confidence, result.region, threshold),
                template=name, timeout_secs=timeout_secs, last=result)
