"""Motion of the stbt API: ``detect_motion``, ``wait_for_motion``,
``MotionResult``, ``MotionTimeout`` and the frame differs ``Differ``,
``BGRDiff`` and ``GrayscaleDiff``.

farmhand's own code, written from stb-tester's public manual. How it works:

- A differ compares two frames inside a mask and says which pixels changed.
  ``BGRDiff`` calls a pixel changed when its colour moved further than
  ``threshold`` (the Euclidean distance of the two BGR colours, 0-441);
  ``GrayscaleDiff`` when its brightness moved by more than
  ``(1 - threshold) * 255`` (``threshold`` is a similarity, 0-1). With
  ``erode`` the changed pixels are eroded by a 2x2 square first, so changes
  only 1 pixel wide or high (noisy pixels, thin edges) do not count; the
  result's ``region`` is the box of what survives at its full size (as an
  opening would restore it). With ``min_size``
  (``(width, height)``) motion is only reported when the bounding box of the
  changed pixels is at least that big.
- ``detect_motion`` compares each frame with the *reference*: the first
  frame, then the last frame in which motion was seen, so a slow fade that
  changes each pixel a little per frame still adds up to motion.
  ``DetectMotion`` is that comparison one frame at a time (stb-tester's
  internal ``_stbt.motion`` / ``_stbt.diff`` name, which test code uses).
"""

from stbt_core import _checks
from stbt_core._config import get_config
from stbt_core._errors import UITestFailure
from stbt_core._mask import load_mask
from stbt_core._motion_arrays import _kernel, _quarters, _scratch
from stbt_core._types import Region

__all__ = ["BGRDiff", "Differ", "GrayscaleDiff", "MotionResult", "MotionTimeout",
           "detect_motion", "wait_for_motion"]


def _np():
    import numpy  # pylint: disable=import-outside-toplevel
    return numpy


def _cv2():
    import cv2  # pylint: disable=import-outside-toplevel
    return cv2


class MotionResult:
    """One frame's answer: ``time`` (the frame's time), ``motion`` (bool),
    ``region`` (the bounding box of the change, None without motion) and
    ``frame``. Truthy when there was motion."""

    __slots__ = ("time", "motion", "region", "frame")

    def __init__(self, time, motion, region, frame):
        self.time, self.motion, self.region, self.frame = time, bool(motion), region, frame

    def __bool__(self):
        return self.motion

    def __repr__(self):
        return "MotionResult(time=%s, motion=%r, region=%r, frame=%s)" % (
            _time_repr(self.time), self.motion, self.region, _frame_repr(self.frame))


def _time_repr(t):
    return "None" if t is None else "%.3f" % t


def _frame_repr(frame):
    """A short stand-in for a frame in a repr: its time, not its pixels."""
    if frame is None:
        return "None"
    if hasattr(frame, "time"):
        return "<Frame(time=%s)>" % _time_repr(frame.time)
    shape = getattr(frame, "shape", ())
    return "<Image(%s)>" % "x".join(str(n) for n in shape[1::-1])


class MotionTimeout(UITestFailure):
    """``wait_for_motion`` saw no motion in time: ``screenshot`` (the last
    frame), ``mask`` and ``timeout_secs``."""

    def __init__(self, screenshot, mask, timeout_secs):
        super().__init__()
        self.screenshot, self.mask, self.timeout_secs = screenshot, mask, timeout_secs

    def __str__(self):
        where = _mask_name(self.mask)
        return "Didn't find motion%s within %g seconds." % (
            "" if where is None else " in %s" % (where,), self.timeout_secs)


MotionTimeout.__module__ = "stbt_core"


# ---------------------------------------------------------------- masks

def _is_all(m):
    return m is None or (isinstance(m, Region) and m == Region.ALL)


def _mask_for(mask, region):
    """The Mask to look through, from ``mask`` and its older synonym
    ``region`` (a rectangle); giving both is an error. None is the whole
    frame here (the default of older stb-tester versions), not the empty
    mask it is to ``load_mask``."""
    if not _is_all(region):
        if not _is_all(mask):
            raise ValueError("Cannot specify mask and region at the same time")
        mask = region
    return load_mask(Region.ALL if mask is None else mask)


def _no_overlap(mask, width, height):
    return ValueError("%r doesn't overlap with the frame (%dx%d)" % (mask, width, height))


# ---------------------------------------------------------------- differs

class Differ:
    """A frame-difference algorithm, with its parameters as attributes.

    ``preprocess(frame)`` is what is compared (computed once per frame),
    ``preprocess_mask(mask, frame_region)`` the mask as an array and its
    bounding box (computed once per mask and frame size), ``diff(a, b,
    mask)`` the ``MotionResult`` of ``b`` against ``a``, and
    ``replace(...)`` a copy with some parameters changed. A subclass defines
    ``_changed(a, b)``: a uint8 0/255 image of the pixels that changed
    between two preprocessed, cropped images."""

    def __init__(self, min_size=None, threshold=25, erode=True):
        if min_size is not None:
            min_size = (int(min_size[0]), int(min_size[1]))
        self.min_size, self.threshold, self.erode = min_size, threshold, bool(erode)
        self._mask_cache = None

    def replace(self, min_size=None, threshold=None, erode=None):
        """A copy with the parameters given (not None) changed."""
        return type(self)(min_size=self.min_size if min_size is None else min_size,
                          threshold=self.threshold if threshold is None else threshold,
                          erode=self.erode if erode is None else erode)

    def __repr__(self):
        return "%s(min_size=%r, threshold=%r, erode=%r)" % (
            type(self).__name__, self.min_size, self.threshold, self.erode)

    def preprocess_mask(self, mask, frame_region):
        """``(array, box)`` of ``mask`` (a Mask, Region, filename, array or
        None) for a frame of ``frame_region``: ``box`` the bounding box of
        the mask's white pixels, ``array`` the mask inside it (uint8 0/255)
        or None when it is all of the box. Raises ``ValueError`` when the
        mask has no white pixel in the frame."""
        width, height = int(frame_region.width), int(frame_region.height)
        hit = self._mask_cache
        if hit is not None and hit[0] is mask and hit[1] == (width, height):
            return hit[2]
        m = load_mask(Region.ALL if mask is None else mask)
        array, box = m.to_array(Region(0, 0, width, height))
        if box is None:
            raise _no_overlap(m, width, height)
        if array is not None:
            array = _np().ascontiguousarray(array.reshape(array.shape[:2]), dtype=_np().uint8)
        self._mask_cache = (mask, (width, height), (array, box))  # one mask at a time is the normal case
        return array, box

    def preprocess(self, frame):
        return frame

    def _changed(self, a, b):
        raise NotImplementedError

    def diff(self, a, b, mask=Region.ALL):
        """``MotionResult`` of ``b`` against ``a`` (frames, or what
        ``preprocess`` made of them) inside ``mask``. ``time`` and
        ``frame`` are ``b``'s; ``region`` is the bounding box of the change
        (None without motion)."""
        np, cv2 = _np(), _cv2()
        height, width = a.shape[:2]
        array, box = self.preprocess_mask(mask, Region(0, 0, width, height))
        sl = box.to_slice()
        changed = self._changed(np.asarray(a)[sl], np.asarray(b)[sl])
        if array is not None:
            changed = cv2.bitwise_and(changed, array, dst=_scratch("masked", changed.shape, np.uint8))
        if self.erode:
            changed = cv2.erode(changed, _kernel(), dst=_scratch("eroded", changed.shape, np.uint8))
        region = None
        x, y, w, h = cv2.boundingRect(changed)  # of the non-zero pixels of a binary image
        if self.erode and w > 0 and h > 0:
            # A pixel kept by the 2x2 erosion stands for itself and its left, upper and upper-left
            # neighbours, all changed: the box of the change itself (an opening) is one pixel wider
            # and higher, towards the top-left (not past the box's edge).
            x0, y0 = max(x - 1, 0), max(y - 1, 0)
            x, y, w, h = x0, y0, x + w - x0, y + h - y0
        if w > 0 and h > 0 and (self.min_size is None or (w >= self.min_size[0] and h >= self.min_size[1])):
            region = Region(x + box.x, y + box.y, width=w, height=h)
        return MotionResult(getattr(b, "time", None), region is not None, region, b)


class BGRDiff(Differ):
    """A pixel changed when its colour moved more than ``threshold`` (the
    Euclidean distance between the two BGR colours; default 25). The
    default differ."""

    def __init__(self, min_size=None, threshold=25, erode=True):
        super().__init__(min_size, float(threshold), erode)

    def _changed(self, a, b):
        np, cv2 = _np(), _cv2()
        d = cv2.absdiff(a, b, dst=_scratch("absdiff", a.shape, a.dtype))
        if d.ndim == 2:
            return cv2.threshold(d, self.threshold, 255, cv2.THRESH_BINARY,
                                 dst=_scratch("changed", d.shape, np.uint8))[1]
        if d.shape[2] != 3:
            d = np.ascontiguousarray(d[:, :, :3])
        changed = _scratch("changed", d.shape[:2], np.uint8)
        if cv2.minMaxLoc(d.reshape(d.shape[0], -1))[1] * 1.7321 <= self.threshold:
            # No channel moved by threshold/sqrt(3): no distance can exceed threshold (a still frame).
            changed[:] = 0
            return changed
        # Squares in 16 bits (255^2 = 65025 fits), summed at a quarter each so the sum of three
        # fits too (OpenCV saturates instead of wrapping, and a quarter loses under 1 unit each).
        squared = cv2.multiply(d, d, dst=_scratch("squared", d.shape, np.uint16), dtype=cv2.CV_16U)
        total = cv2.transform(squared, _quarters(), dst=_scratch("total", d.shape[:2], np.uint16))
        return cv2.compare(total, (self.threshold * self.threshold) / 4.0, cv2.CMP_GT, dst=changed)


class GrayscaleDiff(Differ):
    """A pixel changed when its brightness moved by more than
    ``(1 - threshold) * 255``; ``threshold`` (default 0.84) is a similarity
    from 0 to 1 (stb-tester's older ``noise_threshold``)."""

    def __init__(self, min_size=None, threshold=0.84, erode=True):
        threshold = float(threshold)
        if not 0 <= threshold <= 1:
            raise ValueError("GrayscaleDiff's threshold is a similarity from 0 to 1, not %r" % threshold)
        super().__init__(min_size, threshold, erode)

    def preprocess(self, frame):
        a = _np().asarray(frame)
        if a.ndim == 2:
            return a
        return _cv2().cvtColor(a[:, :, :3], _cv2().COLOR_BGR2GRAY)

    def _changed(self, a, b):
        np, cv2 = _np(), _cv2()
        a, b = self.preprocess(a), self.preprocess(b)
        d = cv2.absdiff(a, b, dst=_scratch("absdiff", a.shape, a.dtype))
        return cv2.threshold(d, (1 - self.threshold) * 255, 255, cv2.THRESH_BINARY,
                             dst=_scratch("changed", d.shape, np.uint8))[1]


# The differ each API uses when none is given; a test pack may replace them, e.g.
# ``stbt.detect_motion.differ = stbt.GrayscaleDiff()`` (stb-tester's default before v34).
_BUILT_IN_MOTION_DIFFER = BGRDiff()


def _differ_for(differ, threshold, noise_threshold, min_size=None, default=None, config_threshold=False):
    """The differ to use: ``differ``, else ``default``, with ``threshold``
    and ``min_size`` applied when given. ``noise_threshold`` alone (the
    older parameter) chooses a ``GrayscaleDiff``. With
    ``config_threshold``, the built-in default differ takes its threshold
    from ``[motion] threshold``."""
    if differ is None and threshold is None and noise_threshold is not None:
        base = GrayscaleDiff(threshold=noise_threshold)
    else:
        base = differ if differ is not None else default
        if threshold is None:
            threshold = noise_threshold
        if threshold is None and config_threshold and base is _BUILT_IN_MOTION_DIFFER:
            threshold = get_config("motion", "threshold", type_=float)
    if threshold is None and min_size is None:
        return base
    return base.replace(min_size=min_size, threshold=threshold)


# ---------------------------------------------------------------- detect_motion / wait_for_motion

def _timed_frames(frames, timeout_secs):
    """The frames, until ``timeout_secs`` have passed since the first one
    (by the frames' own clock; None: no end). Without ``frames``, the live
    frames from the daemon (which also stop on the wall clock)."""
    if frames is None:
        from stbt_core._frames import live_frames as live  # pylint: disable=import-outside-toplevel
        frames = live(timeout_secs)
    first = None
    for frame in frames:
        t = getattr(frame, "time", None)
        if t is not None and timeout_secs is not None:
            if first is None:
                first = t
            elif t - first > timeout_secs:
                return
        yield frame


def _log(message):
    try:
        from farmhand import control  # pylint: disable=import-outside-toplevel
        control.log_event(message)
    except Exception:  # pylint: disable=broad-except
        pass


def _motion_params(n, m, threshold, noise_threshold):
    return {"consecutive_frames": "%d/%d" % (n, m), "threshold": threshold, "noise_threshold": noise_threshold}


def _mask_name(mask):
    if _is_all(mask):
        return None
    return mask if isinstance(mask, str) else repr(load_mask(mask))


def detect_motion(timeout_secs=10, threshold=None, mask=Region.ALL, region=Region.ALL, frames=None,
                  *, differ=None, noise_threshold=None):
    """Yield a ``MotionResult`` for each frame after the first: whether it
    differs from the last frame in which motion was seen (at first, the
    first frame). Stops after ``timeout_secs`` (None: never) of the frames'
    own clock. ``region`` is the older name of a rectangular ``mask``."""
    m = _mask_for(mask, region)
    d = _differ_for(differ, threshold, noise_threshold, default=detect_motion.differ, config_threshold=True)
    against = None
    for frame in _timed_frames(frames, timeout_secs):
        if against is None:
            against = DetectMotion(d, frame, m)
            continue
        yield against.diff(frame)


detect_motion.differ = _BUILT_IN_MOTION_DIFFER


class DetectMotion:
    """``detect_motion``'s comparison, one frame at a time: ``diff(frame)``
    is the ``MotionResult`` of ``frame`` against the reference, which starts
    as ``initial_frame`` and becomes each frame in which motion is seen.
    ``differ`` is a ``Differ`` (e.g. ``BGRDiff()``); ``mask`` as for
    ``detect_motion``."""

    def __init__(self, differ, initial_frame, mask=Region.ALL):
        self.differ = differ
        self.mask = load_mask(Region.ALL if mask is None else mask)
        self.reference = differ.preprocess(initial_frame)
        height, width = self.reference.shape[:2]
        differ.preprocess_mask(self.mask, Region(0, 0, width, height))  # a mask outside the frame: ValueError now

    def diff(self, frame):
        current = self.differ.preprocess(frame)
        result = self.differ.diff(self.reference, current, self.mask)
        result.frame, result.time = frame, getattr(frame, "time", None)
        if result:
            self.reference = current
        return result


def _threshold_diff_bgr_numpy(a, b, threshold):
    """Which pixels of two BGR images differ by a squared colour distance of
    ``threshold`` or more (uint8, 1 or 0): ``_stbt.libstbt.threshold_diff_bgr``,
    under the name stb-tester's ``_stbt.diff`` gives its numpy version."""
    from _stbt.libstbt import threshold_diff_bgr  # pylint: disable=import-outside-toplevel
    return threshold_diff_bgr(a, b, threshold)


def _parse_consecutive(value):
    if value is None:
        value = get_config("motion", "consecutive_frames")
    text = str(value).strip()
    try:
        if "/" in text:
            n, m = (int(p) for p in text.split("/", 1))
        else:
            n = m = int(text)
    except ValueError:
        raise ValueError("consecutive_frames is 'N/M' (N frames with motion out of M) or N, not %r"
                         % (value,)) from None
    if not 1 <= n <= m:
        raise ValueError("consecutive_frames %r: need 1 <= N <= M" % (value,))
    return n, m


def wait_for_motion(timeout_secs=10, consecutive_frames=None, threshold=None, mask=Region.ALL,
                    region=Region.ALL, frames=None, *, differ=None, noise_threshold=None):
    """Wait until N of M consecutive frames (``consecutive_frames``
    ``"N/M"``; default ``[motion] consecutive_frames``, ``"10/20"``) show
    motion. Returns the ``MotionResult`` of the first frame with motion in
    that window; raises ``MotionTimeout`` after ``timeout_secs``."""
    n, m = _parse_consecutive(consecutive_frames)
    shown = mask if _is_all(region) else region
    params = _motion_params(n, m, threshold, noise_threshold)
    window = []
    last = None
    for result in detect_motion(timeout_secs, threshold, mask, region, frames,
                                differ=differ, noise_threshold=noise_threshold):
        last = result
        window.append(result)
        if len(window) > m:
            window.pop(0)
        if sum(1 for r in window if r) >= n:
            first = next(r for r in window if r)
            _log("wait_for_motion: motion at %s in %r" % (first.time, first.region))
            _checks.record("wait_for_motion", True, first.frame, None, params, mask=_mask_name(shown),
                           match_region=_checks.region_dict(first.region),
                           score=sum(1 for r in window if r), threshold=n, timeout_secs=timeout_secs)
            return first
    screenshot = last.frame if last is not None else None
    _log("wait_for_motion: no motion within %s s" % timeout_secs)
    _checks.record("wait_for_motion", False, screenshot, None, params, mask=_mask_name(shown),
                   score=sum(1 for r in window if r), threshold=n, timeout_secs=timeout_secs)
    raise MotionTimeout(screenshot, None if _is_all(shown) else shown, timeout_secs)
