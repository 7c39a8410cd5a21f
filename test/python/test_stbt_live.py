"""match, wait_for_match, is_screen_black and FrameObject on live frames:
frame=None and frames=None take their pictures through the run's control
socket (farmhand.control, the same code path as under the daemon), served
by the stand-in daemon of _fake_daemon.py, whose picture is a blue screen
with a white 8x8 box at x = 4 + 10 * screen, y = 4."""

import unittest

import numpy as np

import stbt
from _fake_daemon import WithDaemon

BLUE = (128, 0, 0)  # BGR


def box_template():
    t = np.empty((12, 12, 3), np.uint8)
    t[:] = BLUE
    t[2:10, 2:10] = 255
    return t


def box_area(screen):
    return stbt.Region(4 + 10 * screen - 4, 0, width=16, height=20)


class Live(WithDaemon, unittest.TestCase):
    def test_match_takes_the_latest_frame_and_logs(self):
        self.daemon.screen = 1
        m = stbt.match(box_template())
        self.assertTrue(m, m)
        self.assertEqual(m.position, (12, 2))
        self.assertIsInstance(m.frame, stbt.Frame)
        self.assertIsNotNone(m.time)
        self.assertEqual(m.time, m.frame.time)
        self.assertTrue(any(text.startswith("match ") and "matched" in text for _, text in self.daemon.logs),
                        self.daemon.logs)

    def test_wait_for_match_on_live_frames(self):
        self.daemon.screen = 2
        first = stbt.get_frame()
        m = stbt.wait_for_match(box_template(), consecutive_matches=3, region=box_area(2))
        self.assertEqual(m.position, (22, 2))
        self.assertGreater(m.frame.time, first.time)  # three new frames were looked at

    def test_wait_for_match_times_out(self):
        self.daemon.screen = 0
        with self.assertRaises(stbt.MatchTimeout) as cm:
            stbt.wait_for_match(box_template(), timeout_secs=0.3, region=box_area(2))
        self.assertIsInstance(cm.exception.screenshot, stbt.Frame)
        self.assertTrue(any("no match within 0.3 s" in text for _, text in self.daemon.logs), self.daemon.logs)

    def test_is_screen_black_and_frame_object_default_to_get_frame(self):
        self.daemon.screen = 0
        r = stbt.is_screen_black()
        self.assertFalse(r)  # the white box
        self.assertIsInstance(r.frame, stbt.Frame)
        self.assertTrue(stbt.is_screen_black(mask=~stbt.Mask(stbt.Region(4, 4, 8, 8))))  # blue is grey 15

        class Boxed(stbt.FrameObject):
            @property
            def is_visible(self):
                return bool(stbt.match(box_template(), frame=self._frame, region=box_area(0)))

        self.assertTrue(Boxed())
        self.daemon.screen = 3
        with self.daemon.cond:  # a frame drawn after the change
            seq = self.daemon.seq
            while self.daemon.seq <= seq + 1:
                self.daemon.cond.wait()
        self.assertFalse(Boxed())


if __name__ == "__main__":
    unittest.main()
