"""Remote control of the stbt API: press (pacing from [press], hold_secs,
Keypress, Enum keys), pressing, last_keypress, press_until_match, MultiPress.

Pacing is checked as a lower bound only (a loaded machine can only make a
gap longer); bench/stbt-press-bench.py measures how close it is."""

import enum
import os
import shutil
import tempfile
import unittest
from unittest import mock

import numpy

import stbt
from _fake_daemon import WithDaemon
from farmhand.errors import ControlError


class Press(WithDaemon, unittest.TestCase):
    def test_press_returns_a_keypress_with_times_and_the_frame_before(self):
        self.assertIsNone(stbt.last_keypress())
        kp = stbt.press("KEY_OK")
        self.assertIsInstance(kp, stbt.Keypress)
        self.assertEqual(kp.key, "KEY_OK")
        key, hold_ms, start, end, _ = self.daemon.presses[0]
        self.assertEqual((key, hold_ms), ("KEY_OK", 0))
        self.assertLessEqual(kp.start_time, start)
        self.assertGreaterEqual(kp.end_time, end)
        self.assertIsInstance(kp.frame_before, stbt.Frame)
        self.assertLessEqual(kp.frame_before.time, kp.start_time)
        self.assertIs(stbt.last_keypress(), kp)

    def test_frame_before_shows_the_screen_before_the_press(self):
        stbt.press("KEY_RIGHT")
        after_first = stbt.get_frame()
        kp = stbt.press("KEY_RIGHT")
        self.assertTrue((kp.frame_before == after_first).all() or kp.frame_before[5, 14, 0] == 255)
        self.assertEqual(kp.frame_before[5, 24, 0], 128)  # the square had not moved to screen 2 yet

    def test_presses_are_paced_by_the_default_interpress_delay(self):
        first = stbt.press("KEY_UP")
        second = stbt.press("KEY_DOWN")
        self.assertGreaterEqual(second.start_time - first.end_time, 0.3)
        self.assertGreaterEqual(self.daemon.presses[1][2] - self.daemon.presses[0][3], 0.3)

    def test_interpress_delay_secs_argument(self):
        stbt.press("KEY_UP")
        second = stbt.press("KEY_DOWN", interpress_delay_secs=0.6)
        self.assertGreaterEqual(second.start_time - self.daemon.presses[0][3], 0.6)

    def test_hold_secs_holds_the_key(self):
        kp = stbt.press("KEY_OK", hold_secs=0.2)
        self.assertEqual(self.daemon.presses[-1][1], 200)
        self.assertGreaterEqual(kp.end_time - kp.start_time, 0.2)
        with self.assertRaises(ValueError):
            stbt.press("KEY_OK", hold_secs=61)

    def test_enum_key_uses_its_value(self):
        class Key(enum.Enum):
            OK = "KEY_OK"

        self.assertEqual(stbt.press(Key.OK, interpress_delay_secs=0).key, "KEY_OK")
        self.assertEqual(self.daemon.presses[-1][0], "KEY_OK")

    def test_unknown_key_is_a_control_error(self):
        with self.assertRaises(ControlError) as c:
            stbt.press("KEY_MISSING")
        self.assertIsInstance(c.exception, stbt.UITestError)

    def test_pressing_holds_until_the_block_ends(self):
        with stbt.pressing("KEY_UP") as kp:
            self.assertEqual(kp.key, "KEY_UP")
            self.assertIsNone(kp.end_time)
            self.assertEqual(self.daemon.presses, [])  # still held
        key, hold_ms, _, _, released = self.daemon.presses[0]
        self.assertEqual((key, hold_ms, released), ("KEY_UP", 60000, True))
        self.assertIsNotNone(kp.end_time)
        self.assertIs(stbt.last_keypress(), kp)

    def test_press_until_match_presses_until_the_image_is_there(self):
        template = numpy.zeros((12, 12, 3), numpy.uint8)
        template[:] = (128, 0, 0)
        template[2:10, 2:10] = 255
        # The square is at x = 4 + 10 * screen; look where screen 3 puts it.
        result = stbt.press_until_match("KEY_RIGHT", template, interval_secs=1,
                                        region=stbt.Region(30, 0, right=48, bottom=20))
        self.assertTrue(result)
        self.assertEqual([p[0] for p in self.daemon.presses], ["KEY_RIGHT"] * 3)
        self.assertEqual(result.region, stbt.Region(32, 2, width=12, height=12))

    def test_press_until_match_raises_match_timeout_after_max_presses(self):
        template = numpy.zeros((12, 12, 3), numpy.uint8)
        template[2:10, 2:10] = (0, 255, 0)
        with self.assertRaises(stbt.MatchTimeout) as cm:
            stbt.press_until_match("KEY_LEFT", template, interval_secs=0.1, max_presses=2)
        self.assertEqual(len(self.daemon.presses), 2)
        # A look before each press and one after the last: three looks of interval_secs.
        self.assertAlmostEqual(cm.exception.timeout_secs, 0.3)

    def test_press_until_match_looks_before_it_presses(self):
        template = numpy.zeros((12, 12, 3), numpy.uint8)
        template[:] = (128, 0, 0)
        template[2:10, 2:10] = 255
        # Screen 0 already shows the square at x = 4: found without a press.
        result = stbt.press_until_match("KEY_RIGHT", template, interval_secs=1,
                                        region=stbt.Region(0, 0, right=20, bottom=20))
        self.assertTrue(result)
        self.assertEqual(self.daemon.presses, [])
        self.assertEqual(result.region, stbt.Region(2, 2, width=12, height=12))

    def test_press_until_match_with_max_presses_0_only_looks(self):
        template = numpy.zeros((12, 12, 3), numpy.uint8)
        template[2:10, 2:10] = (0, 255, 0)
        with self.assertRaises(stbt.MatchTimeout):
            stbt.press_until_match("KEY_RIGHT", template, interval_secs=0.1, max_presses=0)
        self.assertEqual(self.daemon.presses, [])
        with self.assertRaises(ValueError):
            stbt.press_until_match("KEY_RIGHT", template, interval_secs=0.1, max_presses=-1)


class Config(WithDaemon, unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="stbt-conf-")
        os.makedirs(os.path.join(self.root, "config"))
        with open(os.path.join(self.root, "config", "stbt.conf"), "w") as f:
            f.write("[press]\ninterpress_delay_secs = 0.7\n[press_until_match]\nmax_presses = 1\n")
        self.old = os.environ.get("FARMHAND_TEST_PACK_DIR")
        os.environ["FARMHAND_TEST_PACK_DIR"] = self.root
        super().setUp()

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.root, True)
        if self.old is None:
            os.environ.pop("FARMHAND_TEST_PACK_DIR")
        else:
            os.environ["FARMHAND_TEST_PACK_DIR"] = self.old

    def test_pacing_comes_from_press_interpress_delay_secs(self):
        stbt.press("KEY_UP")
        second = stbt.press("KEY_DOWN")
        self.assertGreaterEqual(second.start_time - self.daemon.presses[0][3], 0.7)

    def test_max_presses_comes_from_press_until_match(self):
        with self.assertRaises(stbt.MatchTimeout):
            stbt.press_until_match("KEY_LEFT", numpy.full((4, 4, 3), 1, numpy.uint8), interval_secs=0.1)
        self.assertEqual(len(self.daemon.presses), 1)


class Multi(WithDaemon, unittest.TestCase):
    def test_enter_text_taps_each_letter_with_a_pause_between_letters_of_one_key(self):
        mp = stbt.MultiPress(interpress_delay_secs=0, interletter_delay_secs=0.01)
        mp.enter_text("hi 2")
        self.assertEqual([p[0] for p in self.daemon.presses],
                         ["KEY_4"] * 2 + ["KEY_4"] * 3 + ["KEY_0"] + ["KEY_2"] * 4)
        with self.assertRaises(ValueError):
            mp.enter_text("€")

    def test_key_mapping(self):
        stbt.MultiPress(key_mapping={"KEY_RED": "xy"}, interpress_delay_secs=0).enter_text("y")
        self.assertEqual([p[0] for p in self.daemon.presses], ["KEY_RED", "KEY_RED"])

    def test_key_mapping_changes_keys_of_the_e161_keypad_and_keeps_the_others(self):
        mp = stbt.MultiPress(key_mapping={"KEY_1": "#1"}, interpress_delay_secs=0, interletter_delay_secs=0)
        mp.enter_text("1a")  # KEY_1 is changed, KEY_2 is still the keypad's
        self.assertEqual([p[0] for p in self.daemon.presses], ["KEY_1"] * 2 + ["KEY_2"])
        self.assertEqual(mp.key_mapping["KEY_9"], "wxyz9")

    def test_enter_text_presses_with_stbt_press_as_it_is_at_the_time(self):
        calls = []
        with mock.patch("stbt.press", lambda key, interpress_delay_secs=None: calls.append(("press", key))), \
                mock.patch("time.sleep", lambda secs: calls.append(("sleep", secs))):
            stbt.MultiPress(interletter_delay_secs=2).enter_text("Ab")
        # The delay between two letters of one key goes to time.sleep as it was given (an int here).
        self.assertEqual(calls, [("press", "KEY_2"), ("sleep", 2), ("press", "KEY_2"), ("press", "KEY_2")])
        self.assertIs(type(calls[1][1]), int)
        self.assertEqual(self.daemon.presses, [])


if __name__ == "__main__":
    unittest.main()
