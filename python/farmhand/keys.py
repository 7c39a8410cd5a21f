"""Key presses on the device under test, through the daemon's IR blaster.

The remote control is the run's (the job's ``remote_control``, else the test
pack's ``test_pack.default_remote_control``); keys are the names in its
``config/remote-control/<name>.lircd.conf``, matched case-insensitively.
"""

from farmhand import control

__all__ = ["press", "press_and_hold"]

# press_and_hold's upper bound, as the daemon enforces it.
MAX_HOLD_SECS = 60


def press(key):
    """Press ``key`` (e.g. ``"KEY_OK"``) once; returns when the IR has been sent.

    An unknown key raises ``ControlError`` (code ``not_found``); no IR
    blaster raises ``ControlError`` (``device_unavailable``). Both are test
    *errors*, not failures.
    """
    control.request("press", key=key, hold_ms=0)


def press_and_hold(key, duration_secs):
    """Hold ``key`` down for ``duration_secs`` (at most 60): the remote's
    repeat frames are sent for that long. Returns when the key is released."""
    duration = float(duration_secs)
    if not 0 <= duration <= MAX_HOLD_SECS:
        raise ValueError("duration_secs must be from 0 to %d, not %r" % (MAX_HOLD_SECS, duration_secs))
    control.request("press", timeout=control.DEFAULT_TIMEOUT_SECS + duration, key=key, hold_ms=round(duration * 1000))
