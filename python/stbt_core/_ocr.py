"""Reading text off the screen: ``ocr``, ``match_text``, ``TextMatchResult``,
``OcrMode``, ``OcrEngine``, ``ocr_eq``, ``apply_ocr_corrections``,
``set_global_ocr_corrections``.

farmhand's own implementation of the behaviour stb-tester documents, on
Debian's tesseract 5 (package ``tesseract-ocr``). The parts: the picture
read (``_ocr_prepare``, with ``_ocr_colour`` for ``text_color``), running
tesseract (``_ocr_tesseract``: the resident ``python3-tesserocr`` worker or
the command, the cache of identical reads, the TSV parser), the text side
(``_ocr_text``: corrections, ``ocr_eq``, how words are compared). Which
engine is the default and what the legacy engine value does:
docs/migrating-from-stb-tester.md, section OCR.

Every read is logged in the run's log like ``match`` is.
"""

import enum
import math

import numpy  # already loaded by stbt_core._frames

from stbt_core import _checks, _ocr_colour, _ocr_tesseract
from stbt_core._config import get_config
from stbt_core._errors import ConfigurationError
from stbt_core._ocr_prepare import UPSAMPLE_FACTOR, UPSAMPLE_LINE_HEIGHT, colour_channels, prepare
from stbt_core._ocr_tesseract import CONFIG_KEY_RE, log, parse_tsv
# _tesseract_version: known to users (and to code that skips OCR without tesseract) as stbt_core._ocr's.
from stbt_core._ocr_tesseract import _tesseract_version  # noqa: F401  pylint: disable=unused-import
# Replacements: ocr_eq.replacements' class, known to users as stbt_core._ocr.Replacements.
from stbt_core._ocr_text import Replacements  # noqa: F401  pylint: disable=unused-import
from stbt_core._ocr_text import (apply_ocr_corrections, check_corrections, ocr_eq, plain_punctuation,
                                 set_global_ocr_corrections, short, word_key)
from stbt_core._types import Region

__all__ = ["OcrEngine", "OcrMode", "TextMatchResult", "apply_ocr_corrections", "match_text", "ocr",
           "ocr_eq", "set_global_ocr_corrections"]


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
    """tesseract's engine (its ``--oem``). ``TESSERACT`` (the legacy engine)
    and ``TESSERACT_AND_LSTM`` need language data with the legacy models, which
    Debian's packages do not ship: farmhand's setup adds English's; a language
    without them reads with LSTM. See docs/migrating-from-stb-tester.md."""
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
        self.requested_engine = _engine(engine)
        self.engine = self.requested_engine
        self.tessdata = None  # tesseract's own language data
        if self.engine in (OcrEngine.TESSERACT, OcrEngine.TESSERACT_AND_LSTM):
            # The legacy engine needs its models in the language data; where there are none, LSTM reads.
            self.tessdata = _ocr_tesseract.legacy_tessdata(self.lang)
            if self.tessdata is None:
                self.engine = OcrEngine.LSTM
        self.config = _tesseract_config(tesseract_config, char_whitelist)
        self.user_words = user_words
        self.user_patterns = user_patterns
        self.by_words = False  # text_color read as luma, words kept by colour: see _ocr_prepare.prepare

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


def _engine(engine):
    """``engine`` as an OcrEngine; ``None`` is ``[ocr] engine`` (a name or a number)."""
    if engine is None:
        raw = get_config("ocr", "engine")
        try:
            engine = OcrEngine(int(raw)) if raw.strip().isdigit() else OcrEngine[raw.strip().upper()]
        except (KeyError, ValueError) as e:
            raise ConfigurationError("[ocr] engine = %r is not one of %s" % (
                raw, ", ".join(OcrEngine.__members__))) from e
    return OcrEngine(_enum_value(OcrEngine, engine))


def _tesseract_config(tesseract_config, char_whitelist):
    """tesseract's ``-c`` variables as strings (a bool as 0 or 1), checked: names only of letters, digits
    and ``_``, values without line breaks."""
    config = dict(tesseract_config or {})
    if char_whitelist is not None:
        config["tessedit_char_whitelist"] = str(char_whitelist)
    for k, v in config.items():
        if not CONFIG_KEY_RE.match(str(k)):
            raise ValueError("tesseract_config key %r is not a tesseract variable name" % (k,))
        if "\n" in str(v) or "\r" in str(v):
            raise ValueError("tesseract_config value of %s must not contain line breaks" % (k,))
    return {str(k): (str(int(v)) if isinstance(v, bool) else str(v)) for k, v in config.items()}


def _enum_value(cls, value):
    if isinstance(value, str) and value.strip().upper() in cls.__members__:
        return cls[value.strip().upper()]
    return value


def _choose_read_mode(params, geometry):
    """The default mode (PAGE_SEGMENTATION_WITHOUT_OSD) on a region holding
    one line of text reads it as SINGLE_LINE: tesseract's layout analysis
    drops short lines ("On", "ITV2") and splits others there. ``[ocr]
    auto_single_line = False`` turns it off; any other mode is kept."""
    if geometry is not None and geometry.lines == 1 and params.mode == OcrMode.PAGE_SEGMENTATION_WITHOUT_OSD \
            and get_config("ocr", "auto_single_line", type_=bool):
        params.read_mode = OcrMode.SINGLE_LINE


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
        got = words if words is not None else parse_tsv(_ocr_tesseract.read(grey, params, True))
        return _frame_words(got, clipped, geometry)
    _checks.record(kind, passed, frame, clipped if clipped is not None else region,
                   {"mode": params.mode, "read_mode": params.read_mode, "lang": params.lang, "engine": params.engine,
                    "upsample": params.upsample, "text_color": params.text_color,
                    "text_color_threshold": params.text_color_threshold,
                    "tesseract_config": dict(params.config)},
                   ocr_words=read_words, preprocessing=_preprocessing(params, geometry), **fields)


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
    check_corrections(corrections)
    frame, clipped, grey, geometry = prepare(frame, region, params)
    _choose_read_mode(params, geometry)
    words = None
    if grey is None:
        text = ""
    elif params.by_words:
        words = _colour_words(frame, clipped, grey, geometry, params)
        text = plain_punctuation(_ocr_colour.join(words)).strip()
    else:
        text = plain_punctuation(_ocr_tesseract.read(grey, params, False)).strip()
    text = apply_ocr_corrections(text, corrections)
    log("ocr in %r (%s): %r" % (clipped if clipped is not None else region, params.describe(), short(text)))
    _record("ocr", None, frame, clipped, region, grey, geometry, params, words, text=text)
    return text


def _colour_words(frame, clipped, grey, geometry, params):
    """The words tesseract reads in ``grey`` whose ink is of ``params.text_color`` (_ocr_tesseract.Word,
    in the order read)."""
    words = parse_tsv(_ocr_tesseract.read(grey, params, True))
    crop = colour_channels(numpy.asarray(frame)[clipped.y:clipped.bottom, clipped.x:clipped.right])
    return _ocr_colour.keep(words, crop, geometry.scale, params.text_color, params.text_color_threshold)


def _find(words, wanted, case_sensitive):
    """The first run of ``words`` whose keys are ``wanted`` (see word_key), or ``None``."""
    keys = [word_key(w.text, case_sensitive) for w in words]
    for i in range(len(words) - len(wanted) + 1):
        if keys[i:i + len(wanted)] == wanted:
            return words[i:i + len(wanted)]
    return None


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
    wanted = [word_key(w, case_sensitive) for w in text.split()]
    if not wanted:
        raise ValueError("match_text needs some text to look for")
    params = _Params(mode, lang, tesseract_config, text.split(), None, upsample, text_color,
                     text_color_threshold, engine, char_whitelist)
    frame, clipped, grey, geometry = prepare(frame, region, params)
    _choose_read_mode(params, geometry)
    found, words = None, None
    if grey is not None:
        if params.by_words:
            words = _colour_words(frame, clipped, grey, geometry, params)
        else:
            words = parse_tsv(_ocr_tesseract.read(grey, params, True))
        found = _find(words, wanted, case_sensitive)
    result_region = None
    if found:
        result_region = _to_frame(geometry, clipped, min(w.left for w in found), min(w.top for w in found),
                                  max(w.right for w in found), max(w.bottom for w in found))
    result = TextMatchResult(getattr(frame, "time", None), found is not None, result_region, frame, text)
    log("match_text %r in %r (%s): %s" % (
        text, clipped if clipped is not None else region, params.describe(),
        "found at %r" % (result_region,) if found else "not found"))
    _record("match_text", found is not None, frame, clipped, region, grey, geometry, params, words, text=text,
            case_sensitive=case_sensitive, match_region=_checks.region_dict(result_region))
    return result
