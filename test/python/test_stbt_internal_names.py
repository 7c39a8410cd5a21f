"""stb-tester's internal module names (``_stbt.types``, ``_stbt.mask``, ...) are aliases of
farmhand's modules: code that imports from them gets the very classes ``import stbt`` gives."""

import importlib
import sys
import unittest

import stbt_core


class InternalNames(unittest.TestCase):
    def test_an_internal_module_is_the_farmhand_module_with_the_same_public_names(self):
        from _stbt.mask import Mask  # pylint: disable=import-outside-toplevel
        from _stbt.types import Region  # pylint: disable=import-outside-toplevel
        self.assertIs(Mask, stbt_core.Mask)
        self.assertIs(Region, stbt_core.Region)
        self.assertIs(importlib.import_module("_stbt.core"), stbt_core)
        self.assertIs(importlib.import_module("_stbt.imgutils").crop, stbt_core.crop)

    def test_the_ocr_module_keeps_tesseract_version_and_replacements_where_code_skipping_ocr_imports_them(self):
        # Test code written for stb-tester skips its OCR checks when ``_stbt.ocr._tesseract_version()`` raises; the
        # import itself must not fail (a module split once dropped the name, and every such file stopped loading).
        from _stbt.ocr import Replacements, _tesseract_version  # pylint: disable=import-outside-toplevel
        self.assertIs(Replacements, stbt_core.ocr_eq.replacements.__class__)
        version = _tesseract_version()
        self.assertTrue(all(isinstance(n, int) for n in version), version)
        self.assertGreaterEqual(version, [4])

    def test_the_transition_module_keeps_the_result_class_under_its_older_private_name(self):
        # Test code written for stb-tester releases before `Transition` was public imports the class by that name.
        from _stbt.transition import TransitionStatus, _TransitionResult  # pylint: disable=import-outside-toplevel
        self.assertIs(_TransitionResult, stbt_core.Transition)
        self.assertIs(TransitionStatus, stbt_core.TransitionStatus)

    def test_a_module_keeps_its_own_name_after_being_imported_by_its_alias(self):
        module = importlib.import_module("_stbt.logging")
        self.assertIs(module, sys.modules["stbt_core._logging"])
        self.assertEqual(module.__spec__.name, "stbt_core._logging")
        # Settings that code writes through the alias land on the one module.
        module.some_setting = 1
        self.assertEqual(sys.modules["stbt_core._logging"].some_setting, 1)
        del module.some_setting

    def test_cv2_compat_version_is_opencvs_version_as_a_list_of_integers(self):
        import cv2  # pylint: disable=import-outside-toplevel
        from _stbt import cv2_compat  # pylint: disable=import-outside-toplevel
        self.assertEqual(".".join(str(n) for n in cv2_compat.version), cv2.__version__.split("-")[0])
        self.assertGreaterEqual(cv2_compat.version, [3, 0, 0])

    def test_named_temporary_directory_is_removed_with_its_files_when_the_block_ends(self):
        import os  # pylint: disable=import-outside-toplevel
        from _stbt.utils import named_temporary_directory  # pylint: disable=import-outside-toplevel
        with named_temporary_directory(prefix="stbt-test") as d:
            self.assertTrue(os.path.basename(d).startswith("stbt-test"))
            with open(os.path.join(d, "f"), "w", encoding="utf-8") as f:
                f.write("x")
        self.assertFalse(os.path.exists(d))

    def test_scoped_curdir_returns_to_the_old_working_directory(self):
        import os  # pylint: disable=import-outside-toplevel
        from _stbt.utils import scoped_curdir  # pylint: disable=import-outside-toplevel
        before = os.getcwd()
        with scoped_curdir() as d:
            self.assertEqual(os.path.realpath(os.getcwd()), os.path.realpath(d))
        self.assertEqual(os.getcwd(), before)

    def test_to_unicode_decodes_bytes_as_utf8_and_keeps_text(self):
        from _stbt.utils import to_unicode  # pylint: disable=import-outside-toplevel
        self.assertEqual(to_unicode("caf\xe9.cfg".encode("utf-8")), "caf\xe9.cfg")
        self.assertEqual(to_unicode("already text"), "already text")
        self.assertEqual(to_unicode(12), "12")
        # bytes that are not UTF-8 survive a round trip, as file names do
        self.assertEqual(to_unicode(b"\xff.cfg").encode("utf-8", "surrogateescape"), b"\xff.cfg")

    def test_to_native_str_is_text_as_python_3_strings_are(self):
        from _stbt.utils import to_native_str  # pylint: disable=import-outside-toplevel
        self.assertEqual(to_native_str(b"stbt.conf"), "stbt.conf")
        self.assertIsInstance(to_native_str("x"), str)

    def test_threshold_diff_bgr_marks_pixels_whose_squared_colour_distance_reaches_the_threshold(self):
        import numpy  # pylint: disable=import-outside-toplevel
        from _stbt.libstbt import threshold_diff_bgr  # pylint: disable=import-outside-toplevel
        a = numpy.full((4, 6, 3), 100, dtype=numpy.uint8)
        b = a.copy()
        b[1, 2] = (102, 97, 100)  # distance 2*2 + 3*3 = 13
        b[3, 5] = (90, 100, 100)  # distance 100 (the difference is negative: no uint8 wrap-around)
        same = threshold_diff_bgr(a, a, 0)
        self.assertEqual((same.dtype, same.shape), (numpy.uint8, (4, 6)))
        self.assertTrue((same == 1).all())  # a threshold of 0 is reached everywhere
        self.assertFalse(threshold_diff_bgr(a, a, 1).any())
        got = threshold_diff_bgr(a, b, 13)
        self.assertEqual(sorted(zip(*numpy.nonzero(got))), [(1, 2), (3, 5)])
        self.assertEqual(sorted(zip(*numpy.nonzero(threshold_diff_bgr(a, b, 14)))), [(3, 5)])
        # crops (views with other strides) give the same answer as copies
        big = numpy.zeros((10, 10, 3), dtype=numpy.uint8)
        big[2:6, 3:9] = b
        self.assertTrue((threshold_diff_bgr(a, big[2:6, 3:9], 13) == got).all())
        with self.assertRaises(ValueError):
            threshold_diff_bgr(a, b[:2], 13)

    def test_an_unknown_internal_module_is_an_import_error(self):
        with self.assertRaises(ImportError):
            importlib.import_module("_stbt.no_such_module")


if __name__ == "__main__":
    unittest.main()
