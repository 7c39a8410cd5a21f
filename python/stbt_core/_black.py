"""``is_screen_black`` of the stbt API (farmhand's own code, from stb-tester's manual)."""

from stbt_core import _checks
from stbt_core._config import get_config
from stbt_core._mask import load_mask
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
        return "_IsScreenBlackResult(black=%r, frame=<%s>)" % (
            self.black, "x".join(str(n) for n in getattr(self.frame, "shape", ())[1::-1]))


def is_screen_black(frame=None, mask=Region.ALL, threshold=None, region=Region.ALL):
    """Black when no pixel inside ``mask`` (and ``region``, the older name
    for a rectangular mask) is brighter than ``threshold`` in greyscale
    (0-255; default ``[is_screen_black] threshold``, built-in 20)."""
    import cv2  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    if threshold is None:
        threshold = get_config("is_screen_black", "threshold", type_=int)
    if frame is None:
        from stbt_core._frames import get_frame  # pylint: disable=import-outside-toplevel
        frame = get_frame()
    a = np.asarray(frame)
    gray = a if a.ndim == 2 else cv2.cvtColor(a[:, :, :3], cv2.COLOR_BGR2GRAY)
    height, width = gray.shape
    m = load_mask(mask)
    if region is not None and region != Region.ALL:
        m = m - ~load_mask(region)  # only where both the mask and the region are
    array, box = m.to_array(Region(0, 0, width, height))
    if box is None:  # nothing to look at
        return _IsScreenBlackResult(True, frame)
    part = gray[box.to_slice()]
    if array is None:
        brightest = int(part.max())
    else:
        brightest = int(cv2.minMaxLoc(part, mask=array)[1])
    result = _IsScreenBlackResult(brightest <= threshold, frame)
    _checks.record("is_screen_black", result.black, frame, region if region != Region.ALL else None,
                   {"threshold": threshold}, mask=None if mask is Region.ALL else (
                       mask if isinstance(mask, str) else repr(mask)),
                   score=brightest, threshold=threshold)
    try:
        from farmhand import control  # pylint: disable=import-outside-toplevel
        control.log_event("is_screen_black: %s (brightest %d, threshold %d)" % (
            result.black, brightest, threshold))
    except Exception:  # pylint: disable=broad-except
        pass
    return result
