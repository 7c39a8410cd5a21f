"""Transitions of the stbt API: ``press_and_wait``,
``wait_for_transition_to_end``, ``Transition`` and ``TransitionStatus``.

farmhand's own code, written from stb-tester's public manual. How the times
are found, all on the frames' own clock (``Frame.time``, the moment of
capture):

- ``press_time``: when the press finished going out (``Keypress.end_time``).
- ``animation_start_time``: the time of the first frame, after the press,
  that differs from the frame before the press.
- ``end_time``: the time of the first frame of the final still period: the
  frame after which nothing changed any more (each frame is compared with
  the one before it) for ``stable_secs``.
- ``timeout_secs`` counts from the press: the screen must start changing
  within it (else ``START_TIMEOUT``) and have stayed still for
  ``stable_secs`` by its end (else ``STABLE_TIMEOUT``).
- ``wait_for_transition_to_end`` only waits for the screen to stop changing:
  ``initial_frame`` (else the first frame) is the animation's start, so a
  screen already still is COMPLETE with ``end_time`` that frame's time, as
  the manual's example (``wait_for_transition_to_end(match_result.frame)``
  after a ``wait_for_match``) needs; ``timeout_secs`` counts from it.
- ``frame``: the first still frame when COMPLETE, else the last frame
  looked at.
"""

import enum

from stbt_core._motion import (BGRDiff, _differ_for, _frame_repr, _log, _mask_for, _time_repr)
from stbt_core._types import Region

__all__ = ["Transition", "TransitionStatus", "press_and_wait", "wait_for_transition_to_end"]


class TransitionStatus(enum.Enum):
    """Why a transition ended."""
    START_TIMEOUT = 0  # the screen never started changing
    STABLE_TIMEOUT = 1  # it started changing but never stayed still for stable_secs
    COMPLETE = 2  # it changed, then stayed still for stable_secs


TransitionStatus.__module__ = "stbt_core"


class Transition:
    """What ``press_and_wait`` and ``wait_for_transition_to_end`` saw:
    ``key`` (None for ``wait_for_transition_to_end``), ``frame`` (the last
    frame looked at: the still picture when complete), ``status``,
    ``press_time``, ``animation_start_time`` and ``end_time`` (seconds since
    the epoch; None when not known). Truthy when complete."""

    __slots__ = ("key", "frame", "status", "press_time", "animation_start_time", "end_time",
                 "_start_frame", "_end_frame")

    def __init__(self, key, frame, status, press_time, animation_start_time, end_time,
                 _start_frame=None, _end_frame=None):
        self.key, self.frame, self.status = key, frame, status
        self.press_time, self.animation_start_time, self.end_time = press_time, animation_start_time, end_time
        # The frames those times are of (farmhand's; its timing tests read the virtual box's frame numbers).
        self._start_frame, self._end_frame = _start_frame, _end_frame

    @property
    def duration(self):
        """From the press to the end of the animation (None when unknown)."""
        if self.end_time is None or self.press_time is None:
            return None
        return self.end_time - self.press_time

    @property
    def animation_duration(self):
        """From the first change on screen to the end of the animation."""
        if self.end_time is None or self.animation_start_time is None:
            return None
        return self.end_time - self.animation_start_time

    @property
    def started(self):
        return self.status != TransitionStatus.START_TIMEOUT

    @property
    def complete(self):
        return self.status == TransitionStatus.COMPLETE

    @property
    def stable(self):
        """The picture was still at the end: complete, or it never started
        changing (only ``STABLE_TIMEOUT`` is not stable)."""
        return self.status != TransitionStatus.STABLE_TIMEOUT

    def __bool__(self):
        return self.complete

    def __repr__(self):
        return ("Transition(key=%r, frame=%s, status=%s, press_time=%s, animation_start_time=%s, "
                "end_time=%s)" % (
                    self.key, _frame_repr(self.frame), self.status, _time_repr(self.press_time),
                    _time_repr(self.animation_start_time), _time_repr(self.end_time)))

    def __str__(self):
        """The repr with the two durations too (what a log line wants)."""
        return "%s, duration=%s, animation_duration=%s)" % (
            repr(self)[:-1], _time_repr(self.duration), _time_repr(self.animation_duration))


# stb-tester's name for this class before it was public: test code written for those releases
# imports it from ``_stbt.transition`` to build expected results.
_TransitionResult = Transition


def _frames_after(seq, timeout_secs):
    """The daemon's frames from the one after ``seq`` on (so a change that
    came while the press was answered is not missed)."""
    from stbt_core import _frames  # pylint: disable=import-outside-toplevel
    import time as _time  # pylint: disable=import-outside-toplevel
    from farmhand import control  # pylint: disable=import-outside-toplevel
    deadline = _time.monotonic() + float(timeout_secs)
    while True:
        wait = deadline - _time.monotonic()
        if wait <= 0:
            return
        fields = {"timeout_ms": int(min(wait, 10.0) * 1000)}
        if seq is not None:
            fields["after_seq"] = seq
        frame = _frames._receive(  # pylint: disable=protected-access
            "next_frame", timeout=control.DEFAULT_TIMEOUT_SECS + fields["timeout_ms"] / 1000.0, **fields)
        if frame is None:
            continue
        seq = frame._seq  # pylint: disable=protected-access
        yield frame


def _run(key, initial_frame, start_time, frames, m, d, timeout_secs, stable_secs, press_time):
    """Watch ``frames`` (after ``initial_frame``, the reference; without
    it, the first frame is) through mask ``m`` with differ ``d``: the first
    frame that differs from the reference starts the animation, then
    ``_until_still`` waits for its end."""
    reference = None
    last = initial_frame
    since = getattr(initial_frame, "time", None)
    if initial_frame is not None:
        reference = _reference(d, m, initial_frame)
    for frame in frames:
        t = frame.time
        if since is not None and t is not None and t <= since:
            continue  # not after the reference frame (a given list may start earlier)
        last = frame
        if reference is None:  # no frame before: the first one is the reference
            reference = _reference(d, m, frame)
            continue
        current = d.preprocess(frame)
        if d.diff(reference, current, m):
            return _until_still(key, frame, current, frames, m, d, start_time + timeout_secs,
                                stable_secs, press_time)
        if t - start_time >= timeout_secs:
            return Transition(key, frame, TransitionStatus.START_TIMEOUT, press_time, None, None)
    # The frames ran out (a given list, or the daemon's clock ran out first).
    return Transition(key, last, TransitionStatus.START_TIMEOUT, press_time, None, None)


def _until_still(key, start_frame, previous, frames, m, d, expiry, stable_secs, press_time):
    """From ``start_frame`` (the animation's first frame, ``previous`` its
    preprocessed pixels), each frame compared with the one before it, until
    nothing changed for ``stable_secs`` (COMPLETE: ``frame`` is the first
    still frame, ``end_time`` its time) or the frames' clock reaches
    ``expiry`` (STABLE_TIMEOUT: ``frame`` is the last frame looked at)."""
    animation_start = start_frame.time
    end_frame = last = start_frame
    if stable_secs <= 0:
        return Transition(key, start_frame, TransitionStatus.COMPLETE, press_time, animation_start,
                          animation_start, start_frame, start_frame)
    for frame in frames:
        if frame.time <= last.time:
            continue
        last = frame
        current = d.preprocess(frame)
        if d.diff(previous, current, m):
            end_frame = frame
        previous = current
        if frame.time - end_frame.time >= stable_secs:
            return Transition(key, end_frame, TransitionStatus.COMPLETE, press_time, animation_start,
                              end_frame.time, start_frame, end_frame)
        if frame.time >= expiry:
            break
    return Transition(key, last, TransitionStatus.STABLE_TIMEOUT, press_time, animation_start,
                      end_frame.time, start_frame, end_frame)


def _reference(d, m, frame):
    """``frame`` preprocessed, once the mask is known to overlap it (else ValueError)."""
    current = d.preprocess(frame)
    height, width = current.shape[:2]
    d.preprocess_mask(m, Region(0, 0, width, height))
    return current


def wait_for_transition_to_end(initial_frame=None, mask=Region.ALL, region=Region.ALL, timeout_secs=10,
                               stable_secs=1, min_size=None, frames=None, *, threshold=None, differ=None):
    """Wait for the screen to stop changing: ``initial_frame`` (default: the
    first frame looked at) is taken as the transition's start
    (``animation_start_time``), and the result is COMPLETE once nothing has
    changed for ``stable_secs`` (``end_time`` the first still frame's time,
    which is ``initial_frame``'s when nothing changed after it), else
    STABLE_TIMEOUT ``timeout_secs`` after ``initial_frame``. Returns a
    ``Transition`` (``key`` and ``press_time`` None). The differ is
    ``differ``, else ``press_and_wait.differ``."""
    m = _mask_for(mask, region)
    d = _differ_for(differ, threshold, None, min_size, default=press_and_wait.differ)
    stable_secs, timeout_secs = float(stable_secs), float(timeout_secs)
    if frames is None:
        seq = getattr(initial_frame, "_seq", None)
        frames = _frames_after(seq, timeout_secs + stable_secs + 1)
    frames = iter(frames)
    if getattr(initial_frame, "time", None) is None:
        initial_frame = next(frames, None)
        if initial_frame is None:
            raise ValueError("wait_for_transition_to_end: no frame to look at")
    result = _until_still(None, initial_frame, _reference(d, m, initial_frame), frames, m, d,
                          initial_frame.time + timeout_secs, stable_secs, None)
    _log("wait_for_transition_to_end: %s" % (result,))
    return result


def press_and_wait(key, mask=Region.ALL, region=Region.ALL, timeout_secs=10, stable_secs=1, min_size=None,
                   retries=0, frames=None, _dut=None, *, threshold=None, differ=None):
    """Press ``key``, wait for the screen to start changing and then to stay
    still for ``stable_secs``. Returns a ``Transition``; with ``retries`` the
    key is pressed again (up to that many more times) while the screen did
    not start changing. The differ is ``differ``, else
    ``press_and_wait.differ``. ``_dut`` stands in for the device: its
    ``press(key)`` returns a ``Keypress`` and, when ``frames`` is not given,
    its ``frames()`` the frames to watch."""
    m = _mask_for(mask, region)
    d = _differ_for(differ, threshold, None, min_size, default=press_and_wait.differ)
    stable_secs, timeout_secs = float(stable_secs), float(timeout_secs)
    if _dut is None:
        from stbt_core._remote import press as press_fn  # pylint: disable=import-outside-toplevel
    else:
        press_fn = _dut.press
    for attempt in range(int(retries) + 1):
        keypress = press_fn(key)
        initial = getattr(keypress, "frame_before", None)
        press_time = keypress.end_time
        source = frames
        if source is None and _dut is not None and hasattr(_dut, "frames"):
            source = _dut.frames()
        if source is None:
            source = _frames_after(getattr(initial, "_seq", None), timeout_secs + stable_secs + 1)
        result = _run(getattr(keypress, "key", key), initial, press_time, iter(source), m, d,
                      timeout_secs, stable_secs, press_time)
        _log("press_and_wait(%r): %s" % (key, result))
        if result.started or attempt == int(retries):
            return result
    return result  # pragma: no cover  (the loop always returns)


# The differ press_and_wait and wait_for_transition_to_end use when none is given; a test pack may
# replace it, e.g. ``stbt.press_and_wait.differ = stbt.GrayscaleDiff()``.
press_and_wait.differ = BGRDiff()
