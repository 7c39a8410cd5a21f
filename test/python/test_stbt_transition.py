"""Transitions of the stbt API on synthetic frame sequences:
wait_for_transition_to_end and press_and_wait (with a stand-in remote
control) report the frame times of the first change and of the start of the
final still period; START_TIMEOUT, STABLE_TIMEOUT, retries, masks; the
Transition's properties."""

import unittest
from unittest import mock

import numpy as np

import stbt
from stbt import Region, TransitionStatus

W, H = 160, 90
STEP = 0.04
T0 = 2000.0


def frame(i, x=None, grey=40):
    """Frame number ``i`` (time T0 + i * STEP); with ``x`` a white box at column ``x``."""
    a = np.full((H, W, 3), grey, np.uint8)
    if x is not None:
        a[20:40, x:x + 20] = 255
    return stbt.Frame(a, time=T0 + i * STEP)


def slide(start, length, total, still_at=100):
    """``total`` frames: still, a box sliding 4 px a frame over frames
    ``start`` .. ``start + length - 1``, then still again at ``still_at``."""
    out = []
    for i in range(total):
        if i < start:
            out.append(frame(i))
        elif i < start + length:
            out.append(frame(i, x=10 + 4 * (i - start)))
        else:
            out.append(frame(i, x=still_at))
    return out


class FakeKeypress:
    def __init__(self, key, start_time, end_time, frame_before):
        self.key, self.start_time, self.end_time, self.frame_before = key, start_time, end_time, frame_before


class FakeDut:
    """A remote control that "presses" at a given frame time."""

    def __init__(self, frame_before, end_time):
        self.frame_before, self.end_time, self.pressed = frame_before, end_time, []

    def press(self, key):
        self.pressed.append(key)
        return FakeKeypress(key, self.end_time - 0.01, self.end_time, self.frame_before)


def press_at_first(seq, **kwargs):
    """press_and_wait over ``seq`` with a press at its first frame."""
    return stbt.press_and_wait("KEY_OK", frames=seq, _dut=FakeDut(seq[0], seq[0].time), **kwargs)


class WaitForTransitionToEnd(unittest.TestCase):
    """It waits for the screen to stop changing: the initial frame is the
    transition's start (the manual's example measures the end of a screen's
    loading from the frame a wait_for_match found)."""

    def test_the_initial_frame_starts_it_and_the_first_still_frame_ends_it(self):
        seq = slide(start=5, length=10, total=60)
        t = stbt.wait_for_transition_to_end(seq[3], frames=seq[4:], stable_secs=0.5)
        self.assertIs(t.status, TransitionStatus.COMPLETE)
        self.assertTrue(t)
        self.assertTrue(t.started and t.complete and t.stable)
        self.assertEqual(t.animation_start_time, seq[3].time)
        # frame 15 is the first of the final picture: the last that changed
        self.assertEqual(t.end_time, seq[15].time)
        self.assertAlmostEqual(t.animation_duration, 12 * STEP)
        self.assertIsNone(t.press_time)
        self.assertIsNone(t.duration)
        self.assertIsNone(t.key)
        # the frame is the first still one, not the one that showed it had been still long enough
        self.assertIs(t.frame, seq[15])

    def test_a_screen_already_still_is_complete_at_the_initial_frame(self):
        seq = [frame(i) for i in range(100)]
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], timeout_secs=1, stable_secs=0.5)
        self.assertIs(t.status, TransitionStatus.COMPLETE)
        self.assertEqual((t.animation_start_time, t.end_time), (seq[0].time, seq[0].time))
        self.assertIs(t.frame, seq[0])
        self.assertEqual(t.animation_duration, 0)

    def test_the_manuals_example_measures_from_a_match(self):
        # a screen whose template is there from frame 5, filling in until frame 15
        seq = slide(start=5, length=10, total=60)
        found = seq[5]
        t = stbt.wait_for_transition_to_end(found, frames=seq, stable_secs=0.5)  # earlier frames skipped
        self.assertEqual(t.animation_start_time, found.time)
        self.assertAlmostEqual(t.end_time - T0, 15 * STEP)

    def test_initial_frame_defaults_to_the_first(self):
        seq = slide(start=5, length=10, total=60)
        t = stbt.wait_for_transition_to_end(frames=seq, stable_secs=0.5)
        self.assertEqual((t.animation_start_time, t.end_time), (seq[0].time, seq[15].time))
        with self.assertRaisesRegex(ValueError, "no frame to look at"):
            stbt.wait_for_transition_to_end(frames=[])

    def test_stable_timeout(self):
        seq = slide(start=3, length=90, total=100)  # keeps moving
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], timeout_secs=1, stable_secs=0.5)
        self.assertIs(t.status, TransitionStatus.STABLE_TIMEOUT)
        self.assertFalse(t)
        self.assertTrue(t.started)
        self.assertFalse(t.complete or t.stable)
        self.assertEqual(t.animation_start_time, seq[0].time)
        self.assertAlmostEqual(t.frame.time - T0, 1.0)  # timeout_secs from the initial frame

    def test_mask_ignores_changes_elsewhere(self):
        seq = slide(start=5, length=10, total=60)
        outside = Region(0, 50, width=W, height=40)
        for kwargs in ({"mask": outside}, {"region": outside}, {"min_size": (30, 30)}):
            t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], stable_secs=0.5, **kwargs)
            self.assertEqual(t.end_time, seq[0].time, kwargs)
            t = press_at_first(seq, timeout_secs=1, **kwargs)
            self.assertIs(t.status, TransitionStatus.START_TIMEOUT, kwargs)

    def test_a_slow_fade_ends_when_it_stops_changing(self):
        # brightness +12 a frame (a distance of 20.8 a step: motion at threshold 20)
        # over frames 5-14, then still
        seq = [frame(i, grey=40 + 12 * min(max(i - 4, 0), 10)) for i in range(60)]
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], stable_secs=0.5, threshold=20)
        self.assertEqual(t.end_time, seq[14].time)
        t = press_at_first(seq, stable_secs=0.5, threshold=20)
        self.assertEqual((t.animation_start_time, t.end_time), (seq[5].time, seq[14].time))


class PressAndWait(unittest.TestCase):
    def test_press_time_and_durations(self):
        seq = slide(start=8, length=5, total=60)
        dut = FakeDut(seq[2], seq[3].time + 0.005)
        t = stbt.press_and_wait("KEY_RIGHT", frames=seq, stable_secs=0.5, _dut=dut)
        self.assertEqual(dut.pressed, ["KEY_RIGHT"])
        self.assertEqual(t.key, "KEY_RIGHT")
        self.assertEqual(t.press_time, seq[3].time + 0.005)
        self.assertEqual(t.animation_start_time, seq[8].time)
        self.assertEqual(t.end_time, seq[13].time)
        self.assertAlmostEqual(t.duration, seq[13].time - seq[3].time - 0.005)
        self.assertAlmostEqual(t.animation_duration, 5 * STEP)
        self.assertIn("COMPLETE", repr(t))

    def test_frames_before_the_reference_are_not_looked_at(self):
        # the frames given start earlier (with a change) than the frame before the press
        seq = [frame(0, x=50)] + slide(start=8, length=5, total=60)[1:]
        dut = FakeDut(seq[2], seq[2].time)
        t = stbt.press_and_wait("KEY_OK", frames=seq, stable_secs=0.5, _dut=dut)
        self.assertEqual(t.animation_start_time, seq[8].time)

    def test_retries_press_again_while_nothing_starts(self):
        seq = [frame(i) for i in range(40)]
        dut = FakeDut(seq[0], seq[0].time)
        t = stbt.press_and_wait("KEY_OK", frames=seq, timeout_secs=0.5, retries=2, _dut=dut)
        self.assertEqual(dut.pressed, ["KEY_OK"] * 3)
        self.assertIs(t.status, TransitionStatus.START_TIMEOUT)
        dut = FakeDut(seq[0], seq[0].time)
        stbt.press_and_wait("KEY_OK", frames=slide(5, 5, 60), retries=2, stable_secs=0.5, _dut=dut)
        self.assertEqual(dut.pressed, ["KEY_OK"])



class FakeBox:
    """A stand-in device with its own frames: ``press(key)`` shows the
    frame before the press and then changes the picture to ``key`` (a
    column for a box, or "still"); ``frames()`` yields one frame a STEP on
    its own clock. ``ignores`` presses are lost first."""

    def __init__(self, ignores=0):
        self.state, self.i, self.ignores, self.pressed = "still", 0, ignores, []

    def _next(self):
        self.i += 1
        if self.state == "moving":
            return frame(self.i, x=(4 * self.i) % 120)
        if self.state == "still":
            return frame(self.i)
        return frame(self.i, x=self.state)

    def press(self, key):
        self.pressed.append(key)
        before = self._next()
        if self.ignores:
            self.ignores -= 1
        else:
            self.state = key
        return stbt.Keypress(key, before.time, before.time, before)

    def frames(self):
        while True:
            yield self._next()


class PressAndWaitWithADevice(unittest.TestCase):
    def test_frames_come_from_the_devices_frames(self):
        box = FakeBox()
        t = stbt.press_and_wait(60, stable_secs=0.2, _dut=box)
        self.assertIs(t.status, TransitionStatus.COMPLETE)
        self.assertEqual(t.press_time, T0 + STEP)
        self.assertEqual(t.animation_start_time, T0 + 2 * STEP)
        self.assertEqual(t.end_time, T0 + 2 * STEP)  # one step: the first changed frame is the last
        self.assertAlmostEqual(t.duration, STEP)
        self.assertEqual(int(np.asarray(t.frame)[30, 70, 0]), 255)

    def test_retries_press_again_until_the_screen_changes(self):
        t = stbt.press_and_wait(60, timeout_secs=0.2, stable_secs=0.1, _dut=FakeBox(ignores=2))
        self.assertIs(t.status, TransitionStatus.START_TIMEOUT)
        box = FakeBox(ignores=2)
        t = stbt.press_and_wait(60, timeout_secs=0.2, stable_secs=0.1, retries=2, _dut=box)
        self.assertIs(t.status, TransitionStatus.COMPLETE)
        self.assertEqual(box.pressed, [60, 60, 60])

    def test_the_still_period_must_end_within_timeout_secs(self):
        # it moves for ever: not still by the end of the timeout
        t = stbt.press_and_wait("moving", timeout_secs=0.4, stable_secs=0.1, _dut=FakeBox())
        self.assertIs(t.status, TransitionStatus.STABLE_TIMEOUT)
        self.assertLess(t.frame.time - t.press_time, 0.4 + STEP)
        # it moves for 0.2 s then stops: still for 0.3 s only at 0.5 s after the press
        seq = slide(start=1, length=5, total=60)
        dut = FakeDut(seq[0], seq[0].time)
        t = stbt.press_and_wait("KEY_OK", frames=seq, timeout_secs=0.4, stable_secs=0.3, _dut=dut)
        self.assertIs(t.status, TransitionStatus.STABLE_TIMEOUT)
        t = stbt.press_and_wait("KEY_OK", frames=seq, timeout_secs=0.6, stable_secs=0.3, _dut=dut)
        self.assertIs(t.status, TransitionStatus.COMPLETE)

    def test_the_default_differ_is_replaceable(self):
        # a change of hue at the same brightness: BGRDiff sees it, GrayscaleDiff does not
        def hue_change(i):
            a = np.full((H, W, 3), 100, np.uint8)
            if i >= 3:
                a[20:40, 20:40] = (160, 70, 100)
            return stbt.Frame(a, time=T0 + i * STEP)
        seq = [hue_change(i) for i in range(40)]
        self.assertIsInstance(stbt.press_and_wait.differ, stbt.BGRDiff)
        t = press_at_first(seq, timeout_secs=1, stable_secs=0.2)
        self.assertIs(t.status, TransitionStatus.COMPLETE)
        self.assertEqual(stbt.wait_for_transition_to_end(seq[1], frames=seq, stable_secs=0.2).end_time,
                         seq[3].time)
        saved = stbt.press_and_wait.differ
        self.addCleanup(setattr, stbt.press_and_wait, "differ", saved)
        stbt.press_and_wait.differ = stbt.GrayscaleDiff()
        t = press_at_first(seq, timeout_secs=1, stable_secs=0.2)
        self.assertIs(t.status, TransitionStatus.START_TIMEOUT)
        # wait_for_transition_to_end uses the same module-wide default
        self.assertEqual(stbt.wait_for_transition_to_end(seq[1], frames=seq, stable_secs=0.2).end_time,
                         seq[1].time)
        t = stbt.press_and_wait("KEY_OK", frames=seq, timeout_secs=1, stable_secs=0.2,
                                _dut=FakeDut(seq[0], seq[0].time), differ=stbt.BGRDiff())
        self.assertIs(t.status, TransitionStatus.COMPLETE)

    def test_mask_and_region(self):
        seq = slide(start=5, length=10, total=60)
        with self.assertRaisesRegex(ValueError, "Cannot specify mask and region at the same time"):
            stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], mask=Region(0, 0, 10, 10),
                                            region=Region(0, 0, 10, 10))
        with self.assertRaisesRegex(ValueError, "doesn't overlap with the frame"):
            stbt.press_and_wait("KEY_OK", frames=seq, mask=np.zeros((H, W), np.uint8),
                                _dut=FakeDut(seq[0], seq[0].time))
        above = np.zeros((H, W), np.uint8)
        above[:20] = 255  # the box slides over rows 20-39
        t = press_at_first(seq, timeout_secs=1, mask=above)
        self.assertIs(t.status, TransitionStatus.START_TIMEOUT)
        t = press_at_first(seq, timeout_secs=2, mask=~stbt.Mask(above))
        self.assertIs(t.status, TransitionStatus.COMPLETE)


class TransitionObject(unittest.TestCase):
    def test_properties_by_status(self):
        expected = {TransitionStatus.START_TIMEOUT: (False, False, True),
                    TransitionStatus.STABLE_TIMEOUT: (True, False, False),
                    TransitionStatus.COMPLETE: (True, True, True)}
        for status, (started, complete, stable) in expected.items():
            t = stbt.Transition(key="KEY_OK", frame=None, status=status, press_time=10.0,
                                animation_start_time=10.5, end_time=11.0)
            self.assertEqual((t.started, t.complete, t.stable, bool(t)), (started, complete, stable, complete))
            self.assertEqual((t.duration, t.animation_duration), (1.0, 0.5))

    def test_repr_and_str(self):
        t = stbt.Transition("KEY_OK", stbt.Frame(np.zeros((2, 2, 3), np.uint8), time=11.25),
                            TransitionStatus.COMPLETE, 10.0, 10.5, 11.0)
        self.assertEqual(repr(t), "Transition(key='KEY_OK', frame=<Frame(time=11.250)>, "
                                  "status=TransitionStatus.COMPLETE, press_time=10.000, "
                                  "animation_start_time=10.500, end_time=11.000)")
        # str adds the durations, for logs
        self.assertEqual(str(t), repr(t)[:-1] + ", duration=1.000, animation_duration=0.500)")
        self.assertEqual(str(stbt.Transition(None, None, TransitionStatus.START_TIMEOUT, None, None, None)),
                         "Transition(key=None, frame=None, status=TransitionStatus.START_TIMEOUT, "
                         "press_time=None, animation_start_time=None, end_time=None, duration=None, "
                         "animation_duration=None)")


class WaitUntilOnTheWallClock(unittest.TestCase):
    """``wait_until`` reads ``time.time`` and ``time.sleep`` at each call,
    so replacing them (as stb-tester packs' own tests do) drives it."""

    def test_a_mocked_clock_drives_it(self):
        now = [5000.0]

        def sleep(secs):
            now[0] += secs

        def slow_false():
            sleep(1)
            return False
        with mock.patch("time.time", lambda: now[0]), mock.patch("time.sleep", sleep):
            self.assertIs(stbt.wait_until(slow_false, timeout_secs=3), False)
            self.assertEqual(now[0], 5004.0)  # calls start at 0, 1, 2 and 3 s
            values = iter(["a", "b", "b", "b"])
            self.assertEqual(stbt.wait_until(lambda: next(values), interval_secs=1, stable_secs=2), "b")
            self.assertIsNone(stbt.wait_until(lambda: "x", predicate=lambda v: v == "y", timeout_secs=2,
                                              interval_secs=1))



class AsPreconditionWithAMotionTimeout(unittest.TestCase):
    def test_the_failure_becomes_an_error_that_keeps_the_screenshot(self):
        seq = [frame(i) for i in range(10)]
        with self.assertRaises(stbt.PreconditionError) as cm:
            with stbt.as_precondition("the menu animates"):
                stbt.wait_for_motion(consecutive_frames=1, frames=seq)
        e = cm.exception
        self.assertIsInstance(e, stbt.UITestError)
        self.assertNotIsInstance(e, stbt.UITestFailure)
        self.assertIsInstance(e.original_exception, stbt.MotionTimeout)
        self.assertIs(e.screenshot, seq[-1])
        self.assertIn("the menu animates", str(e))


if __name__ == "__main__":
    unittest.main()
