"""Outcomes as stb-tester reports them, through a real `python -m farmhand.run`:
AssertionError, UITestFailure and its subclasses fail; UITestError,
PreconditionError, ConfigurationError and anything else are errors; the
traceback names the test's own line. Also draw_text/debug lines in the log."""

import os
import unittest

from _fake_daemon import FakeDaemon
from _pack import Pack

TESTS = """\
import stbt_core as stbt


def test_assert():
    assert 1 == 2, "one is not two"


def test_failure():
    raise stbt.UITestFailure("the menu did not open")


def test_no_video():
    raise stbt.NoVideo("no picture")


def test_match_timeout():
    stbt.wait_for_match(stbt.load_image("missing.png"), timeout_secs=0.2)


def test_error():
    raise stbt.UITestError("the set-up is wrong")


def test_configuration():
    stbt.get_config("nosuch", "key")


def test_precondition():
    with stbt.as_precondition("tune to channel 1"):
        assert False, "no channel"


def test_other():
    {}["x"]


def test_logging():
    stbt.draw_text("tuning to BBC One")
    stbt.debug("%d presses", 3)
    stbt.press("KEY_OK")


def test_draw_text_durations():
    stbt.draw_text("tuning to BBC One")
    stbt.draw_text("a:b,c'd [e] %{pts}\\nnext", duration_secs=0.5)
    stbt.draw_text("nothing drawn", duration_secs="soon")
"""


class Outcomes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import numpy, cv2  # pylint: disable=import-outside-toplevel,multiple-imports
        cls.pack = Pack({"tests/__init__.py": "", "tests/outcomes.py": TESTS})
        img = numpy.zeros((8, 8, 3), numpy.uint8)
        img[2:6, 2:6] = (0, 255, 0)
        cv2.imwrite(cls.pack.path("tests/missing.png"), img)
        cls.daemon = FakeDaemon()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()
        cls.pack.cleanup()

    def run_case(self, name):
        report, out = self.pack.run("tests/outcomes.py::" + name, env=self.daemon.env())
        return report, out

    def check(self, name, result, reason, line):
        report, out = self.run_case(name)
        self.assertEqual(report["result"], result, out)
        self.assertEqual(report["failure_reason"].split(":")[0], reason, report)
        self.assertIn('tests/outcomes.py", line %d, in %s' % (line, name), report["traceback"])

    def test_reason_names_the_tests_line_when_stbt_raised(self):
        report, _ = self.run_case("test_match_timeout")
        self.assertTrue(report["failure_reason"].startswith("MatchTimeout: "), report)
        self.assertTrue(report["failure_reason"].endswith(" (at tests/outcomes.py line 17)"), report)
        report, _ = self.run_case("test_other")  # raised on the test's own line: the reason as before
        self.assertEqual(report["failure_reason"], "KeyError: 'x'")
        report, _ = self.run_case("test_assert")
        self.assertEqual(report["failure_reason"], "AssertionError: one is not two")

    def test_failures(self):
        self.check("test_assert", "fail", "AssertionError", 5)
        self.check("test_failure", "fail", "UITestFailure", 9)
        self.check("test_no_video", "fail", "NoVideo", 13)
        self.check("test_match_timeout", "fail", "MatchTimeout", 17)

    def test_errors(self):
        self.check("test_error", "error", "UITestError", 21)
        self.check("test_configuration", "error", "ConfigurationError", 25)
        self.check("test_precondition", "error", "PreconditionError", 30)
        self.check("test_other", "error", "KeyError", 34)

    def test_draw_text_and_debug_go_to_the_runs_log_in_order_with_the_press(self):
        before = len(self.daemon.logs)
        report, out = self.run_case("test_logging")
        self.assertEqual(report["result"], "pass", out)
        lines = [t for _, t in self.daemon.logs[before:]]
        self.assertEqual(lines, ["draw_text: tuning to BBC One (for 3 s)", "debug: 3 presses"])
        self.assertGreaterEqual(self.daemon.presses[-1][2], self.daemon.logs[-1][0])

    def test_draw_text_asks_the_daemon_to_draw_the_text_for_its_duration(self):
        before = len(self.daemon.draws)
        report, out = self.run_case("test_draw_text_durations")
        self.assertEqual(report["result"], "pass", out)
        # The text as given (the daemon makes it safe to draw); a duration that is no number is logged only.
        self.assertEqual(self.daemon.draws[before:], [("tuning to BBC One", 3), ("a:b,c'd [e] %{pts}\nnext", 0.5)])
        lines = [t for _, t in self.daemon.logs]
        self.assertIn("draw_text: nothing drawn (for soon s)", lines)

    def test_without_the_daemon_they_go_to_stderr(self):
        report, out = self.pack.run("tests/outcomes.py::test_logging", env={"FARMHAND_CONTROL_SOCKET": ""})
        self.assertEqual(report["result"], "error")  # the press needs the daemon
        self.assertIn("draw_text: tuning to BBC One", out)
        self.assertIn("debug: 3 presses", out)


if __name__ == "__main__":
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    unittest.main()
