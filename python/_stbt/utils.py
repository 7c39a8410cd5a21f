"""``_stbt.utils``: the small helpers of stb-tester's internal module that test code imports.

farmhand's own code, written from how they are used: ``named_temporary_directory``
(a temporary folder for the length of a ``with`` block), ``scoped_curdir``
(a temporary working directory for the length of a ``with`` block) and
``to_unicode`` / ``to_native_str`` (text from bytes or text).
"""

import contextlib
import os
import shutil
import tempfile

__all__ = ["named_temporary_directory", "scoped_curdir", "to_native_str", "to_unicode"]


@contextlib.contextmanager
def named_temporary_directory(suffix="", prefix="tmp", dir=None):  # pylint: disable=redefined-builtin
    """Yield the path of a new folder, removed with everything in it when the block ends."""
    path = tempfile.mkdtemp(suffix=suffix, prefix=prefix, dir=dir)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def scoped_curdir():
    """Run the block in a new temporary folder, then go back to the old working directory."""
    with named_temporary_directory() as path:
        old = os.getcwd()
        os.chdir(path)
        try:
            yield path
        finally:
            os.chdir(old)


def to_unicode(value):
    """``value`` as text: bytes are decoded as UTF-8 (bytes that are not UTF-8
    are kept as surrogate escapes, as Python does for file names), text is
    returned as it is, anything else is ``str(value)``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, str):
        return value
    return str(value)


def to_native_str(value):
    """``value`` as Python's own string type: the same as ``to_unicode`` (on
    Python 3 the native string is text)."""
    return to_unicode(value)
