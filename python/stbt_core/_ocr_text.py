"""The text side of OCR: ``ocr``'s corrections (``apply_ocr_corrections``,
``set_global_ocr_corrections``), ``ocr_eq`` and how tesseract's words are
compared with the text a test looks for (typographic punctuation as plain
characters, a word's key for ``match_text``).

Written from stb-tester's public documentation; no code of stb-tester's.
``stbt_core._ocr`` re-exports the public names.
"""

import re
import unicodedata

# ---------------------------------------------------------------------------
# Corrections
# ---------------------------------------------------------------------------

_global_corrections = None


def set_global_ocr_corrections(corrections):
    """Corrections applied by every later ``ocr`` call (after the call's own
    ``corrections``) and by ``apply_ocr_corrections``. ``None`` or ``{}``
    removes them."""
    global _global_corrections  # pylint: disable=global-statement
    check_corrections(corrections)
    _global_corrections = dict(corrections) if corrections else None


def check_corrections(corrections):
    """TypeError unless ``corrections`` is None or a dict of {str or compiled regex: str}."""
    if corrections is None:
        return
    if not isinstance(corrections, dict):
        raise TypeError("corrections must be a dict of {text or re.compile(...): replacement}, not %r"
                        % (type(corrections).__name__,))
    for k, v in corrections.items():
        if not isinstance(k, (str, re.Pattern)):
            raise TypeError("a correction's key must be a str or a compiled regex, not %r" % (k,))
        if not isinstance(v, str):
            raise TypeError("a correction's replacement must be a str, not %r" % (v,))


def _apply(text, corrections):
    if not corrections:
        return text
    check_corrections(corrections)
    # Plain strings first (whole words only), in the dict's order; then the regexes, in order.
    for k, v in corrections.items():
        if isinstance(k, str) and k:
            text = re.sub(r"(?<!\w)" + re.escape(k) + r"(?!\w)", lambda _m, v=v: v, text)
    for k, v in corrections.items():
        if isinstance(k, re.Pattern):
            text = k.sub(v, text)
    return text


def apply_ocr_corrections(text, corrections=None):
    """``text`` with ``corrections`` applied as ``ocr(corrections=)`` does:
    a plain-string key replaces whole words only (``"he saw"`` does not touch
    ``"the saw"``); a compiled regex replaces wherever it matches. Plain
    strings go first, then regexes, each in the dict's order. The global
    corrections (``set_global_ocr_corrections``) are applied after
    ``corrections``."""
    text = _apply(text, corrections)
    return _apply(text, _global_corrections)


# ---------------------------------------------------------------------------
# ocr_eq
# ---------------------------------------------------------------------------

class Replacements(dict):
    """``ocr_eq.replacements``: a dict of ``{text: replacement}`` applied one
    after the other, in the dict's order. A key set later has its
    replacement put through the entries already there first, so
    ``replacements["İ"] = "I"`` makes ``"İ"`` whatever ``"I"`` becomes.
    Entries given to the constructor or ``update`` are added the same way,
    one by one, and a copy is a ``Replacements`` too, so that saving and
    restoring ``ocr_eq.replacements`` with ``.copy()`` keeps this rule."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.update(*args, **kwargs)

    def __setitem__(self, key, value):
        super().__setitem__(key, _replace(value, self))

    def update(self, *args, **kwargs):  # pylint: disable=arguments-differ
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def copy(self):
        copied = Replacements()
        dict.update(copied, self)  # already resolved: keep the values as they are
        return copied


def _replace(text, table):
    for k, v in table.items():
        if k:
            text = text.replace(k, v)
    return text


def _normalize(text):
    """``text`` reduced to what OCR reads reliably: Unicode compatibility
    forms folded, ``ocr_eq.replacements`` applied in order, then spaces and
    punctuation dropped."""
    text = _replace(unicodedata.normalize("NFKC", str(text)), ocr_eq.replacements)
    return "".join(ch for ch in text if not unicodedata.category(ch)[0] in "PZC")


def ocr_eq(a, b):
    """True when ``a`` and ``b`` are the same text as far as OCR can tell:
    characters OCR confuses (0/O/o, 1/l/I/|, 5/S, 8/B, 2/Z, ...) count as
    equal, and spaces and punctuation are ignored; other letters keep their
    case. ``ocr_eq.replacements`` (a ``Replacements`` dict, editable or
    replaceable by any dict) maps each confusable text to its class's
    representative; ``ocr_eq.normalize(text)`` is the reduced form
    compared."""
    return _normalize(a) == _normalize(b)


# Each class of confusable characters goes to one representative; a letter whose capital has the same
# shape goes to one case. The order matters only for entries whose replacement is another's key.
ocr_eq.replacements = Replacements([
    ("O", "o"), ("0", "o"), ("Q", "o"), ("D", "o"),
    ("1", "l"), ("I", "l"), ("|", "l"), ("i", "l"), ("!", "l"),
    ("5", "S"), ("s", "S"), ("$", "S"),
    ("8", "B"), ("&", "B"),
    ("2", "Z"), ("z", "Z"),
    ("6", "G"),
    ("f", "r"),
    ("c", "C"), ("v", "V"), ("w", "W"), ("x", "X"), ("u", "U"), ("p", "P"), ("k", "K"),
])
ocr_eq.normalize = _normalize


# ---------------------------------------------------------------------------
# Words as read and as looked for
# ---------------------------------------------------------------------------

# What tesseract reads as typographic punctuation, as the plain characters a screen's text is compared
# with: curly quotes, primes, the dashes and hyphens. Ligatures (fi, fl, ...) are split by NFKC.
_PLAIN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
                        "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-",
                        "\u2015": "-", "\u2212": "-"})
_LIGATURES = re.compile("[\ufb00-\ufb06]")


def plain_punctuation(text):
    """``text`` with typographic quotes and dashes as plain ones and ligatures split."""
    text = _LIGATURES.sub(lambda m: unicodedata.normalize("NFKC", m.group()), text)
    return text.translate(_PLAIN)


_PUNCT_EDGES = re.compile(r"^\W+|\W+$")


def word_key(word, case_sensitive):
    """What ``match_text`` compares of a word: plain punctuation, NFKC, the punctuation at its ends
    dropped (unless that is all of it), case folded unless ``case_sensitive``."""
    w = unicodedata.normalize("NFKC", plain_punctuation(word))
    stripped = _PUNCT_EDGES.sub("", w)
    w = stripped or w
    return w if case_sensitive else w.casefold()


def short(text, n=120):
    """``text`` on one line, cut to ``n`` characters for the log."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 1] + "…"
