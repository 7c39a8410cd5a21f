"""``wait_until`` of the stbt API (farmhand's own code, from stb-tester's manual).

The clock is ``time.time`` and the pause ``time.sleep``, looked up at each
call, so a test that replaces them (``unittest.mock.patch("time.time")``)
drives ``wait_until`` without real waiting.
"""

import time

__all__ = ["wait_until"]


def _now():
    return time.time()


def _pause(secs):
    time.sleep(secs)


# The clock and the pause, replaceable by tests.
_monotonic = _now
_sleep = _pause

_UNSET = object()


def wait_until(callable_, timeout_secs=10, interval_secs=0, predicate=None, stable_secs=0):
    """Call ``callable_`` until what it returns is truthy (or, with
    ``predicate``, until ``predicate(value)`` is), and return that value.

    With ``stable_secs``, the value (or ``predicate(value)`` when given)
    must also stay equal for that long; the first value of the stable run is
    returned. Values are compared only when ``stable_secs`` is given.

    ``timeout_secs`` is checked before each call: the call that starts
    after it has passed is the last one. Then the last value is returned
    when it is falsy, or None when it was truthy (it did not satisfy the
    predicate, or never stayed stable long enough)."""
    test = predicate if predicate is not None else (lambda v: v)
    deadline = _monotonic() + timeout_secs
    stable_key, stable_value, stable_since = _UNSET, None, None
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
            return None if value else value
        if interval_secs:
            _sleep(interval_secs)
