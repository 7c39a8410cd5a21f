"""The record of each check (stbt_core/_checks.py): one JSON line per check
in checks.jsonl of the result folder, with the frame saved off the test's
thread, failing checks always kept and passing ones sampled."""

import json
import os
import shutil
import sys
import tempfile
import threading
import unittest

import cv2
import numpy

import stbt
from stbt_core import _checks, _config, _ocr_tesseract
from _fake_daemon import WithDaemon
from _env import restore_env

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def picture(text=None, square_at=None):
    a = numpy.zeros((360, 640, 3), numpy.uint8)
    a[:] = (60, 30, 20)
    if square_at is not None:
        x, y = square_at
        a[y:y + 40, x:x + 40] = (0, 200, 255)
        a[y + 10:y + 30, x + 10:x + 30] = (255, 255, 255)
    if text is not None:
        ft = cv2.freetype.createFreeType2()
        ft.loadFontData(FONT, 0)
        ft.putText(a, text, (40, 100), 32, (255, 255, 255), -1, cv2.LINE_AA, False)
    return a


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="stbt-checks-")
        self.pack = tempfile.mkdtemp(prefix="stbt-checks-pack-")
        self.saved = {k: os.environ.get(k) for k in
                      ("FARMHAND_CHECKS_DIR", "FARMHAND_CONTROL_SOCKET", "FARMHAND_TEST_PACK_DIR", "FARMHAND_CONFIG")}
        os.environ["FARMHAND_CHECKS_DIR"] = self.dir
        os.environ["FARMHAND_TEST_PACK_DIR"] = self.pack
        os.environ.pop("FARMHAND_CONTROL_SOCKET", None)
        os.environ.pop("FARMHAND_CONFIG", None)
        _config._reset()  # pylint: disable=protected-access
        _ocr_tesseract._cache.clear()  # pylint: disable=protected-access
        _checks.flush()

    def tearDown(self):
        _checks.flush()
        restore_env(self.saved)
        _config._reset()  # pylint: disable=protected-access
        shutil.rmtree(self.dir, True)
        shutil.rmtree(self.pack, True)

    def records(self):
        _checks.flush()
        path = os.path.join(self.dir, "checks.jsonl")
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f]


class RecordFormat(Base):
    def test_a_failed_wait_for_match_keeps_the_closest_frame_both_passes_and_the_template(self):
        template = picture(square_at=(0, 0))[0:40, 0:40].copy()
        frames = [stbt.Frame(picture(), time=100.0 + i / 25) for i in range(5)]
        with self.assertRaises(stbt.MatchTimeout):
            stbt.wait_for_match(template, timeout_secs=1, frames=frames, region=stbt.Region(10, 20, 300, 200))
        (rec,) = self.records()
        self.assertEqual(rec["kind"], "wait_for_match")
        self.assertIs(rec["passed"], False)
        self.assertEqual(rec["region"], {"x": 10, "y": 20, "width": 300, "height": 200})
        self.assertEqual(rec["threshold"], rec["params"]["match_threshold"])
        self.assertLess(rec["score"], rec["threshold"])
        self.assertIs(rec["first_pass"]["passed"], False)
        self.assertIsNone(rec["confirm"]["passed"])  # the confirm pass did not run
        self.assertIn(rec["time"], [f.time for f in frames])
        self.assertEqual(rec["frame_size"], [640, 360])
        saved = cv2.imread(os.path.join(self.dir, rec["frame"]))
        self.assertEqual(saved.shape, (360, 640, 3))
        tpl = cv2.imread(os.path.join(self.dir, rec["template"]))
        self.assertTrue(numpy.array_equal(tpl, template))
        self.assertTrue(rec["frame"].startswith("checks/") and rec["template"].startswith("checks/"))

    def test_a_match_that_passes_the_first_pass_only_says_which_pass_failed(self):
        frame = stbt.Frame(picture(square_at=(100, 100)), time=5.0)
        template = picture(square_at=(0, 0))[0:40, 0:40].copy()
        template[15:25, 15:25] = (0, 0, 0)  # close, but not pixel for pixel
        params = stbt.MatchParameters(match_threshold=0.5, confirm_threshold=0.1)
        result = stbt.match(template, frame, match_parameters=params)
        self.assertFalse(result)
        (rec,) = self.records()
        self.assertEqual(rec["kind"], "match")
        self.assertIs(rec["first_pass"]["passed"], True)
        self.assertIs(rec["confirm"]["passed"], False)
        self.assertEqual(rec["match_region"], {"x": 100, "y": 100, "width": 40, "height": 40})

    def test_match_text_keeps_the_words_boxed_in_frame_coordinates_with_their_confidence(self):
        frame = stbt.Frame(picture("Evening News"), time=7.0)
        result = stbt.match_text("Weather", frame, region=stbt.Region(20, 85, 400, 60))
        self.assertFalse(result)
        (rec,) = self.records()
        self.assertEqual(rec["kind"], "match_text")
        self.assertIs(rec["passed"], False)
        self.assertEqual(rec["text"], "Weather")
        self.assertEqual(rec["region"], {"x": 20, "y": 85, "width": 400, "height": 60})
        texts = [w["text"] for w in rec["words"]]
        self.assertEqual(texts, ["Evening", "News"])
        for w in rec["words"]:
            self.assertGreaterEqual(w["x"], 20)
            self.assertLessEqual(w["x"] + w["width"], 420)
            self.assertGreaterEqual(w["y"], 85)
            self.assertGreater(w["conf"], 50)
        self.assertTrue(any(step.startswith("upsample x") for step in rec["preprocessing"]), rec["preprocessing"])
        self.assertIn("one line of text found: read as SINGLE_LINE (psm 7)", rec["preprocessing"])
        self.assertEqual(rec["params"]["mode"], 3)  # PAGE_SEGMENTATION_WITHOUT_OSD, as asked
        self.assertEqual(rec["params"]["read_mode"], 7)  # SINGLE_LINE, as read

    def test_ocr_keeps_the_text_and_the_words_read_on_the_writer_thread(self):
        frame = stbt.Frame(picture("Evening News"), time=8.0)
        self.assertEqual(stbt.ocr(frame, region=stbt.Region(20, 85, 400, 60)), "Evening News")
        (rec,) = self.records()
        self.assertEqual(rec["kind"], "ocr")
        self.assertIsNone(rec["passed"])
        self.assertEqual(rec["text"], "Evening News")
        self.assertEqual([w["text"] for w in rec["words"]], ["Evening", "News"])

    def test_black_screen_and_motion_are_recorded_with_score_and_threshold(self):
        black = stbt.Frame(numpy.zeros((36, 64, 3), numpy.uint8), time=1.0)
        self.assertTrue(stbt.is_screen_black(black))
        still = [stbt.Frame(numpy.zeros((36, 64, 3), numpy.uint8), time=1.0 + i / 25) for i in range(10)]
        with self.assertRaises(stbt.MotionTimeout):
            stbt.wait_for_motion(timeout_secs=1, consecutive_frames="2/3", frames=still)
        black_rec, motion = self.records()
        self.assertEqual((black_rec["kind"], black_rec["passed"], black_rec["score"]), ("is_screen_black", True, 0))
        self.assertEqual(black_rec["threshold"], 20)
        self.assertEqual((motion["kind"], motion["passed"], motion["score"], motion["threshold"]),
                         ("wait_for_motion", False, 0, 2))
        self.assertEqual(motion["params"]["consecutive_frames"], "2/3")

    def test_nothing_is_recorded_outside_a_farmhand_run(self):
        os.environ.pop("FARMHAND_CHECKS_DIR")
        _checks.flush()
        cwd = os.getcwd()
        os.chdir(self.dir)
        self.addCleanup(os.chdir, cwd)
        stbt.is_screen_black(stbt.Frame(numpy.zeros((8, 8, 3), numpy.uint8), time=1.0))
        _checks.flush()
        self.assertEqual(os.listdir(self.dir), [])


class Sampling(Base):
    def test_failures_always_passes_first_20_then_1_in_10_and_the_last_5(self):
        old = _checks.QUEUE_SIZE
        _checks.QUEUE_SIZE = 1000  # no drop for a full queue in this test: only the sampling rule
        self.addCleanup(setattr, _checks, "QUEUE_SIZE", old)
        black = numpy.zeros((8, 8, 3), numpy.uint8)
        white = numpy.full((8, 8, 3), 255, numpy.uint8)
        for i in range(1, 101):
            stbt.is_screen_black(stbt.Frame(black, time=float(i)))
            if i in (50, 51):
                stbt.is_screen_black(stbt.Frame(white, time=i + 0.5))
        recs = self.records()
        failing = sorted(r["time"] for r in recs if not r["passed"])
        passing = sorted(r["time"] for r in recs if r["passed"])
        self.assertEqual(failing, [50.5, 51.5])
        self.assertEqual(passing, list(range(1, 21)) + [30, 40, 50, 60, 70, 80, 90] + [95, 96, 97, 98, 99, 100])
        self.assertEqual(sorted(r["time"] for r in recs if r.get("sampled") == "last"), [95, 96, 97, 98, 99])

    def test_frames_stop_at_the_cap_but_records_go_on(self):
        old = _checks.MAX_FRAMES
        _checks.MAX_FRAMES = 2
        self.addCleanup(setattr, _checks, "MAX_FRAMES", old)
        white = stbt.Frame(numpy.full((8, 8, 3), 255, numpy.uint8), time=1.0)
        for _ in range(4):
            stbt.is_screen_black(white)
        recs = self.records()
        self.assertEqual(len(recs), 4)
        self.assertEqual([("frame" in r) for r in recs], [True, True, False, False])
        self.assertEqual(len(os.listdir(os.path.join(self.dir, "checks"))), 2)


class OffThread(Base):
    def test_the_check_returns_while_the_writer_is_still_busy(self):
        # the writer thread is held at its first frame: the test's thread must not wait for it
        entered, release = threading.Event(), threading.Event()
        real = cv2.imencode
        writers = []

        def held(*args, **kwargs):
            writers.append(threading.current_thread().name)
            entered.set()
            release.wait()
            return real(*args, **kwargs)

        cv2.imencode = held
        self.addCleanup(setattr, cv2, "imencode", real)
        white = stbt.Frame(numpy.full((720, 1280, 3), 255, numpy.uint8), time=1.0)
        self.assertFalse(stbt.is_screen_black(white))
        self.assertTrue(entered.wait(30))
        self.assertFalse(stbt.is_screen_black(white))  # returns though the writer is held
        self.assertFalse(os.path.exists(os.path.join(self.dir, "checks.jsonl")))
        release.set()
        self.assertEqual(len(self.records()), 2)
        self.assertEqual(set(writers), {"stbt-checks"})


    def test_failing_checks_never_wait_for_a_writer_that_is_behind(self):
        # A polling loop of failing checks outruns the JPEG encoder. The writer is held at its first
        # frame: every later failing check must still return at once (they used to wait up to 5 s each
        # for room on the queue, then were lost), and every one is kept; the frames of the last
        # LAST_FAILING are kept until there is room, the older ones' records are written without it.
        old = _checks.QUEUE_SIZE
        _checks.QUEUE_SIZE = 2
        self.addCleanup(setattr, _checks, "QUEUE_SIZE", old)
        entered, release = threading.Event(), threading.Event()
        real = cv2.imencode

        def held(*args, **kwargs):
            entered.set()
            release.wait()
            return real(*args, **kwargs)

        cv2.imencode = held
        self.addCleanup(setattr, cv2, "imencode", real)
        white = numpy.full((72, 128, 3), 255, numpy.uint8)
        self.assertFalse(stbt.is_screen_black(stbt.Frame(white, time=1.0)))
        self.assertTrue(entered.wait(30))
        for i in range(2, 8):  # the queue (2) fills, then 4 more: 3 held with their frame, 1 let go
            self.assertFalse(stbt.is_screen_black(stbt.Frame(white, time=float(i))))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "checks.jsonl")))  # all while held
        release.set()
        recs = {r["time"]: r for r in self.records()}
        self.assertEqual(sorted(recs), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
        self.assertEqual(sorted(t for t, r in recs.items() if "frame" in r), [1.0, 2.0, 3.0, 5.0, 6.0, 7.0])
        self.assertEqual(recs[4.0]["frame_dropped"], "the writer was behind")
        self.assertIs(recs[4.0]["passed"], False)

    def test_a_forked_child_records_with_a_writer_of_its_own_under_names_of_its_own(self):
        white = stbt.Frame(numpy.full((8, 8, 3), 255, numpy.uint8), time=1.0)
        self.assertFalse(stbt.is_screen_black(white))  # the parent's writer thread exists before the fork
        pid = os.fork()
        if pid == 0:  # the child: the parent's writer thread is not here
            try:
                stbt.is_screen_black(white)
                _checks.flush()
            finally:
                os._exit(0)  # pylint: disable=protected-access
        os.waitpid(pid, 0)
        frames = sorted(r["frame"] for r in self.records())
        self.assertEqual(frames, ["checks/0.jpg", "checks/p%d-0.jpg" % pid])


class MatchAllAndTheOlderApi(Base):
    """match_all and farmhand.match (the API before stbt) keep records of the same shape as stbt.match."""

    def test_match_all_keeps_every_match_and_with_none_the_closest_place(self):
        frame = picture(square_at=(100, 100))
        frame[200:240, 300:340] = frame[100:140, 100:140]
        template = picture(square_at=(0, 0))[0:40, 0:40].copy()
        found = list(stbt.match_all(template, stbt.Frame(frame, time=3.0)))
        self.assertEqual(len(found), 2)
        self.assertEqual(list(stbt.match_all(template, stbt.Frame(picture(), time=4.0),
                                             region=stbt.Region(10, 20, 300, 200))), [])
        hit, miss = self.records()
        self.assertEqual((hit["kind"], hit["passed"], hit["matches"], hit["finished"], hit["time"]),
                         ("match_all", True, 2, True, 3.0))
        self.assertEqual(sorted((r["x"], r["y"]) for r in hit["match_regions"]), [(100, 100), (300, 200)])
        self.assertEqual(hit["match_region"], {"x": found[0].region.x, "y": found[0].region.y,
                                               "width": 40, "height": 40})
        self.assertEqual((hit["first_pass"]["passed"], hit["confirm"]["passed"]), (True, True))
        self.assertGreaterEqual(hit["score"], hit["threshold"])
        self.assertTrue(numpy.array_equal(cv2.imread(os.path.join(self.dir, hit["template"])), template))
        self.assertEqual(cv2.imread(os.path.join(self.dir, hit["frame"])).shape, (360, 640, 3))
        # none: the closest place and its score against the threshold, as a failed match shows them
        self.assertEqual((miss["kind"], miss["passed"], miss["matches"], miss["closest"]),
                         ("match_all", False, 0, True))
        self.assertEqual(miss["region"], {"x": 10, "y": 20, "width": 300, "height": 200})
        self.assertLess(miss["score"], miss["threshold"])
        self.assertIs(miss["first_pass"]["passed"], False)
        self.assertEqual(miss["match_region"]["width"], 40)
        self.assertEqual(miss["match_regions"], [])

    def test_match_all_stopped_early_keeps_the_matches_it_gave(self):
        frame = picture(square_at=(100, 100))
        frame[200:240, 300:340] = frame[100:140, 100:140]
        template = picture(square_at=(0, 0))[0:40, 0:40].copy()
        results = stbt.match_all(template, stbt.Frame(frame, time=5.0))
        self.assertTrue(next(results))
        results.close()  # what a ``break`` or the generator's end of life does
        (rec,) = self.records()
        self.assertEqual((rec["kind"], rec["passed"], rec["matches"], rec["finished"]), ("match_all", True, 1, False))

    def test_farmhand_match_keeps_its_score_threshold_frame_and_template(self):
        import farmhand  # pylint: disable=import-outside-toplevel
        legacy = sys.modules["farmhand.match"]
        # its own saved failures (match-failures/) go to the result folder: here, this test's folder
        old = legacy._RESULT_DIR  # pylint: disable=protected-access
        legacy._RESULT_DIR = self.dir  # pylint: disable=protected-access
        self.addCleanup(setattr, legacy, "_RESULT_DIR", old)
        template = picture(square_at=(0, 0))[0:40, 0:40].copy()
        self.assertTrue(legacy.match(template, frame=picture(square_at=(100, 100))))
        self.assertFalse(legacy.match(template, frame=picture(),
                                              region=farmhand.Region(10, 20, 300, 200), threshold=0.95))
        hit, miss = self.records()
        self.assertEqual((hit["kind"], hit["passed"], hit["image"]), ("match", True, "<array>"))
        self.assertEqual(hit["params"], {"api": "farmhand.match", "match_method": "ccoeff-normed",
                                         "match_threshold": 0.9})
        self.assertEqual(hit["match_region"], {"x": 100, "y": 100, "width": 40, "height": 40})
        self.assertGreaterEqual(hit["score"], 0.9)
        self.assertIsNone(hit["region"])
        self.assertTrue(numpy.array_equal(cv2.imread(os.path.join(self.dir, hit["template"])), template))
        self.assertEqual((miss["kind"], miss["passed"], miss["threshold"]), ("match", False, 0.95))
        self.assertEqual(miss["region"], {"x": 10, "y": 20, "width": 300, "height": 200})
        self.assertLess(miss["score"], 0.95)
        self.assertEqual(miss["first_pass"], {"score": miss["score"], "threshold": 0.95, "passed": False})
        self.assertIsNone(miss["confirm"]["passed"])  # this API has no confirm pass
        self.assertEqual(cv2.imread(os.path.join(self.dir, miss["frame"])).shape, (360, 640, 3))


class OlderApiWaitForMatch(WithDaemon, unittest.TestCase):
    def records(self):
        _checks.flush()
        with open(os.path.join(self.daemon.dir, "checks.jsonl"), encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def test_farmhand_wait_for_match_keeps_the_match_or_the_closest_frame(self):
        import farmhand  # pylint: disable=import-outside-toplevel
        legacy = sys.modules["farmhand.match"]
        old = legacy._RESULT_DIR  # pylint: disable=protected-access
        legacy._RESULT_DIR = self.daemon.dir  # pylint: disable=protected-access
        self.addCleanup(setattr, legacy, "_RESULT_DIR", old)
        square = numpy.zeros((12, 12, 3), numpy.uint8)
        square[:] = (128, 0, 0)  # the stand-in's dark blue, BGR
        square[2:10, 2:10] = 255  # its white square at (4, 4)
        self.assertEqual(farmhand.wait_for_match(square, timeout_secs=30).region, farmhand.Region(2, 2, 12, 12))
        other = square.copy()
        other[2:10, 2:10] = (0, 0, 255)  # a red square: never on screen
        other[4:6, 4:6] = 255
        with self.assertRaises(farmhand.MatchTimeout):
            farmhand.wait_for_match(other, timeout_secs=0.3)
        hit, miss = self.records()
        self.assertEqual((hit["kind"], hit["passed"], hit["timeout_secs"]), ("wait_for_match", True, 30))
        self.assertEqual(hit["match_region"], {"x": 2, "y": 2, "width": 12, "height": 12})
        self.assertEqual((miss["kind"], miss["passed"], miss["closest"]), ("wait_for_match", False, True))
        self.assertLess(miss["score"], miss["threshold"])
        self.assertTrue(miss["frame"].startswith("checks/"))


if __name__ == "__main__":
    unittest.main()
