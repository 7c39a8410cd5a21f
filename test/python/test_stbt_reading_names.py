"""Every name of the reference's OCR and motion / black screen / transition
sections exists in ``stbt``, functions with the reference's parameters in
its order (keyword-only ones included), classes with the documented
constructor parameters or members (docs/migrating-from-stb-tester.md marks
none of them "not yet"; this keeps it so)."""

import inspect
import unittest

import stbt

FUNCTIONS = {
    "ocr": ["frame", "region", "mode", "lang", "tesseract_config", "tesseract_user_words",
            "tesseract_user_patterns", "upsample", "text_color", "text_color_threshold", "engine",
            "char_whitelist", "corrections"],
    "match_text": ["text", "frame", "region", "mode", "lang", "tesseract_config", "case_sensitive", "upsample",
                   "text_color", "text_color_threshold", "engine", "char_whitelist"],
    "ocr_eq": ["a", "b"],
    "apply_ocr_corrections": ["text", "corrections"],
    "set_global_ocr_corrections": ["corrections"],
    "detect_motion": ["timeout_secs", "threshold", "mask", "region", "frames", "differ", "noise_threshold"],
    "wait_for_motion": ["timeout_secs", "consecutive_frames", "threshold", "mask", "region", "frames", "differ",
                        "noise_threshold"],
    "is_screen_black": ["frame", "mask", "threshold", "region"],
    "press_and_wait": ["key", "mask", "region", "timeout_secs", "stable_secs", "min_size", "retries", "frames",
                       "_dut", "threshold", "differ"],
    "wait_for_transition_to_end": ["initial_frame", "mask", "region", "timeout_secs", "stable_secs", "min_size",
                                   "frames", "threshold", "differ"],
}
KEYWORD_ONLY = {"detect_motion": {"differ", "noise_threshold"}, "wait_for_motion": {"differ", "noise_threshold"},
                "press_and_wait": {"threshold", "differ"}, "wait_for_transition_to_end": {"threshold", "differ"}}
CLASSES = ["TextMatchResult", "OcrMode", "OcrEngine", "MotionResult", "MotionTimeout", "Differ", "BGRDiff",
           "GrayscaleDiff", "Transition", "TransitionStatus"]


class ReadingNames(unittest.TestCase):
    def test_functions_have_the_references_parameters(self):
        for name, params in FUNCTIONS.items():
            fn = getattr(stbt, name)
            sig = inspect.signature(fn)
            self.assertEqual(list(sig.parameters), params, name)
            kw_only = {p.name for p in sig.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}
            self.assertEqual(kw_only, KEYWORD_ONLY.get(name, set()), name)
            self.assertIn(name, stbt.__all__)

    def test_classes_and_their_documented_members(self):
        for name in CLASSES:
            self.assertTrue(inspect.isclass(getattr(stbt, name)), name)
            self.assertIn(name, stbt.__all__)
        self.assertEqual((stbt.OcrEngine.TESSERACT, stbt.OcrEngine.LSTM, stbt.OcrEngine.TESSERACT_AND_LSTM,
                          stbt.OcrEngine.DEFAULT), (0, 1, 2, 3))
        self.assertEqual(sorted(int(m) for m in stbt.OcrMode), list(range(14)))
        self.assertEqual({m.name for m in stbt.TransitionStatus}, {"START_TIMEOUT", "STABLE_TIMEOUT", "COMPLETE"})
        self.assertEqual(list(inspect.signature(stbt.MotionResult).parameters)[:4], ["time", "motion", "region",
                                                                                     "frame"])
        self.assertEqual(list(inspect.signature(stbt.MotionTimeout).parameters)[:3], ["screenshot", "mask",
                                                                                      "timeout_secs"])
        self.assertTrue(issubclass(stbt.MotionTimeout, stbt.UITestFailure))
        for cls in (stbt.BGRDiff, stbt.GrayscaleDiff):
            self.assertTrue(issubclass(cls, stbt.Differ))
            self.assertEqual(list(inspect.signature(cls).parameters)[:3], ["min_size", "threshold", "erode"])
        for attr in ("replace", "preprocess_mask", "preprocess", "diff"):
            self.assertTrue(callable(getattr(stbt.Differ, attr)), attr)
        for attr in ("key", "frame", "status", "press_time", "animation_start_time", "end_time", "duration",
                     "animation_duration", "started", "complete", "stable"):
            self.assertTrue(hasattr(stbt.Transition, attr) or attr in getattr(stbt.Transition, "__slots__", ())
                            or attr in inspect.signature(stbt.Transition).parameters, attr)
        for attr in ("time", "match", "region", "frame", "text"):
            self.assertIn(attr, inspect.signature(stbt.TextMatchResult).parameters)


if __name__ == "__main__":
    unittest.main()
