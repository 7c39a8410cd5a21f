"""Transitions of the stbt API on synthetic frame sequences:
wait_for_transition_to_end and press_and_wait (with a stand-in remote
control) report the frame times of the first change and of the start of the
final still period; START_TIMEOUT, STABLE_TIMEOUT, retries, masks; the
Transition's properties."""

import unittest

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


class WaitForTransitionToEnd(unittest.TestCase):
    def test_times_are_the_first_changed_frame_and_the_first_still_one(self):
        seq = slide(start=5, length=10, total=60)
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], stable_secs=0.5)
        self.assertIs(t.status, TransitionStatus.COMPLETE)
        self.assertTrue(t)
        self.assertTrue(t.started and t.complete and t.stable)
        self.assertEqual(t.animation_start_time, seq[5].time)
        # frame 15 is the first of the final picture: the last that changed
        self.assertEqual(t.end_time, seq[15].time)
        self.assertAlmostEqual(t.animation_duration, 10 * STEP)
        self.assertIsNone(t.press_time)
        self.assertIsNone(t.duration)
        self.assertIsNone(t.key)
        # complete as soon as the picture had been still for stable_secs
        self.assertAlmostEqual(t.frame.time - t.end_time, 0.52)

    def test_initial_frame_defaults_to_the_first(self):
        seq = slide(start=5, length=10, total=60)
        t = stbt.wait_for_transition_to_end(frames=seq, stable_secs=0.5)
        self.assertEqual((t.animation_start_time, t.end_time), (seq[5].time, seq[15].time))

    def test_start_timeout(self):
        seq = [frame(i) for i in range(100)]
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], timeout_secs=1)
        self.assertIs(t.status, TransitionStatus.START_TIMEOUT)
        self.assertFalse(t)
        self.assertFalse(t.started or t.complete)
        self.assertTrue(t.stable)  # nothing moved: only STABLE_TIMEOUT is unstable
        self.assertIsNone(t.animation_start_time)
        self.assertIsNone(t.end_time)
        self.assertAlmostEqual(t.frame.time - T0, 1.0)

    def test_stable_timeout(self):
        seq = slide(start=3, length=90, total=100)  # keeps moving
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], timeout_secs=1, stable_secs=0.5)
        self.assertIs(t.status, TransitionStatus.STABLE_TIMEOUT)
        self.assertFalse(t)
        self.assertTrue(t.started)
        self.assertFalse(t.complete or t.stable)
        self.assertEqual(t.animation_start_time, seq[3].time)

    def test_mask_ignores_changes_elsewhere(self):
        seq = slide(start=5, length=10, total=60)
        outside = Region(0, 50, width=W, height=40)
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], timeout_secs=1, mask=outside)
        self.assertIs(t.status, TransitionStatus.START_TIMEOUT)
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], timeout_secs=1, region=outside)
        self.assertIs(t.status, TransitionStatus.START_TIMEOUT)
        # a small change is no change with min_size bigger than it
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], timeout_secs=1, min_size=(30, 30))
        self.assertIs(t.status, TransitionStatus.START_TIMEOUT)

    def test_a_slow_fade_ends_when_it_stops_changing(self):
        # brightness +12 a frame (a distance of 20.8 a step: motion at threshold 20)
        # over frames 5-14, then still
        seq = [frame(i, grey=40 + 12 * min(max(i - 4, 0), 10)) for i in range(60)]
        t = stbt.wait_for_transition_to_end(seq[0], frames=seq[1:], stable_secs=0.5, threshold=20)
        self.assertEqual(t.animation_start_time, seq[5].time)
        self.assertEqual(t.end_time, seq[14].time)


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


if __name__ == "__main__":
    unittest.main()
