"""Keyboard of the stbt API: building the graph (keys, queries and their
errors, transitions and their weights, edge lists, grids with and without
merge), the paths it plans, and typing on a simulated set-top box (two
modes and a one-shot SHIFT) whose presses are stbt's own press functions,
patched. The box can overshoot, lose a press or be slow, and the keyboard
must notice."""

import os
import runpy
import tempfile
import unittest
from unittest import mock

import cv2
import networkx
import numpy

import stbt
from stbt import Region
from stbt_core._keyboard import _keys_to_press, _strip_shift_transitions
from stbt_core._transition import Transition, TransitionStatus

# The box's screen: a 4x3 grid in each mode. SHIFT and SPACE are two cells wide.
LAYOUT = {
    "lowercase": [list("abcd"), list("efgh"), ["SHIFT", "SHIFT", " ", " "]],
    "uppercase": [list("ABCD"), list("EFGH"), ["SHIFT", "SHIFT", " ", " "]],
}
KEYS_REGION = Region(0, 0, width=400, height=300)


def box_keyboard(cls=stbt.Keyboard):
    """The model of the box's keyboard, as a test pack would write it."""
    kb = cls(mask=KEYS_REGION)
    for mode, rows in LAYOUT.items():
        kb.add_grid(stbt.Grid(KEYS_REGION, data=rows), mode=mode, merge=True)
    kb.add_transition({"name": "SHIFT", "mode": "lowercase"}, {"name": "SHIFT", "mode": "uppercase"}, "KEY_OK")
    kb.add_transition({"name": "SHIFT", "mode": "uppercase"}, {"name": "SHIFT", "mode": "lowercase"}, "KEY_OK")
    for letter in "abcdefgh":  # typing a capital ends the shift
        kb.add_transition({"name": letter.upper(), "mode": "uppercase"}, {"name": letter, "mode": "lowercase"},
                          "KEY_OK", symmetrical=False)
    return kb


class Box:
    """The simulated set-top box: where the focus is, the text typed, and
    every press. Wide keys keep the column the focus came from, so UP from
    SHIFT lands on "e" or "f" (the model can't know which)."""

    def __init__(self):
        self.mode, self.x, self.y = "lowercase", 0, 0
        self.typed, self.presses, self.waits = "", [], []

    @property
    def name(self):
        return LAYOUT[self.mode][self.y][self.x]

    def move(self, keypress):
        self.presses.append(keypress)
        if keypress == "KEY_OK":
            self.ok()
        elif keypress in ("KEY_UP", "KEY_DOWN"):
            self.y = max(0, min(2, self.y + (1 if keypress == "KEY_DOWN" else -1)))
        else:
            step = 1 if keypress == "KEY_RIGHT" else -1
            if self.y == 2:  # two cells a key
                self.x = max(0, min(3, self.x - self.x % 2 + (2 if step > 0 else -1)))
            else:
                self.x = max(0, min(3, self.x + step))

    def ok(self):
        if self.name == "SHIFT":
            self.mode = "uppercase" if self.mode == "lowercase" else "lowercase"
            return
        self.typed += self.name
        self.mode = "lowercase"

    # stbt's functions, as the keyboard calls them
    def press(self, key):
        self.move(key)

    def press_and_wait(self, key, **kwargs):
        self.waits.append(kwargs)
        self.move(key)
        return Transition(key, None, TransitionStatus.COMPLETE, 0, 0, 0)

    def wait_for_transition_to_end(self, *args, **kwargs):
        return Transition(None, None, TransitionStatus.COMPLETE, 0, 0, 0)


class ForgetfulBox(Box):
    """Every other arrow press is lost."""

    lost = False

    def move(self, keypress):
        if keypress != "KEY_OK":
            self.lost = not self.lost
            if self.lost:
                self.presses.append(keypress)
                return
        super().move(keypress)


class OvershootingBox(Box):
    """RIGHT from the first column jumps two keys."""

    def move(self, keypress):
        jump = keypress == "KEY_RIGHT" and self.x == 0 and self.y < 2
        super().move(keypress)
        if jump:
            self.x += 1


class SlowBox(Box):
    """press_and_wait returns before the box moves; the move shows only
    once the keyboard waits again."""

    pending = None

    def press_and_wait(self, key, **kwargs):
        self.waits.append(kwargs)
        self.pending = key
        return Transition(key, "the frame after " + key, TransitionStatus.COMPLETE, 0, 0, 0)

    def wait_for_transition_to_end(self, *args, **kwargs):
        assert self.pending is not None, "waited with no press pending"
        self.move(self.pending)
        self.pending = None
        return Transition(None, None, TransitionStatus.COMPLETE, 0, 0, 0)


class Page:
    """A stand-in page object: the box's focus when it was made."""

    _frame = None

    def __init__(self, box, kb, visible=True, attribute="focus"):
        self.box, self.kb, self.is_visible = box, kb, visible
        setattr(self, attribute, kb.find_key(name=box.name, mode=box.mode))

    def refresh(self, frame=None):
        page = Page(self.box, self.kb)
        page._frame = frame
        return page


class KeyboardModelTest(unittest.TestCase):
    def test_keys_text_and_repr(self):
        kb = stbt.Keyboard()
        a = kb.add_key("a")
        self.assertEqual(a, stbt.Keyboard.Key(name="a", text="a", region=None, mode=None))
        self.assertEqual(repr(a), "Keyboard.Key(name='a', text='a', region=None, mode=None)")
        self.assertEqual(kb.add_key(" ").text, " ")
        self.assertEqual(kb.add_key("DELETE").text, "")
        self.assertEqual(kb.add_key("SPACE", text=" ").text, " ")
        self.assertEqual(kb.find_keys(text=" "), [kb.find_key(name=" "), kb.find_key("SPACE")])
        self.assertIn(a, kb.G)
        self.assertFalse(kb.modes)
        with self.assertRaisesRegex(ValueError, r"^Key already exists: Keyboard\.Key\(name='a'"):
            kb.add_key("a")
        with self.assertRaisesRegex(ValueError, r"^Query \{'name': 'z'\} doesn't match any key in the keyboard$"):
            kb.find_key("z")
        with self.assertRaisesRegex(ValueError, r"^Ambiguous query \{'text': ' '\}: Could mean .* or "):
            kb.find_key(text=" ")
        with self.assertRaisesRegex(ValueError, "already exists"):
            kb.add_key("SPACE")  # its text isn't asked for, as in stb-tester
        with self.assertRaisesRegex(ValueError, r"^Empty query \{\}$"):
            kb.find_key()
        # stb-tester's Key has defaults, for type annotations and stand-ins
        self.assertEqual(stbt.Keyboard.Key(name="q"), ("q", None, None, None))

    def test_modes_and_regions_are_all_or_nothing(self):
        kb = stbt.Keyboard()
        kb.add_key("a")
        with self.assertRaisesRegex(ValueError, r"'mode': 'caps'\} specifies 'mode', but none of the other"):
            kb.add_key("b", mode="caps")
        with self.assertRaisesRegex(ValueError, r"specifies 'region', but none of the other"):
            kb.add_key("b", region=Region(0, 0, 10, 10))
        kb = stbt.Keyboard()
        kb.add_key("a", mode="lowercase")
        kb.add_key("A", mode="uppercase")
        self.assertEqual(kb.modes, {"lowercase", "uppercase"})
        with self.assertRaisesRegex(ValueError, r"doesn't specify 'mode', but all the other keys"):
            kb.add_key("b")
        with self.assertRaisesRegex(ValueError, "already exists"):
            kb.add_key("a")  # any mode: a key without one would be ambiguous

    def test_transitions_find_their_keys(self):
        kb = stbt.Keyboard()
        a, b = kb.add_key("a", mode="m"), kb.add_key("b", mode="m")
        kb.add_key("b", mode="n")
        kb.add_transition(a, {"name": "b", "mode": "m"}, "KEY_RIGHT")
        self.assertEqual(kb.G[a][b], {"key": "KEY_RIGHT"})
        self.assertEqual(kb.G[b][a], {"key": "KEY_LEFT"})  # symmetrical by default
        kb.add_transition("a", "b", "KEY_DOWN", mode="m", symmetrical=False)
        self.assertFalse(kb.G.has_edge(b, a) and kb.G[b][a]["key"] == "KEY_UP")
        with self.assertRaisesRegex(ValueError, r"^Ambiguous query 'b': Could mean .*mode='m'.* or .*mode='n'"):
            kb.add_transition("a", "b", "KEY_RIGHT")
        with self.assertRaisesRegex(ValueError, r"^Query 'c' doesn't match any key in the keyboard$"):
            kb.add_transition("a", "c", "KEY_RIGHT")
        # a mode that contradicts the key's own, and a query that asks nothing, are mistakes
        with self.assertRaisesRegex(ValueError, "mode 'n' doesn't match"):
            kb.add_transition(a, "b", "KEY_RIGHT", mode="n")
        with self.assertRaisesRegex(ValueError, "mode 'n' doesn't match key"):
            kb.add_transition({"name": "b", "mode": "m"}, "b", "KEY_RIGHT", mode="n")
        with self.assertRaisesRegex(ValueError, r"^Empty query \{'name': None\}$"):
            kb.add_transition({"name": None}, a, "KEY_RIGHT")

    def test_edgelist(self):
        kb = stbt.Keyboard()
        kb.add_edgelist("""
            ### keys may be called "#"; three of them start a comment
            a # KEY_RIGHT
            # SPACE KEY_RIGHT   ### trailing comment

            a z KEY_UP
        """)
        a, hash_, space = kb.find_key("a"), kb.find_key("#"), kb.find_key(" ")
        self.assertEqual(space.text, " ")
        self.assertEqual(list(_keys_to_press(kb.G, space, [a])), [("KEY_LEFT", {hash_}), ("KEY_LEFT", {a})])
        self.assertEqual(kb.G[kb.find_key("z")][a]["key"], "KEY_DOWN")
        kb.add_edgelist("a q KEY_OK", symmetrical=False)
        self.assertEqual(list(kb.G.successors(kb.find_key("q"))), [])
        with self.assertRaisesRegex(ValueError, r"line 3 .*'a b KEY_LEFT extra'"):
            kb.add_edgelist("\n\n  a b KEY_RIGHT\n\n  a b KEY_LEFT extra\n")
        kb.add_edgelist("")

    def test_weights_make_paths_avoid_guesses(self):
        # 1 2 3 4 over one wide OK key: UP from OK lands on any of them.
        kb = stbt.Keyboard()
        digits = [kb.add_key(d) for d in "1234"]
        ok = kb.add_key("OK")
        for d in digits:
            kb.add_transition(d, ok, "KEY_DOWN")
        for left, right in zip(digits, digits[1:]):
            kb.add_transition(left, right, "KEY_RIGHT")
        self.assertIsNone(kb.G[digits[0]][ok].get("weight"))
        self.assertEqual([kb.G[ok][d]["weight"] for d in digits], [100] * 4)
        self.assertEqual(networkx.shortest_path(kb.G, digits[0], digits[3]), [digits[0], ok, digits[3]])
        self.assertEqual([k for k, _ in _keys_to_press(kb.G, digits[0], [digits[3]])], ["KEY_RIGHT"] * 3)
        self.assertEqual(list(_keys_to_press(kb.G, ok, [digits[2]])), [("KEY_UP", set(digits))])

    def test_add_grid(self):
        kb = stbt.Keyboard()
        keys = kb.add_grid(stbt.Grid(Region(0, 0, 300, 100), data=["abc", "de "]))
        self.assertIsInstance(keys, stbt.Grid)
        self.assertEqual(keys[1, 1].data, kb.find_key("e"))
        self.assertEqual(kb.find_key("e").region, Region(100, 50, 100, 50))
        self.assertEqual(kb.G[kb.find_key("a")][kb.find_key("d")], {"key": "KEY_DOWN"})
        self.assertEqual(kb.G[kb.find_key("e")][kb.find_key("b")], {"key": "KEY_UP"})
        with self.assertRaisesRegex(ValueError, r"^Grid cell \[0,0\] doesn't have any data$"):
            kb.add_grid(stbt.Grid(Region(0, 0, 30, 10), cols=3, rows=1))

    def test_find_key_by_region(self):
        # A page object finds the focus with find_key(region=match.region): the match of the highlight is not the
        # key's cell, so the key is the one whose region holds the middle of the region asked for (stb-tester's rule).
        kb = box_keyboard()
        highlight = Region(96, 96, width=110, height=60)  # around "f" (100, 100, 100, 100) and spilling over
        self.assertEqual(kb.find_key(region=highlight, mode="uppercase"), kb.find_key("F"))
        self.assertEqual(kb.find_keys(region=highlight), [kb.find_key("f"), kb.find_key("F")])
        self.assertEqual(kb.find_key(region=Region(330, 250, 20, 20), mode="lowercase"),
                         kb.find_key(" ", mode="lowercase"))  # the right end of the wide SPACE
        self.assertEqual(kb.find_keys(region=Region(500, 500, 10, 10)), [])
        with self.assertRaisesRegex(ValueError, r"^Ambiguous query \{'region': Region"):
            kb.find_key(region=highlight)
        # the same cell in another mode, as a pack finds where KEY_PLAY lands
        a = kb.find_key("a")
        self.assertEqual(kb.find_key(region=a.region, mode="uppercase"), kb.find_key("A"))
        without = stbt.Keyboard()
        without.add_key("a")
        self.assertEqual(without.find_keys(region=Region(0, 0, 10, 10)), [])

    def test_add_grid_cells_may_be_dicts(self):
        kb = stbt.Keyboard()
        space = {"name": "SPACE", "text": " "}
        keys = kb.add_grid(stbt.Grid(Region(0, 0, 300, 100), data=[[space, space, "a"]]), mode="m", merge=True)
        self.assertEqual(keys[0, 0].data, stbt.Keyboard.Key("SPACE", " ", Region(0, 0, 200, 100), "m"))
        self.assertIs(keys[1, 0].data, keys[0, 0].data)
        self.assertEqual(kb.find_key(text=" "), keys[0, 0].data)
        self.assertEqual(kb.G[kb.find_key("a")][keys[0, 0].data], {"key": "KEY_LEFT"})
        for data, error in (({"name": "b", "mode": "n"}, r"\[0,0\] specifies mode 'n' but add_grid specifies mode 'm'"),
                            ({"text": "b"}, r"\[0,0\] has no 'name'"),
                            ({"name": "b", "colour": "red"}, "colour")):
            with self.assertRaisesRegex(ValueError, error):
                kb.add_grid(stbt.Grid(Region(0, 100, 100, 100), data=[[data]]), mode="m")

    def test_add_grid_merges_wide_keys(self):
        kb = box_keyboard()
        shift, space = kb.find_key("SHIFT", mode="lowercase"), kb.find_key(" ", mode="lowercase")
        self.assertEqual(shift.region, Region(0, 200, 200, 100))
        self.assertEqual(space.region, Region(200, 200, 200, 100))
        e, f = kb.find_key("e"), kb.find_key("f")
        self.assertEqual(list(_keys_to_press(kb.G, shift, [f])), [("KEY_UP", {e, f})])
        self.assertEqual(list(_keys_to_press(kb.G, e, [space])), [("KEY_DOWN", {shift}), ("KEY_RIGHT", {space})])

    def test_add_grid_merges_only_neighbours(self):
        # a SHIFT at each end of the top row, a SPACE two cells wide below
        kb = stbt.Keyboard()
        kb.add_grid(stbt.Grid(Region(0, 0, 400, 200), data=[["SHIFT", "a", "b", "SHIFT"], ["c", " ", " ", "d"]]),
                    merge=True)
        shifts = kb.find_keys("SHIFT")
        self.assertEqual([k.region for k in shifts], [Region(0, 0, 100, 100), Region(300, 0, 100, 100)])
        self.assertEqual(kb.find_key(" ").region, Region(100, 100, 200, 100))
        self.assertEqual(kb.G[shifts[1]][kb.find_key("d")], {"key": "KEY_DOWN"})
        self.assertFalse(kb.G.has_edge(shifts[0], kb.find_key("d")))

    def test_paths_change_mode(self):
        kb = box_keyboard()
        a, b_upper = kb.find_key("a"), kb.find_key("B")
        # UP from SHIFT may land on E or F (a guess that costs 100): the path stops there, for the keyboard to look
        # where the focus went and go on from it, as stb-tester does
        self.assertEqual(list(_keys_to_press(kb.G, a, [b_upper]))[2:],
                         [("KEY_OK", {kb.find_key("SHIFT", mode="uppercase")}),
                          ("KEY_UP", {kb.find_key("E"), kb.find_key("F")})])
        self.assertEqual([k for k, _ in _keys_to_press(kb.G, a, [b_upper])][:2], ["KEY_DOWN", "KEY_DOWN"])
        # the nearest of several targets
        spaces = kb.find_keys(name=" ")
        self.assertEqual(list(_keys_to_press(kb.G, kb.find_key("H"), spaces)),
                         [("KEY_DOWN", {kb.find_key(" ", mode="uppercase")})])
        kb.add_key("x", region=Region(0, 300, 10, 10), mode="lowercase")
        with self.assertRaisesRegex(networkx.NetworkXNoPath, r"^No path to Keyboard\.Key\(name='x'"):
            list(_keys_to_press(kb.G, a, [kb.find_key("x")]))

    def test_strip_shift_transitions_hides_ok_on_letters(self):
        kb = box_keyboard()
        stripped = _strip_shift_transitions(kb.G)
        self.assertEqual(sorted(stripped.nodes()), sorted(kb.G.nodes()))
        self.assertEqual(len(stripped.edges()), len(kb.G.edges()) - 8)
        self.assertFalse(stripped.has_edge(kb.find_key("A"), kb.find_key("a")))
        shift_l, shift_u = kb.find_key("SHIFT", mode="lowercase"), kb.find_key("SHIFT", mode="uppercase")
        self.assertTrue(stripped.has_edge(shift_l, shift_u))


class KeyboardTypingTest(unittest.TestCase):
    def drive(self, box):
        for name in ("press", "press_and_wait", "wait_for_transition_to_end"):
            patcher = mock.patch("stbt_core." + name, getattr(box, name))
            patcher.start()
            self.addCleanup(patcher.stop)
        return box

    def test_enter_text_mixed_case(self):
        kb, box = box_keyboard(), self.drive(Box())
        page = kb.enter_text("Bad cafe", Page(box, kb))
        self.assertEqual(box.typed, "Bad cafe")
        self.assertEqual(page.focus, kb.find_key("e"))
        # SHIFT, then UP, which may land on E or F: it landed on E, and the path to B was planned from there
        self.assertEqual(box.presses[:7], ["KEY_DOWN", "KEY_DOWN", "KEY_OK",
                                           "KEY_UP", "KEY_UP", "KEY_RIGHT", "KEY_OK"])
        self.assertEqual(box.presses[7:8], ["KEY_LEFT"])  # a: the box went back to lowercase by itself

    def test_enter_text_twice_continues_from_the_returned_page(self):
        kb, box = box_keyboard(), self.drive(Box())
        page = kb.enter_text("f", Page(box, kb))
        kb.enter_text("g", page)
        self.assertEqual(sorted(box.presses[:2]), ["KEY_DOWN", "KEY_RIGHT"])
        self.assertEqual(box.presses[2:], ["KEY_OK", "KEY_RIGHT", "KEY_OK"])

    def test_navigate_to_never_types(self):
        kb, box = box_keyboard(), self.drive(Box())
        box.mode = "uppercase"
        page = kb.navigate_to({"name": "b", "mode": "lowercase"}, Page(box, kb))
        self.assertEqual((box.typed, box.mode, page.focus), ("", "lowercase", kb.find_key("b")))
        self.assertIn("KEY_OK", box.presses)  # through SHIFT, not OK on "A"

    def test_targets_and_page_are_checked_before_any_press(self):
        kb, box = box_keyboard(), self.drive(Box())
        with self.assertRaisesRegex(ValueError, "'z'"):
            kb.enter_text("abz", Page(box, kb))
        with self.assertRaises(ValueError):
            kb.navigate_to("nope", Page(box, kb))
        with self.assertRaisesRegex(AssertionError, "Page page isn't visible"):
            kb.navigate_to("b", Page(box, kb, visible=False))
        page = Page(box, kb)
        page.focus = None
        with self.assertRaisesRegex(AssertionError, r"page\.focus \(None\) isn't in the keyboard"):
            kb.navigate_to("b", page)
        self.assertEqual(box.presses, [])

    def test_the_older_selection_property(self):
        kb, box = box_keyboard(), self.drive(Box())
        page = Page(box, kb, attribute="selection")
        page.selection = "nope"
        with self.assertRaisesRegex(AssertionError, r"page\.selection \('nope'\) isn't in the keyboard"):
            kb.navigate_to("b", page)
        self.assertEqual(kb.navigate_to("b", Page(box, kb, attribute="selection")).focus, kb.find_key("b"))

    def test_press_and_wait_watches_the_keyboard(self):
        kb, box = box_keyboard(), self.drive(Box())
        self.assertIsInstance(kb.mask, stbt.Mask)
        kb.navigate_to("c", Page(box, kb))
        self.assertEqual(box.presses, ["KEY_RIGHT", "KEY_RIGHT"])  # the first without waiting
        self.assertEqual(box.waits, [{"mask": KEYS_REGION, "timeout_secs": 10, "stable_secs": 0.5}])

    def test_a_mask_file_is_found_beside_the_file_that_makes_the_keyboard(self):
        # as in stb-tester, which loads the mask when the keyboard is made: navigate_to is often called from a test
        # in another folder than the page object that holds the keyboard and its mask
        with tempfile.TemporaryDirectory() as pages:
            cv2.imwrite(os.path.join(pages, "keys-mask.png"), numpy.full((30, 40), 255, numpy.uint8))
            with open(os.path.join(pages, "search_page.py"), "w", encoding="utf-8") as f:
                f.write("import stbt\nkb = stbt.Keyboard(mask='keys-mask.png')\n")
            kb = runpy.run_path(os.path.join(pages, "search_page.py"))["kb"]
        self.assertIn("keys-mask.png", repr(kb.mask))
        with self.assertRaises(FileNotFoundError):
            stbt.Keyboard(mask="no-such-mask.png")

    def test_a_subclass_may_pass_stb_testers_arguments_on(self):
        # stb-tester's hooks take timeout_secs and stable_secs; a subclass written for it passes them to super()
        class Slower(stbt.Keyboard):
            def press_and_wait(self, key, timeout_secs=10, stable_secs=1):
                return super().press_and_wait(key, timeout_secs=timeout_secs, stable_secs=stable_secs)

            def wait_for_transition_to_end(self, initial_frame=None, timeout_secs=10, stable_secs=2):
                return super().wait_for_transition_to_end(initial_frame, timeout_secs=timeout_secs,
                                                          stable_secs=stable_secs)

        kb, box = box_keyboard(Slower), self.drive(SlowBox())
        waited = []
        with mock.patch("stbt_core.wait_for_transition_to_end",
                        lambda *a, **kw: (waited.append((a, kw)), box.wait_for_transition_to_end())[1]):
            self.assertEqual(kb.navigate_to("b", Page(box, kb)).focus, kb.find_key("b"))
        self.assertEqual(box.waits, [{"mask": KEYS_REGION, "timeout_secs": 10, "stable_secs": 1}])
        # the wait for a slow box starts from the frame the page was read from
        self.assertEqual(waited, [(("the frame after KEY_RIGHT",),
                                   {"mask": KEYS_REGION, "timeout_secs": 10, "stable_secs": 2})])

    def test_a_press_that_may_land_on_several_keys_is_no_failed_attempt(self):
        # UP from SHIFT lands on E or F: the path goes on from where it landed, without using up a retry
        kb, box = box_keyboard(), self.drive(Box())
        page = kb.navigate_to("B", Page(box, kb), retries=0)
        self.assertEqual(page.focus, kb.find_key("B"))
        self.assertEqual(box.presses, ["KEY_DOWN", "KEY_DOWN", "KEY_OK", "KEY_UP", "KEY_UP", "KEY_RIGHT"])
        box = self.drive(Box())
        kb.enter_text("Head", Page(box, kb), verify_every_keypress=True, retries=0)
        self.assertEqual(box.typed, "Head")

    def test_lost_presses_are_pressed_again(self):
        kb, box = box_keyboard(), self.drive(ForgetfulBox())
        page = kb.enter_text("bcgdcb", Page(box, kb), retries=100)
        self.assertEqual((box.typed, page.focus), ("bcgdcb", kb.find_key("b")))

    def test_navigate_to_plans_again_after_an_overshoot(self):
        kb, box = box_keyboard(), self.drive(OvershootingBox())
        page = kb.navigate_to("b", Page(box, kb))
        self.assertEqual(page.focus, kb.find_key("b"))
        self.assertEqual(box.presses, ["KEY_RIGHT", "KEY_LEFT"])

    def test_no_retries_left(self):
        kb = box_keyboard()
        for target, verify, presses in (("b", False, 1), ("b", True, 1), ("c", False, 2), ("c", True, 1)):
            box = self.drive(OvershootingBox())
            with self.assertRaises(AssertionError) as failed:
                kb.navigate_to(target, Page(box, kb), verify_every_keypress=verify, retries=0)
            self.assertEqual(box.presses, ["KEY_RIGHT"] * presses, (target, verify))
        self.assertRegex(str(failed.exception), r"^Keyboard: expected Keyboard\.Key\(name='b'.* after pressing "
                                                r"KEY_RIGHT, but the focus is on Keyboard\.Key\(name='c'")

    def test_a_slow_box_is_waited_for(self):
        kb, box = box_keyboard(), self.drive(SlowBox())
        page = kb.navigate_to("d", Page(box, kb), verify_every_keypress=True)
        self.assertEqual(page.focus, kb.find_key("d"))
        self.assertEqual(box.presses, ["KEY_RIGHT"] * 3)

    def test_navigate_timeout(self):
        kb, box = box_keyboard(), self.drive(Box())
        box.move = lambda keypress: None  # the box ignores everything
        kb.navigate_timeout = 0
        with self.assertRaises(AssertionError):
            kb.navigate_to("b", Page(box, kb), retries=100)


if __name__ == "__main__":
    unittest.main()
