"""Frames and images of the stbt API: Frame, get_frame, frames(), Image,
load_image / find_file (searching up the call stack), save_frame, crop, Color."""

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
        sys.path[0:0] = [os.path.join(self.dir, "lib"), os.path.join(self.dir, "tests")]
        self.addCleanup(lambda: [sys.path.remove(p) for p in (os.path.join(self.dir, "lib"), os.path.join(self.dir, "tests"))])
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

    def test_same_module_under_both_names(self):
        self.assertIs(stbt, stbt_core)
        self.assertIs(stbt.Color, stbt_core.Color)


if __name__ == "__main__":
    unittest.main()
