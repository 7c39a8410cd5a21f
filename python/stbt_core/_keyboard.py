"""``Keyboard`` of the stbt API: an on-screen keyboard as a directed graph.

farmhand's own code, written from stb-tester's public manual and the
behaviour its users rely on. Each key is a node of a networkx ``DiGraph``
(``Keyboard.G``, as in stb-tester); an edge says "pressing this
remote-control key moves the focus from this key to that one" (its ``key``
attribute is the keypress). When one press from a key can land on several
keys (UP from a wide SPACE bar lands on whichever letter was focused last),
each of those edges weighs 100 instead of 1, so the shortest paths avoid
guesses. networkx is imported when a Keyboard is made (Debian's
``python3-networkx``), so ``import stbt`` works without it.
"""

import collections
import sys
import time as _time

from stbt_core._keyboard_graph import (_UNSURE_WEIGHT, _adjacent_groups, _keys_to_press, _networkx,
                                      _strip_shift_transitions)
from stbt_core._mask import load_mask
from stbt_core._types import Region

__all__ = ["Keyboard"]

# The key that undoes each move, for symmetrical transitions.
_OPPOSITE = {"KEY_LEFT": "KEY_RIGHT", "KEY_RIGHT": "KEY_LEFT", "KEY_UP": "KEY_DOWN", "KEY_DOWN": "KEY_UP"}

_FIELDS = ("name", "text", "region", "mode")

# How long the keyboard must stay still after a press (press_and_wait's stable_secs).
_STABLE_SECS = 0.5


def _either(keys):
    """"A, B or C": the keys' reprs, in order when they can be ordered."""
    try:
        keys = sorted(keys)
    except TypeError:
        keys = list(keys)
    names = [repr(k) for k in keys]
    return " or ".join(filter(None, [", ".join(names[:-1]), names[-1]])) if names else ""


def _region_test(query):
    """The test a ``region`` query puts a key's region to: it holds the
    middle of the region asked for, as in stb-tester (a page object finds
    the focused key with ``find_key(region=match.region)``, and a match of
    the focus highlight is seldom the key's exact cell)."""
    try:
        middle = query.center
    except (AttributeError, TypeError, ValueError, OverflowError):
        return lambda region: region == query
    return lambda region: region is not None and region.contains(middle)


def _check_cell_dict(cell, mode):
    """A grid cell's dict names a key (``name``, perhaps ``text``); its
    ``mode``, if any, is ``add_grid``'s and its ``region`` is the cell's."""
    data, (x, y) = cell.data, cell.position
    if "name" not in data:
        raise ValueError("Grid cell [%d,%d] has no 'name': %r" % (x, y, data))
    if data.get("mode", mode) != mode:
        raise ValueError("Grid cell [%d,%d] specifies mode %r but add_grid specifies mode %r"
                         % (x, y, data["mode"], mode))
    unknown = set(data) - set(_FIELDS)
    if unknown:
        raise ValueError("Grid cell [%d,%d] has fields a key doesn't have: %s" % (x, y, ", ".join(sorted(unknown))))


def _stbt():
    """The stbt_core module itself, looked up at call time so that a test's
    ``mock.patch("stbt_core.press", ...)`` is what the keyboard presses."""
    return sys.modules["stbt_core"]


class Key(collections.namedtuple("Key", _FIELDS, defaults=(None,) * len(_FIELDS))):
    """One key: ``name`` (e.g. "a", " ", "BACKSPACE"), ``text`` (what OK on
    it types; "" for none), ``region`` (where it is on screen, or None) and
    ``mode`` (e.g. "lowercase"; None on a keyboard without modes). Every
    field defaults to None, as in stb-tester."""

    __slots__ = ()

    def __repr__(self):
        return "Keyboard.Key(name=%r, text=%r, region=%r, mode=%r)" % tuple(self)


# ---------------------------------------------------------------- the keyboard


class Keyboard:
    """``Keyboard(*, mask=Region.ALL, navigate_timeout=60)``.

    Describe the keys with ``add_key``, ``add_transition``, ``add_edgelist``
    and ``add_grid``; then ``navigate_to`` moves the focus and
    ``enter_text`` types. Both take a ``page``: a FrameObject whose
    ``focus`` (or, older name, ``selection``) property is the focused
    ``Keyboard.Key`` and whose ``refresh()`` looks at a new frame. ``mask``
    is where the keyboard is on screen (``press_and_wait`` watches only
    there): a Region, a Mask or a mask file, loaded when the keyboard is
    made; ``navigate_timeout`` bounds one ``navigate_to`` in seconds. An
    edge list string as the first argument is added with ``add_edgelist``.
    """

    Key = Key

    def __init__(self, graph=None, *, mask=Region.ALL, navigate_timeout=60):
        self.G = _networkx().DiGraph()
        # Loaded now, as stb-tester does: a mask file is found beside the file that makes the keyboard.
        self.mask = load_mask(mask)
        self.navigate_timeout = navigate_timeout
        self.modes = set()
        self._named = {}  # name -> [Key], in the order they were added
        if isinstance(graph, str):
            self.add_edgelist(graph)
        elif graph is not None:
            raise TypeError("Keyboard(graph) takes an edge list string, not %r" % (graph,))

    def __repr__(self):
        return "<Keyboard: %d keys, %d transitions%s>" % (
            self.G.number_of_nodes(), self.G.number_of_edges(),
            ", modes %s" % ", ".join(sorted(map(str, self.modes))) if self.modes else "")

    # ------------------------------------------------------------ keys

    def add_key(self, name, text=None, region=None, mode=None):
        """Add a key and return it. ``text`` defaults to ``name`` when that
        is one character, else "". Raises ``ValueError`` when the key is
        there already, or when it has a ``mode`` (or ``region``) and the
        keyboard's other keys don't, or the other way round."""
        if not isinstance(name, str):
            raise ValueError("A key's name is a string, not %r" % (name,))
        existing = self.find_keys(name, text, region, mode)
        if existing:
            raise ValueError("Key already exists: %r" % (existing[0],))
        if text is None:
            text = name if len(name) == 1 else ""
        fields = dict(zip(_FIELDS, (name, text, region, mode)))
        if self.G:
            some_key = next(iter(self.G))
            for field in ("mode", "region"):
                if fields[field] is not None and getattr(some_key, field) is None:
                    raise ValueError("Key %r specifies %r, but none of the other keys in the keyboard do"
                                     % (fields, field))
                if fields[field] is None and getattr(some_key, field) is not None:
                    raise ValueError("Key %r doesn't specify %r, but all the other keys in the keyboard do"
                                     % (fields, field))
        key = Key(name, text, region, mode)
        self.G.add_node(key)
        self._named.setdefault(name, []).append(key)
        if mode is not None:
            self.modes.add(mode)
        return key

    def find_keys(self, name=None, text=None, region=None, mode=None):
        """Every key whose fields equal the ones given (None: any); a
        ``region`` finds the keys whose region holds its middle."""
        candidates = self._named.get(name, []) if name is not None else self.G
        holds = _region_test(region) if region is not None else None
        return [k for k in candidates
                if (mode is None or k.mode == mode) and (text is None or k.text == text)
                and (holds is None or holds(k.region))]

    def find_key(self, name=None, text=None, region=None, mode=None):
        """The one key that ``find_keys`` finds; ``ValueError`` when none or
        several do, or when no field is given."""
        query = {f: v for f, v in zip(_FIELDS, (name, text, region, mode)) if v is not None}
        if not query:
            raise ValueError("Empty query %r" % (query,))
        return self._one(query, self.find_keys(name, text, region, mode))

    @staticmethod
    def _one(query, found, what="query"):
        if not found:
            raise ValueError("Query %r doesn't match any key in the keyboard" % (query,))
        if len(found) > 1:
            raise ValueError("Ambiguous %s %r: Could mean %s" % (what, query, _either(found)))
        return found[0]

    def _lookup(self, query, mode=None):
        """The keys a Key, a name or a dict of fields means (``mode`` is
        added to a name or dict that has none; ``ValueError`` when it
        contradicts the query's own mode, or the dict asks nothing)."""
        if isinstance(query, Key):
            if mode is not None and query.mode != mode:
                raise ValueError("mode %r doesn't match %r" % (mode, query))
            return [query] if query in self.G else []
        if isinstance(query, str):
            return self.find_keys(name=query, mode=mode)
        if isinstance(query, dict):
            fields = {f: v for f, v in query.items() if v is not None}
            if mode is not None and fields.setdefault("mode", mode) != mode:
                raise ValueError("mode %r doesn't match key %r" % (mode, query))
            if not fields:
                raise ValueError("Empty query %r" % (query,))
            return self.find_keys(**fields)
        raise TypeError("A key is a Keyboard.Key, a name or a dict of its fields, not %r" % (query,))

    def _key(self, query, mode=None):
        shown = {"name": query, "mode": mode} if isinstance(query, str) and mode is not None else query
        return self._one(shown, self._lookup(query, mode))

    # ------------------------------------------------------------ transitions

    def add_transition(self, source, target, keypress, mode=None, symmetrical=True):
        """Pressing ``keypress`` on ``source`` moves the focus to ``target``
        (each a Key, a name, or a dict of fields, found with ``find_key``;
        ``mode`` is added to a name or dict). With ``symmetrical`` the
        opposite arrow (LEFT/RIGHT, UP/DOWN) moves it back."""
        self._connect(self._key(source, mode), self._key(target, mode), keypress, symmetrical)

    def _connect(self, source, target, keypress, symmetrical):
        self._add_edge(source, target, keypress)
        if symmetrical and keypress in _OPPOSITE:
            self._add_edge(target, source, _OPPOSITE[keypress])

    def _add_edge(self, source, target, keypress):
        old = self.G[source][target]["key"] if self.G.has_edge(source, target) else None
        self.G.add_edge(source, target, key=keypress)
        for press in {keypress, old} - {None}:
            self._weigh(source, press)

    def _weigh(self, source, keypress):
        """Give the edges of one press from ``source`` their weight: 1 (no
        attribute) when the press has one target, 100 when it has several."""
        edges = [data for data in self.G[source].values() if data.get("key") == keypress]
        for data in edges:
            if len(edges) > 1:
                data["weight"] = _UNSURE_WEIGHT
            else:
                data.pop("weight", None)

    def add_edgelist(self, edgelist, mode=None, symmetrical=True):
        """Transitions from text, one a line: ``source target KEYPRESS``,
        where source and target are key names (``SPACE`` means the key
        named " "). Keys not in the keyboard yet are added (in ``mode``).
        Blank lines are skipped, and ``###`` starts a comment (a single
        ``#`` can be a key's name). A line of another shape is a
        ``ValueError`` that gives its number, counted from the first line
        that isn't blank."""
        lines = edgelist.splitlines()
        while lines and not lines[0].strip():
            lines.pop(0)
        for number, line in enumerate(lines, 1):
            fields = line.split("###", 1)[0].split()
            if not fields:
                continue
            if len(fields) != 3:
                raise ValueError("Invalid line %d in keyboard edgelist: %r" % (number, line.strip()))
            source, target = (self._key_named(n, mode) for n in fields[:2])
            self._connect(source, target, fields[2], symmetrical)

    def _key_named(self, name, mode):
        name = " " if name == "SPACE" else name
        query = {"name": name} if mode is None else {"name": name, "mode": mode}
        found = self.find_keys(**query)
        return self._one(query, found, "key") if found else self.add_key(name, mode=mode)

    def add_grid(self, grid, mode=None, merge=False):
        """A key for each cell of ``grid`` (a ``Grid`` whose data are key
        names, dicts of a key's ``name`` and ``text``, or Keys), with the
        cell's region and ``mode``, and the arrow moves between neighbouring
        cells. With ``merge``, neighbouring cells
        holding the same name are one key whose region spans them (a SPACE
        bar three cells wide); the same name in cells apart stays two keys.
        Returns a Grid like ``grid`` whose data are the Keys."""
        from stbt_core._grid import Grid  # pylint: disable=import-outside-toplevel
        cells = grid.cells
        for cell in cells:
            if cell.data is None:
                raise ValueError("Grid cell [%d,%d] doesn't have any data" % tuple(cell.position))
            if isinstance(cell.data, dict):
                _check_cell_dict(cell, mode)
        keys = self._grid_keys(cells, mode, merge)
        at = {tuple(c.position): keys[c.index] for c in cells}
        for (x, y), key in at.items():
            for neighbour, keypress in (((x + 1, y), "KEY_RIGHT"), ((x, y + 1), "KEY_DOWN")):
                other = at.get(neighbour)
                if other is not None and other != key:
                    self._connect(key, other, keypress, symmetrical=True)
        return Grid(grid.region, cols=grid.cols, rows=grid.rows,
                    data=[[at[(x, y)] for x in range(grid.cols)] for y in range(grid.rows)])

    def _grid_keys(self, cells, mode, merge):
        """One Key per cell (index -> Key); with ``merge``, one per name."""
        def spec(cell):
            data = cell.data
            if isinstance(data, Key):
                return data.name, data.text
            if isinstance(data, dict):
                return data["name"], data.get("text")
            return str(data), None

        if not merge:
            return {c.index: self.add_key(*spec(c), region=c.region, mode=mode) for c in cells}
        keys = {}
        for group in _adjacent_groups(cells, spec):
            name, text = spec(group[0])
            key = self.add_key(name, text, Region.bounding_box(*(c.region for c in group)), mode)
            keys.update((c.index, key) for c in group)
        return keys

    # ------------------------------------------------------------ pressing (hooks a subclass may replace)

    def press(self, key):
        """Press without waiting (the moves in the middle of a path)."""
        return _stbt().press(key)

    # The keyboard calls both with their first argument alone; the keyword
    # arguments are stb-tester's, for a subclass that passes them on.

    def press_and_wait(self, key, timeout_secs=10, stable_secs=_STABLE_SECS):
        """Press and wait for the keyboard (``mask``) to stay still for
        half a second."""
        return _stbt().press_and_wait(key, mask=self.mask, timeout_secs=timeout_secs, stable_secs=stable_secs)

    def wait_for_transition_to_end(self, initial_frame=None, timeout_secs=10, stable_secs=_STABLE_SECS):
        """Wait again, for a box that was slow to react to the last press."""
        return _stbt().wait_for_transition_to_end(initial_frame, mask=self.mask, timeout_secs=timeout_secs,
                                                  stable_secs=stable_secs)

    # ------------------------------------------------------------ reading the page

    def _focus(self, page):
        """The focused key the page shows: its ``focus`` property (or
        ``selection``, the older name). AssertionError when the page isn't
        visible or that isn't a key of this keyboard."""
        if not getattr(page, "is_visible", True):
            raise AssertionError("%s page isn't visible" % type(page).__name__)
        prop = "focus" if hasattr(page, "focus") else "selection"
        value = getattr(page, prop, None)
        if isinstance(value, Key):
            if value in self.G:
                return value
        elif isinstance(value, str):
            found = self.find_keys(name=value) or self.find_keys(text=value)
            if len(found) == 1:
                return found[0]
        raise AssertionError("page.%s (%r) isn't in the keyboard" % (prop, value))

    def _look(self, page, transition=None):
        """A refreshed page (of the transition's last frame when there is
        one) and its focus."""
        frame = getattr(transition, "frame", None)
        page = page.refresh() if frame is None else page.refresh(frame=frame)
        return page, self._focus(page)

    # ------------------------------------------------------------ moving and typing

    def navigate_to(self, target, page, verify_every_keypress=False, retries=2):
        """Move the focus to ``target`` (a Key, a key's name or text, or a
        dict of fields; the nearest one when several keys match) along a
        cheapest path, and return the page (refreshed after any press), its
        focus on the target. The focus is checked after the last press of a
        path (after every press with ``verify_every_keypress``), and a box
        slow to react gets one more wait. A path ends early after a press
        that may land on several keys, and goes on from where the focus
        landed. When the focus is not where the model said, the path is
        planned again from where it is: ``retries`` times at most, then
        ``AssertionError``; and no new path starts after
        ``navigate_timeout`` seconds."""
        targets = self._targets(target)
        return self._navigate(targets, target, page, verify_every_keypress, retries)[0]

    def _targets(self, target):
        if isinstance(target, str):
            found = self.find_keys(name=target) or self.find_keys(text=target)
        else:
            found = self._lookup(target)
        if not found:
            raise ValueError("Query %r doesn't match any key in the keyboard" % (target,))
        return found

    def _navigate(self, targets, target, page, verify, retries):
        """(page, focus) once the focus is on one of ``targets``."""
        graph = _strip_shift_transitions(self.G)
        deadline = _time.monotonic() + float(self.navigate_timeout)
        focus = self._focus(page)
        failures, paths = 0, 0
        while focus not in targets:
            if paths and _time.monotonic() > deadline:
                raise AssertionError("Keyboard: the focus is on %r, not on %r, after navigate_timeout (%g s)"
                                     % (focus, target, self.navigate_timeout))
            paths += 1
            page, focus, missed = self._follow(graph, focus, targets, page, verify)
            if missed is not None:
                failures += 1
                if failures > int(retries):
                    raise AssertionError("Keyboard: expected %s after pressing %s, but the focus is on %r "
                                         "(on the way to %r; %d retries)"
                                         % (_either(missed[1]), missed[0], focus, target, int(retries)))
        return page, focus

    def _follow(self, graph, focus, targets, page, verify):
        """Press along one planned path: (page, focus, missed), where
        ``missed`` is the press after which the focus was not where the
        model said, as ``(keypress, the keys it may land on)``, or None."""
        steps = list(_keys_to_press(graph, focus, targets))
        for n, (keypress, expected) in enumerate(steps, 1):
            if not verify and n < len(steps):
                self.press(keypress)
                continue
            page, focus = self._look(page, self.press_and_wait(keypress))
            if focus not in expected:
                page, focus = self._look(page, self.wait_for_transition_to_end(getattr(page, "_frame", None)))
            if focus not in expected:
                return page, focus, (keypress, expected)
        return page, focus, None

    def enter_text(self, text, page, verify_every_keypress=False, retries=2):
        """Type ``text``: for each character, move to a key whose ``text``
        it is (the nearest one, changing mode if needed) and press KEY_OK.
        Every character is checked before the first press (``ValueError``
        when no key types one). Returns the refreshed page."""
        plan = []
        for char in text:
            keys = self.find_keys(text=char)
            if not keys:
                raise ValueError("No key in the keyboard types %r" % (char,))
            plan.append((char, keys))
        for char, keys in plan:
            page, focus = self._navigate(keys, char, page, verify_every_keypress, retries)
            page = self._type(page, focus)
        return page

    def _type(self, page, focus):
        """Press KEY_OK on ``focus``; wait for the keyboard to settle only
        when the model says OK changes it (a shift or mode key, a capital
        letter that ends a shift): typing alone often changes nothing
        inside ``mask``. Returns the refreshed page."""
        changes = any(data.get("key") == "KEY_OK" for data in self.G[focus].values())
        if changes:
            return self._look(page, self.press_and_wait("KEY_OK"))[0]
        self.press("KEY_OK")
        return self._look(page)[0]


Keyboard.__module__ = "stbt_core"
