"""The one parser of tesseract's TSV word boxes (``_ocr_tesseract.parse_tsv``),
used by ``ocr`` with ``text_color``, ``match_text`` and the checks' records:
on TSV written here by hand and on what the node's real tesseract writes."""

import unittest

import cv2
import numpy

import stbt
from stbt_core import _ocr, _ocr_prepare, _ocr_tesseract

HEADER = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n"


def row(level, block, par, line, word, box, conf, text):
    return "\t".join(str(c) for c in (level, 1, block, par, line, word) + box + (conf, text)) + "\n"


class ParseTsv(unittest.TestCase):
    def test_words_only_with_their_box_confidence_and_line(self):
        tsv = (HEADER + row(1, 0, 0, 0, 0, (0, 0, 300, 100), -1, "")
               + row(4, 1, 1, 1, 0, (10, 20, 200, 30), -1, "")
               + row(5, 1, 1, 1, 1, (10, 20, 80, 30), 96.5, "Evening")
               + row(5, 1, 1, 1, 2, (100, 21, 60, 29), 91, "News")
               + row(5, 1, 2, 1, 1, (10, 60, 40, 30), 88.25, "Now"))
        words = _ocr_tesseract.parse_tsv(tsv)
        self.assertEqual([w.text for w in words], ["Evening", "News", "Now"])
        self.assertEqual(words[0], _ocr_tesseract.Word("Evening", 10, 20, 90, 50, 96.5, (1, 1, 1)))
        self.assertEqual(words[1].line, words[0].line)
        self.assertEqual(words[2].line, (1, 2, 1))

    def test_empty_words_and_broken_rows_are_skipped_and_a_tab_in_the_text_is_kept(self):
        tsv = (HEADER + row(5, 1, 1, 1, 1, (0, 0, 5, 5), 95, "  ")
               + "5\t1\t1\t1\t1\t2\tx\t0\t5\t5\t90\tbad\n"
               + "5\t1\t1\t1\n"
               + row(5, 1, 1, 1, 3, (20, 0, 30, 10), 80, "a\tb"))
        words = _ocr_tesseract.parse_tsv(tsv)
        self.assertEqual([(w.text, w.left, w.right) for w in words], [("a\tb", 20, 50)])

    def test_no_words(self):
        self.assertEqual(_ocr_tesseract.parse_tsv(""), [])
        self.assertEqual(_ocr_tesseract.parse_tsv(HEADER), [])

    def test_real_tesseract_output_gives_the_lines_ocr_joins(self):
        frame = numpy.zeros((200, 640, 3), numpy.uint8)
        cv2.putText(frame, "TWO WORDS", (20, 60), cv2.FONT_HERSHEY_SIMPLEX, 1.5, (255, 255, 255), 3)
        cv2.putText(frame, "NEXT LINE", (20, 160), cv2.FONT_HERSHEY_SIMPLEX, 1.5, (255, 255, 255), 3)
        params = _ocr._Params(stbt.OcrMode.PAGE_SEGMENTATION_WITHOUT_OSD,  # pylint: disable=protected-access
                              None, None, None, None, None, None, None, None, None)
        grey = _ocr_prepare.prepare(stbt.Frame(frame), stbt.Region.ALL, params)[2]
        words = _ocr_tesseract.parse_tsv(_ocr_tesseract.read(grey, params, True))
        self.assertEqual([w.text for w in words], ["TWO", "WORDS", "NEXT", "LINE"])
        self.assertEqual(words[0].line, words[1].line)
        self.assertNotEqual(words[1].line, words[2].line)
        self.assertTrue(all(w.left < w.right and w.top < w.bottom and 0 <= w.conf <= 100 for w in words), words)


if __name__ == "__main__":
    unittest.main()
