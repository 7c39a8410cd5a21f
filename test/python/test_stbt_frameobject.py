"""stbt.FrameObject in detail: what is computed when (once, also across
threads), what a falsey object answers, the repr, equality between classes,
``_fields``, immutability after construction. (test_stbt_structure.py has
the basics.)"""

import threading
import unittest

import numpy as np

import stbt


def frame_with(value, time=None):
    f = stbt.Frame(np.full((4, 4, 3), value, np.uint8))
    f.time = time
    return f


class Counted(stbt.FrameObject):
    """Every property records its calls in ``self._calls`` (set in __init__)."""

    def __init__(self, frame, visible=True):
        super().__init__(frame)
        self._calls = []
        self._visible = visible

    @property
    def is_visible(self):
        self._calls.append("is_visible")
        return self.level if self._visible else 0  # truthy or falsy, not a bool

    @property
    def level(self):
        self._calls.append("level")
        return self._shared + 1

    @property
    def _shared(self):
        self._calls.append("_shared")
        return int(self._frame[0, 0, 0])

    @property
    def zebra(self):
        self._calls.append("zebra")
        return "z%d" % self._shared


class Computing(unittest.TestCase):
    def test_is_visible_reads_as_a_bool_and_every_property_is_computed_once(self):
        c = Counted(frame_with(6))
        self.assertIs(c.is_visible, True)
        self.assertEqual(c._calls, ["is_visible", "level", "_shared"])  # pylint: disable=protected-access
        self.assertEqual((c.zebra, c.zebra, c.level, c._shared), ("z6", "z6", 7, 6))  # pylint: disable=protected-access
        self.assertEqual(c._calls, ["is_visible", "level", "_shared", "zebra"])  # pylint: disable=protected-access

    def test_a_falsey_object_answers_none_for_public_properties_only(self):
        c = Counted(frame_with(6), visible=False)
        self.assertIs(c.is_visible, False)
        self.assertFalse(c)
        self.assertIsNone(c.level)
        self.assertIsNone(c.zebra)
        self.assertEqual(c._shared, 6)  # pylint: disable=protected-access
        self.assertNotIn("zebra", c._calls)  # pylint: disable=protected-access

    def test_public_properties_read_by_other_threads_while_is_visible_is_decided(self):
        started, release = threading.Event(), threading.Event()

        class Slow(stbt.FrameObject):
            @property
            def is_visible(self):
                started.set()
                release.wait(5)
                return self.value > 100  # uses a public property while deciding

            @property
            def value(self):
                return 5

        s = Slow(frame_with(0))
        answers = []
        decider = threading.Thread(target=lambda: answers.append(("decider", bool(s))))
        decider.start()
        self.assertTrue(started.wait(5))
        readers = [threading.Thread(target=lambda: answers.append(("reader", s.value))) for _ in range(8)]
        for r in readers:
            r.start()
        release.set()
        for t in [decider] + readers:
            t.join(5)
        # the readers waited for is_visible: none of them saw the value of an invisible object
        self.assertEqual(sorted(answers), [("decider", False)] + [("reader", None)] * 8)

    def test_a_property_read_by_many_threads_at_once_is_computed_once(self):
        calls = []

        class Once(stbt.FrameObject):
            @property
            def answer(self):
                calls.append(1)
                return 42

        o = Once(frame_with(0))
        got = []
        threads = [threading.Thread(target=lambda: got.append(o.answer)) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        self.assertEqual((got, calls), ([42] * 16, [1]))


class Describing(unittest.TestCase):
    def test_fields_is_visible_first_then_alphabetical_public_properties_of_the_whole_class(self):
        class More(Counted):
            @property
            def apple(self):
                return 1

        self.assertEqual(Counted._fields, ("is_visible", "level", "zebra"))  # pylint: disable=protected-access
        self.assertEqual(More._fields, ("is_visible", "apple", "level", "zebra"))  # pylint: disable=protected-access

    def test_repr_shows_every_property(self):
        c = Counted(frame_with(6, time=1234.5))
        self.assertEqual(repr(c), "<Counted(_frame=<Frame(time=1234.500)>, is_visible=True, level=7, zebra='z6')>")
        calls = list(c._calls)  # pylint: disable=protected-access
        self.assertEqual(repr(c), "<Counted(_frame=<Frame(time=1234.500)>, is_visible=True, level=7, zebra='z6')>")
        self.assertEqual(c._calls, calls)  # pylint: disable=protected-access  (computed once)
        image = stbt.load_image(np.zeros((4, 6, 3), np.uint8))
        self.assertTrue(repr(Counted(image)).startswith("<Counted(_frame=<Image(filename=None, dimensions=6x4x3)>, "))
        self.assertEqual(repr(Counted(frame_with(6), visible=False)),
                         "<Counted(_frame=<Frame(time=None)>, is_visible=False)>")


class Comparing(unittest.TestCase):
    def test_equal_by_property_values_not_by_frame(self):
        class Other(Counted):
            pass

        class Extra(Counted):
            @property
            def extra(self):
                return 0

        class Unrelated(stbt.FrameObject):
            @property
            def level(self):
                return 7

            @property
            def zebra(self):
                return "z6"

        a = Counted(frame_with(6))
        self.assertEqual(a, Counted(frame_with(6)))
        self.assertNotEqual(a, Counted(frame_with(7)))
        self.assertEqual(hash(a), hash(Counted(frame_with(6))))
        # a subclass without more properties compares equal, both ways; one with more does not
        self.assertTrue(a == Other(frame_with(6)) and Other(frame_with(6)) == a)
        self.assertFalse(a != Other(frame_with(6)))
        self.assertTrue(a != Extra(frame_with(6)) and Extra(frame_with(6)) != a)
        # the same names on an unrelated class are not the same page
        self.assertNotEqual(a, Unrelated(frame_with(6)))
        self.assertNotEqual(Unrelated(frame_with(6)), a)
        # all the invisible objects of a class are equal, whatever their frames
        self.assertEqual(Counted(frame_with(1), visible=False), Counted(frame_with(200), visible=False))
        self.assertEqual(len({a, Counted(frame_with(6)), Counted(frame_with(9))}), 2)


class Immutability(unittest.TestCase):
    def test_init_may_set_anything_then_public_attributes_are_frozen(self):
        class Page(stbt.FrameObject):
            def __init__(self, frame, device):
                super().__init__(frame)
                self.device = device  # a public attribute, set while constructing

            @property
            def mode(self):
                return self.device

        p = Page(frame_with(0), "tv")
        self.assertEqual((p.mode, p.device), ("tv", "tv"))
        with self.assertRaises(AttributeError):
            p.device = "radio"
        with self.assertRaises(AttributeError):
            del p.device
        with self.assertRaises(AttributeError):
            p.mode = "radio"
        p._note = 1  # pylint: disable=protected-access,attribute-defined-outside-init
        self.assertEqual(p._note, 1)  # pylint: disable=protected-access
        self.assertEqual(Page._fields, ("is_visible", "mode"))  # pylint: disable=protected-access


if __name__ == "__main__":
    unittest.main()
