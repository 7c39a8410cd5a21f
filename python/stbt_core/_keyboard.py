"""``Keyboard`` of the stbt API: an on-screen keyboard as a graph.

farmhand's own code, written from stb-tester's public manual. The keys are
the nodes; an edge says "pressing this remote-control key moves the focus
from this key to that one". stb-tester uses networkx for the graph; farmhand
uses a breadth-first search of its own (a few lines, every edge costs one
press), so test packs and nodes need no extra Debian package.
"""

import collections
import time as _time

from stbt_core._types import Region

__all__ = ["Keyboard"]

# The key that undoes each move, for symmetrical transitions.
_OPPOSITE = {"KEY_LEFT": "KEY_RIGHT", "KEY_RIGHT": "KEY_LEFT", "KEY_UP": "KEY_DOWN", "KEY_DOWN": "KEY_UP"}


class _Key(collections.namedtuple("Key", "name text region mode")):
    """One key: ``name`` (e.g. "a", "SPACE", "shift"), ``text`` (what
    pressing OK on it types; "" for none), ``region`` and ``mode`` (e.g.
    "lowercase"; None for a keyboard without modes)."""

    __slots__ = ()

    def __repr__(self):
        return "Keyboard.Key(%s)" % ", ".join(
            "%s=%r" % (f, getattr(self, f)) for f in self._fields if getattr(self, f) is not None)


class Keyboard:
    """``Keyboard(*, mask=Region.ALL, navigate_timeout=60)``. Build it with
    ``add_key``, ``add_transition``, ``add_edgelist`` and ``add_grid``; type
    with ``enter_text`` and move with ``navigate_to``. The ``page`` those
    take is a FrameObject whose ``focus`` property is the focused key (a
    ``Keyboard.Key``, or a name/text ``find_key`` finds) and whose
    ``refresh()`` reads a new frame. ``mask`` is where the keyboard is (the
    motion of the rest of the screen is ignored while waiting)."""

    Key = _Key

    def __init__(self, *, mask=Region.ALL, navigate_timeout=60):
        self.mask = mask
        self.navigate_timeout = navigate_timeout
        self._keys = []
        self._edges = collections.OrderedDict()  # Key -> OrderedDict(keypress -> Key)

    # ------------------------------------------------------------ building

    def add_key(self, name, text=None, region=None, mode=None):
        """Add a key (the same key twice is one key) and return it. ``text``
        defaults to ``name`` when that is one character, else ""."""
        if not isinstance(name, str) or not name:
            raise ValueError("a key's name is a non-empty string, not %r" % (name,))
        if text is None:
            text = name if len(name) == 1 else ""
        key = _Key(name, text, region, mode)
        if key not in self._edges:
            self._keys.append(key)
            self._edges[key] = collections.OrderedDict()
        return key

    def find_keys(self, name=None, text=None, region=None, mode=None):
        """The keys that match every field given."""
        return [k for k in self._keys
                if (name is None or k.name == name) and (text is None or k.text == text)
                and (region is None or k.region == region) and (mode is None or k.mode == mode)]

    def find_key(self, name=None, text=None, region=None, mode=None):
        """The one key that matches; ``ValueError`` when none or several do."""
        found = self.find_keys(name, text, region, mode)
        if len(found) != 1:
            raise ValueError("%s keys match name=%r text=%r region=%r mode=%r" % (
                "No" if not found else "%d" % len(found), name, text, region, mode))
        return found[0]

    def _resolve(self, spec, mode=None):
        if isinstance(spec, _Key):
            if spec not in self._edges:
                self.add_key(*spec)
            return spec
        if isinstance(spec, dict):
            return self.find_key(**spec)
        if isinstance(spec, str):
            found = self.find_keys(name=spec, mode=mode)
            if not found:
                return self.add_key(spec, mode=mode)
            if len(found) > 1:
                raise ValueError("several keys are called %r: give a Keyboard.Key or a dict with its mode" % spec)
            return found[0]
        raise TypeError("a key is a Keyboard.Key, a name or a dict of fields, not %r" % (spec,))

    def add_transition(self, source, target, keypress, mode=None, symmetrical=True):
        """Pressing ``keypress`` moves the focus from ``source`` to
        ``target`` (Keys, names or dicts of fields; a name not known yet adds
        the key, in ``mode``). With ``symmetrical`` the opposite key
        (LEFT/RIGHT, UP/DOWN) moves it back."""
        a, b = self._resolve(source, mode), self._resolve(target, mode)
        self._edges[a][keypress] = b
        if symmetrical and keypress in _OPPOSITE:
            self._edges[b][_OPPOSITE[keypress]] = a

    def add_edgelist(self, edgelist, mode=None, symmetrical=True):
        """Transitions from text, one a line: ``source target KEY``;
        blank lines and ``#`` comments are ignored."""
        for n, line in enumerate(edgelist.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3:
                raise ValueError("edgelist line %d is not 'source target KEY': %r" % (n, line))
            self.add_transition(parts[0], parts[1], parts[2], mode=mode, symmetrical=symmetrical)

    def add_grid(self, grid, mode=None):
        """Add a key for each cell of ``grid`` (a ``Grid`` whose data are
        key names, or Keys), with the cell's region, and the LEFT/RIGHT/
        UP/DOWN moves between neighbouring cells. Returns a new Grid whose
        data are the Keys."""
        from stbt_core._grid import Grid  # pylint: disable=import-outside-toplevel
        at = {}
        for cell in grid.cells:
            data = cell.data
            if data is None:
                continue  # a gap (a short row)
            if isinstance(data, _Key):
                key = self.add_key(data.name, data.text, data.region if data.region is not None else cell.region,
                                   data.mode if data.mode is not None else mode)
            else:
                key = self.add_key(str(data), region=cell.region, mode=mode)
            at[tuple(cell.position)] = key
        for (x, y), key in at.items():
            if (x + 1, y) in at:
                self.add_transition(key, at[(x + 1, y)], "KEY_RIGHT")
            if (x, y + 1) in at:
                self.add_transition(key, at[(x, y + 1)], "KEY_DOWN")
        return Grid(grid.region, cols=grid.cols, rows=grid.rows,
                    data=[[at.get((x, y)) for x in range(grid.cols)] for y in range(grid.rows)])

    # ------------------------------------------------------------ searching

    def _path(self, source, targets):
        """The shortest list of ``(keypress, key)`` from ``source`` to any of
        ``targets`` (breadth-first: every press costs the same); None when
        none can be reached."""
        targets = set(targets)
        if source in targets:
            return []
        came = {source: None}
        queue = collections.deque([source])
        while queue:
            node = queue.popleft()
            for keypress, nxt in self._edges.get(node, {}).items():
                if nxt in came:
                    continue
                came[nxt] = (node, keypress)
                if nxt in targets:
                    path = []
                    while came[nxt] is not None:
                        prev, kp = came[nxt]
                        path.append((kp, nxt))
                        nxt = prev
                    return path[::-1]
                queue.append(nxt)
        return None

    def _focus(self, page):
        focus = page.focus
        if isinstance(focus, _Key):
            return focus
        if focus is None:
            raise ValueError("the page shows no focused key (%r.focus is None)" % (page,))
        found = self.find_keys(name=focus) or self.find_keys(text=focus)
        if len(found) != 1:
            raise ValueError("the focus %r is not one key of this keyboard" % (focus,))
        return found[0]

    # ------------------------------------------------------------ pressing (hooks a subclass may replace)

    def press_and_wait(self, key, **kwargs):
        from stbt_core._transition import press_and_wait  # pylint: disable=import-outside-toplevel
        kwargs.setdefault("mask", self.mask)
        kwargs.setdefault("stable_secs", 0.5)
        return press_and_wait(key, **kwargs)

    def wait_for_transition_to_end(self, initial_frame=None, **kwargs):
        from stbt_core._transition import wait_for_transition_to_end  # pylint: disable=import-outside-toplevel
        kwargs.setdefault("mask", self.mask)
        kwargs.setdefault("stable_secs", 0.5)
        return wait_for_transition_to_end(initial_frame, **kwargs)

    # ------------------------------------------------------------ moving and typing

    def navigate_to(self, target, page, verify_every_keypress=False):
        """Move the focus to ``target`` (a Key, name, or dict of fields; a
        name/text several keys have means whichever is nearest) along a
        shortest path, and return the refreshed page. Checks where the focus
        is (after every press with ``verify_every_keypress``, else at the
        end) and plans again from there until ``navigate_timeout``."""
        targets = self._targets(target)
        deadline = _time.monotonic() + float(self.navigate_timeout)
        while True:
            current = self._focus(page)
            if current in targets:
                return page
            path = self._path(current, targets)
            if path is None:
                raise ValueError("no way from %r to %r on this keyboard" % (current, target))
            transition = None
            for keypress, expected in path:
                transition = self.press_and_wait(keypress)
                if verify_every_keypress:
                    page = page.refresh(getattr(transition, "frame", None))
                    if self._focus(page) != expected:
                        break  # plan again from where the focus is
            if not verify_every_keypress:
                page = page.refresh(getattr(transition, "frame", None))
            if self._focus(page) in targets:
                return page
            if _time.monotonic() > deadline:
                raise AssertionError("Keyboard.navigate_to: the focus is on %r, not %r, after %g s"
                                     % (self._focus(page), target, self.navigate_timeout))

    def _targets(self, target):
        if isinstance(target, _Key):
            return [self._resolve(target)]
        if isinstance(target, dict):
            found = self.find_keys(**target)
        else:
            found = self.find_keys(name=target) or self.find_keys(text=target)
        if not found:
            raise ValueError("no key %r on this keyboard" % (target,))
        return found

    def enter_text(self, text, page, verify_every_keypress=False, retries=2):
        """Type ``text``: for each character move to a key whose ``text``
        it is (whichever is nearest when several modes have one) and press
        KEY_OK. Returns the refreshed page. ``retries``: how many more times
        a character's navigation is attempted when the focus ended
        elsewhere (on top of navigate_to's own re-planning)."""
        for char in text:
            targets = self.find_keys(text=char)
            if not targets:
                raise ValueError("no key types %r on this keyboard" % (char,))
            for attempt in range(int(retries) + 1):
                try:
                    page = self.navigate_to({"text": char} if len(targets) > 1 else targets[0], page,
                                            verify_every_keypress)
                    break
                except AssertionError:
                    if attempt == int(retries):
                        raise
            transition = self.press_and_wait("KEY_OK")
            page = page.refresh(getattr(transition, "frame", None))
        return page
