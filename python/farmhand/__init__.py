"""The Python API of farmhand test scripts.

A test script is a module in the test pack's ``tests/`` folder; each
top-level ``def test_*()`` is a test case. farmhand runs one test case per
process with ``python -m farmhand.run tests/file.py::test_name``.

- Return normally: the test passes.
- ``AssertionError`` or ``UITestFailure`` (or a subclass): the test fails.
- Any other exception (``UITestError`` included): the run is an error.
"""

from farmhand.config import get_config
from farmhand.errors import ConfigurationError, UITestError, UITestFailure

__all__ = ["ConfigurationError", "UITestError", "UITestFailure", "get_config"]
