"""stbt's structure APIs: FrameObject (its documented behaviour),
for_object_repository, Grid, as_precondition / PreconditionError, wait_until
with predicate and stable_secs (on a fake clock: no sleeping)."""

import unittest

import numpy as np

import stbt
from stbt_core import _frameobject, _wait


def frame_with(value):
    return np.full((4, 4, 3), value, np.uint8)


class Menu(stbt.FrameObject):
    calls = []

    @property
    def is_visible(self):
        Menu.calls.append("is_visible")
        return self.brightness > 100  # uses another property while deciding

    @property
    def brightness(self):
        Menu.calls.append("brightness")
        return int(self._frame[0, 0, 0])

    @property
    def title(self):
        Menu.calls.append("title")
        return "menu %d" % self.brightness

    def not_a_property(self):
        return 42


class FrameObjectTest(unittest.TestCase):
    def setUp(self):
        Menu.calls.clear()

    def test_truthy_iff_visible_and_properties_none_when_not(self):
        on, off = Menu(frame_with(200)), Menu(frame_with(50))
        self.assertTrue(on)
        self.assertFalse(off)
        self.assertEqual(on.title, "menu 200")
        self.assertIsNone(off.title)
        self.assertIsNone(off.brightness)  # though is_visible used it
        self.assertFalse(off.is_visible)
        self.assertEqual(off.not_a_property(), 42)

    def test_each_property_computed_once(self):
        m = Menu(frame_with(200))
        for _ in range(3):
            _ = m.title, m.brightness, m.is_visible, bool(m)
        self.assertEqual(sorted(Menu.calls), ["brightness", "is_visible", "title"])

    def test_immutable(self):
        m = Menu(frame_with(200))
        with self.assertRaises(AttributeError):
            m.title = "x"
        with self.assertRaises(AttributeError):
            m.anything = 1
        with self.assertRaises(AttributeError):
            del m.title

    def test_equality_hash_repr(self):
        a, b, c = Menu(frame_with(200)), Menu(frame_with(200)), Menu(frame_with(201))
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)
        self.assertEqual(hash(a), hash(b))
        self.assertEqual(len({a, b, c}), 2)
        self.assertEqual(Menu(frame_with(1)), Menu(frame_with(2)))  # invisible: all properties None
        self.assertEqual(repr(a),
                         "<Menu(_frame=<Frame(time=None)>, is_visible=True, brightness=200, title='menu 200')>")
        self.assertEqual(repr(Menu(frame_with(1))), "<Menu(_frame=<Frame(time=None)>, is_visible=False)>")

    def test_refresh_and_subclass_arguments(self):
        class Tile(stbt.FrameObject):
            def __init__(self, frame=None, index=0):
                super().__init__(frame)
                self._index = index

            @property
            def index(self):
                return self._index

        t = Tile(frame_with(1), index=3)
        self.assertEqual(t.index, 3)
        fresh = t.refresh(frame_with(2), index=4)
        self.assertIsInstance(fresh, Tile)
        self.assertEqual(fresh.index, 4)
        self.assertEqual(int(fresh._frame[0, 0, 0]), 2)  # pylint: disable=protected-access

    def test_default_frame_is_get_frame(self):
        seen = frame_with(150)
        original = stbt.get_frame
        import stbt_core._frames as frames  # pylint: disable=import-outside-toplevel
        saved = frames.get_frame
        frames.get_frame = lambda: seen
        try:
            self.assertEqual(Menu().brightness, 150)
            self.assertEqual(Menu(frame_with(200)).refresh().brightness, 150)
        finally:
            frames.get_frame = saved
        self.assertIs(stbt.get_frame, original)

    def test_object_repository(self):
        self.assertIn(Menu, _frameobject._object_repository)  # pylint: disable=protected-access

        @stbt.for_object_repository
        def helper():
            return 1

        @stbt.for_object_repository()
        class Other:
            pass

        self.assertEqual(helper(), 1)
        self.assertIn(helper, _frameobject._object_repository)  # pylint: disable=protected-access
        self.assertIn(Other, _frameobject._object_repository)  # pylint: disable=protected-access


class GridTest(unittest.TestCase):
    def test_cells_and_lookups(self):
        g = stbt.Grid(stbt.Region(100, 50, width=300, height=100), data=["abc", "def"])
        self.assertEqual((g.cols, g.rows, g.area, len(g)), (3, 2, 6, 6))
        cell = g[4]
        self.assertEqual(cell, stbt.Grid.Cell(4, stbt.Position(1, 1), stbt.Region(200, 100, 100, 50), "e"))
        self.assertEqual(g[-1].data, "f")
        self.assertEqual(g[(2, 0)].data, "c")
        self.assertEqual(g["d"].index, 3)
        self.assertEqual(g[stbt.Region(310, 110, 20, 20)].data, "f")
        self.assertEqual(g.get(position=(0, 1)).region, stbt.Region(100, 100, 100, 50))
        self.assertEqual([c.index for c in g.cells], list(range(6)))
        for key in (6, (3, 0), "z", stbt.Region(0, 0, 10, 10)):
            with self.assertRaises(IndexError):
                _ = g[key]

    def test_uneven_division(self):
        g = stbt.Grid(stbt.Region(0, 0, 10, 3), cols=3, rows=1)
        self.assertEqual([c.region.width for c in g], [3, 3, 4])
        self.assertEqual(g[2].region.right, 10)


class PreconditionTest(unittest.TestCase):
    def test_failures_become_errors(self):
        for exc in (AssertionError("no"), stbt.UITestFailure("gone"), stbt.MatchTimeout(None, "x.png", 3)):
            with self.assertRaises(stbt.PreconditionError) as cm:
                with stbt.as_precondition("Menu is up"):
                    raise exc
            e = cm.exception
            self.assertIsInstance(e, stbt.UITestError)
            self.assertNotIsInstance(e, stbt.UITestFailure)
            self.assertIs(e.original_exception, exc)
            self.assertEqual(e.message, "Menu is up")
            self.assertIn("Menu is up", str(e))

    def test_other_exceptions_pass_through(self):
        with self.assertRaises(KeyError):
            with stbt.as_precondition("x"):
                raise KeyError("k")

    def test_as_decorator(self):
        @stbt.as_precondition("setup")
        def setup():
            assert False, "not ready"

        with self.assertRaises(stbt.PreconditionError):
            setup()


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    def sleep(self, secs):
        self.now += secs


class WaitUntilTest(unittest.TestCase):
    def setUp(self):
        self.clock = FakeClock()
        self.saved = (_wait._monotonic, _wait._sleep)  # pylint: disable=protected-access
        _wait._monotonic, _wait._sleep = self.clock.monotonic, self.clock.sleep  # pylint: disable=protected-access

    def tearDown(self):
        _wait._monotonic, _wait._sleep = self.saved  # pylint: disable=protected-access

    def sequence(self, values, step=0.1):
        it = iter(values)

        def call():
            self.clock.now += step
            return next(it)
        return call

    def test_returns_first_truthy_value(self):
        self.assertEqual(stbt.wait_until(self.sequence([0, None, "", "yes", "later"])), "yes")

    def test_returns_last_falsy_value_on_timeout(self):
        self.assertEqual(stbt.wait_until(self.sequence([0] * 20 + [""] * 200), timeout_secs=2), "")

    def test_predicate(self):
        values = [1, 3, 5, 8, 9]
        self.assertEqual(stbt.wait_until(self.sequence(values), predicate=lambda v: v % 2 == 0), 8)

    def test_stable_secs(self):
        # True from the 3rd call, but it flips once; stable for 1 s from the 5th call on
        values = [False, False, True, True, False, True, True, True, True, True, True, True, True, True, True, True]
        calls = self.sequence([(v, i) for i, v in enumerate(values)], step=0.2)
        got = stbt.wait_until(calls, predicate=lambda v: v[0], stable_secs=1)
        self.assertEqual(got, (True, 5))  # the first value of the stable run

    def test_stable_value_not_only_truthiness(self):
        values = ["a", "b", "c", "d", "d", "d", "d", "d", "d", "d"]
        self.assertEqual(stbt.wait_until(self.sequence(values, step=0.25), stable_secs=1), "d")
        self.clock.now = 0
        flicker = ["a", "b"] * 30
        self.assertIsNone(stbt.wait_until(self.sequence(flicker, step=0.25), timeout_secs=3, stable_secs=1))

    def test_interval(self):
        n = []

        def call():
            n.append(self.clock.now)
            return len(n) >= 3
        self.assertTrue(stbt.wait_until(call, interval_secs=0.5))
        self.assertEqual([b - a for a, b in zip(n, n[1:])], [0.5, 0.5])


if __name__ == "__main__":
    unittest.main()
