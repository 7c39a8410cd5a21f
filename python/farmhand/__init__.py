"""The Python API of farmhand test scripts.

A test script is a module in the test pack's ``tests/`` folder; each
top-level ``def test_*()`` is a test case. farmhand runs one test case per
process with ``python -m farmhand.run tests/file.py::test_name``.

- Return normally: the test passes.
- ``AssertionError`` or ``UITestFailure`` (or a subclass, ``MatchTimeout``
  included): the test fails.
- Any other exception (``UITestError`` and ``ControlError`` included): the
  run is an error.

Keys and frames go through the daemon (the run's control socket); see
docs/test-scripts.md for the whole API with examples.
"""

from farmhand.config import get_config
from farmhand.errors import ConfigurationError, ControlError, MatchTimeout, UITestError, UITestFailure
from farmhand.frames import Frame, Region, get_frame, is_screen_black, save_frame
from farmhand.keys import press, press_and_hold
from farmhand.match import MatchResult, match, wait_for_match
from farmhand.wait import wait_until

__all__ = [
    "ConfigurationError",
    "ControlError",
    "Frame",
    "MatchResult",
    "MatchTimeout",
    "Region",
    "UITestError",
    "UITestFailure",
    "get_config",
    "get_frame",
    "is_screen_black",
    "match",
    "press",
    "press_and_hold",
    "save_frame",
    "wait_for_match",
    "wait_until",
]
