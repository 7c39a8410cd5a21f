"""``_stbt.utils``: the small helpers of stb-tester's internal module that test code imports.

farmhand's own code, written from how they are used: ``named_temporary_directory``
(a temporary folder for the length of a ``with`` block) and ``scoped_curdir``
(a temporary working directory for the length of a ``with`` block).
"""

import contextlib
import os
import shutil
import tempfile

__all__ = ["named_temporary_directory", "scoped_curdir"]


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
