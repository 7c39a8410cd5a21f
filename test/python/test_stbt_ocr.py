"""OCR of the stbt API (ocr, match_text, ocr_eq, corrections, the [ocr]
section of stbt.conf) on the real tesseract of the node (Debian's
tesseract-ocr, tesseract-ocr-eng).

Every picture is rendered here with OpenCV's FreeType text in DejaVu Sans
(fonts-dejavu-core), the virtual set-top box's font, on a 1280x720 frame.
"""

import os
import re
import shutil
import signal
import tempfile
import unittest

import cv2
import numpy

import stbt
from stbt_core import _config, _ocr, _ocr_prepare, _ocr_tesseract, _ocr_text
from _fake_daemon import WithDaemon
from _env import restore_env

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
WHITE = (255, 255, 255)
BACKGROUND = (60, 30, 20)  # dark blue (BGR)
_ft = None


def render(items, background=BACKGROUND):
    """A 1280x720 BGR frame with each ``(text, (x, y) of its top left, pixel height, BGR colour)``."""
    global _ft  # pylint: disable=global-statement
    if _ft is None:
        _ft = cv2.freetype.createFreeType2()
        _ft.loadFontData(FONT, 0)
    frame = numpy.zeros((720, 1280, 3), numpy.uint8)
    frame[:] = background
    for text, (x, y), size, color in items:
        _ft.putText(frame, text, (x, y), size, color, -1, cv2.LINE_AA, False)
    return stbt.Frame(frame, time=1234.5)


def ink_box(frame, region, background=BACKGROUND):
    """The bounding Region of the pixels in ``region`` that differ from the background."""
    sub = numpy.asarray(frame)[region.y:region.bottom, region.x:region.right].astype(int)
    ys, xs = numpy.nonzero(numpy.abs(sub - numpy.array(background)).sum(axis=2) > 60)
    return stbt.Region(region.x + xs.min(), region.y + ys.min(), right=region.x + xs.max() + 1,
                       bottom=region.y + ys.max() + 1)


MENU = [
    ("Channel 104: Evening News", (100, 100), 28, WHITE),
    ("Recordings", (100, 200), 28, WHITE),
    ("Settings and Help", (700, 400), 28, WHITE),
]
LINE1 = stbt.Region(90, 90, width=420, height=45)


class OcrTestCase(unittest.TestCase):
    """Fresh configuration (a pack root of its own) and an empty cache for each test."""

    CONF = None

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="stbt-ocr-")
        if self.CONF:
            os.makedirs(os.path.join(self.root, "config"))
            with open(os.path.join(self.root, "config", "stbt.conf"), "w") as f:
                f.write(self.CONF)
        self.saved = {k: os.environ.get(k) for k in ("FARMHAND_TEST_PACK_DIR", "FARMHAND_NODE_ID", "FARMHAND_CONFIG")}
        os.environ["FARMHAND_TEST_PACK_DIR"] = self.root
        os.environ.pop("FARMHAND_NODE_ID", None)
        os.environ.pop("FARMHAND_CONFIG", None)
        _config._reset()  # pylint: disable=protected-access
        _ocr_tesseract._cache.clear()  # pylint: disable=protected-access
        stbt.set_global_ocr_corrections(None)

    def tearDown(self):
        shutil.rmtree(self.root, True)
        restore_env(self.saved)
        _config._reset()  # pylint: disable=protected-access
        stbt.set_global_ocr_corrections(None)


class Cache(OcrTestCase):
    """A picture read once is not read again, unless the cache is switched off (``_stbt.imgproc_cache``)."""

    def reads(self, frame, times):
        calls = []
        real = _ocr_tesseract._run  # pylint: disable=protected-access

        def counting(argv, stdin, timeout):
            if stdin is not None:  # a picture to read (not --list-langs or --version)
                calls.append(argv)
            return real(argv, stdin, timeout)
        _ocr_tesseract._run = counting  # pylint: disable=protected-access
        try:
            texts = [stbt.ocr(frame, region=LINE1) for _ in range(times)]
        finally:
            _ocr_tesseract._run = real  # pylint: disable=protected-access
        return texts, len(calls)

    def test_the_same_region_read_again_comes_from_the_cache(self):
        texts, calls = self.reads(render(MENU), 3)
        self.assertEqual(texts, ["Channel 104: Evening News"] * 3)
        self.assertEqual(calls, 1)

    def test_with_the_cache_off_every_read_goes_to_tesseract_and_reads_the_same(self):
        from _stbt import imgproc_cache  # pylint: disable=import-outside-toplevel
        self.assertTrue(imgproc_cache.enabled())
        imgproc_cache._cache = None  # pylint: disable=protected-access
        try:
            texts, calls = self.reads(render(MENU), 3)
            self.assertEqual(calls, 3)
            with imgproc_cache.setup_cache("/nonexistent"):
                self.assertTrue(imgproc_cache.enabled())
            self.assertFalse(imgproc_cache.enabled())
        finally:
            imgproc_cache._cache = "memory"  # pylint: disable=protected-access
        self.assertEqual(texts, ["Channel 104: Evening News"] * 3)

    def test_tesseract_version_is_a_list_of_integers(self):
        version = _ocr_tesseract._tesseract_version()  # pylint: disable=protected-access
        self.assertIsInstance(version, list)
        self.assertTrue(all(isinstance(n, int) for n in version))
        self.assertGreaterEqual(version, [4, 0])


class Ocr(OcrTestCase):
    def test_reads_the_text_of_a_region_only(self):
        frame = render(MENU)
        self.assertEqual(stbt.ocr(frame, region=LINE1), "Channel 104: Evening News")
        self.assertEqual(stbt.ocr(frame, region=stbt.Region(690, 390, width=330, height=45)), "Settings and Help")
        whole = stbt.ocr(frame)
        for line in ("Channel 104: Evening News", "Recordings", "Settings and Help"):
            self.assertIn(line, whole)

    def test_a_region_outside_the_frame_or_none_is_an_error(self):
        frame = render(MENU)
        for read in (stbt.ocr, lambda f, region: stbt.match_text("Recordings", f, region=region)):
            with self.assertRaises(ValueError):
                read(frame, region=stbt.Region(1300, 0, width=50, height=50))
            with self.assertRaises(ValueError):
                read(frame, region=stbt.Region(1280, 0, 1280, 720))
            with self.assertRaises(TypeError):
                read(frame, region=None)
        # A region partly outside is clipped to the frame.
        self.assertEqual(stbt.ocr(frame, region=stbt.Region(690, 390, right=5000, bottom=435)), "Settings and Help")

    def test_text_match_results_repr(self):
        frame = render(MENU)
        text = repr(stbt.match_text("Recordings", frame))
        self.assertTrue(text.startswith("TextMatchResult(time=1234.500, match=True, region=Region("), text)
        self.assertTrue(text.endswith("frame=<Frame(time=1234.500, dimensions=1280x720x3)>, text='Recordings')"), text)

    def test_single_word_mode(self):
        frame = render([("OK", (100, 100), 28, WHITE)])
        region = stbt.Region(90, 90, width=60, height=40)
        self.assertEqual(stbt.ocr(frame, region, mode=stbt.OcrMode.SINGLE_WORD), "OK")

    def test_single_line_mode(self):
        frame = render([("4", (100, 100), 28, WHITE)])  # a channel number
        region = stbt.Region(90, 90, width=40, height=40)
        self.assertEqual(stbt.ocr(frame, region, mode=stbt.OcrMode.SINGLE_LINE), "4")
        self.assertEqual(int(stbt.OcrMode.SINGLE_LINE), 7)
        self.assertEqual(int(stbt.OcrMode.SPARSE_TEXT), 11)

    def test_the_default_mode_reads_a_lone_short_word_as_a_single_line(self):
        # tesseract's page analysis (the default mode) finds no text block in a lone short word or number
        # and drops it; a region holding one line of text is read as SINGLE_LINE instead.
        argvs = []
        real = _ocr_tesseract._run  # pylint: disable=protected-access

        def spy(argv, stdin, timeout):
            argvs.append(argv)
            return real(argv, stdin, timeout)
        _ocr_tesseract._run = spy  # pylint: disable=protected-access
        try:
            for text, width in (("OK", 60), ("4", 40), ("On", 60)):
                frame = render([(text, (100, 100), 28, WHITE)])
                self.assertEqual(stbt.ocr(frame, stbt.Region(90, 90, width=width, height=40)), text)
                self.assertEqual(argvs[-1][argvs[-1].index("--psm") + 1], "7")
            # Two lines: tesseract's page analysis, as asked.
            stbt.ocr(render(MENU), stbt.Region(90, 90, width=420, height=150))
            self.assertEqual(argvs[-1][argvs[-1].index("--psm") + 1], "3")
            # Any mode given other than the default is kept.
            stbt.ocr(render(MENU), LINE1, mode=stbt.OcrMode.SINGLE_UNIFORM_BLOCK_OF_TEXT)
            self.assertEqual(argvs[-1][argvs[-1].index("--psm") + 1], "6")
        finally:
            _ocr_tesseract._run = real  # pylint: disable=protected-access

    def test_large_text_is_upsampled_less(self):
        # 3x upsampling put 40 px text at 120 px, where tesseract misread capitals ("sports 2 (HD)"); the
        # factor now brings the shortest line of text towards UPSAMPLE_LINE_HEIGHT px, 3x at most.
        seen = []
        real = _ocr_tesseract._run  # pylint: disable=protected-access

        def spy(argv, stdin, timeout):
            if stdin:
                seen.append(cv2.imdecode(numpy.frombuffer(stdin, numpy.uint8), cv2.IMREAD_UNCHANGED).shape)
            return real(argv, stdin, timeout)
        serif = cv2.freetype.createFreeType2()
        serif.loadFontData("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", 0)
        frame = numpy.zeros((720, 1280, 3), numpy.uint8)
        frame[:] = (30, 20, 120)
        for text, y in (("Sports 2 (HD)", 100), ("Settings and Help", 300)):
            serif.putText(frame, text, (100, y), 40, (0, 220, 255), -1, cv2.LINE_AA, False)
        _ocr_tesseract._run = spy  # pylint: disable=protected-access
        try:
            self.assertEqual(stbt.ocr(frame, stbt.Region(88, 88, right=380, bottom=160), text_color=(0, 220, 255)),
                             "Sports 2 (HD)")
            self.assertEqual(stbt.ocr(frame, stbt.Region(88, 288, right=480, bottom=360),
                                      text_color=(0, 220, 255)), "Settings and Help")
            # 14 px text (a line of 17 rows or less) is still upsampled 3x.
            small = render([("Channel 104: Evening News", (100, 100), 14, WHITE)])
            stbt.ocr(small, stbt.Region(88, 88, width=240, height=32))
        finally:
            _ocr_tesseract._run = real  # pylint: disable=protected-access
        self.assertLess(seen[0][0], 72 * 2)
        self.assertGreaterEqual(seen[0][0], 72)  # never scaled down
        self.assertEqual(seen[-1], (32 * 3, 240 * 3))

    def test_char_whitelist(self):
        frame = render([("AB12 CD34", (100, 100), 28, WHITE)])
        region = stbt.Region(80, 80, width=400, height=50)
        self.assertEqual(stbt.ocr(frame, region), "AB12 CD34")
        self.assertEqual(stbt.ocr(frame, region, char_whitelist="0123456789 "), "12 34")

    def test_text_color_keeps_only_text_of_that_colour(self):
        frame = render([("Record", (100, 100), 28, (0, 200, 255)), ("Delete", (300, 100), 28, WHITE)])
        region = stbt.Region(80, 80, width=400, height=50)
        self.assertEqual(stbt.ocr(frame, region), "Record Delete")
        self.assertEqual(stbt.ocr(frame, region, text_color=(0, 200, 255)), "Record")
        self.assertEqual(stbt.ocr(frame, region, text_color="#ffffff"), "Delete")
        self.assertEqual(stbt.ocr(frame, region, text_color=stbt.Color(255, 255, 255)), "Delete")

    def test_text_color_keeps_the_edges_of_small_text(self):
        # 14 px: few pixels of a stroke have the exact colour; the anti-aliased edges must not be cut off.
        frame = render([("Channel 104: Evening News", (100, 100), 14, WHITE)])
        region = stbt.Region(88, 88, width=240, height=32)
        self.assertEqual(stbt.ocr(frame, region, text_color=WHITE), "Channel 104: Evening News")

    def test_text_color_on_a_coloured_background_dark_on_light(self):
        frame = render([("Favourites", (100, 100), 24, (40, 40, 40)), ("Guide", (300, 100), 24, (0, 0, 200))],
                       background=(200, 230, 240))
        region = stbt.Region(80, 80, width=400, height=50)
        self.assertEqual(stbt.ocr(frame, region, text_color=(40, 40, 40)), "Favourites")

    def test_text_color_leaves_out_a_dimmer_text_of_the_same_hue(self):
        # A selected item (white on a light panel) beside unselected ones (grey on the dark background):
        # all are neutral in colour, only the grey ones' ink never gets as bright as the text colour.
        frame = render([("Summary", (100, 100), 24, (235, 235, 235)), ("Details", (330, 100), 24, (190, 190, 190)),
                        ("Episodes", (480, 100), 24, (190, 190, 190))], background=(0, 0, 0))
        pixels = numpy.array(frame)
        pixels[80:140, 80:280] = numpy.where(pixels[80:140, 80:280] > 100, pixels[80:140, 80:280], (230, 170, 90))
        frame = stbt.Frame(pixels, time=frame.time)
        region = stbt.Region(80, 80, width=560, height=60)
        self.assertEqual(stbt.ocr(frame, region, text_color=(235, 235, 235)), "Summary")
        self.assertTrue(stbt.match_text("Summary", frame, region, text_color="#ebebeb"))
        self.assertFalse(stbt.match_text("Details", frame, region, text_color="#ebebeb"))
        # Words of one colour on different backgrounds are all kept.
        both = render([("Summary", (100, 100), 24, WHITE), ("Details", (330, 100), 24, WHITE)], background=(0, 0, 0))
        pixels = numpy.array(both)
        pixels[80:140, 80:280] = numpy.where(pixels[80:140, 80:280] > 100, pixels[80:140, 80:280], (230, 170, 90))
        self.assertEqual(stbt.ocr(stbt.Frame(pixels), region, text_color=WHITE), "Summary Details")

    def test_a_grey_picture_with_a_channel_axis_is_read(self):
        # load_image(color_channels=1) gives (height, width, 1): read as the grey picture it is.
        frame = render(MENU)
        grey = stbt.Frame(cv2.cvtColor(numpy.asarray(frame), cv2.COLOR_BGR2GRAY)[:, :, numpy.newaxis])
        self.assertEqual(grey.shape, (720, 1280, 1))
        self.assertEqual(stbt.ocr(grey, LINE1), "Channel 104: Evening News")
        self.assertTrue(stbt.match_text("Recordings", grey))
        self.assertEqual(stbt.ocr(grey, LINE1, text_color=WHITE), "Channel 104: Evening News")
        self.assertIn("1280x720x1", repr(stbt.match_text("Recordings", grey)))

    def test_upsample_and_the_regions_it_reports(self):
        # match_text's region is in frame coordinates whether or not the picture was upsampled 3x.
        frame = render(MENU)
        truth = ink_box(frame, stbt.Region(90, 190, width=200, height=45))
        for upsample in (True, False):
            result = stbt.match_text("Recordings", frame, upsample=upsample)
            self.assertTrue(result, upsample)
            for got, want in zip(result.region, truth):
                self.assertLessEqual(abs(got - want), 3, (upsample, result.region, truth))

    def test_upsample_false_reaches_tesseract_at_the_frames_size(self):
        seen = []
        real = _ocr_tesseract._run  # pylint: disable=protected-access

        def spy(argv, stdin, timeout):
            if stdin:
                seen.append(cv2.imdecode(numpy.frombuffer(stdin, numpy.uint8), cv2.IMREAD_UNCHANGED).shape)
            return real(argv, stdin, timeout)
        _ocr_tesseract._run = spy  # pylint: disable=protected-access
        try:
            stbt.ocr(render(MENU), LINE1, upsample=False)
            stbt.ocr(render(MENU), LINE1)
        finally:
            _ocr_tesseract._run = real  # pylint: disable=protected-access
        # 28 px text (a line of ~33 rows) upsampled towards UPSAMPLE_LINE_HEIGHT.
        self.assertEqual(seen[0], (45, 420))
        self.assertGreater(seen[1][0], 45 * 1.2)
        self.assertLess(seen[1][0], 45 * 3)

    def test_user_words_and_patterns(self):
        frame = render(MENU)
        words = os.path.join(self.root, "words.txt")
        with open(words, "w") as f:
            f.write("Evening\nNews\n")
        self.assertEqual(stbt.ocr(frame, LINE1, tesseract_user_words=words,
                                  tesseract_user_patterns=[r"\d\d\d:"]), "Channel 104: Evening News")
        self.assertEqual(stbt.ocr(frame, LINE1, tesseract_user_words=["Evening"]), "Channel 104: Evening News")
        with self.assertRaises(IOError):
            stbt.ocr(frame, LINE1, tesseract_user_words=os.path.join(self.root, "missing.txt"))

    def test_a_string_that_names_no_file_is_one_word_or_pattern(self):
        frame = render([("192.168.10.1", (100, 100), 28, WHITE)])
        region = stbt.Region(90, 90, width=240, height=45)
        # Before, such a string was taken for a file's name and the read failed (no such file).
        for words in ("192.168.10.1", b"192.168.10.1", ["192.168.10.1"]):
            self.assertEqual(stbt.ocr(frame, region, mode=stbt.OcrMode.SINGLE_WORD, tesseract_user_words=words),
                             "192.168.10.1")
        self.assertEqual(stbt.ocr(frame, region, mode=stbt.OcrMode.SINGLE_WORD,
                                  tesseract_user_patterns=r"\d\*.\d\*.\d\*.\d\*"), "192.168.10.1")

    def test_typographic_punctuation_and_ligatures_read_as_plain(self):
        self.assertEqual(_ocr_text.plain_punctuation("\u201cfine\u201d \u2018ok\u2019 em\u2014dash en\u2013dash \ufb01t"),
                         '"fine" \'ok\' em-dash en-dash fit')
        frame = render([("the em-dash, here", (100, 100), 28, WHITE)])
        self.assertTrue(stbt.match_text("em-dash,", frame))
        self.assertTrue(stbt.match_text("em\u2014dash,", frame))

    def test_hocr_asked_through_tesseract_config_is_what_comes_back(self):
        frame = render(MENU)
        hocr = stbt.ocr(frame, LINE1, tesseract_config={"tessedit_create_txt": 0, "tessedit_create_hocr": 1})
        self.assertIn("ocr_line", hocr)
        self.assertNotEqual(hocr, stbt.ocr(frame, LINE1))

    def test_match_text_takes_utf8_bytes(self):
        frame = render(MENU)
        self.assertTrue(stbt.match_text("Recordings".encode("utf-8"), frame))

    def test_tesseract_config(self):
        frame = render([("AB12 CD34", (100, 100), 28, WHITE)])
        region = stbt.Region(80, 80, width=400, height=50)
        text = stbt.ocr(frame, region, tesseract_config={"tessedit_char_blacklist": "ABCD"})
        self.assertIn("34", text)
        for letter in "ABCD":
            self.assertNotIn(letter, text)
        with self.assertRaises(ValueError):
            stbt.ocr(frame, region, tesseract_config={"a b": "1"})

    def test_an_identical_read_does_not_run_tesseract_again(self):
        calls = []
        real = _ocr_tesseract._run  # pylint: disable=protected-access

        def spy(argv, stdin, timeout):
            calls.append(argv)
            return real(argv, stdin, timeout)
        _ocr_tesseract._run = spy  # pylint: disable=protected-access
        try:
            frame = render(MENU)
            first = stbt.ocr(frame, LINE1)
            n = len(calls)
            self.assertEqual(stbt.ocr(render(MENU), LINE1), first)  # same pixels, a new array
            self.assertEqual(len(calls), n)
            stbt.ocr(frame, LINE1, mode=stbt.OcrMode.SPARSE_TEXT)  # other parameters: read again
            self.assertEqual(len(calls), n + 1)
        finally:
            _ocr_tesseract._run = real  # pylint: disable=protected-access


class Corrections(OcrTestCase):
    def test_dict_and_regex_corrections_in_ocr(self):
        frame = render(MENU)
        self.assertEqual(stbt.ocr(frame, LINE1, corrections={"Evening": "Late", re.compile(r"[0-9]"): "#"}),
                         "Channel ###: Late News")

    def test_plain_strings_replace_whole_words_only(self):
        self.assertEqual(stbt.apply_ocr_corrections("the saw, he saw", {"he saw": "HE SAW"}), "the saw, HE SAW")
        self.assertEqual(stbt.apply_ocr_corrections("Settings", {"Set": "Get"}), "Settings")
        self.assertEqual(stbt.apply_ocr_corrections("Settings", {re.compile("Set"): "Get"}), "Gettings")

    def test_plain_strings_go_before_regexes(self):
        self.assertEqual(stbt.apply_ocr_corrections("0K", {re.compile("K"): "X", "0K": "OK"}), "OX")

    def test_global_corrections_come_after_the_calls_own(self):
        stbt.set_global_ocr_corrections({"News": "Weather", "Late": "Early"})
        frame = render(MENU)
        self.assertEqual(stbt.ocr(frame, LINE1), "Channel 104: Evening Weather")
        self.assertEqual(stbt.ocr(frame, LINE1, corrections={"Evening": "Late"}), "Channel 104: Early Weather")
        self.assertEqual(stbt.apply_ocr_corrections("Late News"), "Early Weather")
        stbt.set_global_ocr_corrections(None)
        self.assertEqual(stbt.ocr(frame, LINE1), "Channel 104: Evening News")

    def test_bad_corrections_are_a_type_error(self):
        with self.assertRaises(TypeError):
            stbt.apply_ocr_corrections("x", {1: "y"})
        with self.assertRaises(TypeError):
            stbt.set_global_ocr_corrections(["x"])


class MatchText(OcrTestCase):
    def test_found_with_its_region(self):
        frame = render(MENU)
        result = stbt.match_text("Settings and Help", frame)
        self.assertTrue(result)
        self.assertEqual(result.text, "Settings and Help")
        self.assertIs(result.frame, frame)
        self.assertEqual(result.time, 1234.5)
        truth = ink_box(frame, stbt.Region(690, 390, width=330, height=45))
        for got, want in zip(result.region, truth):
            self.assertLessEqual(abs(got - want), 3, (result.region, truth))

    def test_not_found(self):
        frame = render(MENU)
        result = stbt.match_text("Morning News", frame)
        self.assertFalse(result)
        self.assertIsNone(result.region)
        self.assertIn("match=False", repr(result))

    def test_region_limits_the_search(self):
        frame = render(MENU)
        self.assertTrue(stbt.match_text("Recordings", frame, region=stbt.Region(0, 180, width=640, height=80)))
        self.assertFalse(stbt.match_text("Recordings", frame, region=stbt.Region(640, 0, width=640, height=720)))
        self.assertTrue(stbt.match_text("Evening News", frame, region=LINE1))

    def test_case_sensitive(self):
        frame = render(MENU)
        self.assertTrue(stbt.match_text("EVENING news", frame, region=LINE1))
        self.assertFalse(stbt.match_text("EVENING news", frame, region=LINE1, case_sensitive=True))
        self.assertTrue(stbt.match_text("Evening News", frame, region=LINE1, case_sensitive=True))

    def test_words_must_follow_each_other(self):
        frame = render(MENU)
        self.assertFalse(stbt.match_text("Evening 104", frame, region=LINE1))
        self.assertTrue(stbt.match_text("104 Evening", frame, region=LINE1))  # the colon is punctuation


class OcrEq(unittest.TestCase):
    def test_confusions_spaces_and_punctuation(self):
        self.assertTrue(stbt.ocr_eq("Channel 104", "Channe1 lO4"))
        self.assertTrue(stbt.ocr_eq("SETTINGS", "5ETT1NG5"))
        self.assertTrue(stbt.ocr_eq("Play / Pause", "Play Pause."))
        self.assertFalse(stbt.ocr_eq("Channel 104", "Channel 105"))
        self.assertFalse(stbt.ocr_eq("Recordings", "Reminders"))

    def test_other_letters_keep_their_case(self):
        self.assertFalse(stbt.ocr_eq("hello", "HELLO"))
        self.assertTrue(stbt.ocr_eq("hello", "he1 10"))
        self.assertEqual(stbt.ocr_eq.normalize("he1 10"), "hello")
        self.assertTrue(stbt.ocr_eq("BT Sport", "8T Sport"))
        self.assertTrue(stbt.ocr_eq("Movies & TV", "Movies 8. TV"))

    def test_replacements_apply_in_order_and_a_new_entry_goes_through_the_old_ones(self):
        saved = stbt.ocr_eq.replacements
        try:
            stbt.ocr_eq.replacements = {"1": "l"}  # any dict will do
            self.assertEqual(stbt.ocr_eq.normalize("he1 10"), "hell0")
            stbt.ocr_eq.replacements = _ocr.Replacements({"1": "l"})
            stbt.ocr_eq.replacements["l"] = "L"  # after "1" -> "l": both end as "L"
            self.assertEqual(stbt.ocr_eq.normalize("l1"), "LL")
            stbt.ocr_eq.replacements["7"] = "1"  # put through the entries already there: "L"
            self.assertEqual(stbt.ocr_eq.replacements["7"], "L")
            self.assertTrue(stbt.ocr_eq("7", "l"))
        finally:
            stbt.ocr_eq.replacements = saved

    def test_replacements_stay_replacements_through_copy_and_constructor(self):
        saved = stbt.ocr_eq.replacements
        try:
            # A test saves the table with copy() and puts a copy back: the rule that a new entry goes
            # through the old ones must still hold afterwards.
            stbt.ocr_eq.replacements = saved.copy().copy()
            self.assertIsInstance(stbt.ocr_eq.replacements, _ocr.Replacements)
            self.assertEqual(stbt.ocr_eq.replacements, saved)
            stbt.ocr_eq.replacements["\u0130"] = "I"  # dotted capital I: ends as "I" does
            self.assertEqual(stbt.ocr_eq.replacements["\u0130"], "l")
            self.assertTrue(stbt.ocr_eq("\u0130", "I"))
            self.assertNotIn("\u0130", saved)
            # The constructor and update() add their entries the same way, in order.
            table = _ocr.Replacements([("1", "l"), ("7", "1")])
            self.assertEqual(table["7"], "l")
            table.update({"9": "7"})
            self.assertEqual(table["9"], "l")
        finally:
            stbt.ocr_eq.replacements = saved

    def test_replacements_and_normalize_are_public(self):
        self.assertEqual(stbt.ocr_eq.normalize("l0 O"), stbt.ocr_eq.normalize("IOO"))
        self.assertFalse(stbt.ocr_eq("A", "4"))
        stbt.ocr_eq.replacements["4"] = "A"
        try:
            self.assertTrue(stbt.ocr_eq("A", "4"))
        finally:
            del stbt.ocr_eq.replacements["4"]


class MissingLanguage(OcrTestCase):
    def test_the_error_names_the_debian_package(self):
        with self.assertRaises(stbt.ConfigurationError) as cm:
            stbt.ocr(render(MENU), LINE1, lang="chi_sim")
        self.assertIn("'chi_sim'", str(cm.exception))
        self.assertIn("tesseract-ocr-chi-sim", str(cm.exception))
        with self.assertRaises(stbt.ConfigurationError) as cm:
            stbt.match_text("News", render(MENU), lang="eng+fra")
        self.assertIn("tesseract-ocr-fra", str(cm.exception))

    def test_a_language_name_that_is_not_one(self):
        with self.assertRaises(stbt.ConfigurationError):
            stbt.ocr(render(MENU), LINE1, lang="../eng")


class PackLanguage(OcrTestCase):
    CONF = "[ocr]\nlang = deu\n"

    def test_the_packs_lang_is_checked(self):
        with self.assertRaises(stbt.ConfigurationError) as cm:
            stbt.ocr(render(MENU), LINE1)
        self.assertIn("tesseract-ocr-deu", str(cm.exception))
        self.assertEqual(stbt.ocr(render(MENU), LINE1, lang="eng"), "Channel 104: Evening News")


class PackDefaults(OcrTestCase):
    CONF = "[ocr]\nupsample = false\ntext_color_threshold = 400\nengine = TESSERACT\n"

    def test_ocr_section_gives_the_defaults(self):
        seen = []
        real = _ocr_tesseract._run  # pylint: disable=protected-access

        def spy(argv, stdin, timeout):
            if stdin:
                seen.append((argv, cv2.imdecode(numpy.frombuffer(stdin, numpy.uint8), cv2.IMREAD_UNCHANGED)))
            return real(argv, stdin, timeout)
        _ocr_tesseract._run = spy  # pylint: disable=protected-access
        try:
            stbt.ocr(render(MENU), LINE1)
        finally:
            _ocr_tesseract._run = real  # pylint: disable=protected-access
        argv, picture = seen[0]
        self.assertEqual(picture.shape, (45, 420))  # upsample = false
        self.assertEqual(argv[argv.index("--oem") + 1], "0")  # engine = TESSERACT: the legacy engine
        self.assertEqual(argv[argv.index("-l") + 1], "eng")  # built-in lang
        # threshold 400: a word's colour far from text_color (white text, magenta asked) still counts.
        self.assertEqual(stbt.ocr(render(MENU), LINE1, text_color=(255, 0, 255)), "Channel 104: Evening News")
        # The call's own threshold wins over the section's: at 25 the white line is not magenta.
        self.assertEqual(stbt.ocr(render(MENU), LINE1, text_color=(255, 0, 255), text_color_threshold=25), "")


class LegacyEngine(OcrTestCase):
    """OcrEngine.TESSERACT and TESSERACT_AND_LSTM read with tesseract's legacy engine where the language data
    has its models (scripts/setup.sh puts English's in LEGACY_TESSDATA; Debian's has none), else with LSTM."""

    def setUp(self):
        super().setUp()
        self.saved_folder = _ocr_tesseract.LEGACY_TESSDATA
        self.saved_worker = _ocr_tesseract.USE_WORKER

    def tearDown(self):
        _ocr_tesseract.LEGACY_TESSDATA = self.saved_folder
        _ocr_tesseract.USE_WORKER = self.saved_worker
        super().tearDown()

    def reads(self, **kwargs):
        """The text read of LINE1, and the argv of each tesseract read (none from the cache)."""
        _ocr_tesseract._cache.clear()  # pylint: disable=protected-access
        argvs = []
        real = _ocr_tesseract._run  # pylint: disable=protected-access

        def spy(argv, stdin, timeout):
            if stdin is not None:
                argvs.append(list(argv))
            return real(argv, stdin, timeout)
        _ocr_tesseract._run = spy  # pylint: disable=protected-access
        try:
            return stbt.ocr(render(MENU), LINE1, **kwargs), argvs
        finally:
            _ocr_tesseract._run = real  # pylint: disable=protected-access

    def test_the_legacy_models_are_told_by_the_data_files_table_of_contents(self):
        installed = os.path.join(_ocr_tesseract._tessdata_folder(), "eng.traineddata")  # pylint: disable=protected-access
        self.assertFalse(_ocr_tesseract._has_legacy_models(installed))  # pylint: disable=protected-access
        self.assertTrue(_ocr_tesseract._has_legacy_models(  # pylint: disable=protected-access
            os.path.join(_ocr_tesseract.LEGACY_TESSDATA, "eng.traineddata")),
            "python/tessdata-legacy/eng.traineddata is missing or has no legacy models: run scripts/setup.sh")
        for name, data in (("short", b"\x18\x00"), ("empty", b""), ("text", b"not a traineddata file at all, no")):
            path = os.path.join(self.root, name)
            with open(path, "wb") as f:
                f.write(data)
            self.assertFalse(_ocr_tesseract._has_legacy_models(path), name)  # pylint: disable=protected-access
        self.assertFalse(_ocr_tesseract._has_legacy_models(os.path.join(self.root, "none")))  # pylint: disable=protected-access

    def test_tesseract_and_tesseract_and_lstm_read_with_the_legacy_engine(self):
        for use_worker in (True, False):
            _ocr_tesseract.USE_WORKER = use_worker
            for engine, oem in ((stbt.OcrEngine.TESSERACT, "0"), ("TESSERACT", "0"), (0, "0"),
                                (stbt.OcrEngine.TESSERACT_AND_LSTM, "2"), (stbt.OcrEngine.LSTM, "1"),
                                (stbt.OcrEngine.DEFAULT, "3")):
                text, argvs = self.reads(engine=engine)
                self.assertEqual(text, "Channel 104: Evening News", (engine, use_worker))
                argv = argvs[-1]
                self.assertEqual(argv[argv.index("--oem") + 1], oem, (engine, use_worker))
                # Debian's own data cannot start the legacy engine: the read names farmhand's folder.
                self.assertEqual("--tessdata-dir" in argv, oem in ("0", "2"), argv)
                if oem in ("0", "2"):
                    self.assertEqual(argv[argv.index("--tessdata-dir") + 1], _ocr_tesseract.LEGACY_TESSDATA)

    def test_the_legacy_engine_reads_differently_from_lstm(self):
        # The same picture, the same text, two engines: their word confidences differ (the legacy engine read).
        grey = cv2.cvtColor(render(MENU)[LINE1.y:LINE1.bottom, LINE1.x:LINE1.right], cv2.COLOR_BGR2GRAY)
        words = {}
        for engine in (stbt.OcrEngine.TESSERACT, stbt.OcrEngine.LSTM):
            params = self.params(engine)
            self.assertEqual(params.engine, engine)
            words[engine] = _ocr_tesseract.parse_tsv(_ocr_tesseract.read(grey, params, True))
        texts = {engine: " ".join(w.text for w in ws) for engine, ws in words.items()}
        self.assertEqual(texts[stbt.OcrEngine.TESSERACT], "Channel 104: Evening News")
        self.assertEqual(texts[stbt.OcrEngine.LSTM], "Channel 104: Evening News")
        self.assertNotEqual([w.conf for w in words[stbt.OcrEngine.TESSERACT]],
                            [w.conf for w in words[stbt.OcrEngine.LSTM]])

    @staticmethod
    def params(engine, lang=None):
        return _ocr._Params(mode=stbt.OcrMode.SINGLE_LINE, lang=lang, tesseract_config=None,  # pylint: disable=protected-access
                               user_words=None, user_patterns=None, upsample=None, text_color=None,
                               text_color_threshold=None, engine=engine, char_whitelist=None)

    def test_without_the_legacy_models_it_reads_with_lstm_and_says_so(self):
        _ocr_tesseract.LEGACY_TESSDATA = self.root  # no eng.traineddata with the legacy models here
        lines = []
        real_log = _ocr.log
        _ocr.log = lines.append
        try:
            for engine in (stbt.OcrEngine.TESSERACT, stbt.OcrEngine.TESSERACT_AND_LSTM):
                text, argvs = self.reads(engine=engine)
                self.assertEqual(text, "Channel 104: Evening News", engine)
                self.assertEqual(argvs[-1][argvs[-1].index("--oem") + 1], "1", engine)
                self.assertNotIn("--tessdata-dir", argvs[-1])
        finally:
            _ocr.log = real_log
        self.assertIn("engine=LSTM (asked TESSERACT)", lines[0])
        self.assertIn("engine=LSTM (asked TESSERACT_AND_LSTM)", lines[1])

    def test_a_language_without_the_legacy_models_reads_with_lstm(self):
        # eng+osd: farmhand's folder has English's legacy models, not the script detector's.
        params = self.params(stbt.OcrEngine.TESSERACT, lang="eng+osd")
        self.assertEqual((params.engine, params.tessdata), (stbt.OcrEngine.LSTM, None))
        self.assertIsNone(_ocr_tesseract.legacy_tessdata("not a language"))


class PackNoAutoSingleLine(OcrTestCase):
    CONF = "[ocr]\nauto_single_line = false\n"

    def test_auto_single_line_false_keeps_the_default_modes_page_analysis(self):
        frame = render([("OK", (100, 100), 28, WHITE)])
        region = stbt.Region(90, 90, width=60, height=40)
        argvs = []
        real = _ocr_tesseract._run  # pylint: disable=protected-access

        def spy(argv, stdin, timeout):
            argvs.append(argv)
            return real(argv, stdin, timeout)
        _ocr_tesseract._run = spy  # pylint: disable=protected-access
        try:
            stbt.ocr(frame, region)
        finally:
            _ocr_tesseract._run = real  # pylint: disable=protected-access
        self.assertEqual(argvs[-1][argvs[-1].index("--psm") + 1], "3")


class PackEngineNumber(OcrTestCase):
    CONF = "[ocr]\nengine = 0\n"

    def test_engine_by_number(self):
        self.assertEqual(stbt.ocr(render(MENU), LINE1), "Channel 104: Evening News")


class PackEngineWrong(OcrTestCase):
    CONF = "[ocr]\nengine = cuneiform\n"

    def test_a_wrong_engine_is_a_configuration_error(self):
        with self.assertRaises(stbt.ConfigurationError) as cm:
            stbt.ocr(render(MENU), LINE1)
        self.assertIn("cuneiform", str(cm.exception))


class Timeout(OcrTestCase):
    CONF = "[ocr]\ntimeout_secs = 0.001\n"

    def test_a_tesseract_that_takes_too_long_is_stopped(self):
        _ocr_tesseract._installed_langs()  # pylint: disable=protected-access
        with self.assertRaises(stbt.UITestError) as cm:
            stbt.ocr(render(MENU))
        self.assertIn("did not finish within 0.001 s", str(cm.exception))


class Log(WithDaemon, OcrTestCase):
    CAPTURE = False

    def setUp(self):
        OcrTestCase.setUp(self)
        WithDaemon.setUp(self)

    def tearDown(self):
        WithDaemon.tearDown(self)
        OcrTestCase.tearDown(self)

    def test_reads_appear_in_the_runs_log(self):
        frame = render(MENU)
        stbt.ocr(frame, LINE1)
        stbt.match_text("Recordings", frame)
        stbt.match_text("Morning", frame, region=LINE1)
        stbt.ocr(frame)  # three lines of text on the screen: still one line in the log
        lines = [t for _, t in self.daemon.logs]
        self.assertTrue(any(t.startswith("ocr in Region(x=90, y=90, right=510, bottom=135)")
                            and "'Channel 104: Evening News'" in t for t in lines), lines)
        self.assertTrue(any(t.startswith("match_text 'Recordings'") and "found at Region(" in t
                            for t in lines), lines)
        self.assertTrue(any(t.startswith("match_text 'Morning'") and t.endswith("not found") for t in lines), lines)
        whole = [t for t in lines if t.startswith("ocr in Region(x=0, y=0, right=1280, bottom=720)")]
        self.assertEqual(len(whole), 1, lines)
        self.assertIn("Recordings", whole[0])
        self.assertNotIn("\n", whole[0])


if __name__ == "__main__":
    unittest.main()


class Worker(OcrTestCase):
    """The resident tesserocr worker: one process reused across reads, killed and restarted on a hang or a
    crash, and the same answers as the tesseract command."""

    def setUp(self):
        super().setUp()
        self.assertTrue(_ocr_tesseract.USE_WORKER)
        _ocr_tesseract._installed_langs()  # pylint: disable=protected-access

    def tearDown(self):
        _ocr_tesseract._worker_test_sleep = 0.0  # pylint: disable=protected-access
        _ocr_tesseract.USE_WORKER = True
        super().tearDown()

    def test_one_worker_process_serves_every_read(self):
        frame = render(MENU)
        stbt.ocr(frame, LINE1)
        pid = _ocr_tesseract._worker_pid()  # pylint: disable=protected-access
        self.assertIsNotNone(pid)
        starts = _ocr_tesseract._worker_starts  # pylint: disable=protected-access
        for region in (LINE1, stbt.Region(90, 190, width=300, height=45), stbt.Region(690, 390, width=400, height=45)):
            stbt.ocr(frame, region, mode=stbt.OcrMode.SINGLE_LINE)
        self.assertTrue(stbt.match_text("Recordings", frame))
        self.assertEqual(_ocr_tesseract._worker_pid(), pid)  # pylint: disable=protected-access
        self.assertEqual(_ocr_tesseract._worker_starts, starts)  # pylint: disable=protected-access

    def test_a_hung_worker_is_killed_at_the_timeout_and_the_next_read_works(self):
        frame = render(MENU)
        stbt.ocr(frame, stbt.Region(90, 190, width=300, height=45))  # the worker is up
        pid = _ocr_tesseract._worker_pid()  # pylint: disable=protected-access
        self._timeout(1)
        _ocr_tesseract._worker_test_sleep = 3600.0  # pylint: disable=protected-access
        with self.assertRaises(stbt.UITestError) as cm:
            stbt.ocr(frame, LINE1)
        self.assertIn("did not finish within 1 s", str(cm.exception))
        self.assertIsNone(_ocr_tesseract._worker_pid())  # pylint: disable=protected-access
        with self.assertRaises(ProcessLookupError):
            os.kill(pid, 0)
        _ocr_tesseract._worker_test_sleep = 0.0  # pylint: disable=protected-access
        self._timeout(60)  # the new worker loads its model again: no race with a loaded machine
        self.assertEqual(stbt.ocr(frame, LINE1), "Channel 104: Evening News")
        self.assertNotEqual(_ocr_tesseract._worker_pid(), pid)  # pylint: disable=protected-access

    def _timeout(self, secs):
        os.makedirs(os.path.join(self.root, "config"), exist_ok=True)
        with open(os.path.join(self.root, "config", "stbt.conf"), "w") as f:
            f.write("[ocr]\ntimeout_secs = %g\n" % secs)
        _config._reset()  # pylint: disable=protected-access

    def test_a_crashed_worker_fails_the_read_and_the_next_read_works(self):
        frame = render(MENU)
        stbt.ocr(frame, stbt.Region(90, 190, width=300, height=45))
        pid = _ocr_tesseract._worker_pid()  # pylint: disable=protected-access
        # The worker dies in the middle of the read: it sleeps first, so the kill lands while the read waits.
        _ocr_tesseract._worker_test_sleep = 3600.0  # pylint: disable=protected-access
        real = _ocr_tesseract._worker_exchange  # pylint: disable=protected-access

        def kill_then_exchange(p, data, timeout):
            if data:
                os.kill(p.pid, signal.SIGKILL)
            return real(p, data, timeout)
        _ocr_tesseract._worker_exchange = kill_then_exchange  # pylint: disable=protected-access
        try:
            with self.assertRaises(stbt.UITestError) as cm:
                stbt.ocr(frame, LINE1)
        finally:
            _ocr_tesseract._worker_exchange = real  # pylint: disable=protected-access
        self.assertIn("OCR worker (tesserocr) died", str(cm.exception))
        _ocr_tesseract._worker_test_sleep = 0.0  # pylint: disable=protected-access
        self.assertEqual(stbt.ocr(frame, LINE1), "Channel 104: Evening News")
        self.assertNotEqual(_ocr_tesseract._worker_pid(), pid)  # pylint: disable=protected-access

    def test_the_worker_and_the_command_give_the_same_answers(self):
        frames = [render(MENU), render([("AB12 CD34", (100, 100), 28, WHITE)]),
                  render([("Dark on light 42", (200, 300), 20, (20, 20, 20))], background=(230, 230, 230))]
        reads = []
        for frame in frames:
            for kwargs in ({}, {"region": LINE1}, {"region": LINE1, "mode": stbt.OcrMode.SINGLE_LINE},
                           {"upsample": False}, {"text_color": WHITE}, {"tesseract_user_words": ["Evening"]},
                           {"tesseract_config": {"tessedit_char_blacklist": "ABCD"}}):
                reads.append((frame, kwargs))
        got = {}
        for use in (True, False):
            _ocr_tesseract.USE_WORKER = use
            _ocr_tesseract._cache.clear()  # pylint: disable=protected-access
            got[use] = [stbt.ocr(frame, **kwargs) for frame, kwargs in reads]
            got[use].append(repr([stbt.match_text(t, frame).region for frame in frames
                                  for t in ("Recordings", "CD34", "light")]))
            # match_text's word boxes and confidences: the TSV itself.
            _ocr_tesseract._cache.clear()  # pylint: disable=protected-access
            params = _ocr._Params(stbt.OcrMode.PAGE_SEGMENTATION_WITHOUT_OSD,  # pylint: disable=protected-access
                                  None, None, None, None, None, None, None, None, None)
            grey = _ocr_prepare.prepare(frames[0], stbt.Region.ALL, params)[2]
            got[use].append(_ocr_tesseract.read(grey, params, True))
        self.assertIn("Channel 104: Evening News", got[True])
        words = _ocr_tesseract.parse_tsv(got[True][-1])  # pylint: disable=protected-access
        self.assertIn("Recordings", [w.text for w in words])
        self.assertTrue(all(0 <= w.conf <= 100 for w in words), words)
        self.assertEqual(got[True], got[False])

    def test_without_tesserocr_every_read_runs_the_command_and_the_log_says_so_once(self):
        _ocr_tesseract._worker_kill()  # pylint: disable=protected-access
        shadow = os.path.join(self.root, "shadow")
        os.makedirs(shadow)
        with open(os.path.join(shadow, "tesserocr.py"), "w") as f:
            f.write("raise ImportError(\"No module named 'tesserocr'\")\n")
        saved_path, logged, commands = os.environ.get("PYTHONPATH"), [], []
        real_log, real_command = _ocr_tesseract.log, _ocr_tesseract._run_command  # pylint: disable=protected-access

        def command_spy(argv, stdin, timeout):
            commands.append(argv)
            return real_command(argv, stdin, timeout)
        os.environ["PYTHONPATH"] = shadow
        _ocr_tesseract.log, _ocr_tesseract._run_command = logged.append, command_spy  # pylint: disable=protected-access
        try:
            frame = render(MENU)
            self.assertEqual(stbt.ocr(frame, LINE1), "Channel 104: Evening News")
            self.assertTrue(stbt.match_text("Recordings", frame))
        finally:
            _ocr_tesseract.log, _ocr_tesseract._run_command = real_log, real_command  # pylint: disable=protected-access
            if saved_path is None:
                os.environ.pop("PYTHONPATH")
            else:
                os.environ["PYTHONPATH"] = saved_path
            missing, _ocr_tesseract._worker_missing = _ocr_tesseract._worker_missing, False  # pylint: disable=protected-access
        self.assertTrue(missing)
        self.assertIsNone(_ocr_tesseract._worker_pid())  # pylint: disable=protected-access
        self.assertEqual(len([c for c in commands if c[1] == "stdin"]), 2)
        notes = [line for line in logged if "python3-tesserocr" in line]
        self.assertEqual(len(notes), 1, logged)
        self.assertIn("No module named 'tesserocr'", notes[0])
        self.assertIn("each read runs the tesseract command", notes[0])

    def test_a_forked_child_reads_with_its_own_worker_and_leaves_its_parents_alone(self):
        frame = render(MENU)
        stbt.ocr(frame, stbt.Region(90, 190, width=300, height=45))
        pid = _ocr_tesseract._worker_pid()  # pylint: disable=protected-access
        r, w = os.pipe()
        child = os.fork()
        if child == 0:  # the child: one read, its answer and its worker's pid to the parent
            code = 1
            try:
                os.close(r)
                text = stbt.ocr(frame, LINE1)
                os.write(w, ("%s\n%s" % (_ocr_tesseract._worker_pid(), text)).encode())  # pylint: disable=protected-access
                code = 0
            finally:
                os._exit(code)  # pylint: disable=protected-access
        os.close(w)
        with os.fdopen(r, "rb") as f:
            answer = f.read().decode()
        self.assertEqual(os.waitpid(child, 0)[1], 0)
        child_worker, text = answer.split("\n", 1)
        self.assertEqual(text, "Channel 104: Evening News")
        self.assertNotEqual(child_worker, str(pid))
        self.assertEqual(_ocr_tesseract._worker_pid(), pid)  # pylint: disable=protected-access
        self.assertEqual(stbt.ocr(frame, LINE1), "Channel 104: Evening News")
