"""stbt's mask algebra: Regions and Masks combined with +, |, - and ~, None as
the empty mask, equality and reprs of the expressions, to_array (bounding
box, cropped read-only array, memoised, ValueError when nothing overlaps or
the sizes differ; the whole frame with shape=), masks from files, arrays
(a loaded image's repr names its file) and alpha channels, and the
private helpers _stbt.mask._to_array and _stbt.imgutils._image_region."""

import os
import tempfile
import unittest

import cv2
import numpy as np

import stbt
from stbt_core import _frames, _mask

Region, Mask = stbt.Region, stbt.Mask
FRAME = Region(0, 0, 8, 5)


def picture(mask):
    """The mask over FRAME as rows of '#' (in) and '-' (out)."""
    a = _mask._to_array(mask, FRAME)  # pylint: disable=protected-access
    return ["".join("#" if a[y, x, 0] else "-" for x in range(FRAME.width)) for y in range(FRAME.height)]


class AlgebraTest(unittest.TestCase):
    a = Region(0, 0, 3, 2)
    b = Region(5, 1, right=8, bottom=5)
    c = Region(2, 1, 2, 3)

    def test_regions_combine_into_masks(self):
        self.assertEqual(picture(self.a + self.b), ["###-----", "###--###", "-----###", "-----###", "-----###"])
        self.assertEqual(picture(self.a - self.c), ["###-----", "##------", "--------", "--------", "--------"])
        self.assertEqual(picture(~self.a), ["---#####", "---#####", "########", "########", "########"])
        self.assertEqual(picture(~~self.a), picture(Mask(self.a)))
        self.assertEqual(picture(Region.ALL - self.a), picture(~self.a))
        self.assertEqual(picture(self.a - ~self.c), ["--------", "--#-----", "--------", "--------", "--------"])

    def test_bar_is_the_same_union_as_plus(self):
        self.assertEqual(self.a | self.b, self.a + self.b)
        self.assertEqual(picture(self.a | self.b), picture(self.a + self.b))
        self.assertEqual(picture(Mask(self.a) | self.c), picture(self.a + self.c))
        self.assertEqual(picture(self.c | Mask(self.a)), picture(self.c + self.a))
        self.assertEqual(picture(~self.a | self.a), ["#" * 8] * 5)
        self.assertEqual(picture(self.a | None), picture(Mask(self.a)))
        pixels = np.zeros((5, 8), np.uint8)
        self.assertEqual(repr(pixels | Mask(self.a)), "Mask(<Image>) + %r" % (self.a,))
        with self.assertRaisesRegex(TypeError, "unsupported operand type"):
            _ = self.a | 1

    def test_reprs_read_as_written(self):
        a, b, c = self.a, self.b, self.c
        self.assertEqual(repr(Mask(a)), repr(a))
        self.assertEqual(repr(~a), "~" + repr(a))
        self.assertEqual(repr(a + b - c), "%r + %r - %r" % (a, b, c))
        self.assertEqual(repr(a - (b + c)), "%r - (%r + %r)" % (a, b, c))
        self.assertEqual(repr(~(a + b)), "~(%r + %r)" % (a, b))
        self.assertEqual(repr(~~a), repr(a))
        self.assertEqual(repr(Mask(None)), "~Region.ALL")
        self.assertEqual(repr(Mask(Region.ALL)), "Region.ALL")
        self.assertEqual(repr(Mask(np.zeros((2, 2), np.uint8))), "Mask(<Image>)")

    def test_none_is_the_empty_mask(self):
        self.assertEqual(picture(self.a + None), picture(Mask(self.a)))
        self.assertEqual(picture(None + self.a), picture(Mask(self.a)))
        self.assertEqual(picture(self.a - None), picture(Mask(self.a)))
        self.assertEqual(picture(None - Mask(self.a)), ["-" * 8] * 5)
        self.assertEqual(picture(~Region.ALL), picture(Mask(None)))
        with self.assertRaisesRegex(TypeError, "unsupported operand type"):
            _ = None + None

    def test_image_arrays_combine_on_either_side(self):
        pixels = np.zeros((5, 8), np.uint8)
        pixels[4, 7] = 255
        self.assertEqual(repr(self.a + pixels), "%r + Mask(<Image>)" % (self.a,))
        self.assertEqual(repr(pixels - Mask(self.a)), "Mask(<Image>) - %r" % (self.a,))
        self.assertEqual((self.a + pixels).to_array(FRAME)[1], FRAME)

    def test_other_operands_are_type_errors(self):
        for bad in (lambda: self.a + 1, lambda: 1 + self.a, lambda: self.a - 1.5, lambda: 2 - Mask(self.a),
                    lambda: Mask(self.a) + [1]):
            with self.assertRaisesRegex(TypeError, "unsupported operand type"):
                bad()

    def test_equality_and_hash(self):
        a = self.a
        self.assertEqual(Mask(a), a)
        self.assertEqual(a, Mask(a))
        self.assertEqual(Mask(a), ~~Mask(a))
        self.assertEqual(a + self.b, a + self.b)
        self.assertNotEqual(a + self.b, self.b + a)  # expressions, not pixel sets
        self.assertNotEqual(Mask(a), a.translate(1, 0))
        self.assertNotEqual(Mask(None), None)
        self.assertEqual(Mask(None), ~Mask(Region.ALL))
        self.assertEqual(len({Mask(a), Mask(a), a + self.b, a + self.b}), 2)
        # equal objects hash alike, a Mask of one Region and that Region too (one set entry, one dict key)
        self.assertEqual(hash(Mask(a)), hash(a))
        self.assertEqual(len({a, Mask(a)}), 1)
        self.assertEqual({Mask(a): 1}.get(a), 1)
        pixels = np.zeros((5, 8), np.uint8)
        pixels[1, 1] = 255
        self.assertEqual(Mask(pixels), Mask(pixels.copy()))

    def test_region_methods_are_class_only(self):
        with self.assertRaises(AttributeError):
            self.a.intersect(self.b)  # pylint: disable=no-member
        with self.assertRaises(AttributeError):
            self.a.bounding_box(self.b)  # pylint: disable=no-member
        self.assertEqual(Region.intersect(self.a, self.c), Region(2, 1, 1, 1))


class ToArrayTest(unittest.TestCase):
    def test_rectangle_gives_no_array(self):
        self.assertEqual(Mask(Region(2, 1, 3, 3)).to_array(FRAME), (None, Region(2, 1, 3, 3)))
        self.assertEqual(Mask(Region(6, 3, 10, 10)).to_array(FRAME), (None, Region(6, 3, right=8, bottom=5)))
        self.assertEqual(Mask(Region.ALL).to_array(FRAME), (None, FRAME))

    def test_shapes_channels_and_box(self):
        m = Region(0, 0, 1, 1) + Region(3, 2, 1, 1)
        array, box = m.to_array(FRAME)
        self.assertEqual(box, Region(0, 0, right=4, bottom=3))
        self.assertEqual(array.shape, (3, 4, 1))
        self.assertEqual((array[0, 0, 0], array[2, 3, 0], array[1, 1, 0]), (255, 255, 0))
        three, _ = m.to_array(FRAME, color_channels=3)
        self.assertEqual(three.shape, (3, 4, 3))
        self.assertTrue((three == array).all())

    def test_memoised_and_read_only(self):
        first, _ = (Region(0, 0, 1, 1) + Region(3, 3, 1, 1)).to_array(FRAME)
        again, _ = (Region(0, 0, 1, 1) + Region(3, 3, 1, 1)).to_array(FRAME)
        self.assertIs(first, again)
        self.assertIsNot(first, (Region(0, 0, 1, 1) + Region(3, 3, 1, 1)).to_array(FRAME, color_channels=3)[0])
        with self.assertRaises(ValueError):
            first[0, 0, 0] = 1

    def test_nothing_inside_the_frame_is_a_value_error(self):
        for empty in (Mask(None), ~Mask(Region.ALL), Mask(Region(20, 20, 5, 5)),
                      Region(0, 0, 2, 2) - Region(0, 0, 4, 4), Mask(np.zeros((5, 8), np.uint8))):
            with self.assertRaisesRegex(ValueError, r"doesn't overlap with the frame's Region\(x=0, y=0"):
                empty.to_array(FRAME)

    def test_shape_form_gives_the_whole_frame(self):
        m = Region(0, 0, 1, 1) + Region(3, 2, 1, 1)
        whole = m.to_array(shape=(5, 8, 1))
        self.assertEqual(whole.shape, (5, 8, 1))
        self.assertEqual(picture(m), ["".join("#" if whole[y, x, 0] else "-" for x in range(8)) for y in range(5)])
        self.assertEqual(m.to_array(shape=(5, 8, 3)).shape, (5, 8, 3))
        self.assertEqual(m.to_array(shape=(5, 8)).shape, (5, 8, 1))  # no channels given: one
        self.assertIs(m.to_array((5, 8, 1)), whole)  # a bare tuple is a shape; memoised
        with self.assertRaises(ValueError):
            whole[0, 0, 0] = 0
        # an empty mask is all black here, not a ValueError
        self.assertEqual(int(Mask(None).to_array(shape=(5, 8, 1)).sum()), 0)
        with self.assertRaisesRegex(ValueError, "doesn't match required shape"):
            Mask(np.zeros((5, 8), np.uint8)).to_array(shape=(2, 2, 1))

    def test_whole_frame_private_helpers(self):
        full = _mask._to_array(Region(1, 1, 2, 2), FRAME)  # pylint: disable=protected-access
        self.assertEqual(full.shape, (5, 8, 1))
        self.assertEqual(int(full.sum()) // 255, 4)
        self.assertEqual(int(_mask._to_array(None, FRAME).sum()), 0)  # pylint: disable=protected-access
        self.assertEqual(_frames._image_region(np.zeros((5, 8, 3))), FRAME)  # pylint: disable=protected-access
        import _stbt.imgutils  # pylint: disable=import-outside-toplevel
        import _stbt.mask  # pylint: disable=import-outside-toplevel
        self.assertIs(_stbt.mask._to_array, _mask._to_array)  # pylint: disable=protected-access
        self.assertIs(_stbt.imgutils._image_region, _frames._image_region)  # pylint: disable=protected-access


class SourcesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def png(self, name, array):
        path = os.path.join(self.dir, name)
        cv2.imwrite(path, array)
        return path

    def test_file_mask(self):
        pixels = np.zeros((5, 8), np.uint8)
        pixels[:, 4:] = 255
        path = self.png("right-half.png", pixels)
        m = Mask(path)
        self.assertEqual(repr(m), "Mask(%r)" % path)
        self.assertEqual(m.to_array(FRAME), (None, Region(4, 0, right=8, bottom=5)))
        self.assertIs(Mask(path).to_array(Region(0, 0, 8, 5))[1], m.to_array(FRAME)[1])  # memoised
        self.assertEqual((~m).to_array(FRAME)[1], Region(0, 0, 4, 5))
        self.assertEqual(repr(m + Region(0, 0, 1, 1)), "Mask(%r) + Region(x=0, y=0, right=1, bottom=1)" % path)
        with self.assertRaisesRegex(ValueError, r"shape \(5, 8, 1\) doesn't match required shape \(8, 5, 1\)"):
            m.to_array(Region(0, 0, 5, 8))

    def test_array_masks_of_any_channels(self):
        two_d = np.zeros((5, 8), np.uint8)
        two_d[1:3, 1:3] = 255
        for a in (two_d, two_d[:, :, None], cv2.cvtColor(two_d, cv2.COLOR_GRAY2BGR)):
            self.assertEqual(Mask(a).to_array(FRAME), (None, Region(1, 1, 2, 2)))
        self.assertEqual(Mask(two_d, invert=True), ~Mask(two_d))

    def test_mask_of_a_loaded_image_names_its_file(self):
        pixels = np.zeros((5, 8), np.uint8)
        pixels[:2, :2] = 255
        img = stbt.load_image(self.png("corner.png", pixels))
        self.assertTrue(img.relative_filename.endswith("corner.png"))
        self.assertEqual(repr(Mask(img)), "Mask(%r)" % (img.relative_filename,))
        self.assertEqual(repr(~Mask(img[:, :, 0])), "~Mask(%r)" % (img.relative_filename,))
        self.assertEqual(Mask(img).to_array(FRAME), (None, Region(0, 0, 2, 2)))
        self.assertEqual(repr(Mask(np.asarray(img))), "Mask(<Image>)")  # a plain array has no file

    def test_from_alpha_channel(self):
        bgra = np.full((5, 8, 4), 255, np.uint8)
        bgra[:, 2:4, 3] = 0
        bgra[0, 0, 3] = 200  # partly transparent counts as transparent
        m = Mask.from_alpha_channel(self.png("holes.png", bgra))
        array, box = m.to_array(FRAME)
        self.assertEqual(box, FRAME)
        self.assertEqual((array[0, 0, 0], array[1, 0, 0], array[1, 2, 0]), (0, 255, 0))
        self.assertEqual((~m).to_array(FRAME)[1], Region(0, 0, 4, 5))
        opaque = self.png("opaque.png", np.zeros((5, 8, 3), np.uint8))
        self.assertEqual(Mask.from_alpha_channel(opaque), Region(0, 0, 8, 5))


if __name__ == "__main__":
    unittest.main()
