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

    def test_an_unknown_internal_module_is_an_import_error(self):
        with self.assertRaises(ImportError):
            importlib.import_module("_stbt.no_such_module")


if __name__ == "__main__":
    unittest.main()
