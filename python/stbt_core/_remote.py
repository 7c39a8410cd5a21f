"""Remote control: ``press``, ``pressing``, ``last_keypress``, ``Keypress``,
``press_until_match`` and ``MultiPress``.

Presses go to the daemon over the run's control socket, which sends them
with the run's remote control and writes each one into the run's log at the
moment the IR goes out.
"""

import contextlib
import enum
import threading
import time

from farmhand import control
from stbt_core._config import get_config
from stbt_core._errors import NoVideo, UITestError

__all__ = ["Keypress", "MultiPress", "last_keypress", "press", "press_until_match", "pressing"]

MAX_HOLD_SECS = 60
# How long before a paced press the frame before it is fetched (a frame takes a few ms to arrive).
_FRAME_LEAD_SECS = 0.05
# The last part of a pacing wait is spent spinning, for a gap that is exact to the millisecond.
_SPIN_SECS = 0.002

try:
    from stbt_core._types import Region as _Region
    _ALL = _Region.ALL
except ImportError:  # the regions module is not there yet
    _ALL = None


class Keypress:
    """One press: ``key``, ``start_time`` and ``end_time`` (seconds since the
    epoch, when the IR started and finished going out) and ``frame_before``,
    the latest frame just before the press (None without capture)."""

    __slots__ = ("key", "start_time", "end_time", "frame_before")

    def __init__(self, key, start_time, end_time, frame_before):
        self.key = key
        self.start_time = start_time
        self.end_time = end_time
        self.frame_before = frame_before

    def __repr__(self):
        return "Keypress(key=%r, start_time=%.3f, end_time=%.3f, frame_before=%r)" % (
            self.key, self.start_time, self.end_time, self.frame_before)


_last = None
_lock = threading.Lock()


def last_keypress():
    """The ``Keypress`` of the most recent press, or None."""
    return _last


def _key_name(key):
    if isinstance(key, enum.Enum):
        key = key.value
    if not isinstance(key, str) or not key:
        raise ValueError("a key is a name such as 'KEY_OK' (or an Enum whose value is one), not %r" % (key,))
    return key


def _delay(interpress_delay_secs):
    if interpress_delay_secs is None:
        interpress_delay_secs = get_config("press", "interpress_delay_secs", type_=float)
    delay = float(interpress_delay_secs)
    if delay < 0:
        raise ValueError("interpress_delay_secs must not be negative, not %r" % (interpress_delay_secs,))
    return delay


def _frame_or_none():
    from stbt_core._frames import get_frame  # pylint: disable=import-outside-toplevel
    try:
        return get_frame()
    except NoVideo:
        return None


def _paced(delay):
    """Wait until ``delay`` has passed since the previous press ended; returns the frame just before."""
    due = None if _last is None else _last.end_time + delay
    if due is not None and due - time.time() > _FRAME_LEAD_SECS:
        time.sleep(due - time.time() - _FRAME_LEAD_SECS)
    frame = _frame_or_none()
    if due is not None:
        # Sleep to just short of the moment, then spin: a sleep alone can wake late by a few ms.
        rest = due - time.time() - _SPIN_SECS
        if rest > 0:
            time.sleep(rest)
        while time.time() < due:
            pass
    return frame


def press(key, interpress_delay_secs=None, hold_secs=None):
    """Press ``key`` once (held for ``hold_secs`` when given, at most 60),
    first waiting until ``interpress_delay_secs`` (``[press]
    interpress_delay_secs``, 0.3 s) have passed since the previous press
    ended. Returns its ``Keypress``."""
    global _last  # pylint: disable=global-statement
    name = _key_name(key)
    delay = _delay(interpress_delay_secs)
    hold_ms = 0
    if hold_secs is not None:
        hold = float(hold_secs)
        if not 0 <= hold <= MAX_HOLD_SECS:
            raise ValueError("hold_secs must be from 0 to %d, not %r" % (MAX_HOLD_SECS, hold_secs))
        hold_ms = round(hold * 1000)
    with _lock:
        frame = _paced(delay)
        start = time.time()
        control.request("press", timeout=control.DEFAULT_TIMEOUT_SECS + hold_ms / 1000.0, key=name, hold_ms=hold_ms)
        _last = Keypress(name, start, time.time(), frame)
        return _last


@contextlib.contextmanager
def pressing(key, interpress_delay_secs=None):
    """Hold ``key`` down while the ``with`` block runs (at most 60 s): the
    block starts once the key is down, and the ``with`` statement ends once it
    is up again. Yields its ``Keypress`` (``end_time`` is set when the key is
    released)."""
    global _last  # pylint: disable=global-statement
    name = _key_name(key)
    delay = _delay(interpress_delay_secs)
    with _lock:
        frame = _paced(delay)
        hold_id = "hold-%d-%d" % (id(frame), time.monotonic_ns())
        failure = []
        answered = threading.Event()

        def hold():
            try:
                # On a connection of its own: the block's own requests must not wait behind it.
                _request_alone(
                    "press", timeout=control.DEFAULT_TIMEOUT_SECS + MAX_HOLD_SECS,
                    key=name, hold_ms=MAX_HOLD_SECS * 1000, hold_id=hold_id)
            except BaseException as e:  # pylint: disable=broad-except
                failure.append(e)
            finally:
                answered.set()

        start = time.time()
        keypress = Keypress(name, start, None, frame)
        _last = keypress
        thread = threading.Thread(target=hold, name="stbt-pressing", daemon=True)
        thread.start()
        try:
            # The block starts once the key is down (or the hold has already ended).
            control.request("held", hold_id=hold_id)
        except BaseException:
            control.request("release", hold_id=hold_id)
            answered.wait(control.DEFAULT_TIMEOUT_SECS)
            raise
    try:
        yield keypress
    finally:
        if not answered.is_set():
            control.request("release", hold_id=hold_id)
        answered.wait(control.DEFAULT_TIMEOUT_SECS)
        keypress.end_time = time.time()
    if failure:
        raise failure[0]
    if not answered.is_set():
        raise UITestError("the daemon did not release %s" % name)


def _request_alone(op, timeout, **fields):
    """One request on a connection of its own (``control.request`` shares one per process)."""
    import os  # pylint: disable=import-outside-toplevel
    path = os.environ.get(control.SOCKET_ENV)
    if not path:
        raise UITestError("this needs the farmhand daemon: %s is not set" % control.SOCKET_ENV)
    conn = control._Connection(path)  # pylint: disable=protected-access
    try:
        header, _ = conn.call(op, fields, timeout, lambda h: bytearray(h["bytes"]))
    finally:
        conn.close()
    if not header.get("ok"):
        raise control.ControlError(str(header.get("error")), str(header.get("message")))


def press_until_match(key, image, interval_secs=None, max_presses=None, match_parameters=None, region=_ALL):
    """Press ``key`` as many times as it takes for ``image`` to appear: look
    for it for up to ``interval_secs`` (``[press_until_match] interval_secs``,
    3) first, and press only when it is not there, then look again; up to
    ``max_presses`` presses (10). An image already on the screen takes no
    press. Returns the ``MatchResult``; ``MatchTimeout`` after the look that
    follows the last press."""
    from stbt_core._match import MatchTimeout, wait_for_match  # pylint: disable=import-outside-toplevel

    if interval_secs is None:
        interval_secs = get_config("press_until_match", "interval_secs", type_=float)
    if max_presses is None:
        max_presses = get_config("press_until_match", "max_presses", type_=int)
    if int(max_presses) < 0:
        raise ValueError("max_presses must be 0 or more, not %r" % (max_presses,))
    kwargs = {"match_parameters": match_parameters}
    if region is not None:
        kwargs["region"] = region
    presses = 0
    while True:
        try:
            return wait_for_match(image, timeout_secs=interval_secs, **kwargs)
        except MatchTimeout as e:
            if presses >= int(max_presses):
                raise MatchTimeout(e.screenshot, e.expected, float(interval_secs) * (presses + 1)) from None
        press(key)
        presses += 1


# ITU-T E.161 letters on a phone keypad; each key's own digit comes last.
_E161 = {
    "KEY_1": "1", "KEY_2": "abc2", "KEY_3": "def3", "KEY_4": "ghi4", "KEY_5": "jkl5",
    "KEY_6": "mno6", "KEY_7": "pqrs7", "KEY_8": "tuv8", "KEY_9": "wxyz9", "KEY_0": " 0",
}


class MultiPress:
    """Type text with a phone keypad, pressing a key once per letter step
    (``enter_text("hi")``: ``KEY_4`` twice, then ``KEY_4`` three times after
    ``interletter_delay_secs``). The keypad is ITU-T E.161; ``key_mapping``
    (key name -> the characters it cycles through) changes or adds keys of
    it, and where a character is on two keys the ``key_mapping`` one is
    used. Each press goes through ``stbt.press`` as it is when the letter is
    typed, so a test that replaces ``stbt.press`` sees the presses."""

    def __init__(self, key_mapping=None, interpress_delay_secs=None, interletter_delay_secs=1):
        given = dict(key_mapping or {})
        self.key_mapping = dict(_E161, **given)
        self.interpress_delay_secs = interpress_delay_secs
        self.interletter_delay_secs = interletter_delay_secs
        self._where = {}
        for k in list(given) + [k for k in self.key_mapping if k not in given]:
            for i, c in enumerate(self.key_mapping[k]):
                self._where.setdefault(c, (k, i + 1))

    def enter_text(self, text):
        import stbt_core  # pylint: disable=import-outside-toplevel

        previous = None
        for c in text:
            found = self._where.get(c) or self._where.get(c.lower())
            if found is None:
                raise ValueError("%r cannot be typed with this keypad" % (c,))
            key, times = found
            if key == previous:
                # The same key again: wait for the keypad to accept the last letter. The delay goes
                # to time.sleep as it was given.
                time.sleep(self.interletter_delay_secs)
            for _ in range(times):
                stbt_core.press(key, interpress_delay_secs=self.interpress_delay_secs)
            previous = key
