"""Motion of the stbt API on synthetic frame sequences: the differs
(BGRDiff's colour distance, GrayscaleDiff's similarity, erode, min_size),
masks and regions, detect_motion against the last frame with motion (slow
fades add up), its timeout on the frames' own clock, wait_for_motion's "N/M"
with its default from [motion], MotionTimeout; DetectMotion of _stbt.motion."""

import os
import shutil
import tempfile
import unittest

import cv2
import numpy as np

import stbt
from stbt import Region
from stbt_core import _config

W, H = 160, 90
FPS = 25.0


def frame(t, value=(40, 40, 40), boxes=()):
    """A frame at time ``t``: a plain colour with ``boxes`` ``(region, colour)`` drawn on it."""
    a = np.empty((H, W, 3), np.uint8)
    a[:] = value
    for region, colour in boxes:
        a[region.to_slice()] = colour
    return stbt.Frame(a, time=t)


def times(n, start=1000.0):
    return [start + i / FPS for i in range(n)]


BOX = Region(20, 20, width=30, height=20)


class DifferTest(unittest.TestCase):
    def test_bgrdiff_threshold_is_a_colour_distance(self):
        a = frame(0)
        near = frame(1, boxes=[(BOX, (40 + 14, 40 + 14, 40 + 14))])   # distance 24.2
        far = frame(1, boxes=[(BOX, (40 + 15, 40 + 15, 40 + 15))])    # distance 26.0
        self.assertFalse(stbt.BGRDiff().diff(a, near))
        r = stbt.BGRDiff().diff(a, far)
        self.assertTrue(r)
        self.assertEqual(r.time, 1)
        self.assertIs(r.frame, far)
        # the box of the change itself (the 2x2 erosion only drops changes 1 pixel wide or high)
        self.assertEqual(r.region, BOX)
        self.assertTrue(stbt.BGRDiff(threshold=20).diff(a, near))
        # a line 1 pixel high is noise to the erosion, kept without it (its box then exact too)
        line = frame(1, boxes=[(Region(5, 60, width=40, height=1), (255, 255, 255))])
        self.assertFalse(stbt.BGRDiff().diff(a, line))
        self.assertEqual(stbt.BGRDiff(erode=False).diff(a, line).region, Region(5, 60, width=40, height=1))
        self.assertEqual(stbt.GrayscaleDiff().diff(a, frame(1, boxes=[(BOX, (255, 255, 255))])).region, BOX)
        # one channel alone by 30 is a distance of 30
        self.assertTrue(stbt.BGRDiff().diff(a, frame(1, boxes=[(BOX, (40, 40, 70))])))

    def test_erode_ignores_lone_pixels_and_min_size_small_changes(self):
        a = frame(0)
        speck = frame(1, boxes=[(Region(70, 40, width=1, height=1), (255, 255, 255))])
        self.assertFalse(stbt.BGRDiff().diff(a, speck))
        r = stbt.BGRDiff(erode=False).diff(a, speck)
        self.assertTrue(r)
        self.assertEqual(r.region, Region(70, 40, width=1, height=1))
        big = frame(1, boxes=[(BOX, (255, 255, 255))])
        self.assertTrue(stbt.BGRDiff(min_size=(20, 10)).diff(a, big))
        self.assertFalse(stbt.BGRDiff(min_size=(40, 10)).diff(a, big))
        self.assertFalse(stbt.BGRDiff(min_size=(20, 30)).diff(a, big))

    def test_grayscalediff_threshold_is_a_similarity(self):
        a = frame(0, (100, 100, 100))
        b = frame(1, (100, 100, 100), boxes=[(BOX, (140, 140, 140))])  # 40/255 = 0.157 apart
        self.assertFalse(stbt.GrayscaleDiff().diff(a, b))      # (1 - 0.84) * 255 = 40.8
        self.assertTrue(stbt.GrayscaleDiff(threshold=0.85).diff(a, b))
        # a change of hue at the same brightness is no change in grey
        hue = frame(1, (100, 100, 100), boxes=[(BOX, (100 + 60, 100 - 30, 100))])
        grey = cv2.cvtColor(np.asarray(hue), cv2.COLOR_BGR2GRAY)[BOX.y, BOX.x]
        self.assertLess(abs(int(grey) - 100), 30)
        self.assertFalse(stbt.GrayscaleDiff().diff(a, hue))
        self.assertTrue(stbt.BGRDiff().diff(a, hue))
        with self.assertRaises(ValueError):
            stbt.GrayscaleDiff(threshold=25)

    def test_replace_and_mask(self):
        d = stbt.BGRDiff().replace(threshold=50, min_size=(2, 2))
        self.assertEqual((d.threshold, d.min_size, d.erode), (50, (2, 2), True))
        with self.assertRaises(TypeError):
            d.replace(colour=1)
        a, b = frame(0), frame(1, boxes=[(BOX, (255, 255, 255))])
        self.assertFalse(stbt.BGRDiff().diff(a, b, mask=Region(100, 0, right=160, bottom=90)))
        self.assertFalse(stbt.BGRDiff().diff(a, b, mask=~stbt.Mask(BOX.dilate(2))))
        r = stbt.BGRDiff().diff(a, b, mask=Region(30, 0, right=160, bottom=90))
        self.assertEqual(r.region, Region(30, 20, right=50, bottom=40))  # x=30 is inside the box


class DetectMotionTest(unittest.TestCase):
    def test_yields_one_result_per_frame_after_the_first(self):
        ts = times(5)
        seq = [frame(ts[0]), frame(ts[1]), frame(ts[2], boxes=[(BOX, (255, 255, 255))]),
               frame(ts[3], boxes=[(BOX, (255, 255, 255))]), frame(ts[4])]
        results = list(stbt.detect_motion(frames=seq))
        self.assertEqual([bool(r) for r in results], [False, True, False, True])
        self.assertEqual([r.time for r in results], ts[1:])
        self.assertIsNone(results[0].region)
        self.assertEqual(results[1].region, BOX)

    def test_slow_fade_adds_up_against_the_last_frame_with_motion(self):
        # 6 levels a frame: each frame is 10.4 from the one before (no motion
        # against the frame before), but the fourth is 31.2 from the first
        ts = times(8)
        seq = [frame(t, (40 + 6 * i,) * 3) for i, t in enumerate(ts)]
        results = list(stbt.detect_motion(frames=seq))
        self.assertEqual([bool(r) for r in results], [False, False, True, False, False, True, False])
        self.assertEqual(results[2].time, ts[3])
        self.assertEqual(results[2].region, Region(0, 0, W, H))

    def test_mask_region_and_mask_file(self):
        seq = [frame(t, boxes=[(BOX, (255, 255, 255))] if i % 2 else ()) for i, t in enumerate(times(4))]
        self.assertFalse(any(stbt.detect_motion(frames=seq, region=Region(80, 0, width=80, height=90))))
        self.assertFalse(any(stbt.detect_motion(frames=seq, mask=Region(0, 50, width=160, height=40))))
        self.assertTrue(all(stbt.detect_motion(frames=seq, region=Region(0, 0, width=40, height=40))))
        folder = tempfile.mkdtemp(prefix="stbt-motion-")
        self.addCleanup(shutil.rmtree, folder, True)
        path = os.path.join(folder, "mask.png")
        m = np.full((H, W), 255, np.uint8)
        m[BOX.dilate(1).to_slice()] = 0
        cv2.imwrite(path, m)
        self.assertFalse(any(stbt.detect_motion(frames=seq, mask=path)))
        self.assertTrue(all(stbt.detect_motion(frames=seq, mask=stbt.Mask(path, invert=True))))

    def test_threshold_and_noise_threshold_choose_the_differ(self):
        seq = [frame(1000.0), frame(1000.04, boxes=[(BOX, (60, 60, 60))])]  # distance 34.6, grey 20
        self.assertTrue(next(stbt.detect_motion(frames=seq)))
        self.assertFalse(next(stbt.detect_motion(frames=seq, threshold=40)))
        self.assertFalse(next(stbt.detect_motion(frames=seq, noise_threshold=0.84)))
        self.assertTrue(next(stbt.detect_motion(frames=seq, differ=stbt.GrayscaleDiff(threshold=0.95))))

    def test_stops_after_timeout_secs_of_the_frames_clock(self):
        seq = [frame(t) for t in times(100)]  # 4 s of frames
        self.assertEqual(len(list(stbt.detect_motion(timeout_secs=1, frames=seq))), 25)  # 1.04 s is past
        self.assertEqual(len(list(stbt.detect_motion(timeout_secs=None, frames=seq))), 99)


class DetectMotionOneFrameAtATimeTest(unittest.TestCase):
    """``_stbt.motion.DetectMotion`` / ``_stbt.diff.DetectMotion``: the comparison of detect_motion, frame by frame."""

    def test_diff_compares_with_the_last_frame_with_motion(self):
        from _stbt.motion import DetectMotion  # pylint: disable=import-outside-toplevel
        ts = times(5)
        detector = DetectMotion(stbt.BGRDiff(), frame(ts[0]))
        r = detector.diff(frame(ts[1], (50, 50, 50)))  # distance 17.3: no motion, the first frame stays
        self.assertFalse(r)
        self.assertEqual(r.time, ts[1])
        r = detector.diff(frame(ts[2], (60, 60, 60)))  # 34.6 from the first frame
        self.assertTrue(r)
        self.assertEqual(r.region, Region(0, 0, W, H))
        self.assertFalse(detector.diff(frame(ts[3], (70, 70, 70))))  # 17.3 from the frame with motion

    def test_the_differ_and_the_mask_are_the_given_ones(self):
        from _stbt.diff import DetectMotion  # pylint: disable=import-outside-toplevel
        before = frame(1000.0)
        after = frame(1000.04, boxes=[(BOX, (60, 60, 60))])  # distance 34.6, grey level 20
        self.assertTrue(DetectMotion(stbt.BGRDiff(), before).diff(after))
        self.assertFalse(DetectMotion(stbt.GrayscaleDiff(), before).diff(after))
        self.assertFalse(DetectMotion(stbt.BGRDiff(), before, mask=Region(80, 0, width=80, height=90)).diff(after))
        with self.assertRaises(ValueError):
            DetectMotion(stbt.BGRDiff(), before, mask=Region(500, 500, width=10, height=10))

    def test_threshold_diff_bgr_numpy_marks_squared_distances_from_the_threshold_up(self):
        from _stbt import diff  # pylint: disable=import-outside-toplevel
        a = np.zeros((4, 6, 3), np.uint8)
        b = a.copy()
        b[1, 2] = (1, 2, 3)  # squared distance 14
        got = diff._threshold_diff_bgr_numpy(a, b, 14)  # pylint: disable=protected-access
        self.assertEqual((got.dtype, got.shape), (np.uint8, (4, 6)))
        self.assertEqual(sorted(zip(*np.nonzero(got))), [(1, 2)])
        self.assertFalse(diff._threshold_diff_bgr_numpy(a, b, 15).any())  # pylint: disable=protected-access
        self.assertTrue(diff._threshold_diff_bgr_numpy(a, a, 0).all())  # pylint: disable=protected-access


class WaitForMotionTest(unittest.TestCase):
    def sequence(self, pattern):
        """Frames whose motion against the frame before follows ``pattern`` (a string of 0/1)."""
        ts = times(len(pattern) + 1)
        out, on = [frame(ts[0])], False
        for t, c in zip(ts[1:], pattern):
            if c == "1":
                on = not on
            out.append(frame(t, boxes=[(BOX, (255, 255, 255))] if on else ()))
        return out, ts

    def test_n_of_m(self):
        seq, ts = self.sequence("0101000110100")
        r = stbt.wait_for_motion(consecutive_frames="3/4", frames=seq)
        self.assertTrue(r)
        # motion in frames 2, 4, 8, 9 and 11: frames 8-11 have 1,1,0,1, the first being frame 8
        self.assertEqual(r.time, ts[8])
        r = stbt.wait_for_motion(consecutive_frames=2, frames=seq)  # 2 in a row
        self.assertEqual(r.time, ts[8])
        r = stbt.wait_for_motion(consecutive_frames="1/1", frames=seq)
        self.assertEqual(r.time, ts[2])
        with self.assertRaises(stbt.MotionTimeout) as cm:
            stbt.wait_for_motion(consecutive_frames="3/3", frames=seq, timeout_secs=5)
        self.assertIs(cm.exception.screenshot, seq[-1])
        self.assertEqual(cm.exception.timeout_secs, 5)
        self.assertIsInstance(cm.exception, stbt.UITestFailure)
        self.assertIn("5 seconds", str(cm.exception))
        for bad in ("3/2", "0/4", "x", "1/2/3"):
            with self.assertRaises(ValueError):
                stbt.wait_for_motion(consecutive_frames=bad, frames=seq)

    def test_default_consecutive_frames_from_the_motion_section(self):
        seq, ts = self.sequence("0" + "1" * 9 + "0" * 5 + "1" * 10)
        # built in: 10/20 -- frames 1-9 are not enough, 16-25 bring the count to 10 at frame 16
        r = stbt.wait_for_motion(frames=seq)
        self.assertEqual(r.time, ts[2])
        root = tempfile.mkdtemp(prefix="stbt-motion-")
        saved = os.environ.get("FARMHAND_TEST_PACK_DIR")

        def restore():
            shutil.rmtree(root, True)
            if saved is None:
                os.environ.pop("FARMHAND_TEST_PACK_DIR", None)
            else:
                os.environ["FARMHAND_TEST_PACK_DIR"] = saved
            _config._reset()  # pylint: disable=protected-access
        self.addCleanup(restore)
        os.makedirs(os.path.join(root, "config"))
        with open(os.path.join(root, "config", "stbt.conf"), "w") as f:
            f.write("[motion]\nconsecutive_frames = 10/10\n")
        os.environ["FARMHAND_TEST_PACK_DIR"] = root
        _config._reset()  # pylint: disable=protected-access
        r = stbt.wait_for_motion(frames=seq)
        self.assertEqual(r.time, ts[16])
        with self.assertRaises(stbt.MotionTimeout):
            stbt.wait_for_motion(frames=seq[:-1])



class ReprAndDefaultsTest(unittest.TestCase):
    def test_motion_result_repr_shows_the_frame_by_its_time(self):
        r = stbt.MotionResult(time=1700000000.12345, motion=True, region=Region(1, 2, right=3, bottom=4),
                              frame=stbt.Frame(np.zeros((4, 4, 3), np.uint8), time=1700000000.12345))
        self.assertEqual(repr(r), "MotionResult(time=1700000000.123, motion=True, "
                                  "region=Region(x=1, y=2, right=3, bottom=4), "
                                  "frame=<Frame(time=1700000000.123)>)")
        self.assertFalse(stbt.MotionResult(None, False, None, None))
        self.assertIn("time=None", repr(stbt.MotionResult(None, False, None, None)))

    def test_the_default_differ_is_replaceable(self):
        # distance 34.6 but a grey change of 20: motion for BGRDiff, none for GrayscaleDiff
        seq = [frame(1000.0), frame(1000.04, boxes=[(BOX, (60, 60, 60))])]
        self.assertIsInstance(stbt.detect_motion.differ, stbt.BGRDiff)
        saved = stbt.detect_motion.differ
        self.addCleanup(setattr, stbt.detect_motion, "differ", saved)
        stbt.detect_motion.differ = stbt.GrayscaleDiff()
        self.assertFalse(next(stbt.detect_motion(frames=seq)))
        with self.assertRaises(stbt.MotionTimeout):
            stbt.wait_for_motion(consecutive_frames=1, frames=seq)
        stbt.detect_motion.differ = stbt.GrayscaleDiff(threshold=0.95)
        self.assertTrue(next(stbt.detect_motion(frames=seq)))
        # a threshold given to the call applies to the replaced differ
        self.assertFalse(next(stbt.detect_motion(frames=seq, threshold=0.9)))

    def test_a_differ_subclass_of_ones_own(self):
        class BlueOnly(stbt.Differ):
            def preprocess(self, frame):
                return np.ascontiguousarray(np.asarray(frame)[:, :, 0])

            def _changed(self, a, b):
                return cv2.threshold(cv2.absdiff(a, b), self.threshold, 255, cv2.THRESH_BINARY)[1]

        seq = [frame(1000.0), frame(1000.04, boxes=[(BOX, (40, 40, 200))]),
               frame(1000.08, boxes=[(BOX, (200, 40, 200))])]
        results = list(stbt.detect_motion(frames=seq, differ=BlueOnly(threshold=10)))
        self.assertEqual([bool(r) for r in results], [False, True])
        self.assertEqual(BlueOnly(threshold=10).replace(min_size=(5, 5)).min_size, (5, 5))


class MaskAndRegionTest(unittest.TestCase):
    def test_region_is_the_older_name_of_a_rectangular_mask(self):
        seq = [frame(t, boxes=[(BOX, (255, 255, 255))] if i % 2 else ()) for i, t in enumerate(times(3))]
        left, right = Region(0, 0, width=60, height=90), Region(80, 0, width=80, height=90)
        self.assertTrue(all(stbt.detect_motion(frames=seq, region=left)))
        self.assertFalse(any(stbt.detect_motion(frames=seq, region=right)))
        self.assertFalse(any(stbt.detect_motion(frames=seq, mask=right)))
        with self.assertRaisesRegex(ValueError, "Cannot specify mask and region at the same time"):
            next(stbt.detect_motion(frames=seq, mask=left, region=right))
        # None (older stb-tester's default) is the whole frame
        self.assertTrue(all(stbt.detect_motion(frames=seq, mask=None)))
        self.assertTrue(all(stbt.detect_motion(frames=seq, mask=None, region=left)))

    def test_a_mask_that_covers_nothing_of_the_frame_is_an_error(self):
        seq = [frame(t) for t in times(3)]
        with self.assertRaisesRegex(ValueError, "doesn't overlap with the frame"):
            next(stbt.detect_motion(frames=seq, mask=np.zeros((H, W), np.uint8)))
        with self.assertRaisesRegex(ValueError, "doesn't overlap with the frame"):
            next(stbt.detect_motion(frames=seq, mask=Region(W + 10, 0, width=5, height=5)))
        with self.assertRaises(ValueError):
            stbt.BGRDiff().diff(seq[0], seq[1], mask=np.zeros((H, W), np.uint8))
        # a region partly outside is cut to the frame
        self.assertEqual(len(list(stbt.detect_motion(frames=seq, mask=Region(0, 0, right=W * 2, bottom=H * 9)))), 2)

    def test_the_no_overlap_error_starts_with_the_masks_name(self):
        # scripts match on this text: the mask as its repr shows it, then the complaint
        seq = [frame(t) for t in times(2)]
        for mask, name in ((np.zeros((H, W), np.uint8), "Mask(<Image>)"),
                           (~Region.ALL, "~Region.ALL")):
            with self.assertRaises(ValueError) as cm:
                next(stbt.detect_motion(frames=seq, mask=mask))
            self.assertTrue(str(cm.exception).startswith(name + " doesn't overlap with the frame"),
                            str(cm.exception))

    def test_preprocess_mask_gives_the_array_and_its_bounding_box(self):
        d = stbt.BGRDiff()
        array, box = d.preprocess_mask(Region(10, 20, width=30, height=5), Region(0, 0, W, H))
        self.assertIsNone(array)  # a plain rectangle needs no pixel mask
        self.assertEqual(box, Region(10, 20, width=30, height=5))
        m = np.zeros((H, W), np.uint8)
        m[30:40, 50:60] = 255
        m[35, 55] = 0
        array, box = d.preprocess_mask(m, Region(0, 0, W, H))
        self.assertEqual(box, Region(50, 30, width=10, height=10))
        self.assertEqual(array.shape, (10, 10))
        self.assertEqual(int(array[5, 5]), 0)


class ErodeTest(unittest.TestCase):
    def test_changes_one_pixel_wide_or_high_are_ignored_two_are_not(self):
        a = frame(0)
        for line, moves in ((Region(10, 10, width=1, height=50), False),
                            (Region(10, 10, width=60, height=1), False),
                            (Region(10, 10, width=2, height=50), True),
                            (Region(10, 10, width=60, height=2), True)):
            b = frame(1, boxes=[(line, (255, 255, 255))])
            self.assertEqual(bool(stbt.BGRDiff().diff(a, b)), moves, line)
            self.assertEqual(bool(stbt.GrayscaleDiff().diff(a, b)), moves, line)
            self.assertTrue(stbt.BGRDiff(erode=False).diff(a, b))



class ScratchArraysTest(unittest.TestCase):
    def test_back_to_back_diffs_of_other_sizes_and_masks_do_not_mix(self):
        # the differs reuse intermediate arrays; each answer must still be its own
        small_a, small_b = frame(0), frame(1, boxes=[(BOX, (255, 255, 255))])
        big_a = stbt.Frame(np.zeros((200, 300, 3), np.uint8), time=0)
        big_b = stbt.Frame(np.zeros((200, 300, 3), np.uint8), time=1)
        big_b[150:180, 200:260] = 200
        mask = np.zeros((H, W), np.uint8)
        mask[:, 35:] = 255
        for d in (stbt.BGRDiff(), stbt.GrayscaleDiff()):
            for _ in range(2):
                self.assertEqual(d.diff(small_a, small_b).region, BOX)
                self.assertEqual(d.diff(big_a, big_b).region, Region(200, 150, right=260, bottom=180))
                # the mask's edge is not eroded away
                self.assertEqual(d.diff(small_a, small_b, mask).region, Region(35, 20, right=50, bottom=40))
                self.assertFalse(d.diff(small_a, small_a))


if __name__ == "__main__":
    unittest.main()
