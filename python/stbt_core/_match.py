"""Image matching of the stbt API: ``match``, ``match_all``, ``wait_for_match``,
``MatchParameters``, ``MatchMethod``, ``ConfirmMethod``, ``MatchResult``,
``MatchTimeout``.

farmhand's own implementation of the algorithm stb-tester documents (a first
pass on an image pyramid, a confirm pass pixel by pixel after erosion,
transparent template pixels ignored). How each step works and why the scores
are on the scale they are: docs/stbt-matching.md.
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
    ``image`` the template, ``time`` the frame's capture time."""

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
        return "MatchResult(time=%s, match=%r, region=%r, first_pass_result=%.4f, frame=<%s>, image=<%s>)" % (
            "None" if self.time is None else "%.3f" % self.time, self.match, self.region,
            self.first_pass_result, _shape_text(self.frame), _image_name(self.image))


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


def _shape_text(a):
    shape = getattr(a, "shape", None)
    if shape is None:
        return "None"
    return "%dx%d" % (shape[1], shape[0]) + ("x%d" % shape[2] if len(shape) > 2 else "")


def _image_name(image):
    for attr in ("relative_filename", "filename"):
        name = getattr(image, attr, None)
        if name:
            return name
    return _shape_text(image)


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------

def _load_template(image):
    """``(template object as given/loaded, BGR uint8 array, mask or None)``.

    The mask is 1.0 where the template's alpha is 255 (opaque) and 0.0 where
    it is lower: partly transparent pixels are ignored like fully transparent
    ones. A template without transparent pixels has no mask (the faster,
    plain path)."""
    np, cv2 = _np(), _cv2()
    if isinstance(image, (str, bytes)) or hasattr(image, "__fspath__"):
        try:
            from stbt_core._frames import load_image  # pylint: disable=import-outside-toplevel
        except ImportError:  # the loader's module is not there (yet): plain read
            load_image = None
        if load_image is not None:
            loaded = load_image(image)
        else:
            import os  # pylint: disable=import-outside-toplevel
            loaded = cv2.imread(os.fspath(image), cv2.IMREAD_UNCHANGED)
            if loaded is None:
                raise IOError("No such file or not an image: %s" % (image,))
        image = loaded
    array = np.asarray(image)
    if array.dtype != np.uint8:
        raise TypeError("the image to match must be 8-bit (uint8), not %s" % array.dtype)
    if array.ndim == 2:
        bgr, mask = cv2.cvtColor(array, cv2.COLOR_GRAY2BGR), None
    elif array.ndim == 3 and array.shape[2] == 3:
        bgr, mask = np.ascontiguousarray(array), None
    elif array.ndim == 3 and array.shape[2] == 4:
        bgr = np.ascontiguousarray(array[:, :, :3])
        opaque = array[:, :, 3] == 255
        mask = None if opaque.all() else opaque.astype(np.float32)
    else:
        raise ValueError("the image to match must be height x width x 3 (BGR) or 4 (BGRA), not %r"
                         % (array.shape,))
    if bgr.shape[0] == 0 or bgr.shape[1] == 0:
        raise ValueError("the image to match is empty (%dx%d)" % (bgr.shape[1], bgr.shape[0]))
    if mask is not None and not mask.any():
        raise ValueError("the image to match is transparent everywhere")
    return image, bgr, mask


def _frame_bgr(frame):
    np, cv2 = _np(), _cv2()
    a = np.asarray(frame)
    if a.ndim == 2:
        return cv2.cvtColor(a, cv2.COLOR_GRAY2BGR)
    if a.ndim == 3 and a.shape[2] == 4:
        return a[:, :, :3]
    return a


def _get_frame():
    from stbt_core._frames import get_frame  # pylint: disable=import-outside-toplevel
    return get_frame()


# ---------------------------------------------------------------------------
# First pass: scores, higher is better, 1.0 is a perfect match
# ---------------------------------------------------------------------------

class _Template:
    """A template prepared for matching: its pyramid (template, mask, their
    float forms and the constant terms the masked SQDIFF needs)."""

    def __init__(self, bgr, mask, levels):
        cv2, np = _cv2(), _np()
        self.levels = []
        t, m = bgr.copy(), mask  # a copy: the caller may change its array later
        for level in range(levels):
            if level:
                if min(t.shape[0], t.shape[1]) < 2 * _MIN_TOP_SIZE:
                    break
                t = cv2.pyrDown(t)
                if m is not None:
                    m = cv2.pyrDown(m)
            tf = t.astype(np.float32)
            if m is not None:
                # below full size the mask is made binary again (half-covered pixels count)
                m = (m >= 0.5).astype(np.float32)
                if not m.any():
                    break
            entry = {"t": t, "tf": tf, "m": m}
            if m is not None:
                m3 = cv2.merge([m, m, m])
                entry["m3"] = m3
                entry["m8"] = m.astype(np.uint8)
                entry["wt"] = t * m3.astype(np.uint8)      # the template with its transparent pixels zeroed
                entry["wtt"] = float((tf * tf * m3).sum())  # sum of T^2 over the opaque pixels
                entry["n"] = float(m.sum()) * 3            # number of compared values
            else:
                entry["n"] = float(t.shape[0] * t.shape[1] * 3)
            self.levels.append(entry)
        self.height, self.width = bgr.shape[:2]


_ONES_1X3 = None
# The template at the pyramid's top level keeps at least this many pixels per side.
_MIN_TOP_SIZE = 8
_FULL_SCALE = 255.0


def _scores(img, lv, method):
    """Score map (float32) of the template level ``lv`` at every place in ``img``."""
    global _ONES_1X3  # pylint: disable=global-statement
    cv2, np = _cv2(), _np()
    if _ONES_1X3 is None:
        _ONES_1X3 = np.ones((1, 3), np.float32)
    if method is MatchMethod.SQDIFF:
        if lv["m"] is None:
            ssd = cv2.matchTemplate(img, lv["t"], cv2.TM_SQDIFF)
        else:
            cross = cv2.matchTemplate(img, lv["wt"], cv2.TM_CCORR)
            f = img.astype(np.float32)
            sq = cv2.transform(f * f, _ONES_1X3)
            energy = cv2.matchTemplate(sq, lv["m"], cv2.TM_CCORR)
            ssd = energy - 2 * cross + lv["wtt"]
        np.maximum(ssd, 0, out=ssd)
        # 1 - the root-mean-square difference per compared value, as a fraction of full scale
        return 1.0 - np.sqrt(ssd * (1.0 / (lv["n"] * _FULL_SCALE * _FULL_SCALE)))
    cv_method = {MatchMethod.SQDIFF_NORMED: cv2.TM_SQDIFF_NORMED,
                 MatchMethod.CCORR_NORMED: cv2.TM_CCORR_NORMED,
                 MatchMethod.CCOEFF_NORMED: cv2.TM_CCOEFF_NORMED}[method]
    if lv["m"] is None:
        s = cv2.matchTemplate(img, lv["t"], cv_method)
    else:
        s = cv2.matchTemplate(img.astype(np.float32), lv["tf"], cv_method, mask=lv["m3"])
    s = np.nan_to_num(s, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
    if method is MatchMethod.SQDIFF_NORMED:
        s = 1.0 - s
    return s


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
# match() follows at most this many places below the top level.
_MAX_KEPT_PER_LEVEL = 2
# match_all() looks at most at this many places.
_MAX_ALL_CANDIDATES = 200


def _candidates(scores, min_score, limit, spread=(3, 3)):
    """The local maxima of ``scores`` at or above ``min_score`` (each the
    highest within ``spread`` (width, height) around it), best first."""
    cv2, np = _cv2(), _np()
    peaks = cv2.dilate(scores, np.ones((spread[1], spread[0]), np.uint8))
    ys, xs = np.nonzero((scores >= peaks) & (scores >= min_score))
    if len(xs) == 0:
        return []
    values = scores[ys, xs]
    order = np.argsort(-values, kind="stable")[:limit]
    return [(int(xs[i]), int(ys[i])) for i in order]


def _refine_one(pyr, tpl, method, level, x, y):
    """A place found at ``level + 1`` looked for again at ``level``, within
    two pixels of where it lands; returns ``(x, y, score)`` at ``level``."""
    np = _np()
    lv = tpl.levels[level]
    img = pyr[level]
    th, tw = lv["t"].shape[:2]
    max_x, max_y = img.shape[1] - tw, img.shape[0] - th
    x0, x1 = max(0, 2 * x - 2), min(max_x, 2 * x + 2)
    y0, y1 = max(0, 2 * y - 2), min(max_y, 2 * y + 2)
    if method is MatchMethod.SQDIFF:
        # 25 places at most: a direct sum per place is cheaper than a correlation
        return _sqdiff_best(img, lv, x0, x1, y0, y1)
    s = _scores(img[y0:y1 + th, x0:x1 + tw], lv, method)
    iy, ix = np.unravel_index(int(np.argmax(s)), s.shape)
    return x0 + int(ix), y0 + int(iy), float(s[iy, ix])


def _sqdiff_best(img, lv, x0, x1, y0, y1):
    """The best SQDIFF place (and its score) with x0 <= x <= x1, y0 <= y <= y1."""
    cv2 = _cv2()
    t, m8 = lv["t"], lv.get("m8")
    th, tw = t.shape[:2]
    best = None
    for y in range(y0, y1 + 1):
        for x in range(x0, x1 + 1):
            ssd = cv2.norm(img[y:y + th, x:x + tw], t, cv2.NORM_L2SQR, mask=m8)
            if best is None or ssd < best[2]:
                best = (x, y, ssd)
    x, y, ssd = best
    return x, y, 1.0 - (max(ssd, 0.0) / (lv["n"] * _FULL_SCALE * _FULL_SCALE)) ** 0.5


def _first_pass(img, tpl, params, best_only):
    """Places (x, y, score at full resolution) in ``img``, best first.

    The places scoring well at the pyramid's top level are followed down one
    level at a time; at each level the ones that fell too far behind are
    dropped (for ``match``, those more than the slack below the best
    of that level, and all but the best few; for ``match_all``, those too far
    below the threshold)."""
    np = _np()
    levels = len(tpl.levels)
    # the searched area must hold the template at every level used
    while levels > 1 and (img.shape[0] >> (levels - 1) < tpl.levels[levels - 1]["t"].shape[0]
                          or img.shape[1] >> (levels - 1) < tpl.levels[levels - 1]["t"].shape[1]):
        levels -= 1
    pyr = _pyramid(img, levels)
    top = levels - 1
    lv = tpl.levels[top]
    th, tw = lv["t"].shape[:2]
    if pyr[top].shape[0] < th or pyr[top].shape[1] < tw:
        return []
    method = params.match_method
    s = _scores(pyr[top], lv, method)
    slack = _TOP_LEVEL_SLACK[method]
    if top == 0:
        if best_only:
            iy, ix = np.unravel_index(int(np.argmax(s)), s.shape)
            return [(int(ix), int(iy), float(s[iy, ix]))]
        return [(x, y, float(s[y, x])) for x, y in
                _candidates(s, params.match_threshold, _MAX_ALL_CANDIDATES)]
    if best_only:
        # one place per half template: a best match has no close rival worth following
        spread = (max(3, tw // 2 | 1), max(3, th // 2 | 1))
        cands = _candidates(s, float(s.max()) - slack, _MAX_BEST_CANDIDATES, spread)
    else:
        # Scores fall at the pyramid's coarse levels (hard edges blur): the best place of a level and
        # those close behind it are followed even when below the threshold's slack, or a template whose
        # every place scores under it there (a small one with sharp edges) would never be found.
        cands = _candidates(s, min(params.match_threshold, float(s.max())) - slack, _MAX_ALL_CANDIDATES)
    places = [(x, y, None) for x, y in cands]
    for level in range(top - 1, -1, -1):
        refined, seen = [], set()
        for x, y, _ in places:
            r = _refine_one(pyr, tpl, method, level, x, y)
            if (r[0], r[1]) not in seen:
                seen.add((r[0], r[1]))
                refined.append(r)
        refined.sort(key=lambda r: -r[2])
        if level:
            if best_only:
                # the best and whatever is close behind it (half the slack) go on
                refined = [r for r in refined if r[2] >= refined[0][2] - slack / 2][:_MAX_KEPT_PER_LEVEL]
            else:
                refined = [r for r in refined if r[2] >= min(params.match_threshold, refined[0][2]) - slack]
        places = refined
    return places


# ---------------------------------------------------------------------------
# Second pass: confirm pixel by pixel
# ---------------------------------------------------------------------------

def _confirm(window, tpl_bgr, mask, params):
    """True when no blob of differing pixels survives the erosion."""
    cv2, np = _cv2(), _np()
    if params.confirm_method is ConfirmMethod.NONE:
        return True
    a = cv2.cvtColor(np.ascontiguousarray(window), cv2.COLOR_BGR2GRAY)
    b = cv2.cvtColor(tpl_bgr, cv2.COLOR_BGR2GRAY)
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
# The API
# ---------------------------------------------------------------------------

class _Prepared:
    """A template ready for many frames (wait_for_match reuses it)."""

    def __init__(self, image, match_parameters):
        self.params = match_parameters if match_parameters is not None else MatchParameters()
        self.image, self.bgr, self.mask = _load_template(image)
        self.tpl = _prepared_template(self.bgr, self.mask, self.params.pyramid_levels)


# Templates prepared lately, by their pixels (a page object matches the same
# few templates over and over): at most this many are kept.
_TEMPLATE_CACHE_SIZE = 16
_template_cache = {}


def _prepared_template(bgr, mask, levels):
    key = (levels, bgr.shape, hash(bgr.tobytes()), None if mask is None else hash(mask.tobytes()))
    tpl = _template_cache.pop(key, None)
    if tpl is None:
        tpl = _Template(bgr, mask, levels)
        if len(_template_cache) >= _TEMPLATE_CACHE_SIZE:
            del _template_cache[next(iter(_template_cache))]
    _template_cache[key] = tpl  # most recently used last
    return tpl


def _search(prep, frame, region, best_only):
    """Yield MatchResults for ``frame`` (best only: exactly one result)."""
    if frame is None:
        frame = _get_frame()
    img = _frame_bgr(frame)
    t = getattr(frame, "time", None)
    fh, fw = img.shape[:2]
    th, tw = prep.bgr.shape[:2]
    if region is None:
        region = Region.ALL
    area = Region.intersect(region, Region(0, 0, fw, fh))
    if area is None or area.width < tw or area.height < th:
        # the template does not fit in the searched area: nothing can match there
        if best_only:
            origin = area or Region(0, 0, 0, 0)
            yield MatchResult(t, False, Region(origin.x, origin.y, tw, th), 0.0, frame, prep.image, False)
        return
    window = img[area.y:area.bottom, area.x:area.right]
    params = prep.params
    taken = []
    for x, y, score in _first_pass(window, prep.tpl, params, best_only):
        r = Region(area.x + x, area.y + y, tw, th)
        passed = score >= params.match_threshold
        if best_only:
            ok = passed and _confirm(window[y:y + th, x:x + tw], prep.bgr, prep.mask, params)
            yield MatchResult(t, ok, r, score, frame, prep.image, passed)
            return
        if not passed:
            continue
        if any(Region.intersect(r, other) is not None for other in taken):
            continue
        if _confirm(window[y:y + th, x:x + tw], prep.bgr, prep.mask, params):
            taken.append(r)
            yield MatchResult(t, True, r, score, frame, prep.image, True)
    if best_only:  # no place at all (cannot happen when the template fits)
        yield MatchResult(t, False, Region(area.x, area.y, tw, th), 0.0, frame, prep.image, False)


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
        template=prep.bgr, image=_image_name(prep.image), match_region=_checks.region_dict(result.region),
        score=result.first_pass_result, threshold=params.match_threshold,
        first_pass={"score": result.first_pass_result, "threshold": params.match_threshold, "passed": first_ok},
        confirm={"method": params.confirm_method, "threshold": params.confirm_threshold,
                 "passed": bool(result) if first_ok else None},
        mask="transparent pixels of the template" if prep.mask is not None else None, **fields)


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
        template=prep.bgr, image=_image_name(prep.image), threshold=params.match_threshold,
        mask="transparent pixels of the template" if prep.mask is not None else None, later=later, **fields)


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
        from stbt_core._frames import frames as live_frames  # pylint: disable=import-outside-toplevel
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

