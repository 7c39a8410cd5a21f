"""Image matching of the stbt API: ``match``, ``match_all``, ``wait_for_match``,
``MatchParameters``, ``MatchMethod``, ``ConfirmMethod``, ``MatchResult``,
``MatchTimeout``.

farmhand's own implementation of the algorithm stb-tester documents (a first
pass on an image pyramid, a confirm pass pixel by pixel after erosion,
transparent template pixels ignored), written from the manual and from the
behaviour test scripts rely on. How each step works and why the scores are on
the scale they are: docs/stbt-matching.md.
"""

import enum
import typing

from stbt_core import _checks
from stbt_core._config import get_config
from stbt_core._errors import UITestFailure
from stbt_core._types import Position, Region

__all__ = ["ConfirmMethod", "MatchMethod", "MatchParameters", "MatchResult", "MatchTimeout",
           "detect_match", "match", "match_all", "wait_for_match"]


def _cv2():
    import cv2  # pylint: disable=import-outside-toplevel
    return cv2


def _np():
    import numpy  # pylint: disable=import-outside-toplevel
    return numpy


class MatchMethod(enum.Enum):
    """The first pass's measure (the value is the name stbt.conf uses)."""
    SQDIFF = "sqdiff"
    SQDIFF_NORMED = "sqdiff-normed"
    CCORR_NORMED = "ccorr-normed"
    CCOEFF_NORMED = "ccoeff-normed"


class ConfirmMethod(enum.Enum):
    """The second (confirm) pass's measure."""
    NONE = "none"
    ABSDIFF = "absdiff"
    NORMED_ABSDIFF = "normed-absdiff"


def _enum(cls, value):
    if isinstance(value, cls):
        return value
    text = str(value).strip()
    for candidate in (text, text.lower()):
        try:
            return cls(candidate)
        except ValueError:
            pass
    name = text.upper().replace("-", "_")
    if name in cls.__members__:
        return cls[name]
    raise ValueError("%r is not a %s (one of %s)" % (value, cls.__name__, ", ".join(cls.__members__)))


class MatchParameters:
    """Tuning of the matching algorithm. Every argument left ``None`` comes
    from the test pack's stbt.conf section ``[match]`` (built-in: ``sqdiff``,
    0.98, ``normed-absdiff``, 0.70, 1 erode pass, 3 pyramid levels)."""

    def __init__(self, match_method=None, match_threshold=None, confirm_method=None,
                 confirm_threshold=None, erode_passes=None):
        if match_method is None:
            match_method = get_config("match", "match_method", type_=MatchMethod)
        if match_threshold is None:
            match_threshold = get_config("match", "match_threshold", type_=float)
        if confirm_method is None:
            confirm_method = get_config("match", "confirm_method", type_=ConfirmMethod)
        if confirm_threshold is None:
            confirm_threshold = get_config("match", "confirm_threshold", type_=float)
        if erode_passes is None:
            erode_passes = get_config("match", "erode_passes", type_=int)
        self.match_method = _enum(MatchMethod, match_method)
        self.match_threshold = float(match_threshold)
        self.confirm_method = _enum(ConfirmMethod, confirm_method)
        self.confirm_threshold = float(confirm_threshold)
        self.erode_passes = int(erode_passes)
        # Not a constructor argument in stbt's documented signature; read from [match] like the others.
        self.pyramid_levels = max(1, get_config("match", "pyramid_levels", 3, type_=int))
        if self.erode_passes < 0:
            raise ValueError("erode_passes must not be negative, not %r" % erode_passes)

    def __repr__(self):
        return ("MatchParameters(match_method=MatchMethod.%s, match_threshold=%g, "
                "confirm_method=ConfirmMethod.%s, confirm_threshold=%g, erode_passes=%d)" % (
                    self.match_method.name, self.match_threshold, self.confirm_method.name,
                    self.confirm_threshold, self.erode_passes))


class MatchResult:
    """Where the template is best in a frame. True (in ``if`` / ``assert``)
    when it matched. ``region`` is the best place even when it did not match;
    ``first_pass_result`` the first pass's score there (0 to 1, higher is
    better, on the scale of ``match_threshold``); ``frame`` the frame searched,
    ``image`` the template (a ``stbt.Image``: ``image.filename`` is the name it
    was given by, None for an array), ``time`` the frame's capture time."""

    def __init__(self, time, match, region, first_pass_result, frame, image,  # pylint: disable=redefined-outer-name
                 _first_pass_matched=None):
        self.time = time
        self.match = bool(match)
        self.region = region
        self.first_pass_result = first_pass_result
        self.frame = frame
        self.image = image
        self._first_pass_matched = _first_pass_matched

    @property
    def position(self):
        """The top-left corner of ``region``."""
        return Position(self.region.x, self.region.y)

    def __bool__(self):
        return self.match

    def __repr__(self):
        return "MatchResult(time=%s, match=%r, region=%r, first_pass_result=%r, frame=%s, image=%s)" % (
            "None" if self.time is None else "%.3f" % self.time, self.match, self.region,
            self.first_pass_result, _frame_text(self.frame), _image_text(self.image))


class MatchTimeout(UITestFailure):
    """``wait_for_match`` (or ``press_until_match``) did not find the image in
    time: the test fails. ``screenshot`` is the last frame seen, ``expected``
    the image's name, ``timeout_secs`` how long it waited."""

    def __init__(self, screenshot, expected, timeout_secs):
        super().__init__(screenshot, expected, timeout_secs)
        self.screenshot = screenshot
        self.expected = expected
        self.timeout_secs = timeout_secs

    def __str__(self):
        return "Didn't find match for %r within %g seconds." % (self.expected, self.timeout_secs)


for _cls in (MatchMethod, ConfirmMethod, MatchParameters, MatchResult, MatchTimeout):
    _cls.__module__ = "stbt_core"
del _cls


def _dimensions(a):
    shape = a.shape
    return "%dx%dx%d" % (shape[1], shape[0], shape[2] if len(shape) > 2 else 1)


def _frame_text(frame):
    """A frame as a MatchResult's repr shows it: its time and size, never its pixels."""
    shape = getattr(frame, "shape", None)
    if shape is None or len(shape) < 2:
        return repr(frame)
    t = getattr(frame, "time", None)
    return "<Frame(time=%s, dimensions=%s)>" % ("None" if t is None else "%.3f" % t, _dimensions(frame))


def _image_text(image):
    """A template as a MatchResult's repr shows it: ``<Image(filename=..., dimensions=WxHxC)>``."""
    shape = getattr(image, "shape", None)
    if shape is None or len(shape) < 2:
        return repr(image)
    return "<Image(filename=%r, dimensions=%s)>" % (getattr(image, "filename", None), _dimensions(image))


def _image_name(image):
    """The template's name in logs and messages: its file name, else its size."""
    if isinstance(image, str):
        return image
    for attr in ("relative_filename", "filename"):
        name = getattr(image, attr, None)
        if name:
            return name
    shape = getattr(image, "shape", None)
    return "<Custom Image>" if shape is None else "<Custom Image %s>" % _dimensions(image)


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

class _Template:
    """A template ready to be searched for: ``image`` (a ``stbt.Image``, what
    MatchResult.image holds), ``pixels`` (uint8: height x width x 3 BGR, or
    height x width for grey), ``mask`` (float32, 1.0 where the template is
    opaque; None when it is opaque everywhere) and ``transparent`` (True when
    no pixel is opaque: such a template matches everywhere)."""

    def __init__(self, image, pixels, mask, transparent):
        self.image, self.pixels, self.mask, self.transparent = image, pixels, mask, transparent
        self.height, self.width = pixels.shape[:2]

    def with_channels(self, grey):
        """The same template in the frame's colour space (grey or BGR)."""
        if grey == (self.pixels.ndim == 2):
            return self
        cv2 = _cv2()
        code = cv2.COLOR_BGR2GRAY if grey else cv2.COLOR_GRAY2BGR
        return _Template(self.image, cv2.cvtColor(self.pixels, code), self.mask, self.transparent)


def _to_uint8(a):
    np = _np()
    if a.dtype == np.uint8:
        return a
    if a.dtype == np.uint16:  # a 16-bit PNG: the same picture in 8 bits
        return (a // 257).astype(np.uint8)
    raise TypeError("images to match must be 8-bit (uint8), not %s" % a.dtype)


def _load_template(image):
    """A ``_Template`` from a filename (found as ``load_image`` finds it) or
    an array (BGR, BGRA, grey, grey with alpha; 8 or 16 bits).

    A pixel is compared when its alpha is 255: partly transparent pixels are
    ignored like fully transparent ones."""
    np = _np()
    from stbt_core._frames import load_image  # pylint: disable=import-outside-toplevel
    image = load_image(image)
    a = _to_uint8(np.asarray(image))
    alpha = None
    if a.ndim == 3 and a.shape[2] == 4 and a.flags.c_contiguous:
        # OpenCV splits the channels several times faster than numpy copies a strided view
        cv2 = _cv2()
        alpha, a = cv2.extractChannel(a, 3), cv2.cvtColor(a, cv2.COLOR_BGRA2BGR)
    elif a.ndim == 3 and a.shape[2] in (2, 4):
        alpha, a = a[:, :, -1], a[:, :, :-1]
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if not (a.ndim == 2 or (a.ndim == 3 and a.shape[2] == 3)):
        raise ValueError("the image to match must be height x width x 3 (BGR) or 4 (BGRA), or grey, not %r"
                         % (image.shape,))
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError("the image to match is empty (%dx%d)" % (a.shape[1], a.shape[0]))
    mask, transparent = None, False
    if alpha is not None:
        opaque = alpha == 255
        if not opaque.any():
            transparent = True
        elif not opaque.all():
            mask = opaque.astype(np.float32)
    return _Template(image, np.ascontiguousarray(a), mask, transparent)


def _frame_pixels(frame):
    """The frame's pixels: height x width x 3 (BGR) or height x width (grey)."""
    np = _np()
    a = _to_uint8(np.asarray(frame))
    if a.ndim == 3 and a.shape[2] == 1:
        return a[:, :, 0]
    if a.ndim == 3 and a.shape[2] == 4:
        return a[:, :, :3]
    if a.ndim == 2 or (a.ndim == 3 and a.shape[2] == 3):
        return a
    raise ValueError("a frame must be height x width x 3 (BGR) or grey, not %r" % (a.shape,))


def _get_frame():
    from stbt_core._frames import get_frame  # pylint: disable=import-outside-toplevel
    return get_frame()


def _searched_area(frame, template, region):
    """The part of the frame searched: ``region`` clipped to the frame. A
    ValueError when the template does not fit in it."""
    fh, fw = frame.shape[:2]
    th, tw = template.shape[:2]
    if fh < th or fw < tw:
        raise ValueError("Frame %r must be larger than reference image %r" % (frame.shape, template.shape))
    if region is None:
        region = Region.ALL
    area = Region.intersect(region, Region(0, 0, fw, fh))
    if area is None or area.width < tw or area.height < th:
        raise ValueError("%r must be larger than reference image %r" % (
            region if area is None else area, template.shape))
    return area


# ---------------------------------------------------------------------------
# First pass: scores, higher is better, 1.0 is a perfect match
# ---------------------------------------------------------------------------
#
# Internally the SQDIFF score is 1 - RMS difference / 255 (linear in grey
# levels, so one slack fits all the pyramid's levels); what MatchResult
# reports and match_threshold is compared with is 1 - MSE / 255², the
# normalised sum of squared differences: _reported() and _internal() convert.

def _reported(method, q):
    if method is MatchMethod.SQDIFF:
        return 1.0 - (1.0 - q) ** 2
    return q


def _internal(method, threshold):
    if method is MatchMethod.SQDIFF:
        return 1.0 - max(0.0, 1.0 - threshold) ** 0.5
    return threshold


def _build_pyramid(image, levels, is_mask=False):
    """``image`` and ``levels - 1`` smaller copies, each half the one before
    (``cv2.pyrDown``). A mask (255 = compared, 0 = ignored) is made stricter
    at each step: a pixel that any ignored pixel blurred into is ignored too.
    Below full size ``_CROP`` pixels are cut off each side (their blur mixed
    in what lies outside the picture, which is not what the frame has around
    it), so the place of a smaller level's template is ``_CROP`` pixels right
    of and below the place of the whole template."""
    cv2, np = _cv2(), _np()
    whole, out = image, [image]
    for _ in range(levels - 1):
        whole = cv2.pyrDown(whole)
        if is_mask:
            whole = np.where(whole == 255, 255, 0).astype(image.dtype)
        out.append(whole[_CROP:whole.shape[0] - _CROP, _CROP:whole.shape[1] - _CROP])
    return out


def _level_count(height, width, levels):
    """How many pyramid levels a template of this size has (at most ``levels``): the top level keeps at
    least ``_MIN_TOP_SIZE`` pixels a side."""
    n = 1
    while n < levels and min(height, width) >= 2 * (_MIN_TOP_SIZE + 2 * _CROP):
        height, width = (height + 1) // 2, (width + 1) // 2
        n += 1
    return n


class _Levels:
    """A template's pyramid (``_build_pyramid``): per level, the template,
    its mask and the constant terms the masked SQDIFF needs."""

    def __init__(self, pixels, mask, levels):
        np = _np()
        n = _level_count(pixels.shape[0], pixels.shape[1], levels)
        ts = _build_pyramid(pixels.copy(), n)  # a copy: the caller may change its array later
        ms = [None] * n if mask is None else _build_pyramid((mask * 255).astype(np.uint8), n, is_mask=True)
        self.levels = []
        for level, (t, m) in enumerate(zip(ts, ms)):
            if m is not None and not _mask_spans(m, ms[0]):
                # Nothing compared at this size, or the stricter mask has shrunk what is compared to a
                # few rows or columns of it (a single row of vertical stripes matches at any height):
                # search at the sizes above only.
                break
            self.levels.append(_level_entry(np.ascontiguousarray(t), m, _CROP if level else 0))
        self.height, self.width = pixels.shape[:2]


def _mask_spans(m, full):
    """Whether the mask ``m`` of a smaller level still spans the template as
    the full-size mask ``full`` does: the box around its compared pixels is,
    as a share of the template's height and of its width, at least
    ``_MIN_MASK_SPAN`` of the full-size box's."""
    np = _np()

    def extent(a):
        a = a if a.ndim == 2 else a.max(axis=2)
        rows, cols = np.flatnonzero(a.any(axis=1)), np.flatnonzero(a.any(axis=0))
        if not len(rows):
            return 0.0, 0.0
        return (rows[-1] - rows[0] + 1) / a.shape[0], (cols[-1] - cols[0] + 1) / a.shape[1]

    h, w = extent(m)
    full_h, full_w = extent(full)
    return h > 0 and h >= _MIN_MASK_SPAN * full_h and w >= _MIN_MASK_SPAN * full_w


def _level_entry(t, m8, crop):
    np = _np()
    channels = 1 if t.ndim == 2 else t.shape[2]
    entry = {"t": t, "m": None, "crop": crop, "channels": channels}
    if m8 is not None:
        m = (m8 > 0).astype(np.float32)
        entry["m"] = m
        mc = m if channels == 1 else np.dstack([m] * channels)
        tf = t.astype(np.float32)
        entry["mc"] = mc
        entry["tf"] = tf
        entry["m8"] = m.astype(np.uint8)
        entry["wt"] = t * mc.astype(np.uint8)      # the template with its ignored pixels zeroed
        entry["tt"] = float((tf * tf * mc).sum())   # sum of T² over the compared values
        entry["corners"] = _mask_corners(m)
        rects = _mask_rects(m)
        entry["rects"] = None if rects is None else [
            (x0, y0, x1, y1, np.ascontiguousarray(t[y0:y1, x0:x1])) for x0, y0, x1, y1 in rects]
        entry["n"] = float(m.sum()) * channels     # number of compared values
    else:
        entry["tt"] = float((t.astype(np.float64) ** 2).sum())
        entry["n"] = float(t.shape[0] * t.shape[1] * channels)
    return entry


def _mask_corners(m):
    """The mask (2-D, non-zero where compared) as signed corners of an
    integral image: at every place, the sum of a picture over the mask's
    pixels is ``sum(c * ii[y + cy, x + cx])`` over the corners ``(cy, cx, c)``,
    ``ii`` being the picture's integral image (``cv2.integral``). A mask made
    of a few rectangles (an opaque frame around a transparent hole) has a few
    corners: a handful of array sums instead of a correlation. None when the
    mask has more than ``_MAX_MASK_CORNERS``."""
    np = _np()
    h, w = m.shape
    p = np.zeros((h + 2, w + 2), np.int32)
    p[1:h + 1, 1:w + 1] = m > 0
    # 2-D difference: +1 / -1 where a compared rectangle's corner is (inner corners cancel)
    d = p[:h + 1, :w + 1] - p[:h + 1, 1:] - p[1:, :w + 1] + p[1:, 1:]
    ys, xs = np.nonzero(d)
    if len(ys) > _MAX_MASK_CORNERS:
        return None
    return [(int(y), int(x), int(d[y, x])) for y, x in zip(ys, xs)]


def _mask_rects(m):
    """The mask's compared pixels as rectangles ``(x0, y0, x1, y1)`` (ends
    excluded): each row's runs, rows with the same runs in one rectangle.
    None when that takes more than ``_MAX_MASK_RECTS``."""
    np = _np()
    h, w = m.shape
    b = np.zeros((h, w + 2), np.int8)
    b[:, 1:w + 1] = m > 0
    ys, xs = np.nonzero(np.diff(b, axis=1))  # a run starts and ends at each pair of changes
    rows = [()] * h
    for y in np.unique(ys):
        edges = xs[ys == y]
        rows[y] = tuple(zip(edges[0::2].tolist(), edges[1::2].tolist()))
    rects, start = [], 0
    for y in range(1, h + 1):
        if y == h or rows[y] != rows[start]:
            rects += [(x0, start, x1, y) for x0, x1 in rows[start]]
            if len(rects) > _MAX_MASK_RECTS:
                return None
            start = y
    return rects


def _masked_sums(sq, corners, out_shape):
    """The sum of ``sq`` (one channel) over the mask at every place of the
    score map (``out_shape``), from the mask's corners (``_mask_corners``):
    exact, in float64, returned as float32."""
    cv2, np = _cv2(), _np()
    ii = cv2.integral(sq, sdepth=cv2.CV_64F)
    oh, ow = out_shape
    total = np.zeros(out_shape, np.float64)
    for y, x, c in corners:
        part = ii[y:y + oh, x:x + ow]
        if c == 1:
            total += part
        elif c == -1:
            total -= part
        else:
            total += c * part
    return total.astype(np.float32)


# A mask with more corners than this is summed by a correlation (see _mask_corners).
_MAX_MASK_CORNERS = 32
# A mask made of more rectangles than this is compared through the mask (see _sqdiff_best).
_MAX_MASK_RECTS = 8
# A smaller level is used only while the box around its compared pixels spans at least this share
# of the template's height and of its width, as the full-size mask's box does: see _mask_spans.
_MIN_MASK_SPAN = 0.5
# Pixels cut off each side of the template below full size (see _build_pyramid).
_CROP = 1
# The template at the pyramid's top level keeps at least this many pixels per side.
_MIN_TOP_SIZE = 8
_FULL_SCALE = 255.0


def _scores(img, lv, method):
    """Score map (float32, internal scale) of the template level ``lv`` at every place in ``img``."""
    cv2, np = _cv2(), _np()
    if method is MatchMethod.SQDIFF:
        # sum of (I - T)² = sum of I² - 2 sum of I.T + sum of T², over the compared pixels: a
        # correlation and a sum of squares (OpenCV's own TM_SQDIFF is several times slower)
        f = img.astype(np.float32)
        sq = f * f
        if lv["channels"] > 1:
            sq = cv2.transform(sq, np.ones((1, lv["channels"]), np.float32))
        th, tw = lv["t"].shape[:2]
        if lv["m"] is None:
            cross = cv2.matchTemplate(img, lv["t"], cv2.TM_CCORR)
            energy = cv2.boxFilter(sq, -1, (tw, th), normalize=False, anchor=(0, 0),
                                   borderType=cv2.BORDER_CONSTANT)[:cross.shape[0], :cross.shape[1]]
        else:
            cross = cv2.matchTemplate(img, lv["wt"], cv2.TM_CCORR)
            if lv["corners"] is None:
                energy = cv2.matchTemplate(sq, lv["m"], cv2.TM_CCORR)
            else:
                energy = _masked_sums(sq, lv["corners"], cross.shape)
        ssd = energy - 2 * cross + lv["tt"]
        np.maximum(ssd, 0, out=ssd)
        # 1 - the root-mean-square difference per compared value, as a fraction of full scale
        return 1.0 - np.sqrt(ssd * (1.0 / (lv["n"] * _FULL_SCALE * _FULL_SCALE)))
    cv_method = {MatchMethod.SQDIFF_NORMED: cv2.TM_SQDIFF_NORMED,
                 MatchMethod.CCORR_NORMED: cv2.TM_CCORR_NORMED,
                 MatchMethod.CCOEFF_NORMED: cv2.TM_CCOEFF_NORMED}[method]
    if lv["m"] is None:
        s = cv2.matchTemplate(img, lv["t"], cv_method)
    else:
        s = cv2.matchTemplate(img.astype(np.float32), lv["tf"], cv_method, mask=lv["mc"])
    if method is MatchMethod.SQDIFF_NORMED:
        # OpenCV gives 1 (the worst) where the normalisation is 0: a black template or frame
        s = 1.0 - s
    # undefined places (a flat area for CCOEFF_NORMED with a mask, 0/0) score 0
    return np.nan_to_num(s, copy=False, nan=0.0, posinf=0.0, neginf=0.0)


def _pyramid(img, n):
    cv2 = _cv2()
    out = [img]
    for _ in range(n - 1):
        out.append(cv2.pyrDown(out[-1]))
    return out


# How far below the threshold a place at the pyramid's top level may score and
# still be looked at in full resolution (the blur of the smaller levels and
# their half-pixel grid shift move scores both ways).
_TOP_LEVEL_SLACK = {MatchMethod.SQDIFF: 0.08, MatchMethod.SQDIFF_NORMED: 0.15,
                    MatchMethod.CCORR_NORMED: 0.1, MatchMethod.CCOEFF_NORMED: 0.3}
# match() refines at most this many of the top level's best places.
_MAX_BEST_CANDIDATES = 6
# match() follows at most this many places below the top level (patterns that
# only full size tells apart tie at the smaller levels; at full size the places
# are scored best first and a perfect score ends the search).
_MAX_KEPT_PER_LEVEL = 4
# A search area with at most this many places is scored at full size directly (no pyramid).
_DIRECT_MAX_PLACES = 64


def _candidates(scores, min_score, limit=None, spread=None):
    """The local maxima of ``scores`` (each the highest of the 3x3 pixels
    around it) at or above ``min_score``, best first (equal scores top to
    bottom, left to right). With ``spread`` (width, height), a place inside
    the spread-sized box centred on a better one already taken is left out:
    one place per such area (also on a plateau of equal scores)."""
    cv2, np = _cv2(), _np()
    peaks = cv2.dilate(scores, np.ones((3, 3), np.uint8))
    ys, xs = np.nonzero((scores >= peaks) & (scores >= min_score))
    order = np.argsort(-scores[ys, xs], kind="stable")
    xs, ys = xs[order], ys[order]
    if spread is not None:
        xs, ys = _spread_out(xs, ys, spread, limit)
    if limit is not None:
        xs, ys = xs[:limit], ys[:limit]
    return list(zip(xs.tolist(), ys.tolist()))


def _spread_out(xs, ys, spread, limit):
    """The places of ``xs``, ``ys`` (best first) outside the boxes centred on better ones taken."""
    np = _np()
    alive = np.ones(len(xs), bool)
    taken = []
    start = 0
    while start < len(xs) and (limit is None or len(taken) < limit):
        i = start + int(np.argmax(alive[start:]))
        if not alive[i]:
            break
        taken.append(i)
        alive[(np.abs(xs - xs[i]) <= spread[0] // 2) & (np.abs(ys - ys[i]) <= spread[1] // 2)] = False
        start = i + 1
    return xs[taken], ys[taken]


def _refine_level(pyr, tpl, method, level, places):
    """Template places found at ``level + 1`` looked for again at ``level``,
    each within two pixels of where it lands; returns ``(x, y, score)`` at
    ``level`` for each (places are the top-left corner of the uncut template).

    A few SQDIFF places are scored one by one; otherwise the areas around the
    places are merged (``_merge_regions``) and each merged area is scored at
    once."""
    lv = tpl.levels[level]
    img = pyr[level]
    crop = lv["crop"]
    th, tw = lv["t"].shape[:2]
    max_x, max_y = img.shape[1] - tw, img.shape[0] - th
    windows = []
    for x, y, _ in places:
        # the cut template's places: the template's place + crop
        x0, x1 = max(0, 2 * x - 2 + crop), min(max_x, 2 * x + 2 + crop)
        y0, y1 = max(0, 2 * y - 2 + crop), min(max_y, 2 * y + 2 + crop)
        if x0 <= x1 and y0 <= y1:
            windows.append((x0, x1, y0, y1))
    if method is MatchMethod.SQDIFF and len(windows) <= _MAX_SUMMED_WINDOWS:
        # 25 places each: a direct sum per place is cheaper than a correlation
        best = [_sqdiff_best(img, lv, *w) for w in windows]
    else:
        best = _best_in_merged_areas(img, lv, method, windows)
    return [(x - crop, y - crop, q) for x, y, q in best]


# Up to this many places to refine, SQDIFF scores them one sum at a time.
_MAX_SUMMED_WINDOWS = 3
# Over this many places to refine, the whole level is scored once (merging their areas would cost more).
_MAX_MERGED_WINDOWS = 256


def _refine_until_perfect(pyr, tpl, method, places):
    """``_refine_level`` to full size, one place at a time (best first),
    stopping at a perfect score: nothing can beat it."""
    out = []
    for place in places:
        out += _refine_level(pyr, tpl, method, 0, [place])
        if out and out[-1][2] >= 1.0:
            break
    return out


def _best_in_merged_areas(img, lv, method, windows):
    np = _np()
    th, tw = lv["t"].shape[:2]
    areas = [Region(x0, y0, right=x1 + tw, bottom=y1 + th) for x0, x1, y0, y1 in windows]
    _merge_regions(areas)
    maps = [(a, _scores(img[a.y:a.bottom, a.x:a.right], lv, method)) for a in areas]
    best = []
    for x0, x1, y0, y1 in windows:
        a, s = next((a, s) for a, s in maps if a.x <= x0 and a.y <= y0 and
                    x1 + tw <= a.right and y1 + th <= a.bottom)
        part = s[y0 - a.y:y1 - a.y + 1, x0 - a.x:x1 - a.x + 1]
        iy, ix = np.unravel_index(int(np.argmax(part)), part.shape)
        best.append((x0 + int(ix), y0 + int(iy), float(part[iy, ix])))
    return best


def _refine_many(pyr, tpl, method, level, places):
    """``_refine_level`` for places all over the level (a plateau: a flat
    template on a flat screen gives one at every pixel), in arrays: the whole
    level scored once (merging so many areas would cost more), each place's
    best read from it, then without repeats and best first (ties top to
    bottom, left to right), as ``_first_pass`` orders them."""
    np = _np()
    lv = tpl.levels[level]
    img = pyr[level]
    crop = lv["crop"]
    th, tw = lv["t"].shape[:2]
    p = np.array([(x, y) for x, y, _ in places], np.int64)
    x0, x1 = np.maximum(0, 2 * p[:, 0] - 2 + crop), np.minimum(img.shape[1] - tw, 2 * p[:, 0] + 2 + crop)
    y0, y1 = np.maximum(0, 2 * p[:, 1] - 2 + crop), np.minimum(img.shape[0] - th, 2 * p[:, 1] + 2 + crop)
    keep = (x0 <= x1) & (y0 <= y1)
    if not keep.any():
        return []
    bx, by, bq = _best_in_whole_level(_scores(img, lv, method), x0[keep], x1[keep], y0[keep], y1[keep])
    bx, by = bx - crop, by - crop
    key = (by + crop) * (img.shape[1] + 1) + (bx + crop)
    first = np.sort(np.unique(key, return_index=True)[1])  # each place once, where it first came
    bx, by, bq = bx[first], by[first], bq[first]
    order = np.lexsort((bx, by, -bq))
    return list(zip(bx[order].tolist(), by[order].tolist(), bq[order].tolist()))


def _best_in_whole_level(s, x0, x1, y0, y1):
    """Each window's best place in the score map ``s`` (the first best in
    row order, as ``_best_in_merged_areas`` picks): arrays x, y, score."""
    np = _np()
    best_q = np.full(len(x0), -np.inf)
    best_x, best_y = x0.copy(), y0.copy()
    for dy in range(int((y1 - y0).max()) + 1):
        for dx in range(int((x1 - x0).max()) + 1):
            ok = (y0 + dy <= y1) & (x0 + dx <= x1)
            q = np.where(ok, s[np.minimum(y0 + dy, s.shape[0] - 1), np.minimum(x0 + dx, s.shape[1] - 1)], -np.inf)
            better = q > best_q
            best_q = np.where(better, q, best_q)
            best_x = np.where(better, x0 + dx, best_x)
            best_y = np.where(better, y0 + dy, best_y)
    return best_x, best_y, best_q


def _sqdiff_best(img, lv, x0, x1, y0, y1):
    """The best SQDIFF place (and its score) with x0 <= x <= x1, y0 <= y <= y1."""
    cv2 = _cv2()
    t, m8, rects = lv["t"], lv.get("m8"), lv.get("rects")
    th, tw = t.shape[:2]
    best = None
    for y in range(y0, y1 + 1):
        for x in range(x0, x1 + 1):
            if rects is not None:  # the compared rectangles one by one: cheaper than the mask
                ssd = 0.0
                for rx0, ry0, rx1, ry1, part in rects:
                    ssd += cv2.norm(img[y + ry0:y + ry1, x + rx0:x + rx1], part, cv2.NORM_L2SQR)
            else:
                ssd = cv2.norm(img[y:y + th, x:x + tw], t, cv2.NORM_L2SQR, mask=m8)
            if best is None or ssd < best[2]:
                best = (x, y, ssd)
    x, y, ssd = best
    return x, y, 1.0 - (max(ssd, 0.0) / (lv["n"] * _FULL_SCALE * _FULL_SCALE)) ** 0.5


def _usable_levels(img, tpl):
    """How many of the template's levels the searched area allows: at each,
    the area must hold the template at every place it could be found."""
    h, w = img.shape[:2]
    if (h - tpl.height + 1) * (w - tpl.width + 1) <= _DIRECT_MAX_PLACES:
        return 1
    levels = len(tpl.levels)
    while levels > 1:
        lv = tpl.levels[levels - 1]
        th, tw = lv["t"].shape[:2]
        if (h >> (levels - 1)) >= th + 2 * lv["crop"] and (w >> (levels - 1)) >= tw + 2 * lv["crop"]:
            break
        levels -= 1
    return levels


def _first_pass(img, tpl, params, best_only):
    """Places ``(x, y, score)`` in ``img`` at full resolution (internal
    scale), best first; for ``best_only``, one.

    The places scoring well at the pyramid's top level are followed down one
    level at a time; at each level the ones that fell too far behind are
    dropped (for ``match``, those more than the slack below the best
    of that level, and all but the best few; for ``match_all``, those too far
    below the threshold)."""
    np = _np()
    levels = _usable_levels(img, tpl)
    method = params.match_method
    threshold = _internal(method, params.match_threshold)
    if levels == 1:
        s = _scores(img, tpl.levels[0], method)
        if best_only:
            iy, ix = np.unravel_index(int(np.argmax(s)), s.shape)
            return [(int(ix), int(iy), float(s[iy, ix]))]
        return [(x, y, float(s[y, x])) for x, y in _candidates(s, threshold)]
    pyr = _pyramid(img, levels)
    top = levels - 1
    lv = tpl.levels[top]
    th, tw = lv["t"].shape[:2]
    s = _scores(pyr[top], lv, method)
    slack = _TOP_LEVEL_SLACK[method]
    crop = lv["crop"]
    if best_only:
        # one place per half template: a best match has no close rival worth following
        spread = (max(3, tw // 2 | 1), max(3, th // 2 | 1))
        cands = _candidates(s, float(s.max()) - slack, _MAX_BEST_CANDIDATES, spread)
    else:
        # Scores fall at the pyramid's coarse levels (hard edges blur): the best place of a level and
        # those close behind it are followed even when below the threshold's slack, or a template whose
        # every place scores under it there (a small one with sharp edges) would never be found.
        cands = _candidates(s, min(threshold, float(s.max())) - slack)
    places = [(x - crop, y - crop, None) for x, y in cands]
    for level in range(top - 1, -1, -1):
        if not best_only and len(places) > _MAX_MERGED_WINDOWS:
            refined = _refine_many(pyr, tpl, method, level, places)
        else:
            refined = _refine_few(pyr, tpl, method, level, places, best_only)
        if not refined:
            return []
        if level:
            if best_only:
                # the best and whatever is close behind it (half the slack) go on
                refined = [r for r in refined if r[2] >= refined[0][2] - slack / 2][:_MAX_KEPT_PER_LEVEL]
            else:
                refined = [r for r in refined if r[2] >= min(threshold, refined[0][2]) - slack]
        places = refined
    return places


def _refine_few(pyr, tpl, method, level, places, best_only):
    """The places refined at ``level`` (``_refine_level``; at full size for
    ``match``, best first until a perfect one), each once, best first (ties
    top to bottom, left to right)."""
    if best_only and level == 0:
        found = _refine_until_perfect(pyr, tpl, method, places)
    else:
        found = _refine_level(pyr, tpl, method, level, places)
    refined, seen = [], set()
    for r in found:
        if (r[0], r[1]) not in seen:
            seen.add((r[0], r[1]))
            refined.append(r)
    refined.sort(key=lambda r: (-r[2], r[1], r[0]))
    return refined


# ---------------------------------------------------------------------------
# Second pass: confirm pixel by pixel
# ---------------------------------------------------------------------------

def _confirm(window, pixels, mask, params):
    """True when no blob of differing pixels survives the erosion."""
    cv2, np = _cv2(), _np()
    if params.confirm_method is ConfirmMethod.NONE:
        return True
    a, b = np.ascontiguousarray(window), pixels
    if a.ndim == 3:
        a = cv2.cvtColor(a, cv2.COLOR_BGR2GRAY)
        b = cv2.cvtColor(b, cv2.COLOR_BGR2GRAY)
    m8 = None if mask is None else (mask > 0).astype(np.uint8)
    if params.confirm_method is ConfirmMethod.NORMED_ABSDIFF:
        a = _stretch(a, m8)
        b = _stretch(b, m8)
    diff = cv2.absdiff(a, b)
    if m8 is not None:
        diff *= m8
    # a pixel differs when its difference is above confirm_threshold of full scale
    limit = params.confirm_threshold * _FULL_SCALE
    differs = (diff > limit).astype(np.uint8)
    if params.erode_passes:
        # more passes than half the template's smaller side erase everything anyway: stop there
        passes = min(params.erode_passes, (min(differs.shape) + 1) // 2)
        differs = cv2.erode(differs, np.ones((3, 3), np.uint8), iterations=passes,
                            borderType=cv2.BORDER_CONSTANT, borderValue=0)
    return cv2.countNonZero(differs) == 0


def _stretch(gray, m8):
    """Stretch the grey levels of the compared pixels to the full 0..255 range."""
    cv2 = _cv2()
    lo, hi, _, _ = cv2.minMaxLoc(gray, mask=m8)
    if hi <= lo:
        return gray
    return cv2.convertScaleAbs(gray, alpha=255.0 / (hi - lo), beta=-lo * 255.0 / (hi - lo))


# ---------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------

class _Prepared:
    """A template ready for many frames (wait_for_match reuses it)."""

    def __init__(self, image, match_parameters):
        self.params = match_parameters if match_parameters is not None else MatchParameters()
        self.template = _load_template(image)
        self.image = self.template.image

    def levels(self, template):
        return _prepared_levels(template.pixels, template.mask, self.params.pyramid_levels)


# Templates prepared lately, by their pixels (a page object matches the same
# few templates over and over): at most this many are kept.
_TEMPLATE_CACHE_SIZE = 16
_template_cache = {}


def _prepared_levels(pixels, mask, levels):
    key = (levels, pixels.shape, hash(pixels.tobytes()), None if mask is None else hash(mask.tobytes()))
    tpl = _template_cache.pop(key, None)
    if tpl is None:
        tpl = _Levels(pixels, mask, levels)
        if len(_template_cache) >= _TEMPLATE_CACHE_SIZE:
            del _template_cache[next(iter(_template_cache))]
    _template_cache[key] = tpl  # most recently used last
    return tpl


def _search(prep, frame, region, best_only):
    """Yield MatchResults for ``frame`` (best only: exactly one result, else
    every match, best first, none overlapping one given before)."""
    if frame is None:
        frame = _get_frame()
    img = _frame_pixels(frame)
    t = getattr(frame, "time", None)
    area = _searched_area(img, prep.image, region)
    template = prep.template.with_channels(img.ndim == 2)
    th, tw = template.height, template.width
    window = img[area.y:area.bottom, area.x:area.right]
    params = prep.params
    method = params.match_method
    if template.transparent:
        places = _everywhere(window, th, tw)
    else:
        places = _first_pass(window, prep.levels(template), params, best_only)

    def confirmed(x, y):
        if template.transparent:
            return True  # no pixel is compared, so none can differ
        return _confirm(window[y:y + th, x:x + tw], template.pixels, template.mask, params)

    blocked = None
    for x, y, q in places:
        score = _reported(method, q)
        passed = score >= params.match_threshold
        if best_only:
            ok = passed and confirmed(x, y)
            yield MatchResult(t, ok, Region(area.x + x, area.y + y, tw, th), score, frame, prep.image, passed)
            return
        if not passed:
            continue
        if blocked is None:
            blocked = _np().zeros((window.shape[0] - th + 1, window.shape[1] - tw + 1), bool)
        if blocked[y, x]:
            continue  # it would overlap a match given already
        if confirmed(x, y):
            blocked[max(0, y - th + 1):y + th, max(0, x - tw + 1):x + tw] = True
            r = Region(area.x + x, area.y + y, tw, th)
            yield MatchResult(t, True, r, score, frame, prep.image, True)
    if best_only:  # no place at all (cannot happen when the template fits)
        yield MatchResult(t, False, Region(area.x, area.y, tw, th), 0.0, frame, prep.image, False)


def _everywhere(window, th, tw):
    """A template transparent everywhere scores 1 at every place: the places
    of a grid from the area's top-left corner, row by row (in a match_all,
    the others would overlap them)."""
    return [(x, y, 1.0) for y in range(0, window.shape[0] - th + 1, th)
            for x in range(0, window.shape[1] - tw + 1, tw)]


def _merge_regions(regions):
    """Merge, in place, the regions of the list whose bounding box is no
    bigger than the two of them (one inside the other, or nearly): what is
    left is a list of regions to search where searching each part apart would
    cost more than searching their bounding box."""
    # (x, y, right, bottom, area, the Region as given or None once merged): plain numbers, because
    # building a Region per comparison costs more than the comparison
    out = []
    for region in regions:
        x, y, right, bottom = region.x, region.y, region.right, region.bottom
        r = (x, y, right, bottom, (right - x) * (bottom - y), region)
        merged = True
        while merged:
            merged = False
            for i, o in enumerate(out):
                bx, by, bright, bbottom = min(r[0], o[0]), min(r[1], o[1]), max(r[2], o[2]), max(r[3], o[3])
                area = (bright - bx) * (bbottom - by)
                if area <= r[4] + o[4]:
                    r = (bx, by, bright, bbottom, area, None)
                    del out[i]
                    merged = True
                    break
        out.append(r)
    regions[:] = [r[5] if r[5] is not None else Region(r[0], r[1], right=r[2], bottom=r[3]) for r in out]


def _log(text):
    try:
        from farmhand import control  # pylint: disable=import-outside-toplevel
        control.log_event(text)
    except Exception:  # pylint: disable=broad-except
        pass


def _record(kind, result, prep, region, **fields):
    params = prep.params
    first_ok = result.first_pass_result >= params.match_threshold
    _checks.record(
        kind, bool(result), result.frame, region if region is not None and region != Region.ALL else None,
        {"match_method": params.match_method, "match_threshold": params.match_threshold,
         "confirm_method": params.confirm_method, "confirm_threshold": params.confirm_threshold,
         "erode_passes": params.erode_passes},
        template=prep.template.pixels, image=_image_name(prep.image), match_region=_checks.region_dict(result.region),
        score=result.first_pass_result, threshold=params.match_threshold,
        first_pass={"score": result.first_pass_result, "threshold": params.match_threshold, "passed": first_ok},
        confirm={"method": params.confirm_method, "threshold": params.confirm_threshold,
                 "passed": bool(result) if first_ok else None},
        mask=_mask_text(prep.template), **fields)


def _mask_text(template):
    if template.transparent:
        return "the template is transparent everywhere"
    return "transparent pixels of the template" if template.mask is not None else None


def _describe(result, params):
    return "%s %s (first pass %.3f, threshold %g, at %r)" % (
        _image_name(result.image), "matched" if result else "no match", result.first_pass_result,
        params.match_threshold, result.region)


def match(image, frame=None, match_parameters=None, region=Region.ALL):
    """Find ``image`` (a filename, or a BGR/BGRA array) in ``frame`` (default:
    ``get_frame()``), inside ``region``. Returns a ``MatchResult``, true when
    the best place passes both passes. Transparent pixels of ``image`` are
    ignored."""
    prep = _Prepared(image, match_parameters)
    result = next(_search(prep, frame, region, True))
    _log("match " + _describe(result, prep.params))
    _record("match", result, prep, region)
    return result


def match_all(image, frame=None, match_parameters=None, region=Region.ALL) -> typing.Iterator[MatchResult]:
    """Every place where ``image`` matches in ``frame``, best first; no two
    results overlap."""
    prep = _Prepared(image, match_parameters)
    if frame is None:
        frame = _get_frame()
    found, finished = [], False
    try:
        for result in _search(prep, frame, region, False):
            found.append(result)
            yield result
        finished = True
        _log("match_all %s: %d matches" % (_image_name(prep.image), len(found)))
    finally:
        # Also when the caller stopped early (``next(match_all(...))``, a break): the matches it saw.
        _record_all(prep, frame, region, found, finished)


def _record_all(prep, frame, region, found, finished):
    """The record of one match_all: every match's place; with none, the closest place (its scores found
    on the writer thread: the test does not wait for that search)."""
    params = prep.params
    fields = {"matches": len(found), "match_regions": [_checks.region_dict(r.region) for r in found[:50]],
              "finished": finished}
    later = None
    if found:
        best = found[0]
        fields.update(match_region=_checks.region_dict(best.region), score=best.first_pass_result,
                      first_pass={"score": best.first_pass_result, "threshold": params.match_threshold,
                                  "passed": True},
                      confirm={"method": params.confirm_method, "threshold": params.confirm_threshold,
                               "passed": True})
    else:
        def later():
            closest = next(_search(prep, frame, region, True))
            first_ok = closest.first_pass_result >= params.match_threshold
            return {"closest": True, "match_region": _checks.region_dict(closest.region),
                    "score": closest.first_pass_result,
                    "first_pass": {"score": closest.first_pass_result, "threshold": params.match_threshold,
                                   "passed": first_ok},
                    "confirm": {"method": params.confirm_method, "threshold": params.confirm_threshold,
                                "passed": bool(closest) if first_ok else None}}
    _checks.record(
        "match_all", bool(found), frame, region if region is not None and region != Region.ALL else None,
        {"match_method": params.match_method, "match_threshold": params.match_threshold,
         "confirm_method": params.confirm_method, "confirm_threshold": params.confirm_threshold,
         "erode_passes": params.erode_passes},
        template=prep.template.pixels, image=_image_name(prep.image), threshold=params.match_threshold,
        mask=_mask_text(prep.template), later=later, **fields)


def wait_for_match(image, timeout_secs=10, consecutive_matches=1, match_parameters=None,
                   region=Region.ALL, frames=None):
    """Match ``image`` in each new frame until it has matched in
    ``consecutive_matches`` frames in a row at the same place; return that
    last ``MatchResult``. Raise ``MatchTimeout`` after ``timeout_secs``."""
    if consecutive_matches < 1:
        raise ValueError("consecutive_matches must be at least 1")
    prep = _Prepared(image, match_parameters)
    source = _frames_for(frames, timeout_secs)
    in_a_row, last_place, last_frame, best = 0, None, None, None
    for frame in source:
        last_frame = frame
        result = next(_search(prep, frame, region, True))
        if best is None or result.first_pass_result >= best.first_pass_result:
            best = result
        if result:
            in_a_row = in_a_row + 1 if result.position == last_place else 1
            last_place = result.position
            if in_a_row >= consecutive_matches:
                _log("wait_for_match " + _describe(result, prep.params))
                _record("wait_for_match", result, prep, region, timeout_secs=timeout_secs)
                return result
        else:
            in_a_row, last_place = 0, None
    _log("wait_for_match %s: no match within %g s" % (_image_name(prep.image), timeout_secs))
    if best is not None:
        # the frame that came closest, with its scores: what the author needs to see
        _record("wait_for_match", best, prep, region, timeout_secs=timeout_secs, closest=True)
    raise MatchTimeout(last_frame, _image_name(prep.image), timeout_secs)


def detect_match(image, timeout_secs=10, match_parameters=None, region=Region.ALL, frames=None):
    """The legacy form (removed from stb-tester in v30, still in old packs):
    a generator of one ``MatchResult`` per new frame, matched or not, until
    ``timeout_secs``. ``for m in detect_match(...): if m: break`` is
    ``wait_for_match`` without the exception."""
    prep = _Prepared(image, match_parameters)
    for frame in _frames_for(frames, timeout_secs):
        yield next(_search(prep, frame, region, True))


def _frames_for(frames, timeout_secs):
    """The frames to look at: the live ones until the timeout, or the given
    iterable until a frame's capture time is ``timeout_secs`` after the
    first's (frames without a time: until the iterable ends)."""
    if frames is None:
        from stbt_core._frames import live_frames  # pylint: disable=import-outside-toplevel
        return live_frames(timeout_secs)
    return _until(frames, timeout_secs)


def _until(frames, timeout_secs):
    start = None
    for frame in frames:
        t = getattr(frame, "time", None)
        if t is not None and timeout_secs is not None:
            if start is None:
                start = t
            elif t - start > timeout_secs:
                return
        yield frame

