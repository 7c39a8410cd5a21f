"""The picture tesseract reads for ``ocr`` and ``match_text``: the region
cropped, turned grey (or, with ``text_color``, into text of that colour
dark on white: ``_ocr_colour`` where text and background differ in luma,
the share-of-colour map below where they do not) and upsampled towards the
line height tesseract's LSTM model reads best.

farmhand's own implementation, from stb-tester's documented behaviour.
"""

import collections

from stbt_core import _ocr_colour
from stbt_core._types import Region

# upsample=True scales by UPSAMPLE_FACTOR at most: less when the region's smallest line of text is
# already tall, so that it lands near UPSAMPLE_LINE_HEIGHT pixels (tesseract's LSTM model reads best
# there; 40 px text scaled 3x read worse). Never scaled down. Why: docs/stbt-matching.md, OCR accuracy.
UPSAMPLE_FACTOR = 3
UPSAMPLE_LINE_HEIGHT = 50
# A row belongs to a line of text when some pixel differs from the background (median of the crop's
# border) by more than this; runs of such rows shorter than _MIN_LINE_ROWS are rules or noise.
_INK_DIFF = 64
_MIN_LINE_ROWS = 6
# text_color (see _text_color_share): how much a pixel's distance off the background-to-text line (in
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


# How the picture read relates to the region: ``scale`` (the upsampling factor), the height of its
# shortest line of text (None when none was found) and its number of lines.
Geometry = collections.namedtuple("Geometry", "scale line_height lines")


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


def prepare(frame, region, params):
    """``(frame, clipped region, grey picture for tesseract, Geometry)``: the region cropped, with
    ``text_color`` turned into dark text on white, and upsampled (see UPSAMPLE_LINE_HEIGHT). Sets
    ``params.by_words`` (text_color read as luma, words kept by colour: see _ocr_colour)."""
    np, cv2 = _np(), _cv2()
    if frame is None:
        from stbt_core._frames import get_frame  # pylint: disable=import-outside-toplevel
        frame = get_frame()
    clipped, crop = _crop(np.asarray(frame), region)
    grey, share, other = _grey(crop, params)
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
    return frame, clipped, np.ascontiguousarray(grey), Geometry(factor, line_height, lines)


def _crop(a, region):
    """``(the region clipped to the frame, its pixels without alpha)``; errors for a frame that is not
    an 8-bit picture and a region outside it."""
    np = _np()
    if a.dtype != np.uint8 or a.ndim not in (2, 3):
        raise TypeError("the frame to read must be an 8-bit picture, not %s %r" % (a.dtype, a.shape))
    h, w = a.shape[:2]
    if region is None:
        raise TypeError("region=None is not a region to read: give a Region (Region.ALL for the whole frame)")
    clipped = Region.intersect(fourtuple(region), Region(0, 0, width=w, height=h))
    if clipped is None or clipped.width == 0 or clipped.height == 0:
        raise ValueError("region %r does not overlap the %dx%d frame: there is nothing to read" % (region, w, h))
    return clipped, colour_channels(a[clipped.y:clipped.bottom, clipped.x:clipped.right])


def colour_channels(crop):
    """``crop`` as BGR (h, w, 3) or grey (h, w): alpha dropped, and a grey picture with a channel
    axis (``load_image(color_channels=1)`` gives (h, w, 1); grey with alpha is (h, w, 2)) made 2-D."""
    if crop.ndim == 3 and crop.shape[2] in (1, 2):
        return crop[:, :, 0]
    if crop.ndim == 3 and crop.shape[2] == 4:
        return crop[:, :, :3]
    return crop


def _grey(crop, params):
    """``(grey, share, other)``: the crop as tesseract will read it (before upsampling); with a
    ``text_color`` of too little luma contrast, its share-of-colour map and other-colour pixels (else
    ``None``)."""
    np, cv2 = _np(), _cv2()
    params.by_words = params.text_color is not None and \
        abs(_ocr_colour.luma_contrast(crop, params.text_color)) >= _ocr_colour.LUMA_CONTRAST
    if params.by_words:
        return _ocr_colour.text_grey(crop, params.text_color, _line_height(_ocr_colour.luma(crop))[0]), None, None
    if params.text_color is not None:
        share, other = _text_color_share(crop, params.text_color, params.text_color_threshold)
        return np.clip((1.0 - share) * 255.0, 0, 255).astype(np.uint8), share, other
    if crop.ndim == 3:
        return cv2.cvtColor(crop, cv2.COLOR_BGR2GRAY), None, None
    return crop, None, None


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


def fourtuple(region):
    """A Region from a Region (or any ``(x, y, right, bottom)`` sequence)."""
    if isinstance(region, Region):
        return region
    x, y, right, bottom = region
    return Region(x, y, right=right, bottom=bottom)
