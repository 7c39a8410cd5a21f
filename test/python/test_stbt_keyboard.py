"""Keyboard of the stbt API against a simulated on-screen keyboard:
find_key(s), add_key defaults, add_transition (symmetrical), add_edgelist,
add_grid, shortest paths (every press counted), enter_text, navigate_to with
re-planning when a press goes astray, and modes."""

import unittest

import stbt
from stbt import Region


class Screen:
    """A simulated set-top box showing a keyboard: the focus moves along the
    keyboard's true edges; KEY_OK types the focused key's text."""

    def __init__(self, keyboard, focus, edges=None, glitch=None):
        self.keyboard, self.focus, self.typed, self.presses = keyboard, focus, "", []
        self.edges = edges  # {(key, keypress): key}: the box's own truth
        self.glitch = glitch  # a press number whose move is lost

    def press(self, keypress):
        self.presses.append(keypress)
        if self.glitch is not None and len(self.presses) == self.glitch:
            return
        if keypress == "KEY_OK":
            self.typed += self.focus.text
        else:
            self.focus = self.edges[(self.focus, keypress)]


class Page:
    """A stand-in FrameObject: its focus is the screen's when it was made."""

    def __init__(self, screen):
        self.screen, self.focus = screen, screen.focus

    def refresh(self, frame=None):
        return Page(self.screen)


class FakeKeyboard(stbt.Keyboard):
    screen = None

    def press_and_wait(self, key, **kwargs):
        self.screen.press(key)


ROWS = ["abcdef", "ghijkl", "mnopqr", "stuvwx", "yz0123"]


def grid_keyboard():
    kb = FakeKeyboard()
    grid = kb.add_grid(stbt.Grid(Region(0, 0, 600, 500), data=[list(r) for r in ROWS]))
    space = kb.add_key("SPACE", text=" ", region=Region(0, 500, 600, 50))
    for key in grid.data[-1]:
        kb.add_transition(key, space, "KEY_DOWN", symmetrical=False)
    kb.add_transition(space, kb.find_key("y"), "KEY_UP", symmetrical=False)
    edges = {(k, p): t for k, out in kb._edges.items() for p, t in out.items()}  # pylint: disable=protected-access
    return kb, grid, edges


class KeyboardTest(unittest.TestCase):
    def test_keys_and_finding_them(self):
        kb = stbt.Keyboard()
        a = kb.add_key("a")
        self.assertEqual(a, stbt.Keyboard.Key("a", "a", None, None))
        self.assertEqual(kb.add_key("a"), a)
        self.assertEqual(len(kb.find_keys()), 1)
        clear = kb.add_key("CLEAR")
        self.assertEqual(clear.text, "")
        upper = kb.add_key("A", mode="uppercase")
        self.assertIs(kb.find_key(text="A"), upper)
        self.assertEqual(kb.find_keys(mode="uppercase"), [upper])
        with self.assertRaises(ValueError):
            kb.find_key(name="nope")
        kb.add_key("a", mode="other")
        with self.assertRaises(ValueError):
            kb.find_key(name="a")  # two
        self.assertEqual(kb.find_key(name="a", mode="other").mode, "other")

    def test_edgelist_and_symmetry(self):
        kb = stbt.Keyboard()
        kb.add_edgelist("""
            # row one
            a b KEY_RIGHT
            b c KEY_RIGHT   # trailing comment
            a d KEY_DOWN
            d d2 KEY_OK
        """)
        a, b, c, d = (kb.find_key(n) for n in "abcd")
        self.assertEqual(kb._path(a, [c]), [("KEY_RIGHT", b), ("KEY_RIGHT", c)])  # pylint: disable=protected-access
        self.assertEqual(kb._path(c, [a]), [("KEY_LEFT", b), ("KEY_LEFT", a)])  # pylint: disable=protected-access
        self.assertEqual(kb._path(d, [c])[0], ("KEY_UP", a))  # pylint: disable=protected-access
        self.assertIsNone(kb._path(kb.find_key("d2"), [a]))  # pylint: disable=protected-access
        with self.assertRaises(ValueError):
            kb.add_edgelist("a b")

    def test_add_grid_regions_and_neighbours(self):
        kb, grid, _ = grid_keyboard()
        self.assertEqual(kb.find_key("h").region, Region(100, 100, 100, 100))
        self.assertEqual(grid.data[1][1], kb.find_key("h"))
        path = kb._path(kb.find_key("a"), [kb.find_key("p")])  # pylint: disable=protected-access
        self.assertEqual(sorted(p for p, _ in path), ["KEY_DOWN"] * 2 + ["KEY_RIGHT"] * 3)

    def test_enter_text_by_shortest_paths(self):
        kb, _, edges = grid_keyboard()
        kb.screen = Screen(kb, kb.find_key("a"), edges)
        page = kb.enter_text("hi z", Page(kb.screen))
        self.assertEqual(kb.screen.typed, "hi z")
        self.assertEqual(page.focus, kb.find_key("z"))
        moves = [p for p in kb.screen.presses if p != "KEY_OK"]
        # a->h 2, h->i 1, i->SPACE 4 (down to row 5, then space), SPACE->z 2 (up to y, right)
        self.assertEqual(len(moves), 2 + 1 + 4 + 2)
        self.assertEqual(kb.screen.presses.count("KEY_OK"), 4)

    def test_navigate_to_plans_again_when_a_press_is_lost(self):
        kb, _, edges = grid_keyboard()
        for verify in (False, True):
            kb.screen = Screen(kb, kb.find_key("a"), edges, glitch=2)
            page = kb.navigate_to("x", Page(kb.screen), verify_every_keypress=verify)
            self.assertEqual(page.focus, kb.find_key("x"))
            self.assertEqual(len(kb.screen.presses), 5 + 3 + 1)  # one lost, found and made good
        kb.navigate_timeout = 0
        kb.screen = Screen(kb, kb.find_key("a"), edges, glitch=1)
        kb.screen.press = lambda keypress: None  # the box ignores everything
        with self.assertRaises(AssertionError):
            kb.navigate_to("b", Page(kb.screen))

    def test_modes_choose_the_nearest_key_with_the_text(self):
        kb = FakeKeyboard()
        kb.add_edgelist("a b KEY_RIGHT\nb shift KEY_RIGHT", mode="lowercase")
        kb.add_edgelist("A B KEY_RIGHT\nB SHIFT KEY_RIGHT", mode="uppercase")
        shift_l, shift_u = kb.find_key("shift"), kb.find_key("SHIFT")
        kb.add_transition(shift_l, shift_u, "KEY_OK", symmetrical=False)
        kb.add_transition(shift_u, shift_l, "KEY_OK", symmetrical=False)
        edges = {(k, p): t for k, out in kb._edges.items() for p, t in out.items()}  # pylint: disable=protected-access

        class ModeScreen(Screen):
            def press(self, keypress):
                self.presses.append(keypress)
                if keypress == "KEY_OK" and self.focus.text:
                    self.typed += self.focus.text
                else:
                    self.focus = self.edges[(self.focus, keypress)]

        kb.screen = ModeScreen(kb, kb.find_key("a"), edges)
        kb.enter_text("bB", Page(kb.screen))
        self.assertEqual(kb.screen.typed, "bB")
        with self.assertRaises(ValueError):
            kb.enter_text("q", Page(kb.screen))


if __name__ == "__main__":
    unittest.main()
