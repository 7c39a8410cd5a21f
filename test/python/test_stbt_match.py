"""The matching corpus: stbt.match / match_all / wait_for_match against
pictures drawn here (test/python/_match_corpus.py), each case with the answer
the documented algorithm gives (docs/stbt-matching.md):

- first pass: score = 1 - mean square difference / 255² over the opaque
  template pixels (3 channels), found through a 3-level pyramid; it must
  reach match_threshold (0.98, i.e. a root-mean-square difference of at most
  about 36 grey levels);
- confirm pass: grey levels, each side stretched to 0..255 (NORMED_ABSDIFF),
  pixels differing by more than confirm_threshold * 255 (0.70 -> 178.5),
  eroded erode_passes times with a 3x3 square; any pixel left = no match.

`first_pass_score` in the corpus computes the first-pass score straight from
its definition (brute force, float64) so the fast pyramid search is checked
against it.
"""

import os
import tempfile
import unittest

import cv2
import numpy as np

import stbt_core as stbt
from stbt_core import _config, _match
from _match_corpus import (LABELS, FONT, TEXT_COLOR, background, button, crop, first_pass_score, jpeg,
                           logo, logo_template, menu_screen, noisy, with_alpha)

BUTTON_X = [25 + 205 * i for i in range(6)]
BUTTON_Y = 203


def screen(labels=LABELS, border_at=None, border=None):
    img = background()
    for i, label in enumerate(labels):
        button(img, BUTTON_X[i], BUTTON_Y, label, border=border if i == border_at else None)
    logo(img, 1150, 80)
    cv2.putText(img, "Recordings and Settings", (120, 500), FONT, 1.0, TEXT_COLOR, 2, cv2.LINE_AA)
    return img


def heading(text):
    img = background()
    cv2.putText(img, text, (100, 560), FONT, 2.0, TEXT_COLOR, 6, cv2.LINE_AA)
    return img


class Base(unittest.TestCase):
    def setUp(self):
        # built-in [match] defaults only: no test pack around
        self.dir = tempfile.mkdtemp(prefix="stbt-match-")
        os.environ["FARMHAND_TEST_PACK_DIR"] = self.dir
        os.environ.pop("FARMHAND_CONFIG", None)
        _config._reset()  # pylint: disable=protected-access
        self.menu = menu_screen()
        self.movies = crop(self.menu, BUTTON_X[2], BUTTON_Y, 200, 100)

    def tearDown(self):
        os.environ.pop("FARMHAND_TEST_PACK_DIR", None)
        _config._reset()  # pylint: disable=protected-access


class OpaqueTemplates(Base):
    def test_exact_crop_found_at_its_place_with_score_1(self):
        m = stbt.match(self.movies, frame=self.menu)
        self.assertTrue(m)
        self.assertEqual(m.region, stbt.Region(BUTTON_X[2], BUTTON_Y, width=200, height=100))
        self.assertEqual(m.position, stbt.Position(BUTTON_X[2], BUTTON_Y))
        self.assertGreater(m.first_pass_result, 0.999)
        self.assertIs(m.frame, self.menu)
        # the template as a stbt.Image (an array has no file name)
        self.assertIsInstance(m.image, stbt.Image)
        self.assertTrue(np.array_equal(m.image, self.movies))
        self.assertIsNone(m.image.filename)

    def test_every_pixel_phase_is_found_exactly(self):
        # the pyramid halves twice; a place at any x, y mod 4 must come back to the pixel
        for dx in range(4):
            for dy in range(4):
                x, y = 300 + dx, 400 + dy
                t = crop(self.menu, x, y, 160, 90)
                m = stbt.match(t, frame=self.menu)
                self.assertTrue(m, (dx, dy, m))
                self.assertEqual((m.region.x, m.region.y), (x, y))

    def test_absent_template_does_not_match_and_region_is_still_the_best_place(self):
        frame = screen(["Home", "Search", "Music", "Series", "Sport", "Kids"])
        m = stbt.match(self.movies, frame=frame)
        self.assertFalse(m)
        self.assertIsInstance(m.region, stbt.Region)
        self.assertEqual((m.region.width, m.region.height), (200, 100))
        # "Music" where "Movies" was: close enough for the first pass, the confirm pass rejects it
        self.assertGreater(m.first_pass_result, 0.98)
        self.assertAlmostEqual(m.first_pass_result, first_pass_score(frame, with_alpha(self.movies), *m.position),
                               places=4)

    def test_region_limits_the_search(self):
        left = stbt.Region(0, 0, width=400, height=720)
        self.assertFalse(stbt.match(self.movies, frame=self.menu, region=left))
        around = stbt.Region(BUTTON_X[2] - 100, BUTTON_Y - 50, width=400, height=200)
        m = stbt.match(self.movies, frame=self.menu, region=around)
        self.assertTrue(m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))

    def test_a_frame_or_region_smaller_than_the_template_is_a_value_error_saying_so(self):
        with self.assertRaises(ValueError) as cm:
            stbt.match(self.movies, frame=self.menu[:99, :300])
        self.assertIn("Frame (99, 300, 3) must be larger than reference image (100, 200, 3)", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            stbt.match(self.movies, frame=self.menu, region=stbt.Region(BUTTON_X[2], BUTTON_Y, width=100, height=50))
        self.assertIn("Region(x=435, y=203, right=535, bottom=253) must be larger than reference image (100, 200, 3)",
                      str(cm.exception))
        # big enough as asked, but it runs off the frame: the part inside is what must hold the template
        with self.assertRaises(ValueError) as cm:
            stbt.match(self.movies, frame=self.menu, region=stbt.Region(1081, 620, width=200, height=100))
        self.assertIn("Region(x=1081, y=620, right=1280, bottom=720) must be larger", str(cm.exception))
        with self.assertRaises(ValueError):
            list(stbt.match_all(self.movies, frame=self.menu[:50]))

    def test_frame_or_region_exactly_the_templates_size(self):
        self.assertTrue(stbt.match(self.movies, frame=self.movies.copy()))
        m = stbt.match(self.movies, frame=self.menu, region=stbt.Region(BUTTON_X[2], BUTTON_Y, width=200, height=100))
        self.assertTrue(m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))
        self.assertFalse(stbt.match(self.movies, frame=self.menu,
                                    region=stbt.Region(BUTTON_X[3], BUTTON_Y, width=200, height=100)))
        # a region partly outside the frame is clipped to it
        corner = crop(self.menu, 1080, 620, 200, 100)
        m = stbt.match(corner, frame=self.menu, region=stbt.Region(1000, 600, width=500, height=500))
        self.assertTrue(m)
        self.assertEqual(m.position, (1080, 620))

    def test_searching_again_in_the_region_found_gives_the_same_answer(self):
        # what a page object does: find, then check again exactly there
        rng = np.random.default_rng(11)
        picture = cv2.GaussianBlur(rng.integers(0, 255, (720, 1280, 3), np.uint8), (5, 5), 0)
        cases = [(self.movies, self.menu), (self.menu, self.menu), (self.movies[::-1].copy(), self.menu),
                 (crop(picture, 300, 200, 90, 160), picture), (np.zeros((10, 10, 3), np.uint8), np.zeros_like(picture)),
                 (with_alpha(self.movies, [(10, 15, 180, 70)]), self.menu),
                 (np.zeros((40, 50, 4), np.uint8), self.menu)]
        for template, frame in cases:
            everywhere = stbt.match(template, frame=frame)
            there = stbt.match(template, frame=frame, region=everywhere.region)
            self.assertEqual((bool(everywhere), everywhere.region), (bool(there), there.region))
            self.assertAlmostEqual(everywhere.first_pass_result, there.first_pass_result, places=4)

    def test_match_all_finds_each_copy_best_first_without_overlap(self):
        icon = np.zeros((60, 60, 3), np.uint8)
        cv2.circle(icon, (30, 30), 25, (0, 0, 255), -1)
        cv2.putText(icon, "7", (18, 42), FONT, 1.0, TEXT_COLOR, 3, cv2.LINE_AA)
        frame = background()
        places = [(101 + 150 * i, 551 + (i % 2) * 3) for i in range(7)]
        for x, y in places:
            frame[y:y + 60, x:x + 60] = icon
        found = list(stbt.match_all(icon, frame=frame))
        self.assertEqual(sorted(r.position for r in found), sorted(places))
        scores = [r.first_pass_result for r in found]
        self.assertEqual(scores, sorted(scores, reverse=True))
        for i, a in enumerate(found):
            for b in found[i + 1:]:
                self.assertIsNone(stbt.Region.intersect(a.region, b.region))

    def test_match_all_of_an_absent_template_is_empty(self):
        self.assertEqual(list(stbt.match_all(logo_template()[:, :, :3] // 2 + 100, frame=self.menu)), [])


class TransparentTemplates(Base):
    def test_transparent_label_matches_every_button_opaque_twin_only_its_own(self):
        # the label area (55 % of the pixels) is transparent: any label matches
        t = with_alpha(self.movies, [(10, 15, 180, 70)])
        self.assertGreater((t[:, :, 3] == 0).mean(), 0.5)
        found = list(stbt.match_all(t, frame=self.menu))
        self.assertEqual(sorted(r.position.x for r in found), BUTTON_X)
        self.assertTrue(all(r.position.y == BUTTON_Y for r in found))
        # the same pixels without alpha: only the Movies button
        opaque = list(stbt.match_all(self.movies, frame=self.menu))
        self.assertEqual([r.position for r in opaque], [(BUTTON_X[2], BUTTON_Y)])

    def test_badge_with_transparent_surround_matches_over_any_background(self):
        frame = self.menu.copy()
        rng = np.random.default_rng(5)
        frame[420:700, 700:1000] = rng.integers(0, 255, (280, 300, 3), np.uint8)  # "photo" behind
        logo(frame, 853, 561)
        t = logo_template()
        found = sorted(r.position for r in stbt.match_all(t, frame=frame))
        self.assertEqual(found, [(803, 511), (1100, 30)])
        # the case: alpha dropped, the black surround is compared and fails
        m = stbt.match(t[:, :, :3], frame=frame, region=stbt.Region(803, 511, width=100, height=100))
        self.assertFalse(m)
        self.assertLess(first_pass_score(frame, with_alpha(t[:, :, :3]), 803, 511), 0.98)
        self.assertLess(m.first_pass_result, 0.98)

    def test_partly_transparent_pixels_are_ignored_too(self):
        t = with_alpha(self.movies)
        t[15:85, 10:190, 3] = 128  # half-transparent: ignored like alpha 0
        self.assertEqual(len(list(stbt.match_all(t, frame=self.menu))), 6)

    def test_score_matches_the_definition_with_transparency(self):
        t = with_alpha(self.movies, [(10, 15, 180, 70)])
        frame = noisy(self.menu, 3)
        m = stbt.match(t, frame=frame, region=stbt.Region(BUTTON_X[4] - 20, 150, width=260, height=200))
        self.assertEqual(m.position, (BUTTON_X[4], BUTTON_Y))
        self.assertAlmostEqual(m.first_pass_result, first_pass_score(frame, t, BUTTON_X[4], BUTTON_Y), places=3)

    def test_a_mask_of_a_few_rectangles_scores_as_a_mask_of_many(self):
        # a mask of a few rectangles is summed from its corners and compared rectangle by rectangle; a
        # mask of many pieces through a correlation and the mask itself: the same scores either way
        frame = noisy(self.menu, 3)
        holed = with_alpha(self.movies, [(10, 15, 180, 70)])
        speckled = holed.copy()
        speckled[::7, ::5, 3] = 0  # hundreds of one-pixel holes
        self.assertIsNotNone(_match._mask_corners(holed[:, :, 3]))  # pylint: disable=protected-access
        self.assertIsNotNone(_match._mask_rects(holed[:, :, 3]))  # pylint: disable=protected-access
        self.assertIsNone(_match._mask_corners(speckled[:, :, 3]))  # pylint: disable=protected-access
        self.assertIsNone(_match._mask_rects(speckled[:, :, 3]))  # pylint: disable=protected-access
        region = stbt.Region(BUTTON_X[4] - 20, 150, width=260, height=200)
        for t in (holed, speckled):
            m = stbt.match(t, frame=frame, region=region)
            self.assertEqual(m.position, (BUTTON_X[4], BUTTON_Y))
            self.assertAlmostEqual(m.first_pass_result, first_pass_score(frame, t, BUTTON_X[4], BUTTON_Y),
                                   places=5)

    def test_mask_rectangles_and_corners_cover_exactly_the_compared_pixels(self):
        rng = np.random.default_rng(30)
        for _ in range(200):
            h, w = rng.integers(1, 12, 2)
            mask = (rng.random((h, w)) < rng.random()).astype(np.float32)
            rects = _match._mask_rects(mask)  # pylint: disable=protected-access
            if rects is not None:
                covered = np.zeros((h, w), int)
                for x0, y0, x1, y1 in rects:
                    covered[y0:y1, x0:x1] += 1
                self.assertTrue((covered == (mask > 0)).all(), (mask, rects))
            corners = _match._mask_corners(mask)  # pylint: disable=protected-access
            if corners is not None:
                picture = rng.integers(0, 3 * 255 * 255, (h + 5, w + 7)).astype(np.float32)
                sums = _match._masked_sums(picture, corners, (6, 8))  # pylint: disable=protected-access
                want = np.array([[(picture[y:y + h, x:x + w].astype(np.float64) * mask).sum()
                                  for x in range(8)] for y in range(6)])
                self.assertTrue(np.array_equal(sums, want.astype(np.float32)), (mask, sums, want))

    def test_other_first_pass_methods_honour_transparency(self):
        t = with_alpha(self.movies, [(10, 15, 180, 70)])
        for method in (stbt.MatchMethod.SQDIFF_NORMED, stbt.MatchMethod.CCORR_NORMED,
                       stbt.MatchMethod.CCOEFF_NORMED):
            params = stbt.MatchParameters(match_method=method, match_threshold=0.95)
            m = stbt.match(t, frame=self.menu, match_parameters=params,
                           region=stbt.Region(BUTTON_X[5] - 30, 170, width=260, height=170))
            self.assertTrue(m, method)
            self.assertEqual(m.position, (BUTTON_X[5], BUTTON_Y), method)


class AgreesWithAFullSearch(Base):
    """Random crops (random size and place, some with a transparent hole)
    of a noisy screen: the pyramid's answer is the full-resolution search's
    best place, or a near tie of it (within 0.005: the flat insides of six
    equal buttons differ only by noise)."""

    def test_random_crops(self):
        rng = np.random.default_rng(20261126)
        screen_ = self.menu.copy()
        logo(screen_, 300, 600)
        for i in range(14):
            w, h = int(rng.integers(24, 300)), int(rng.integers(24, 200))
            x, y = int(rng.integers(0, 1280 - w)), int(rng.integers(0, 720 - h))
            t = crop(screen_, x, y, w, h)
            holes = [] if i % 2 == 0 else [(int(rng.integers(0, w // 2)), int(rng.integers(0, h // 2)), w // 2, h // 2)]
            ta = with_alpha(t, holes)
            frame = noisy(screen_, 3, seed=i)
            m = stbt.match(ta, frame=frame)
            opaque = (ta[:, :, 3] == 255).astype(np.float32)
            full = cv2.matchTemplate(frame.astype(np.float32), t.astype(np.float32), cv2.TM_SQDIFF,
                                     mask=cv2.merge([opaque] * 3))
            _, _, (bx, by), _ = cv2.minMaxLoc(full)
            best = first_pass_score(frame, ta, bx, by)
            self.assertAlmostEqual(m.first_pass_result, first_pass_score(frame, ta, *m.position), places=3)
            if m.position != (bx, by):
                self.assertGreater(m.first_pass_result, best - 0.005, (i, w, h, x, y, m, (bx, by), best))


class NearMisses(Base):
    """A big template (1200x500) with one glyph changed: diluted among all
    the equal pixels, the change is far inside the first pass's budget, so it
    accepts it; the confirm pass sees a blob of differing pixels thicker than
    the erosion removes."""

    def setUp(self):
        super().setUp()
        self.template = crop(heading("Recordings and Settings"), 50, 150, 1200, 500)

    def check(self, text, first_pass_ok, matched, **params):
        frame = heading(text)
        m = stbt.match(self.template, frame=frame, match_parameters=stbt.MatchParameters(**params))
        self.assertEqual(m.position, (50, 150))
        self.assertEqual(m.first_pass_result >= 0.98, first_pass_ok, (text, m))
        self.assertAlmostEqual(m.first_pass_result, first_pass_score(frame, with_alpha(self.template), 50, 150),
                               places=3)
        self.assertEqual(bool(m), matched, (text, params, m))

    def test_same_text_matches(self):
        self.check("Recordings and Settings", True, True)

    def test_one_changed_glyph_passes_the_first_pass_and_fails_the_confirm(self):
        self.check("Recordings and Settinqs", True, False)            # g -> q: a 6-pixel-wide stroke differs
        self.check("Recordings and Settinqs", True, True, confirm_method="none")
        self.check("Recordings and Settinqs", True, False, erode_passes=3)

    def test_erosion_forgives_thin_differences(self):
        # i -> l: the difference is the short stem between the i's dot and its body
        self.check("Recordings and Settlngs", True, False, erode_passes=1)
        self.check("Recordings and Settlngs", True, True, erode_passes=3)

    def test_confirm_threshold_scale(self):
        # the changed strokes differ by about 255 after stretching: above 0.70 * 255, below 1.0 * 255
        self.check("Recordings and Settinqs", True, True, confirm_threshold=1.0)
        self.check("Recordings and Settinqs", True, True, confirm_method="absdiff", confirm_threshold=1.0)
        self.check("Recordings and Settinqs", True, False, confirm_method="absdiff")

    def test_one_pixel_border(self):
        white = screen(border_at=2, border=(255, 255, 255))
        place = stbt.Region(BUTTON_X[2], BUTTON_Y, width=200, height=100)
        # a white 1-pixel outline on 596 of 20000 pixels: RMS about 31 levels, within the first pass's budget
        score = first_pass_score(white, with_alpha(self.movies), BUTTON_X[2], BUTTON_Y)
        self.assertGreater(score, 0.98)
        self.assertLess(score, 0.99)
        m = stbt.match(self.movies, frame=white, region=place)
        self.assertAlmostEqual(m.first_pass_result, score, places=4)
        # one erosion removes a 1-pixel line: it matches; without erosion the outline is a difference
        self.assertTrue(m)
        self.assertFalse(stbt.match(self.movies, frame=white, region=place,
                                    match_parameters=stbt.MatchParameters(erode_passes=0)))


class CaptureArtefacts(Base):
    def test_noise_matches(self):
        # Gaussian noise of sigma 4 grey levels: mean square difference about 16 -> 1 - 16 / 255²
        frame = noisy(self.menu, 4)
        m = stbt.match(self.movies, frame=frame)
        self.assertTrue(m, m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))
        self.assertAlmostEqual(m.first_pass_result, 1 - (4 / 255.0) ** 2, delta=0.0003)

    def test_a_difference_beyond_the_budget_fails_the_first_pass(self):
        # the button 40 grey levels brighter everywhere: RMS 40 > 36 -> 1 - (40 / 255)² = 0.975
        frame = self.menu.copy()
        frame[BUTTON_Y:BUTTON_Y + 100, BUTTON_X[2]:BUTTON_X[2] + 200] += np.uint8(40)
        frame[200:310, 430:640] = np.maximum(frame[200:310, 430:640], self.menu[200:310, 430:640])  # no wrap
        expected = first_pass_score(frame, with_alpha(self.movies), BUTTON_X[2], BUTTON_Y)
        self.assertLess(expected, 0.98)
        self.assertGreater(expected, 0.97)
        around = stbt.Region(BUTTON_X[2] - 20, BUTTON_Y - 20, width=240, height=140)
        m = stbt.match(self.movies, frame=frame, region=around)
        self.assertFalse(m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))  # still the best place
        self.assertAlmostEqual(m.first_pass_result, expected, places=4)
        # a threshold lowered to 0.97 accepts it; so does the confirm pass (it stretches grey levels)
        self.assertTrue(stbt.match(self.movies, frame=frame, region=around,
                                   match_parameters=stbt.MatchParameters(match_threshold=0.97)))

    def test_jpeg_quality_70(self):
        # JPEG at quality 70 around white text on blue: RMS about 6 levels
        frame = jpeg(self.menu, 70)
        expected = first_pass_score(frame, with_alpha(self.movies), BUTTON_X[2], BUTTON_Y)
        self.assertGreater(expected, 0.999)
        m = stbt.match(self.movies, frame=frame)
        self.assertTrue(m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))
        self.assertAlmostEqual(m.first_pass_result, expected, places=4)

    def test_templates_are_not_rescaled_a_720p_template_does_not_match_a_1080p_frame(self):
        big = cv2.resize(self.menu, (1920, 1080), interpolation=cv2.INTER_CUBIC)
        m = stbt.match(self.movies, frame=big)
        self.assertFalse(m)
        self.assertLess(m.first_pass_result, 0.98)
        # scaled back to 720p (what stb-tester's capture hands to tests), it matches at its place
        back = cv2.resize(big, (1280, 720), interpolation=cv2.INTER_AREA)
        m = stbt.match(self.movies, frame=back)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))
        self.assertEqual(bool(m), first_pass_score(back, with_alpha(self.movies), BUTTON_X[2], BUTTON_Y) >= 0.98)
        self.assertTrue(m)


class Parameters(Base):
    def test_built_in_defaults(self):
        p = stbt.MatchParameters()
        self.assertEqual(p.match_method, stbt.MatchMethod.SQDIFF)
        self.assertEqual(p.match_threshold, 0.98)
        self.assertEqual(p.confirm_method, stbt.ConfirmMethod.NORMED_ABSDIFF)
        self.assertEqual(p.confirm_threshold, 0.70)
        self.assertEqual(p.erode_passes, 1)
        self.assertEqual(p.pyramid_levels, 3)

    def test_defaults_come_from_the_packs_stbt_conf(self):
        os.makedirs(os.path.join(self.dir, "config"))
        with open(os.path.join(self.dir, "config", "stbt.conf"), "w", encoding="utf-8") as f:
            f.write("[match]\nmatch_threshold = 0.97\nconfirm_method = absdiff\nerode_passes = 2\n"
                    "match_method = ccoeff-normed\n")
        _config._reset()  # pylint: disable=protected-access
        p = stbt.MatchParameters()
        self.assertEqual((p.match_threshold, p.confirm_method, p.erode_passes, p.match_method),
                         (0.97, stbt.ConfirmMethod.ABSDIFF, 2, stbt.MatchMethod.CCOEFF_NORMED))
        self.assertEqual(stbt.MatchParameters(match_threshold=0.5).match_threshold, 0.5)
        # and match() uses them: a lower threshold lets a farther place through
        frame = self.menu.copy()
        frame[BUTTON_Y:BUTTON_Y + 100, BUTTON_X[2]:BUTTON_X[2] + 200] //= 2
        around = stbt.Region(BUTTON_X[2] - 20, BUTTON_Y - 20, width=240, height=140)
        for threshold, matched in ((0.98, False), (0.5, True)):
            with open(os.path.join(self.dir, "config", "stbt.conf"), "w", encoding="utf-8") as f:
                f.write("[match]\nmatch_threshold = %s\n" % threshold)
            _config._reset()  # pylint: disable=protected-access
            self.assertEqual(bool(stbt.match(self.movies, frame=frame, region=around)), matched, threshold)

    def test_hostile_values_stay_bounded(self):
        # a pack's stbt.conf asking for a billion erosions or pyramid levels: same answers, no hang
        params = stbt.MatchParameters(erode_passes=10 ** 9)
        self.assertTrue(stbt.match(self.movies, frame=self.menu, match_parameters=params))
        os.makedirs(os.path.join(self.dir, "config"))
        with open(os.path.join(self.dir, "config", "stbt.conf"), "w", encoding="utf-8") as f:
            f.write("[match]\npyramid_levels = 1000000\n")
        _config._reset()  # pylint: disable=protected-access
        m = stbt.match(self.movies, frame=self.menu)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))
        with self.assertRaises(ValueError):
            stbt.match(np.zeros((0, 5, 3), np.uint8), frame=self.menu)
        with self.assertRaises(ValueError):
            stbt.MatchParameters(erode_passes=-1)

    def test_string_names_as_in_stbt_conf(self):
        p = stbt.MatchParameters(match_method="sqdiff-normed", confirm_method="normed-absdiff")
        self.assertEqual(p.match_method, stbt.MatchMethod.SQDIFF_NORMED)
        self.assertEqual(p.confirm_method, stbt.ConfirmMethod.NORMED_ABSDIFF)
        with self.assertRaises(ValueError):
            stbt.MatchParameters(match_method="nearest")


class Inputs(Base):
    """Greyscale, 16-bit and transparent-everywhere inputs, and the repr."""

    def grey_picture(self):
        rng = np.random.default_rng(3)
        return cv2.GaussianBlur(rng.integers(0, 255, (240, 320), np.uint8), (5, 5), 0)

    def test_grey_template_in_a_grey_frame(self):
        frame = self.grey_picture()
        template = frame[40:200, 100:192].copy()
        for method, threshold in ((stbt.MatchMethod.SQDIFF, 0.98), (stbt.MatchMethod.SQDIFF_NORMED, 0.8)):
            params = stbt.MatchParameters(method, threshold)
            for t, f in ((template, frame), (template[:, :, None], frame[:, :, None])):  # 2 or 3 dimensions
                m = stbt.match(t, frame=f, match_parameters=params)
                self.assertTrue(m, (method, t.shape))
                self.assertEqual(m.region, stbt.Region(100, 40, width=92, height=160))

    def test_grey_template_in_a_colour_frame_and_the_other_way_round(self):
        grey = cv2.cvtColor(self.movies, cv2.COLOR_BGR2GRAY)
        frame = cv2.cvtColor(cv2.cvtColor(self.menu, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
        self.assertEqual(stbt.match(grey, frame=frame).position, (BUTTON_X[2], BUTTON_Y))
        # a colour template with transparent pixels in a one-channel frame: compared in grey, mask kept
        t = with_alpha(self.movies, [(10, 15, 180, 70)])
        for shape in ((720, 1280), (720, 1280, 1)):
            g = cv2.cvtColor(self.menu, cv2.COLOR_BGR2GRAY).reshape(shape)
            self.assertEqual(sorted(m.position.x for m in stbt.match_all(t, frame=g)), BUTTON_X)

    def test_16_bit_template(self):
        wide = self.movies.astype(np.uint16) * 257
        m = stbt.match(wide, frame=self.menu)
        self.assertTrue(m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))

    def test_a_template_transparent_everywhere_matches_everywhere(self):
        t = np.zeros((60, 70, 4), np.uint8)
        frame = np.full((268, 434, 3), 90, np.uint8)
        m = stbt.match(t, frame=frame)
        self.assertTrue(m)
        self.assertEqual((m.region, m.first_pass_result), (stbt.Region(0, 0, width=70, height=60), 1.0))
        found = [r.region for r in stbt.match_all(t, frame=frame)]
        # the places that do not overlap: a grid from the top-left corner, row by row
        self.assertEqual(found, [stbt.Region(x, y, width=70, height=60)
                                 for y in range(0, 268 - 59, 60) for x in range(0, 434 - 69, 70)])
        self.assertEqual(len(found), 24)
        self.assertEqual(len(list(stbt.match_all(t, frame=frame, region=stbt.Region(10, 10, 150, 130)))), 4)

    def test_a_template_transparent_everywhere_passes_the_confirm_pass_on_a_busy_frame(self):
        # nothing of the template is compared, so the confirm pass has no pixel that could differ:
        # the black of its (hidden) colour channels must not be held against the frame's bright parts
        t = np.zeros((44, 135, 4), np.uint8)
        frame = self.menu[:268, :434].copy()
        frame[::3] = 255
        m = stbt.match(t, frame=frame)
        self.assertTrue(m)
        self.assertEqual(m.region, stbt.Region(0, 0, width=135, height=44))
        self.assertEqual(len(list(stbt.match_all(t, frame=frame))), 18)  # 3 columns x 6 rows
        for method in (stbt.ConfirmMethod.ABSDIFF, stbt.ConfirmMethod.NORMED_ABSDIFF):
            params = stbt.MatchParameters(confirm_method=method, confirm_threshold=0.01, erode_passes=0)
            self.assertTrue(stbt.match(t, frame=frame, match_parameters=params), method)

    def test_a_template_that_repeats_matches_every_tile(self):
        rng = np.random.default_rng(8)
        tile = rng.integers(0, 255, (16, 16, 3), np.uint8)
        frame = np.tile(tile, (15, 20, 1))  # 320x240
        for method, threshold in ((stbt.MatchMethod.SQDIFF, 0.98), (stbt.MatchMethod.SQDIFF_NORMED, 0.8)):
            found = sorted(m.region for m in stbt.match_all(
                tile, frame=frame, match_parameters=stbt.MatchParameters(method, threshold)))
            self.assertEqual(found, sorted(stbt.Region(x, y, width=16, height=16)
                                           for x in range(0, 320, 16) for y in range(0, 240, 16)), method)

    def test_match_all_on_a_plateau_tiles_the_frame_from_its_top_left_corner(self):
        # a flat template on a flat frame scores the same at every place: the matches are a grid from
        # the top-left corner, row by row, found through the path for places all over a level
        calls = []
        real = _match._refine_many  # pylint: disable=protected-access

        def counted(*args):
            calls.append(len(args[-1]))
            return real(*args)
        _match._refine_many = counted  # pylint: disable=protected-access
        try:
            for value in (0, 7):
                found = [m.region for m in stbt.match_all(np.full((20, 24, 3), value, np.uint8),
                                                          frame=np.full((240, 320, 3), value, np.uint8))]
                self.assertEqual(found, [stbt.Region(x, y, width=24, height=20)
                                         for y in range(0, 221, 20) for x in range(0, 289, 24)])
        finally:
            _match._refine_many = real  # pylint: disable=protected-access
        self.assertTrue(calls and min(calls) > _match._MAX_MERGED_WINDOWS, calls)  # pylint: disable=protected-access

    def test_black_on_black(self):
        black, near_black = np.zeros((10, 10, 3), np.uint8), np.ones((10, 10, 3), np.uint8)
        frame, grey2 = np.zeros((720, 1280, 3), np.uint8), np.full((720, 1280, 3), 2, np.uint8)
        sqdiff = stbt.MatchParameters(stbt.MatchMethod.SQDIFF)
        normed = stbt.MatchParameters(stbt.MatchMethod.SQDIFF_NORMED, 0.8)
        for t, f in ((black, frame), (near_black, frame), (near_black, grey2)):
            # SQDIFF: a difference of 0 or 1 level is a match
            self.assertTrue(stbt.match(t, f, sqdiff))
            # SQDIFF_NORMED divides by the pictures' energy: nothing to normalise by, no match
            self.assertFalse(stbt.match(t, f, normed))

    def test_repr_names_the_template(self):
        text = repr(stbt.match(np.zeros((30, 30, 3), np.uint8), frame=np.zeros((720, 1280, 3), np.uint8)))
        self.assertIn("image=<Image(filename=None, dimensions=30x30x3)>", text)
        self.assertIn("frame=<Frame(time=None, dimensions=1280x720x3)>", text)
        self.assertIn("region=Region(x=0, y=0, right=30, bottom=30)", text)
        path = os.path.join(self.dir, "movies.png")
        cv2.imwrite(path, self.movies)
        m = stbt.match(path, frame=self.menu)
        self.assertEqual(m.image.filename, path)
        self.assertIn("image=<Image(filename=%r, dimensions=200x100x3)>" % path, str(m))
        # built by hand (as a test of a test might), the image is kept as given
        by_hand = stbt.MatchResult(12.0, True, stbt.Region(1, 2, 3, 4), first_pass_result=1, frame=self.menu,
                                   image="reference.png")
        self.assertIn("image='reference.png'", repr(by_hand))


class PyramidEdges(Base):
    """A template with hard edges (white frame, blue inside, on black) put
    at, near and past the frame's edges: found at the exact pixel when it is
    wholly inside, not found when any of it is outside. Its pixels are
    dimmed to 85 %: a difference of 39 levels, inside the first pass's budget
    (1 - 39² x 1000 / (1200 x 255²) = 0.9805 for the 20x20 template)."""

    def check(self, width, height, frame_width, frame_height, x, y):
        place = stbt.Region(x, y, width=width, height=height)
        template = np.full((height, width, 3), 255, np.uint8)
        template[5:-5, 5:-5] = (255, 0, 0)
        frame = np.zeros((frame_height, frame_width, 3), np.uint8)
        inside = stbt.Region.intersect(place, stbt.Region(0, 0, frame_width, frame_height))
        frame[inside.to_slice()] = (template[inside.y - y:inside.bottom - y, inside.x - x:inside.right - x]
                                    * 0.85).astype(np.uint8)
        m = stbt.match(template, frame)
        wholly_inside = inside == place
        self.assertEqual(bool(m), wholly_inside, (place, m))
        if wholly_inside:
            self.assertEqual(m.region, place)

    def test_edges_and_corners(self):
        for width, height in ((20, 20), (21, 20), (41, 40), (158, 88)):
            for fw, fh in ((160, 90), (159, 89)):
                right, bottom = fw - width, fh - height
                for dx, dy in ((0, 0), (1, 0), (0, 1), (2, 2), (5, 5), (-1, 0), (0, -1), (-2, -2), (-10, 0)):
                    for x, y in ((dx, dy), (right - dx, dy), (dx, bottom - dy), (right - dx, bottom - dy)):
                        self.check(width, height, fw, fh, x, y)


class LookalikesAtCoarseLevels(Base):
    """Patterns of 1-pixel columns or rows blur to the same flat colour at
    half and quarter size: four 40x40 blocks (red/blue and blue/red columns,
    and rows) look alike there; only full size tells them apart."""

    def test_each_block_is_found_at_its_own_corner(self):
        red, blue = (0, 0, 255), (255, 0, 0)
        columns = np.zeros((40, 40, 3), np.uint8)
        columns[:, 0::2], columns[:, 1::2] = red, blue
        swapped = columns[:, ::-1].copy()
        blocks = {(0, 0): columns, (1240, 680): swapped, (1240, 0): columns.transpose(1, 0, 2).copy(),
                  (0, 680): swapped.transpose(1, 0, 2).copy()}
        frame = np.full((720, 1280, 3), 30, np.uint8)
        for (x, y), block in blocks.items():
            frame[y:y + 40, x:x + 40] = block
        for (x, y), block in blocks.items():
            with_hole = np.dstack([block, np.full((40, 40), 255, np.uint8)])
            with_hole[10:30, 10:30, 3] = 0
            for template in (block, with_hole):
                m = stbt.match(template, frame=frame)
                self.assertTrue(m, (x, y, m))
                self.assertEqual(m.position, (x, y))
                self.assertEqual(m.first_pass_result, 1.0)

    def test_a_level_whose_mask_shrank_to_a_strip_is_not_searched(self):
        # 3-pixel red/blue stripes with a transparent middle: at quarter size the stricter mask keeps one
        # row of the template, which fits anywhere along the stripes. Searching there led to a place above
        # the real one, and no match; the pyramid must stop at the level whose mask still spans the template.
        red, blue = (0, 0, 255), (255, 0, 0)
        stripes = np.zeros((41, 43, 3), np.uint8)
        for x in range(43):
            stripes[:, x] = red if x // 3 % 2 == 0 else blue
        template = np.dstack([stripes, np.full((41, 43), 255, np.uint8)])
        template[10:30, 10:32, 3] = 0
        for vertical in (True, False):
            t = template if vertical else template.transpose(1, 0, 2).copy()
            h, w = t.shape[:2]
            for x, y in ((100, 101), (2, 3), (5, 7), (1237, 676)):
                frame = np.zeros((720, 1280, 3), np.uint8)
                frame[300:300 + h, 600:600 + w] = np.roll(t[:, :, :3], 3, axis=1 if vertical else 0)
                frame[y:y + h, x:x + w] = t[:, :, :3]
                m = stbt.match(t, frame=frame)
                self.assertTrue(m, (vertical, x, y, m))
                self.assertEqual(m.region, stbt.Region(x, y, width=w, height=h))

    def test_a_thin_opaque_frame_keeps_the_smaller_levels(self):
        # the span rule above must not drop the pyramid for a selection frame's outline: its mask
        # shrinks at smaller sizes but still goes all round the template
        ring = np.zeros((100, 200), np.float32)
        ring[:6], ring[-6:], ring[:, :6], ring[:, -6:] = 1, 1, 1, 1
        tpl = _match._Levels(np.zeros((100, 200, 3), np.uint8), ring, 3)  # pylint: disable=protected-access
        self.assertEqual(len(tpl.levels), 2)


class PrivateHelpers(unittest.TestCase):
    """Helpers of the matching module that code written for stb-tester reaches for."""

    def test_build_pyramid_of_a_mask_makes_every_blurred_pixel_ignored_and_cuts_the_edges(self):
        mask = np.full((100, 30, 3), 255, np.uint8)
        mask[10:13, 20:23] = 0
        levels = _match._build_pyramid(mask, 2, is_mask=True)  # pylint: disable=protected-access
        self.assertIs(levels[0], mask)
        half = levels[1]
        self.assertEqual(half.shape, (48, 13, 3))  # 50x15, one pixel cut off each side
        self.assertEqual(set(np.unique(half)), {0, 255})
        # a half-size pixel i blends full-size pixels 2i-2 .. 2i+2: rows 10..12 reach i = 4..7, columns
        # 20..22 reach i = 9..12 (before the cut, hence the + 1)
        ignored = np.argwhere(half[:, :, 0] == 0)
        self.assertEqual((ignored.min(axis=0) + 1).tolist(), [4, 9])
        self.assertEqual((ignored.max(axis=0) + 1).tolist(), [7, 12])

    def test_merge_regions_merges_what_is_cheaper_to_search_as_one(self):
        big = stbt.Region(100, 100, width=200, height=100)
        inside = stbt.Region(150, 120, width=10, height=10)
        overlapping_a_little = stbt.Region(290, 190, width=50, height=50)
        far = stbt.Region(0, 0, width=20, height=20)
        regions = [inside, far, overlapping_a_little, big]
        _match._merge_regions(regions)  # pylint: disable=protected-access
        self.assertEqual(sorted(regions), sorted([far, overlapping_a_little, big]))
        twins = [stbt.Region(0, 0, 10, 10), stbt.Region(0, 5, 10, 10)]
        _match._merge_regions(twins)  # pylint: disable=protected-access
        self.assertEqual(twins, [stbt.Region(0, 0, 10, 15)])


class _Frame(np.ndarray):
    """A frame with a capture time (as stbt.Frame has)."""

    def __new__(cls, array, time):
        obj = np.asarray(array).view(cls)
        obj.time = time
        return obj

    def __array_finalize__(self, obj):
        self.time = getattr(obj, "time", None)


class WaitForMatch(Base):
    def frames(self, pictures, start=1000.0):
        return [_Frame(p, start + 0.04 * i) for i, p in enumerate(pictures)]

    def test_returns_the_first_matching_frame(self):
        other = screen(["Home", "Search", "Music", "Series", "Sport", "Kids"])
        fs = self.frames([other, other, self.menu, self.menu])
        m = stbt.wait_for_match(self.movies, frames=iter(fs))
        self.assertTrue(m)
        self.assertIs(m.frame, fs[2])
        self.assertEqual(m.time, fs[2].time)

    def test_consecutive_matches_at_the_same_place(self):
        moved = np.roll(self.menu, 7, axis=1)
        other = screen(["Home", "Search", "Music", "Series", "Sport", "Kids"])
        fs = self.frames([self.menu, other, self.menu, moved, self.menu, self.menu, self.menu])
        m = stbt.wait_for_match(self.movies, consecutive_matches=3, frames=iter(fs))
        self.assertIs(m.frame, fs[6])

    def test_timeout_raises_match_timeout_with_the_last_frame(self):
        other = screen(["Home", "Search", "Music", "Series", "Sport", "Kids"])
        fs = self.frames([other] * 10)  # 0.36 s of frames
        with self.assertRaises(stbt.MatchTimeout) as cm:
            stbt.wait_for_match(self.movies, timeout_secs=0.21, frames=iter(fs))
        e = cm.exception
        self.assertIsInstance(e, stbt.UITestFailure)
        self.assertIs(e.screenshot, fs[5])  # the last frame within 0.21 s of the first (0.04 s apart)
        self.assertEqual(e.timeout_secs, 0.21)
        self.assertIn("0.21", str(e))

    def test_detect_match_legacy_generator(self):
        other = screen(["Home", "Search", "Music", "Series", "Sport", "Kids"])
        fs = self.frames([other, self.menu, other])
        results = list(stbt.detect_match(self.movies, frames=iter(fs)))
        self.assertEqual([bool(r) for r in results], [False, True, False])
        self.assertTrue(all(r.frame is f for r, f in zip(results, fs)))


if __name__ == "__main__":
    unittest.main()
