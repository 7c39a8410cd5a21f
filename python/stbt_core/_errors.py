"""The exceptions of the stbt API.

They are farmhand's own classes (``farmhand.UITestFailure`` is
``stbt.UITestFailure``), so ``except`` clauses written against either name
catch both, and the runner's outcome rules apply unchanged: ``AssertionError``
and ``UITestFailure`` (with its subclasses) fail a test, everything else is an
error.
"""

from farmhand.errors import ConfigurationError, ControlError, UITestError, UITestFailure

__all__ = ["ConfigurationError", "NoVideo", "UITestError", "UITestFailure"]


class NoVideo(UITestFailure):
    """No picture from the capture device (capture is offline)."""


NoVideo.__module__ = "stbt_core"

# ControlError is farmhand's (the daemon refused a request); re-exported for
# the modules of this package, not part of stbt's names.
_ = ControlError
