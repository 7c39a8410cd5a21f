"""stbt's geometry and masks: Region (both constructors, Region.ALL, every
method, (x, y, right, bottom) iteration), Position, Size, Direction, Mask,
load_mask, MaskTypes, and is_screen_black with mask, threshold and its result."""

import copy
import os
import pickle
import tempfile
import unittest

import cv2
import numpy as np

import stbt
import stbt_core
from stbt_core import _config

Region = stbt.Region


class RegionTest(unittest.TestCase):
    def test_both_constructors_and_iteration_order(self):
        a = Region(10, 20, width=30, height=40)
        b = Region(10, 20, right=40, bottom=60)
        self.assertEqual(a, b)
        self.assertEqual(tuple(a), (10, 20, 40, 60))
        x, y, right, bottom = a
        self.assertEqual((x, y, right, bottom), (10, 20, 40, 60))
        self.assertEqual((a.x, a.y, a.right, a.bottom, a.width, a.height), (10, 20, 40, 60, 30, 40))
        self.assertEqual(Region(1, 2, 3, 4), Region(1, 2, width=3, height=4))  # positional: width, height
        self.assertEqual(repr(a), "Region(x=10, y=20, right=40, bottom=60)")
        self.assertIs(stbt.Region, stbt_core.Region)

    def test_invalid(self):
        with self.assertRaises(ValueError):
            Region(0, 0, width=5, right=5, height=1)
        with self.assertRaises(ValueError):
            Region(0, 0, width=5)
        with self.assertRaises(ValueError):
            Region(10, 0, right=5, bottom=5)

    def test_all(self):
        self.assertEqual(repr(Region.ALL), "Region.ALL")
        self.assertTrue(Region.ALL.contains(Region(-5000, 3, width=10 ** 6, height=1)))
        self.assertEqual(Region.ALL.width, float("inf"))
        frame = np.zeros((720, 1280, 3), np.uint8)
        self.assertEqual(frame[Region.ALL.to_slice()].shape, (720, 1280, 3))
        self.assertEqual(Region.intersect(Region.ALL, Region(0, 0, 1280, 720)), Region(0, 0, 1280, 720))

    def test_properties_and_class_methods(self):
        r = Region(10, 20, width=31, height=40)
        self.assertEqual(r.center, stbt.Position(25, 40))
        self.assertEqual(Region.from_extents(1, 2, 3, 4), Region(1, 2, right=3, bottom=4))
        self.assertEqual(Region.intersect(Region(0, 0, 10, 10), Region(5, 5, 10, 10)), Region(5, 5, 5, 5))
        self.assertIsNone(Region.intersect(Region(0, 0, 10, 10), Region(10, 0, 10, 10)))  # touching only
        self.assertIsNone(Region.intersect(Region(0, 0, 10, 10), None))
        self.assertEqual(Region.bounding_box(Region(0, 0, 10, 10), None, Region(20, 5, 1, 30)),
                         Region(0, 0, right=21, bottom=35))
        self.assertIsNone(Region.bounding_box())

    def test_methods(self):
        r = Region(10, 20, width=30, height=40)
        frame = np.arange(100 * 100).reshape(100, 100)
        self.assertEqual(frame[r.to_slice()].shape, (40, 30))
        self.assertEqual(frame[r.to_slice()][0, 0], frame[20, 10])
        self.assertTrue(r.contains(Region(10, 20, 30, 40)))
        self.assertFalse(r.contains(Region(10, 20, 31, 40)))
        self.assertTrue(r.contains(stbt.Position(39, 59)))
        self.assertFalse(r.contains((40, 59)))
        self.assertEqual(r.translate(5, -5), Region(15, 15, 30, 40))
        self.assertEqual(r.translate(stbt.Position(1, 2)), Region(11, 22, 30, 40))
        self.assertEqual(r.translate(x=3), Region(13, 20, 30, 40))
        self.assertEqual(r.extend(x=-1, y=-2, right=3, bottom=4), Region(9, 18, right=43, bottom=64))
        self.assertEqual(r.replace(x=0), Region(0, 20, right=40, bottom=60))  # moves the left edge only
        self.assertEqual(r.replace(x=0, width=5), Region(0, 20, 5, 40))
        self.assertEqual(r.replace(right=100), Region(10, 20, right=100, bottom=60))
        self.assertEqual(r.replace(width=5, height=6), Region(10, 20, 5, 6))
        self.assertEqual(r.replace(y=0, bottom=10), Region(10, 0, right=40, bottom=10))
        self.assertEqual(r.dilate(2), Region(8, 18, right=42, bottom=62))
        self.assertEqual(r.erode(2), Region(12, 22, right=38, bottom=58))
        self.assertEqual(r.above(5), Region(10, 15, right=40, bottom=20))
        self.assertEqual(r.below(5), Region(10, 60, right=40, bottom=65))
        self.assertEqual(r.right_of(5), Region(40, 20, right=45, bottom=60))
        self.assertEqual(r.left_of(5), Region(5, 20, right=10, bottom=60))
        self.assertEqual(r.above().y, -float("inf"))
        self.assertEqual(r.right_of().right, float("inf"))

    def test_replace_moves_only_the_edges_named(self):
        r = Region(10, 20, width=20, height=30)
        self.assertEqual(r.replace(x=11), Region(11, 20, right=30, bottom=50))
        self.assertEqual(r.replace(width=19), Region(10, 20, 19, 30))
        self.assertEqual(r.replace(x=11, right=21, y=0, height=5), Region(11, 0, 10, 5))
        with self.assertRaises(ValueError):
            r.replace(x=1, width=2, right=3)
        with self.assertRaises(ValueError):
            r.replace(height=2, bottom=3)

    def test_translate_by_a_point_or_numbers(self):
        r = Region(2, 3, 2, 1)
        self.assertEqual(r.translate(Region(1, 1, 5, 5)), Region(3, 4, 2, 1))
        with self.assertRaises(TypeError):
            r.translate(Region(0, 0, 1, 1), 5)
        with self.assertRaises(TypeError):
            r.translate(stbt.Position(1, 1), 5)

    def test_copy_pickle_hash(self):
        r = Region(1, 2, 3, 4)
        self.assertEqual(pickle.loads(pickle.dumps(r)), r)
        self.assertEqual(copy.deepcopy(r), r)
        self.assertEqual(len({r, Region(1, 2, right=4, bottom=6)}), 1)

    def test_internal_types_module_holds_the_shared_classes(self):
        import _stbt.types  # pylint: disable=import-outside-toplevel
        self.assertIs(_stbt.types.Region, stbt.Region)
        self.assertIs(_stbt.types.Keypress, stbt.Keypress)
        self.assertIs(_stbt.types.UITestFailure, stbt.UITestFailure)
        self.assertIs(_stbt.types.NoVideo, stbt.NoVideo)
        with self.assertRaises(AttributeError):
            _stbt.types.NoSuchName  # pylint: disable=pointless-statement

    def test_position_size_direction(self):
        self.assertEqual(tuple(stbt.Position(3, 4)), (3, 4))
        self.assertEqual(stbt.Position(3, 4).x, 3)
        self.assertEqual(stbt.Size(640, 480).height, 480)
        self.assertEqual({d.name for d in stbt.Direction}, {"HORIZONTAL", "VERTICAL"})


class MaskTest(unittest.TestCase):
    FRAME = Region(0, 0, 100, 50)

    def test_region_and_arithmetic(self):
        m = stbt.load_mask(Region(10, 10, 20, 20))
        self.assertIsInstance(m, stbt.Mask)
        array, box = m.to_array(self.FRAME)
        self.assertIsNone(array)  # a plain rectangle
        self.assertEqual(box, Region(10, 10, 20, 20))
        both = stbt.Mask(Region(0, 0, 10, 10)) + Region(50, 20, 10, 10)
        array, box = both.to_array(self.FRAME)
        self.assertEqual(box, Region(0, 0, right=60, bottom=30))
        self.assertEqual(int(array.sum() // 255), 200)
        hole = stbt.Mask(Region.ALL) - Region(0, 0, 50, 50)
        array, box = hole.to_array(self.FRAME)
        self.assertEqual(box, Region(50, 0, 50, 50))
        inverted = ~stbt.Mask(Region(0, 0, 50, 50))
        self.assertEqual(inverted.to_array(self.FRAME)[1], Region(50, 0, 50, 50))
        self.assertEqual(stbt.Mask(Region(0, 0, 50, 50), invert=True).to_array(self.FRAME)[1], Region(50, 0, 50, 50))
        three, _ = (stbt.Mask(Region(0, 0, 5, 5)) + Region(6, 6, 1, 1)).to_array(self.FRAME, color_channels=3)
        self.assertEqual(three.shape, (7, 7, 3))

    def test_from_file_array_alpha(self):
        d = tempfile.mkdtemp()
        img = np.zeros((50, 100), np.uint8)
        img[5:15, 20:40] = 255
        path = os.path.join(d, "mask.png")
        cv2.imwrite(path, img)
        self.assertEqual(stbt.load_mask(path).to_array(self.FRAME)[1], Region(20, 5, 20, 10))
        self.assertEqual(stbt.load_mask(img).to_array(self.FRAME)[1], Region(20, 5, 20, 10))
        bgra = np.zeros((50, 100, 4), np.uint8)
        bgra[1:3, 2:4, 3] = 255
        self.assertEqual(stbt.Mask.from_alpha_channel(bgra).to_array(self.FRAME)[1], Region(2, 1, 2, 2))
        with self.assertRaises(ValueError):
            stbt.load_mask(np.ones((10, 10), np.uint8)).to_array(self.FRAME)  # not the frame's size
        self.assertIn(stbt.Mask, stbt.MaskTypes.__args__)


class IsScreenBlackTest(unittest.TestCase):
    def setUp(self):
        os.environ["FARMHAND_TEST_PACK_DIR"] = self.dir = tempfile.mkdtemp()
        _config._reset()  # pylint: disable=protected-access
        self.frame = np.full((720, 1280, 3), 10, np.uint8)
        self.frame[600:680, 1000:1200] = 255  # a white channel banner

    def tearDown(self):
        os.environ.pop("FARMHAND_TEST_PACK_DIR", None)
        _config._reset()  # pylint: disable=protected-access

    def test_mask_threshold_and_result(self):
        r = stbt.is_screen_black(self.frame)
        self.assertFalse(r)
        self.assertFalse(r.black)
        self.assertIs(r.frame, self.frame)
        banner = Region(1000, 600, right=1200, bottom=680)
        self.assertTrue(stbt.is_screen_black(self.frame, mask=stbt.Mask(Region.ALL) - banner))
        self.assertTrue(stbt.is_screen_black(self.frame, mask=~stbt.Mask(banner)).black)
        self.assertTrue(stbt.is_screen_black(self.frame, region=Region(0, 0, 640, 720)))  # the older name
        grey = np.full((720, 1280, 3), 20, np.uint8)
        self.assertTrue(stbt.is_screen_black(grey))             # 20 is not brighter than 20
        self.assertFalse(stbt.is_screen_black(grey, threshold=19))
        mask_file = os.path.join(self.dir, "mask.png")
        m = np.full((720, 1280), 255, np.uint8)
        m[600:680, 1000:1200] = 0
        cv2.imwrite(mask_file, m)
        self.assertTrue(stbt.is_screen_black(self.frame, mask=mask_file))

    def test_mask_and_region_are_synonyms(self):
        dark = Region(0, 0, 640, 720)
        self.assertTrue(stbt.is_screen_black(self.frame, mask=dark))
        self.assertTrue(stbt.is_screen_black(self.frame, region=dark))
        self.assertTrue(stbt.is_screen_black(self.frame, None, None, dark))
        with self.assertRaisesRegex(ValueError, "Cannot specify mask and region"):
            stbt.is_screen_black(self.frame, mask=dark, region=dark)
        banners = Region(1000, 600, 20, 20) + Region(1100, 600, 20, 20)
        self.assertFalse(stbt.is_screen_black(self.frame, banners))
        self.assertTrue(stbt.is_screen_black(self.frame, ~Region(1000, 600, right=1200, bottom=680)))
        numpy_mask = np.zeros((720, 1280), np.uint8)
        numpy_mask[:100, :100] = 255
        self.assertTrue(stbt.is_screen_black(self.frame, numpy_mask))
        with self.assertRaises(ValueError):  # nothing of the frame to look at
            stbt.is_screen_black(self.frame, Region(2000, 2000, 5, 5))

    def test_threshold_default_from_stbt_conf(self):
        os.makedirs(os.path.join(self.dir, "config"))
        with open(os.path.join(self.dir, "config", "stbt.conf"), "w", encoding="utf-8") as f:
            f.write("[is_screen_black]\nthreshold = 5\n")
        _config._reset()  # pylint: disable=protected-access
        self.assertFalse(stbt.is_screen_black(np.full((72, 128, 3), 10, np.uint8)))
        self.assertTrue(stbt.is_screen_black(np.full((72, 128, 3), 5, np.uint8)))


if __name__ == "__main__":
    unittest.main()
