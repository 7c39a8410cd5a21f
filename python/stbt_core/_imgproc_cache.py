"""The switch of the stbt API's cache of image-processing results (``_stbt.imgproc_cache``).

farmhand keeps the text tesseract read for a picture (the last _CACHE_SIZE
pictures, in memory; python/stbt_core/_ocr_tesseract.py), so reading the same region
of the same picture again costs no second OCR. stb-tester keeps such results
in a cache that a test can set up for a folder and turn off; code written
for it does both through this module:

- ``setup_cache(directory)``: a ``with`` block in which the cache is on (it is
  on by default in farmhand; the folder is accepted and not used: farmhand's
  cache lives in the process);
- ``_cache = None``: turns it off until it is set back.

farmhand's own code, written from how the names are used.
"""

import contextlib

__all__ = ["setup_cache"]

_ON = "memory"
_cache = _ON  # None: every read goes to tesseract


def enabled():
    """Whether results may be taken from the cache now."""
    return _cache is not None


@contextlib.contextmanager
def setup_cache(directory=None):  # pylint: disable=unused-argument
    """Turn the cache on for the length of the block, then back to what it was."""
    global _cache  # pylint: disable=global-statement
    saved = _cache
    _cache = _ON
    try:
        yield
    finally:
        _cache = saved
