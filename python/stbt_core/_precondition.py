"""``as_precondition`` and ``PreconditionError`` of the stbt API (farmhand's own code)."""

import contextlib

from stbt_core._errors import UITestError, UITestFailure

__all__ = ["PreconditionError", "as_precondition"]


class PreconditionError(UITestError):
    """A check that the test needed before what it tests did not pass: the
    run is an *error*, not a failure. ``message`` names the precondition,
    ``original_exception`` is what failed."""

    def __init__(self, message, original_exception):
        super().__init__(message, original_exception)
        self.message = message
        self.original_exception = original_exception
        # The picture of the failure (MatchTimeout's, MotionTimeout's ...) stays with the error.
        if hasattr(original_exception, "screenshot"):
            self.screenshot = original_exception.screenshot

    def __str__(self):
        return "Didn't meet precondition %r (original exception was: %s: %s)" % (
            self.message, type(self.original_exception).__name__, self.original_exception)


PreconditionError.__module__ = "stbt_core"


@contextlib.contextmanager
def as_precondition(message):
    """Inside this block (or the function it decorates), a ``UITestFailure``
    or ``AssertionError`` becomes a ``PreconditionError`` (an error)."""
    try:
        yield
    except (UITestFailure, AssertionError) as e:
        raise PreconditionError(message, e) from e
