"""``text_color`` for ``ocr`` and ``match_text``: read the region as text of
the text colour's brightness, then keep the words whose ink is of the text
colour.

A capture's luma is sharp and its chroma subsampled (4:2:0) and blurred, so
the glyphs are read from the luma: the region's luma with text of the
other polarity flattened into the local median (MEDIAN_SHARE line heights
wide) and its local background taken out (a morphological top-hat for text
brighter than the background, a black-hat for darker text: the shading of
gradients and photo-like backgrounds goes), dark text on white, black from
the text colour's luma on (a brighter second text does not make it faint).
tesseract reads that picture with word boxes; each word's ink colour is then
measured in the capture's own terms and compared with ``text_color``:

- its chroma per unit of luma (chroma ``c`` regressed on the word's luma
  difference from its background, blurred as chroma subsampling blurs it,
  over a plane for the background's own chroma): this ratio does not
  depend on how much of a pixel the glyph covers, so thin and light fonts
  measure as well as bold ones;
- the luma of its strongest ink against the text colour's (both from the
  word's background, the median of a ring around its box): a text of the
  same hue but brighter (or much dimmer) is another text.

A word is kept when its chroma differs from ``text_color``'s by at most
WORD_CHROMA of the text colour's contrast with the background and its luma
is between WORD_LUMA_MIN and WORD_LUMA_MAX of the text colour's;
``text_color_threshold`` (default 25) scales the chroma limit by
threshold / 25 and, above 25, widens the luma range by as much. A word
within UNSURE of the chroma limit takes the verdict of the sure word
nearest to it in colour, when one is within NEAR. Of the words kept, one whose ink peaks more
than DIMMER levels of luma below the closest word's is dropped: a dimmer text of the same hue (the
unselected items beside a selected one). Where text colour and background hardly
differ in luma (less than ``LUMA_CONTRAST``), the luma cannot show the text:
``_ocr_prepare`` then reads the share-of-colour map instead. Constants chosen on the
training split of test/python/_ocr_corpus.py.
"""

import numpy as np  # already loaded by stbt_core._frames

WORD_CHROMA = 0.45
WORD_LUMA_MIN = 0.5
WORD_LUMA_MAX = 1.22
# The top-hat's structuring element, as a share of the region's shortest line of text (at least
# MIN_KERNEL px; FALLBACK_KERNEL px when no line was found).
KERNEL_SHARE = 0.4
MIN_KERNEL = 5
FALLBACK_KERNEL = 15
LUMA_CONTRAST = 25.0
MEDIAN_SHARE = 2.0
MAX_MEDIAN = 101
DEFAULT_THRESHOLD = 25.0
# A word's verdict is unsure within UNSURE of the chroma limit (luma in range): it takes that of the
# nearest sure word in colour when within NEAR (chroma offset and luma share).
UNSURE = 0.15
NEAR = 0.25
_RING = 2  # pixels around a word's box: its background
# A word whose strongest ink falls short of the text colour's luma by more than DIMMER levels (times
# threshold / 25) beyond the kept word that comes closest is another, dimmer text of the same hue. Words
# of one colour in one region of the corpus spread by up to 24 levels; at 30 (20 to 40 alike) no word of
# the text is dropped and the held-out split gains a line in each variant (tv 98.3 to 98.7 %).
DIMMER = 30.0

_Y = np.array([0.114, 0.587, 0.299], np.float32)
_YCC = np.stack([_Y, 0.564 * (np.array([1, 0, 0], np.float32) - _Y),
                 0.713 * (np.array([0, 0, 1], np.float32) - _Y)])

def _cv2():
    # OpenCV loads when text_color is first used, not at ``import stbt`` (most of a second).
    import cv2  # pylint: disable=import-outside-toplevel
    return cv2


def ycc(bgr):
    """BGR (..., 3) as luma, blue and red chroma (float32)."""
    return np.asarray(bgr, np.float32) @ _YCC.T


def _bgr(crop):
    if crop.ndim == 3:
        return crop[:, :, :3]
    cv2 = _cv2()
    return cv2.cvtColor(crop, cv2.COLOR_GRAY2BGR)


def luma(crop):
    """The crop's luma (uint8)."""
    cv2 = _cv2()
    return cv2.cvtColor(_bgr(crop), cv2.COLOR_BGR2GRAY)


def luma_contrast(crop, text_color):
    """The text colour's luma minus the region's median luma."""
    y = luma(crop)
    return float(ycc(text_color)[0]) - float(np.median(y))


def text_grey(crop, text_color, line_height):
    """The region's luma with its local background taken out, text of ``text_color``'s polarity dark on
    white (uint8), black from the text colour's luma on."""
    cv2 = _cv2()
    y = luma(crop)
    size = FALLBACK_KERNEL if not line_height else max(MIN_KERNEL, int(round(line_height * KERNEL_SHARE)))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size | 1, size | 1))
    contrast = float(ycc(text_color)[0]) - float(np.median(y))
    # Text of the other polarity first flattened into the background (the local median): else the
    # background between its strokes reads as hollow letters.
    k = min(MAX_MEDIAN, max(MIN_KERNEL, int(round((line_height or FALLBACK_KERNEL) * MEDIAN_SHARE)))) | 1
    med = cv2.medianBlur(y, k)
    y = np.maximum(y, med) if contrast >= 0 else np.minimum(y, med)
    ink = cv2.morphologyEx(y, cv2.MORPH_TOPHAT if contrast >= 0 else cv2.MORPH_BLACKHAT, kernel)
    # Black at the text colour's luma: a brighter text beside it does not make it faint.
    return np.clip(255.0 - ink.astype(np.float32) * (255.0 / max(abs(contrast), 1.0)), 0, 255).astype(np.uint8)


def word_colour(crop, box, text_color):
    """``(chroma offset, luma share)`` of the word in ``box`` (x0, y0, x1, y1 in ``crop``): its ink's
    chroma per unit of luma less ``text_color``'s, at the text colour's luma, in units of the text
    colour's distance from the word's background (a 2-vector; its length is the chroma difference),
    and its strongest ink's luma as a share of the text colour's."""
    h, w = crop.shape[:2]
    x0, y0 = max(0, box[0] - _RING), max(0, box[1] - _RING)
    x1, y1 = min(w, box[2] + _RING), min(h, box[3] + _RING)
    if x1 - x0 < 3 or y1 - y0 < 3:
        return np.zeros(2, np.float32), 1.0
    sub = ycc(_bgr(crop)[y0:y1, x0:x1])
    ring = np.concatenate([sub[0], sub[-1], sub[:, 0], sub[:, -1]])
    d = sub - np.median(ring, axis=0)
    t = ycc(text_color) - np.median(ring, axis=0)
    ty = float(t[0]) if abs(float(t[0])) > 1.0 else 1.0
    dy = d[:, :, 0]
    blurred = _cv2().blur(dy, (3, 3))
    hh, ww = dy.shape
    yy, xx = np.mgrid[0:hh, 0:ww].astype(np.float32)
    design = np.stack([np.ones(hh * ww, np.float32), xx.ravel() / ww, yy.ravel() / hh, blurred.ravel()], axis=1)
    sol = np.linalg.lstsq(design, d[:, :, 1:].reshape(-1, 2), rcond=None)[0]
    offset = (sol[3] - t[1:] / ty) * ty / (float(np.linalg.norm(t)) + 1e-6)
    luma = float(np.percentile(dy * np.sign(ty), 98)) / abs(ty)
    return offset, luma


def _verdict(offset, luma, threshold):
    """``(of text_color, sure)`` for a word's colour: see the module's docstring; not sure when its
    luma is in range and its chroma difference within UNSURE of the limit."""
    scale = max(threshold, 1.0) / DEFAULT_THRESHOLD
    wider = max(scale, 1.0)
    limit = WORD_CHROMA * scale
    chroma = float(np.linalg.norm(offset))
    in_range = WORD_LUMA_MIN / wider <= luma <= WORD_LUMA_MAX * wider
    return in_range and chroma <= limit, not in_range or abs(chroma - limit) > UNSURE * scale


def is_text_colour(crop, box, text_color, threshold):
    """Whether the word in ``box`` is of ``text_color``, on its own: see the module's docstring.
    ``threshold`` (``text_color_threshold``) scales the chroma limit, and widens the luma range above
    its default."""
    return _verdict(*word_colour(crop, box, text_color), threshold)[0]


def keep(words, crop, scale, text_color, threshold):
    """The words (``_ocr_tesseract.Word``s, boxes in the picture read, ``scale`` times the crop) whose ink
    is of ``text_color``.
    A word the measure is not sure of takes the verdict of the sure word nearest to it in colour, when
    within NEAR."""
    boxes = [(int(w.left / scale), int(w.top / scale), int(np.ceil(w.right / scale)), int(np.ceil(w.bottom / scale)))
             for w in words]
    colours = [word_colour(crop, b, text_color) for b in boxes]
    verdicts = [_verdict(offset, luma, threshold) for offset, luma in colours]
    sure = [i for i, (_, certain) in enumerate(verdicts) if certain]
    kept = []
    for i, (verdict, certain) in enumerate(verdicts):
        if not certain and sure:
            j = min(sure, key=lambda j, i=i: _colour_distance(colours[i], colours[j]))
            if _colour_distance(colours[i], colours[j]) <= NEAR:
                verdict = verdicts[j][0]
        if verdict:
            kept.append(i)
    return [words[i] for i in _without_dimmer(kept, boxes, colours, crop, text_color, threshold)]


def _without_dimmer(kept, boxes, colours, crop, text_color, threshold):
    """The kept words (indices) less those whose strongest ink falls short of the text colour's luma by
    more than DIMMER levels (times threshold / 25) beyond the word that comes closest: words of one
    colour in one region peak alike, and a dimmer text of the same hue (an unselected item beside the
    selected one) is another text."""
    if DIMMER is None or len(kept) < 2:
        return kept
    short = {i: (1.0 - colours[i][1]) * abs(_text_luma_contrast(crop, boxes[i], text_color)) for i in kept}
    best = min(short.values())
    limit = DIMMER * max(threshold, 1.0) / DEFAULT_THRESHOLD
    return [i for i in kept if short[i] - best <= limit]


def _text_luma_contrast(crop, box, text_color):
    """The text colour's luma less the word's background's (the median of the ring round its box)."""
    h, w = crop.shape[:2]
    x0, y0 = max(0, box[0] - _RING), max(0, box[1] - _RING)
    x1, y1 = min(w, box[2] + _RING), min(h, box[3] + _RING)
    if x1 - x0 < 3 or y1 - y0 < 3:
        return 0.0
    y = luma(crop[y0:y1, x0:x1]).astype(np.float32)
    ring = np.concatenate([y[0], y[-1], y[:, 0], y[:, -1]])
    return float(ycc(text_color)[0]) - float(np.median(ring))


def _colour_distance(a, b):
    return float(np.hypot(np.linalg.norm(a[0] - b[0]), a[1] - b[1]))


def join(words):
    """The words as text: a space between words of a line, a line break between lines, an empty line
    between paragraphs."""
    parts, last = [], None
    for w in words:
        if last is not None:
            parts.append(" " if w.line == last else "\n" if w.line[:2] == last[:2] else "\n\n")
        parts.append(w.text)
        last = w.line
    return "".join(parts)
