"""``draw_text`` and ``debug``: lines in the run's log.

Both go to the daemon's run log (``farmhand.log``) over the control socket,
stamped with the daemon's clock like the presses and matches around them, so
the log read beside the video tells the story; ``draw_text`` also writes its
text on the video (the daemon's ``draw_text`` request: src/runner/control.ts).
Outside farmhand they go to standard error.
"""

import contextlib
import os
import sys

from farmhand import control
from farmhand.errors import ControlError

__all__ = ["debug", "draw_text"]


def _emit(text):
    if os.environ.get(control.SOCKET_ENV):
        control.log_event(text)
    else:
        sys.stderr.write(text + "\n")


def draw_text(text, duration_secs=3):
    """Write ``text`` on the output video (the run's recording and the live
    view) for ``duration_secs`` seconds, and log it in the run's log at this
    moment. The frames the script gets (``get_frame``, ``frames``) never show
    it. Returns once the text is on the video; never raises (a capture
    without video, or a daemon going away, leaves the log line only)."""
    text = str(text)
    line = "draw_text: %s (for %s s)" % (text, duration_secs)
    if not os.environ.get(control.SOCKET_ENV):
        sys.stderr.write(line + "\n")
        return
    try:
        secs = float(duration_secs)
    except (TypeError, ValueError):
        secs = None
    try:
        if secs is None or secs != secs or secs in (float("inf"), float("-inf")):
            control.log_event(line)  # no duration to draw for: the log line alone
        else:
            control.request("draw_text", text=text, duration_secs=secs)
    except ControlError:
        control.log_event(line)  # a daemon without draw_text: the log line as before
    except Exception:  # pylint: disable=broad-except
        pass


def debug(msg, *args, **kwargs):  # pylint: disable=unused-argument
    """Log a debugging line in the run's log: ``msg % args`` when args are given."""
    if args:
        try:
            msg = msg % args
        except (TypeError, ValueError):
            msg = " ".join(str(a) for a in (msg,) + args)
    _emit("debug: %s" % (msg,))


# ---- verbosity (stb-tester's ``stbt run -v``; farmhand logs ``debug`` always)

_debug_level = None  # None: read ``[global] verbose`` (default 0) when first asked


def get_debug_level():
    """The verbosity: 0, 1 (``-v``) or 2 (``-vv``): ``[global] verbose``
    unless a ``scoped_debug_level`` block sets it."""
    global _debug_level  # pylint: disable=global-statement
    if _debug_level is None:
        from stbt_core._config import get_config  # pylint: disable=import-outside-toplevel
        _debug_level = get_config("global", "verbose", default=0, type_=int)
    return _debug_level


@contextlib.contextmanager
def scoped_debug_level(level):
    """Run a ``with`` block at verbosity ``level``, then restore the previous one."""
    global _debug_level  # pylint: disable=global-statement
    before = _debug_level
    _debug_level = level
    try:
        yield
    finally:
        _debug_level = before


def ddebug(msg, *args, **kwargs):
    """``debug`` for very verbose runs (level 2) only."""
    if get_debug_level() >= 2:
        debug(msg, *args, **kwargs)


def warn(msg, *args, **kwargs):  # pylint: disable=unused-argument
    """A warning line in the run's log."""
    if args:
        try:
            msg = msg % args
        except (TypeError, ValueError):
            msg = " ".join(str(a) for a in (msg,) + args)
    _emit("warning: %s" % (msg,))
