"""Loading a test pack written for stb-tester: both import names, tests in
packages with relative imports, TEST_PACK_ROOT, and import failures reported
as errors that say which file and why."""

import os
import subprocess
import sys
import unittest

from _pack import Pack

PACKAGED = {
    "tests/__init__.py": "",
    "tests/roku/__init__.py": "",
    "tests/roku/pages/__init__.py": "",
    "tests/roku/pages/menu.py": "TITLE = 'menu'\n",
    "tests/roku/tests.py": (
        "import stbt\n"
        "import stbt_core\n"
        "from .pages.menu import TITLE\n"
        "from . import pages\n"
        "def test_relative():\n"
        "    assert TITLE == 'menu'\n"
        "    assert __name__ == 'tests.roku.tests', __name__\n"
        "    assert stbt is stbt_core and stbt.press is stbt_core.press\n"
        "    import importlib\n"
        "    assert importlib.import_module('stbt._frames') is importlib.import_module('stbt_core._frames')\n"
        "def test_root():\n"
        "    import os\n"
        "    assert stbt.TEST_PACK_ROOT == os.environ['FARMHAND_TEST_PACK_DIR'], stbt.TEST_PACK_ROOT\n"
    ),
    "tests/flat.py": (
        "import stbt_core as stbt\n"
        "import helper\n"
        "def test_flat():\n"
        "    assert helper.X == 1 and stbt.UITestFailure\n"
    ),
    "tests/helper.py": "X = 1\n",
}


class Loading(unittest.TestCase):
    def setUp(self):
        self.pack = Pack(PACKAGED)
        self.addCleanup(self.pack.cleanup)

    def test_test_in_packages_imports_under_its_dotted_name_with_relative_imports(self):
        report, out = self.pack.run("tests/roku/tests.py::test_relative")
        self.assertEqual(report["result"], "pass", out)

    def test_test_pack_root_is_the_checkout(self):
        report, out = self.pack.run("tests/roku/tests.py::test_root")
        self.assertEqual(report["result"], "pass", out)

    def test_file_outside_packages_loads_as_before(self):
        report, out = self.pack.run("tests/flat.py::test_flat")
        self.assertEqual(report["result"], "pass", out)


class ImportFailures(unittest.TestCase):
    def run_one(self, files, case):
        pack = Pack(files)
        self.addCleanup(pack.cleanup)
        return pack.run(case)

    def test_python2_pack_is_an_error_naming_the_file_and_python2(self):
        report, _ = self.run_one({"tests/old.py": "import stbt\ndef test_x():\n    print 'hello'\n"}, "tests/old.py::test_x")
        self.assertEqual(report["result"], "error")
        self.assertTrue(report["failure_reason"].startswith("ImportError: tests/old.py cannot be imported: it is Python 2 code"), report)
        self.assertIn("tests/old.py line 3", report["failure_reason"])
        self.assertTrue(report["traceback"].startswith("ImportError: tests/old.py cannot be imported"), report["traceback"])

    def test_python2_module_import_is_named(self):
        report, _ = self.run_one({"tests/old.py": "import urllib2\ndef test_x():\n    pass\n"}, "tests/old.py::test_x")
        self.assertEqual(report["result"], "error")
        self.assertIn("Python 2", report["failure_reason"])

    def test_failing_helper_is_named_with_its_line(self):
        files = {
            "tests/__init__.py": "",
            "tests/a.py": "from .pages import broken\ndef test_x():\n    pass\n",
            "tests/pages/__init__.py": "",
            "tests/pages/broken.py": "x = 1\nimport no_such_module_here\n",
        }
        report, _ = self.run_one(files, "tests/a.py::test_x")
        self.assertEqual(report["result"], "error")
        self.assertEqual(
            report["failure_reason"],
            "ImportError: tests/a.py cannot be imported: ModuleNotFoundError: No module named "
            "'no_such_module_here' (tests/pages/broken.py line 2)")
        self.assertIn("tests/pages/broken.py", report["traceback"])

    def test_assertion_at_import_is_an_error_not_a_failure(self):
        report, _ = self.run_one({"tests/a.py": "assert False, 'no'\ndef test_x():\n    pass\n"}, "tests/a.py::test_x")
        self.assertEqual(report["result"], "error")
        self.assertEqual(report["failure_reason"], "ImportError: tests/a.py cannot be imported: AssertionError: no at tests/a.py line 1")


class ImportCost(unittest.TestCase):
    """``import stbt`` leaves OpenCV (most of a second to load) for the first call that needs it."""

    def test_import_stbt_does_not_load_opencv(self):
        code = "import sys, stbt; print(sorted(m for m in ('cv2', 'tesserocr') if m in sys.modules))"
        out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ), check=False, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr.decode())
        self.assertEqual(out.stdout.decode().strip(), "[]")

    def test_opencv_loads_when_text_color_is_first_used(self):
        code = ("import sys, numpy, stbt\n"
                "from stbt_core import _ocr_colour\n"
                "before = 'cv2' in sys.modules\n"
                "_ocr_colour.luma(numpy.zeros((4, 4, 3), numpy.uint8))\n"
                "print(before, 'cv2' in sys.modules)")
        out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ), check=False, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr.decode())
        self.assertEqual(out.stdout.decode().strip(), "False True")


if __name__ == "__main__":
    unittest.main()
