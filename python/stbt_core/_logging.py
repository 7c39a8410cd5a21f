"""``draw_text`` and ``debug``: lines in the run's log.

Both go to the daemon's run log (``farmhand.log``) over the control socket,
stamped with the daemon's clock like the presses and matches around them, so
the log read beside the video tells the story. Outside farmhand they go to
standard error.
"""

import os
import sys

from farmhand import control

__all__ = ["debug", "draw_text"]


def _emit(text):
    if os.environ.get(control.SOCKET_ENV):
        control.log_event(text)
    else:
        sys.stderr.write(text + "\n")


def draw_text(text, duration_secs=3):
    """Log ``text`` in the run's log at this moment. (stb-tester also draws it
    on the recorded video for ``duration_secs``; farmhand's recording is the
    capture as it is, so the log line stands for it.)"""
    _emit("draw_text: %s (for %s s)" % (text, duration_secs))


def debug(msg, *args, **kwargs):  # pylint: disable=unused-argument
    """Log a debugging line in the run's log: ``msg % args`` when args are given."""
    if args:
        try:
            msg = msg % args
        except (TypeError, ValueError):
            msg = " ".join(str(a) for a in (msg,) + args)
    _emit("debug: %s" % (msg,))
