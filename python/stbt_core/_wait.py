"""``wait_until`` of the stbt API (farmhand's own code, from stb-tester's manual)."""

import time

__all__ = ["wait_until"]

# The clock and the pause, replaceable by tests (a fake clock, no real sleeping).
_monotonic = time.monotonic
_sleep = time.sleep


def wait_until(callable_, timeout_secs=10, interval_secs=0, predicate=None, stable_secs=0):
    """Call ``callable_`` until what it returns is truthy (or, with
    ``predicate``, until ``predicate(value)`` is), and return that value.

    With ``stable_secs``, the value (or ``predicate(value)`` when given)
    must also stay equal for that long; the first value of the stable run is
    returned. After ``timeout_secs`` return the last value when it is falsy,
    or None when it was truthy but never stayed stable long enough."""
    test = predicate if predicate is not None else (lambda v: v)
    deadline = _monotonic() + timeout_secs
    stable_key = _UNSET = object()
    stable_value = stable_since = None
    while True:
        now = _monotonic()
        value = callable_()
        key = test(value)
        if stable_secs:
            if stable_key is _UNSET or key != stable_key:
                stable_key, stable_value, stable_since = key, value, now
            if key and now - stable_since >= stable_secs:
                return stable_value
        elif key:
            return value
        if now >= deadline:
            return None if key else value
        if interval_secs:
            _sleep(interval_secs)
