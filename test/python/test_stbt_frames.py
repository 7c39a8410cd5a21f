"""Frames and images of the stbt API: Frame, get_frame, frames(), Image,
load_image / find_file (searching up the call stack, color_channels, alpha),
save_frame, crop, Color (every constructor form), and the verbosity helpers."""

import os
import shutil
import sys
import tempfile
import unittest

import cv2
import numpy

import stbt
import stbt_core
from _fake_daemon import WithDaemon


class Frames(WithDaemon, unittest.TestCase):
    def test_get_frame_is_a_read_only_bgr_frame_with_its_capture_time(self):
        with self.daemon.cond:
            at = self.daemon.at
        f = stbt.get_frame()
        self.assertIsInstance(f, stbt.Frame)
        self.assertIsInstance(f, numpy.ndarray)
        self.assertEqual((f.width, f.height), (64, 36))
        self.assertEqual(f.region, stbt.Region(0, 0, 64, 36))
        self.assertEqual(f.shape, (36, 64, 3))
        self.assertEqual(list(f[0, 0]), [128, 0, 0])  # rgb24 (0, 0, 128) becomes BGR (128, 0, 0)
        self.assertEqual(list(f[5, 5]), [255, 255, 255])
        self.assertGreaterEqual(f.time, at / 1000.0)
        self.assertFalse(f.flags.writeable)
        self.assertEqual(f[2:4].time, f.time)  # slices keep the capture time

    def test_frames_yields_every_new_frame_in_order(self):
        seen = []
        for f in stbt.frames():
            seen.append((f._seq, f.time))  # pylint: disable=protected-access
            if len(seen) == 20:
                break
        seqs = [s for s, _ in seen]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + 20)), "a frame was skipped or repeated")
        times = [t for _, t in seen]
        self.assertEqual(times, sorted(times))
        self.assertEqual(len(set(times)), 20)

    def test_frames_stops_after_timeout_secs(self):
        got = list(stbt.frames(timeout_secs=0.3))
        # It ended by itself; every frame it gave was new.
        seqs = [f._seq for f in got]  # pylint: disable=protected-access
        self.assertEqual(seqs, sorted(set(seqs)))

    def test_a_pack_pinned_before_v29_gets_frame_and_timestamp_tuples(self):
        # `[test_pack] stbt_version` below 29: `for frame, timestamp in stbt.frames()`, as those versions yielded.
        from stbt_core import _config  # pylint: disable=import-outside-toplevel
        saved = os.environ.pop("STBT_CONFIG_FILE", None)
        try:
            for version, legacy in (("28", True), ("27.1", True), ("29", False), ("34", False), ("x", False)):
                _config.set_config("test_pack", "stbt_version", version)
                item = next(iter(stbt.frames(timeout_secs=5)))
                if legacy:
                    frame, timestamp = item
                    self.assertIsInstance(frame, stbt.Frame, version)
                    self.assertEqual(timestamp, int(round(frame.time * 1e9)), version)
                else:
                    self.assertIsInstance(item, stbt.Frame, version)
            # The API's own loops take frames either way: wait_for_match on a pack pinned to 28.
            _config.set_config("test_pack", "stbt_version", "28")
            template = numpy.zeros((12, 12, 3), numpy.uint8)
            template[:] = (128, 0, 0)
            template[2:10, 2:10] = 255
            self.assertTrue(stbt.wait_for_match(template, timeout_secs=5))
            self.assertIsInstance(next(stbt.detect_motion(timeout_secs=5)).frame, stbt.Frame)
        finally:
            _config.set_config("test_pack", "stbt_version", None)
            if saved is not None:
                os.environ["STBT_CONFIG_FILE"] = saved

    def test_frames_is_the_source_of_wait_for_match(self):
        template = numpy.zeros((12, 12, 3), numpy.uint8)
        template[:] = (128, 0, 0)
        template[2:10, 2:10] = 255
        result = stbt.wait_for_match(template, timeout_secs=5)
        self.assertTrue(result)
        self.assertEqual(result.region, stbt.Region(2, 2, width=12, height=12))


class NoCapture(WithDaemon, unittest.TestCase):
    CAPTURE = False

    def test_no_video_is_a_failure_class(self):
        with self.assertRaises(stbt.NoVideo):
            stbt.get_frame()
        self.assertTrue(issubclass(stbt.NoVideo, stbt.UITestFailure))


class Files(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="stbt-files-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def write_module(self, folder, name, text):
        os.makedirs(os.path.join(self.dir, folder), exist_ok=True)
        with open(os.path.join(self.dir, folder, name + ".py"), "w") as f:
            f.write(text)

    def png(self, path, array):
        full = os.path.join(self.dir, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        cv2.imwrite(full, array)
        return full

    def test_load_image_searches_the_callers_folder_then_up_the_stack_then_the_working_directory(self):
        # tests/a.py calls lib/helper.py's load(), which loads "img.png": found beside tests/a.py.
        self.write_module("lib", "helper", "import stbt\ndef load(name):\n    return stbt.load_image(name)\n")
        self.write_module("tests", "a", "import helper\ndef go(name):\n    return helper.load(name)\n")
        folders = [os.path.join(self.dir, "lib"), os.path.join(self.dir, "tests")]
        sys.path[0:0] = folders
        self.addCleanup(lambda: [sys.path.remove(p) for p in folders])
        self.addCleanup(lambda: [sys.modules.pop(m, None) for m in ("helper", "a")])
        import a  # pylint: disable=import-error,import-outside-toplevel
        beside_test = self.png("tests/img.png", numpy.full((4, 5, 3), 7, numpy.uint8))
        img = a.go("img.png")
        self.assertEqual(img.absolute_filename, beside_test)
        self.assertEqual(img.filename, "img.png")
        self.assertEqual((img.width, img.height), (5, 4))
        # The innermost caller wins: a copy beside lib/helper.py is found first.
        beside_helper = self.png("lib/img.png", numpy.full((4, 5, 3), 9, numpy.uint8))
        self.assertEqual(a.go("img.png").absolute_filename, beside_helper)
        self.assertEqual(a.go("img.png")[0, 0, 0], 9)
        # Not beside any caller: the working directory.
        cwd = os.getcwd()
        os.chdir(self.dir)
        self.addCleanup(os.chdir, cwd)
        only_here = self.png("cwd-only.png", numpy.zeros((2, 2, 3), numpy.uint8))
        self.assertEqual(a.go("cwd-only.png").absolute_filename, only_here)
        self.assertEqual(stbt.find_file("cwd-only.png"), only_here)
        with self.assertRaises(FileNotFoundError):
            a.go("nowhere.png")
        with self.assertRaises(FileNotFoundError):
            stbt.find_file("nowhere.png")

    def test_load_image_keeps_transparency_only_where_there_is_some(self):
        bgra = numpy.zeros((6, 6, 4), numpy.uint8)
        bgra[:, :, :3] = (10, 20, 30)
        bgra[:, :, 3] = 255
        opaque = self.png("opaque.png", bgra)
        bgra[0, 0, 3] = 0
        transparent = self.png("transparent.png", bgra)
        self.assertEqual(stbt.load_image(opaque).shape, (6, 6, 3))
        img = stbt.load_image(transparent)
        self.assertEqual(img.shape, (6, 6, 4))
        self.assertEqual(img[0, 0, 3], 0)
        self.assertEqual(stbt.load_image(transparent, color_channels=(3,)).shape, (6, 6, 3))
        self.assertEqual(stbt.load_image(transparent, color_channels=1).shape, (6, 6, 1))  # always 3-D
        grey = self.png("grey.png", numpy.full((3, 3), 50, numpy.uint8))
        self.assertEqual(stbt.load_image(grey).shape, (3, 3, 3))
        self.assertIsInstance(stbt.load_image(grey), stbt.Image)

    def test_save_frame_and_crop(self):
        frame = stbt.Frame(numpy.arange(4 * 6 * 3, dtype=numpy.uint8).reshape(4, 6, 3), time=12.5)
        part = stbt.crop(frame, stbt.Region(1, 2, right=4, bottom=4))
        self.assertEqual(part.shape, (2, 3, 3))
        self.assertTrue(numpy.shares_memory(part, frame))
        self.assertEqual(part.time, 12.5)
        self.assertEqual(stbt.crop(frame, stbt.Region.ALL).shape, frame.shape)
        with self.assertRaises(ValueError):
            stbt.crop(frame, stbt.Region(10, 10, 2, 2))
        path = os.path.join(self.dir, "sub", "saved.png")
        stbt.save_frame(frame, path)
        self.assertTrue((cv2.imread(path) == frame).all())


class FrameAndImageValues(unittest.TestCase):
    def test_frame_keeps_its_time(self):
        f = stbt.Frame(numpy.zeros((6, 8, 3), numpy.uint8), time=1466002032.335607)
        self.assertEqual(stbt.Frame(f).time, f.time)
        self.assertEqual(f.copy().time, f.time)
        self.assertEqual(f[1:3, 2:, 0].time, f.time)
        self.assertEqual((f[1:3, 2:, 0].width, f[1:3, 2:, 0].height), (6, 2))
        self.assertEqual(repr(f), "<Frame(time=1466002032.336)>")
        self.assertEqual(repr(stbt.Frame(numpy.zeros((2, 2, 3), numpy.uint8))), "<Frame(time=None)>")
        self.assertEqual(repr(numpy.max(f)), "<Frame(time=1466002032.336)>")

    def test_image_from_array(self):
        a = numpy.zeros((6, 8, 3), numpy.uint8)
        img = stbt.load_image(a)
        self.assertTrue(numpy.shares_memory(a, img))
        self.assertEqual((img.filename, img.absolute_filename, img.relative_filename), (None, None, None))
        self.assertIs(stbt.load_image(img), img)
        self.assertEqual(repr(img), "<Image(filename=None, dimensions=8x6x3)>")
        self.assertEqual(repr(numpy.max(img)), "Image(0, dtype=uint8)")
        for shape in [(6, 8), (6, 8, 1), (6, 8, 3), (6, 8, 4)]:
            for channels in [(1,), (3,), (4,), (1, 3), (1, 4), (3, 4), (1, 3, 4)]:
                out = stbt.load_image(numpy.zeros(shape, numpy.uint8), color_channels=channels)
                self.assertIn(out.shape[2], channels, (shape, channels))

    def test_alpha_is_all_or_nothing(self):
        a = numpy.full((1, 3, 4), 255, numpy.uint8)
        a[0, :, 3] = (0, 127, 255)
        self.assertEqual(list(stbt.load_image(a)[0, :, 3]), [0, 0, 255])
        self.assertEqual(list(a[0, :, 3]), [0, 127, 255])  # the caller's array is left alone

    def test_crop_none_and_outside(self):
        frame = numpy.zeros((6, 8, 3), numpy.uint8)
        with self.assertRaises(TypeError):
            stbt.crop(frame, None)
        with self.assertRaises(ValueError):
            stbt.crop(frame, stbt.Region(-5, -5, right=0, bottom=0))
        inf = float("inf")
        self.assertEqual(stbt.crop(frame, stbt.Region(-inf, -inf, right=2, bottom=3)).shape, (3, 2, 3))

    def test_missing_file_message(self):
        with self.assertRaisesRegex(FileNotFoundError, r"^\[Errno 2\] No such file: 'not-here.png'$"):
            stbt.load_image("not-here.png")

    def test_relative_filename_follows_test_pack_root(self):
        d = tempfile.mkdtemp()
        os.makedirs(os.path.join(d, "images"))
        path = os.path.join(d, "images", "x.png")
        cv2.imwrite(path, numpy.zeros((2, 2, 3), numpy.uint8))
        before = stbt_core.TEST_PACK_ROOT
        stbt_core.TEST_PACK_ROOT = d
        try:
            self.assertEqual(stbt.load_image(path).relative_filename, os.path.join("images", "x.png"))
        finally:
            stbt_core.TEST_PACK_ROOT = before

    def test_scoped_debug_level(self):
        from _stbt.logging import get_debug_level, scoped_debug_level  # pylint: disable=import-outside-toplevel
        level = get_debug_level()
        with scoped_debug_level(2):
            self.assertEqual(get_debug_level(), 2)
        self.assertEqual(get_debug_level(), level)


class Colors(unittest.TestCase):
    def test_forms(self):
        self.assertEqual(list(stbt.Color("#ff8000")), [0, 128, 255])
        self.assertEqual(stbt.Color("#ff8000"), stbt.Color(0, 128, 255))
        self.assertEqual(stbt.Color((0, 128, 255)), stbt.Color(stbt.Color("ff8000")))
        self.assertEqual(stbt.Color("#ff800080")[3], 128)
        self.assertEqual(stbt.Color(0, 128, 255).hexstring, "#ff8000")
        with self.assertRaises(ValueError):
            stbt.Color("orange")
        with self.assertRaises(ValueError):
            stbt.Color(0, 300, 0)

    def test_short_hex_keywords_and_pixels(self):
        self.assertEqual(stbt.Color("#1a3").hexstring, "#11aa33")
        self.assertEqual(stbt.Color("1A3F").hexstring, "#11aa33ff")
        self.assertEqual(stbt.Color(hexstring="#102030").hexstring, "#102030")
        self.assertEqual(stbt.Color(bgr=(3, 2, 1)).hexstring, "#010203")
        self.assertEqual(stbt.Color(bgra=(3, 2, 1, 4)).hexstring, "#01020304")
        self.assertEqual(stbt.Color(blue=3, green=2, red=1).hexstring, "#010203")
        self.assertEqual(stbt.Color(blue=3, green=2, red=1, alpha=0).hexstring, "#01020300")
        pixel = numpy.array([[[9, 8, 7]]], numpy.uint8)[0, 0]
        self.assertEqual(stbt.Color(pixel).hexstring, "#070809")
        for bad in ("#12345", "#1234567", "#12345x", ""):
            with self.assertRaises(ValueError):
                stbt.Color(bad)
        with self.assertRaises(ValueError):
            stbt.Color(1, -2, 3)
        for args, kwargs in [((), {}), ((1, 2), {}), ((), {"blue": 1, "green": 2}), (("#000",), {"bgr": (1, 2, 3)})]:
            with self.assertRaises(TypeError):
                stbt.Color(*args, **kwargs)

    def test_equal_colours_hash_alike(self):
        self.assertEqual(stbt.Color("#000"), stbt.Color(0, 0, 0))
        self.assertNotEqual(stbt.Color("#000"), stbt.Color("#000001"))
        seen = {stbt.Color("#fff"): 1}
        seen[stbt.Color(255, 255, 255)] = 2
        self.assertEqual(list(seen.values()), [2])
        self.assertEqual(repr(stbt.Color("#0a0b0c")), "Color('#0a0b0c')")

    def test_same_module_under_both_names(self):
        self.assertIs(stbt, stbt_core)
        self.assertIs(stbt.Color, stbt_core.Color)


if __name__ == "__main__":
    unittest.main()
