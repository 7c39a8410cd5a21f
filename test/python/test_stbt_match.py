"""The matching corpus: stbt.match / match_all / wait_for_match against
pictures drawn here (test/python/_match_corpus.py), each case with the answer
the documented algorithm gives (docs/stbt-matching.md):

- first pass: score = 1 - RMS difference / 255 over the opaque template pixels
  (3 channels), found through a 3-level pyramid; it must reach
  match_threshold (0.98);
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
from stbt_core import _config
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
        self.assertIs(m.image, self.movies)

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
        m = stbt.match(self.movies, frame=screen(["Home", "Search", "Music", "Series", "Sport", "Kids"]))
        self.assertFalse(m)
        self.assertIsInstance(m.region, stbt.Region)
        self.assertEqual((m.region.width, m.region.height), (200, 100))
        self.assertLess(m.first_pass_result, 0.98)

    def test_region_limits_the_search(self):
        left = stbt.Region(0, 0, width=400, height=720)
        self.assertFalse(stbt.match(self.movies, frame=self.menu, region=left))
        around = stbt.Region(BUTTON_X[2] - 100, BUTTON_Y - 50, width=400, height=200)
        m = stbt.match(self.movies, frame=self.menu, region=around)
        self.assertTrue(m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))

    def test_region_smaller_than_the_template_is_no_match(self):
        m = stbt.match(self.movies, frame=self.menu, region=stbt.Region(BUTTON_X[2], BUTTON_Y, width=100, height=50))
        self.assertFalse(m)
        self.assertEqual(m.first_pass_result, 0.0)

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
        self.assertLess(first_pass_score(frame, with_alpha(t[:, :, :3]), 803, 511), 0.7)
        self.assertLess(m.first_pass_result, 0.7)

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
    """A big template (1200x500) with one glyph changed: the change is under
    1.5 % of the RMS budget, so the first pass accepts it; the confirm pass
    sees a blob of differing pixels thicker than the erosion removes."""

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
        # a white 1-pixel outline on 596 of 20000 pixels: RMS far above 5.1 -> first pass fails
        m = stbt.match(self.movies, frame=white)
        self.assertFalse(m)
        self.assertAlmostEqual(m.first_pass_result, first_pass_score(white, with_alpha(self.movies), *m.position),
                               places=3)
        self.assertLess(m.first_pass_result, 0.9)
        self.assertLess(first_pass_score(white, with_alpha(self.movies), BUTTON_X[2], BUTTON_Y), 0.9)
        # with a lenient first pass the outline reaches the confirm pass: one erosion removes a 1-pixel line
        lenient = dict(match_threshold=0.8)
        self.assertTrue(stbt.match(self.movies, frame=white, match_parameters=stbt.MatchParameters(**lenient)))
        self.assertFalse(stbt.match(self.movies, frame=white,
                                    match_parameters=stbt.MatchParameters(erode_passes=0, **lenient)))
        # a faint outline (20 grey levels from the button) stays inside the RMS budget: matches
        faint = screen(border_at=2, border=(170, 110, 50))
        m = stbt.match(self.movies, frame=faint)
        self.assertTrue(m, m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))


class CaptureArtefacts(Base):
    def test_noise_within_the_rms_budget_matches(self):
        # Gaussian noise of sigma 4 grey levels: RMS about 4 < 5.1 (= 0.02 * 255)
        frame = noisy(self.menu, 4)
        m = stbt.match(self.movies, frame=frame)
        self.assertTrue(m, m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))
        self.assertAlmostEqual(m.first_pass_result, 1 - 4 / 255.0, delta=0.002)

    def test_noise_beyond_the_rms_budget_does_not(self):
        frame = noisy(self.menu, 8)  # RMS about 8 > 5.1
        m = stbt.match(self.movies, frame=frame)
        self.assertFalse(m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))  # still the best place
        self.assertAlmostEqual(m.first_pass_result, 1 - 8 / 255.0, delta=0.003)

    def test_jpeg_quality_70(self):
        # JPEG at quality 70 around white text on blue: RMS about 6.2 levels, beyond the 0.98 budget
        frame = jpeg(self.menu, 70)
        expected = first_pass_score(frame, with_alpha(self.movies), BUTTON_X[2], BUTTON_Y)
        self.assertLess(expected, 0.98)
        self.assertGreater(expected, 0.97)
        m = stbt.match(self.movies, frame=frame)
        self.assertFalse(m)
        self.assertEqual(m.position, (BUTTON_X[2], BUTTON_Y))
        self.assertAlmostEqual(m.first_pass_result, expected, places=3)
        # a threshold lowered to 0.97 (RMS 7.65) accepts it, and the confirm pass does too
        self.assertTrue(stbt.match(self.movies, frame=frame,
                                   match_parameters=stbt.MatchParameters(match_threshold=0.97)))

    def test_templates_are_not_rescaled_a_720p_template_does_not_match_a_1080p_frame(self):
        big = cv2.resize(self.menu, (1920, 1080), interpolation=cv2.INTER_CUBIC)
        m = stbt.match(self.movies, frame=big)
        self.assertFalse(m)
        self.assertLess(m.first_pass_result, 0.9)
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
        # and match() uses them: JPEG q70 now matches (see CaptureArtefacts.test_jpeg_quality_70)
        with open(os.path.join(self.dir, "config", "stbt.conf"), "w", encoding="utf-8") as f:
            f.write("[match]\nmatch_threshold = 0.97\n")
        _config._reset()  # pylint: disable=protected-access
        self.assertTrue(stbt.match(self.movies, frame=jpeg(self.menu, 70)))

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
            stbt.match(np.zeros((5, 5, 4), np.uint8), frame=self.menu)  # transparent everywhere
        with self.assertRaises(ValueError):
            stbt.MatchParameters(erode_passes=-1)

    def test_string_names_as_in_stbt_conf(self):
        p = stbt.MatchParameters(match_method="sqdiff-normed", confirm_method="normed-absdiff")
        self.assertEqual(p.match_method, stbt.MatchMethod.SQDIFF_NORMED)
        self.assertEqual(p.confirm_method, stbt.ConfirmMethod.NORMED_ABSDIFF)
        with self.assertRaises(ValueError):
            stbt.MatchParameters(match_method="nearest")


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
