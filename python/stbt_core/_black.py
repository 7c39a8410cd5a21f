"""``is_screen_black`` of the stbt API (farmhand's own code, from stb-tester's manual)."""

from stbt_core import _checks
from stbt_core._config import get_config
from stbt_core._mask import Mask, load_mask
from stbt_core._types import Region

__all__ = ["is_screen_black"]


class _IsScreenBlackResult:
    """Truthy when the screen was black: ``.black`` (bool), ``.frame``."""

    __slots__ = ("black", "frame")

    def __init__(self, black, frame):
        self.black, self.frame = bool(black), frame

    def __bool__(self):
        return self.black

    def __repr__(self):
        if hasattr(self.frame, "time") or hasattr(self.frame, "filename"):
            frame = repr(self.frame)  # <Frame(time=...)>, <Image(filename=...)>
        else:
            frame = "<%s>" % "x".join(str(n) for n in getattr(self.frame, "shape", ())[1::-1])
        return "_IsScreenBlackResult(black=%r, frame=%s)" % (self.black, frame)


def is_screen_black(frame=None, mask=Region.ALL, threshold=None, region=Region.ALL):
    """Black when no pixel inside ``mask`` is brighter than ``threshold`` in
    greyscale (0-255; default ``[is_screen_black] threshold``, built-in 20).

    ``mask`` is anything ``load_mask`` takes (a Region, a Mask expression,
    a black-and-white image file or array); None means the whole frame.
    ``region`` is the older name for a rectangular mask: giving both is a
    ValueError. A mask with no pixel inside the frame is a ValueError too."""
    import cv2  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    mask = _one_mask(mask, region)
    if threshold is None:
        threshold = get_config("is_screen_black", "threshold", type_=int)
    if frame is None:
        from stbt_core._frames import get_frame  # pylint: disable=import-outside-toplevel
        frame = get_frame()
    a = np.asarray(frame)
    gray = _grey(cv2, a)
    height, width = gray.shape
    array, box = load_mask(mask).to_array(Region(0, 0, width, height))
    part = gray[box.to_slice()]
    if array is None:
        brightest = int(part.max())
    else:
        brightest = int(cv2.minMaxLoc(part, mask=array[:, :, 0])[1])
    result = _IsScreenBlackResult(brightest <= threshold, frame)
    _log(result, frame, mask, threshold, brightest)
    return result


def _one_mask(mask, region):
    """The mask to use, from ``mask`` and its older synonym ``region``."""
    if mask is None:
        mask = Region.ALL
    if region is None or _is_all(region):
        return mask
    if not _is_all(mask):
        raise ValueError("Cannot specify mask and region at the same time")
    return region


def _is_all(m):
    return isinstance(m, (Region, Mask)) and m == Region.ALL


def _grey(cv2, a):
    import numpy as np  # pylint: disable=import-outside-toplevel
    if a.ndim == 2:
        return a
    if a.shape[2] == 1:
        return a[:, :, 0]
    return cv2.cvtColor(np.ascontiguousarray(a[:, :, :3]), cv2.COLOR_BGR2GRAY)


def _log(result, frame, mask, threshold, brightest):
    """The check's record and log line: a rectangular mask as its region,
    any other mask by its repr (its filename for a file)."""
    rectangle = isinstance(mask, Region)
    region = mask if rectangle and mask != Region.ALL else None
    shown = None if rectangle else (mask if isinstance(mask, str) else repr(mask))
    _checks.record("is_screen_black", result.black, frame, region, {"threshold": threshold},
                   mask=shown, score=brightest, threshold=threshold)
    where = "" if region is None and shown is None else " in %s" % (shown or repr(region))
    try:
        from farmhand import control  # pylint: disable=import-outside-toplevel
        control.log_event("is_screen_black: %s (brightest %d, threshold %d%s)" % (
            result.black, brightest, threshold, where))
    except Exception:  # pylint: disable=broad-except
        pass
