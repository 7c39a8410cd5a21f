"""Waiting for a condition on the device under test."""

import time

__all__ = ["wait_until"]


def wait_until(condition, timeout_secs=10, interval_secs=0.1):
    """Call ``condition()`` until it returns a truthy value, and return that
    value; after ``timeout_secs`` return its last (falsy) value instead. It
    is called at least once, and once more at the deadline.

        assert wait_until(is_screen_black, timeout_secs=5), "still not black"
        m = wait_until(lambda: match("images/ok.png"))
    """
    deadline = time.monotonic() + timeout_secs
    while True:
        value = condition()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            return value
        time.sleep(min(interval_secs, left))
