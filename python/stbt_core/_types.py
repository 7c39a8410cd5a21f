"""Geometry of the stbt API: ``Region``, ``Position``, ``Size``, ``Direction``.

Written for farmhand from stb-tester's public manual (its documented
behaviour), not from its source. A ``Region`` is a named tuple
``(x, y, right, bottom)``: ``right`` and ``bottom`` are exclusive, so
``width == right - x``. ``Region.ALL`` is the unbounded region (its edges
are infinite); functions that take ``region=Region.ALL`` clip it to the
frame.
"""

import enum
import math
from collections import namedtuple
from typing import NamedTuple

__all__ = ["Direction", "Position", "Region", "Size"]

_INF = float("inf")


class Position(NamedTuple):
    """A point: ``x``, ``y`` in pixels from the top left."""
    x: int
    y: int


class Size(NamedTuple):
    """A size: ``width``, ``height`` in pixels."""
    width: int
    height: int


class Direction(enum.Enum):
    """Which way a grid or a layout runs."""
    HORIZONTAL = "horizontal"
    VERTICAL = "vertical"


def _num(v):
    """An int for finite values, the float for infinite ones."""
    if isinstance(v, float) and math.isinf(v):
        return v
    return int(v)


def _xy(x, y):
    """``(x, y)`` from two numbers, or from one Position, Region or
    ``(x, y)`` tuple given alone (then ``y`` must not be given too)."""
    if x is None or isinstance(x, (int, float)):
        return x, y
    if y is not None:
        raise TypeError("give a point (a Position, Region or (x, y)) or two numbers, not a point and y=%r" % (y,))
    if hasattr(x, "x") and hasattr(x, "y"):
        return x.x, x.y
    x, y = x
    return x, y


class _ClassOnly:
    """A method callable on the class only (``Region.intersect(a, b)``);
    on an instance it is an AttributeError, so ``r1.intersect(r2)`` (which
    reads as something else) fails loudly."""

    def __init__(self, func):
        self.func = func
        self.__doc__ = func.__doc__

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, instance, owner=None):
        if instance is not None:
            raise AttributeError("%s is called on the class: Region.%s(...), not on a Region"
                                 % (self.name, self.name))
        return self.func


def _mask_module():
    from stbt_core import _mask  # pylint: disable=import-outside-toplevel,cyclic-import
    return _mask


class Region(namedtuple("Region", "x y right bottom")):
    """A rectangle of a frame, ``(x, y, right, bottom)`` (right and bottom
    exclusive). Build it with ``Region(x, y, width=, height=)`` or
    ``Region(x, y, right=, bottom=)``."""

    __slots__ = ()

    def __new__(cls, x, y, width=None, height=None, right=None, bottom=None):
        if (width is None) == (right is None):
            raise ValueError("Region needs exactly one of width and right")
        if (height is None) == (bottom is None):
            raise ValueError("Region needs exactly one of height and bottom")
        x, y = _num(x), _num(y)
        right = _num(right) if right is not None else _num(x + width)
        bottom = _num(bottom) if bottom is not None else _num(y + height)
        if right < x or bottom < y:
            raise ValueError("Region must not have a negative width or height: x=%r, y=%r, right=%r, bottom=%r"
                             % (x, y, right, bottom))
        return super().__new__(cls, x, y, right, bottom)

    def __repr__(self):
        if self == Region.ALL:
            return "Region.ALL"
        return "Region(x=%r, y=%r, right=%r, bottom=%r)" % tuple(self)

    def __getnewargs__(self):
        # pickling/copy: rebuild through the right/bottom constructor
        return (self.x, self.y, None, None, self.right, self.bottom)

    # ---- derived values ----------------------------------------------------
    @property
    def width(self):
        return self.right - self.x

    @property
    def height(self):
        return self.bottom - self.y

    @property
    def center(self):
        """The middle, as a ``Position`` (rounded down to whole pixels)."""
        return Position((self.x + self.right) // 2, (self.y + self.bottom) // 2)

    @property
    def area(self):
        return self.width * self.height

    # ---- class methods -----------------------------------------------------
    @classmethod
    def from_extents(cls, x, y, right, bottom):
        """The region with these four edges."""
        return cls(x, y, right=right, bottom=bottom)

    @_ClassOnly
    def intersect(*args):
        """The region covered by every argument; None when they do not
        overlap (or any argument is None). No arguments: ``Region.ALL``."""
        out = Region.ALL
        for r in args:
            if r is None:
                return None
            x, y = max(out.x, r.x), max(out.y, r.y)
            right, bottom = min(out.right, r.right), min(out.bottom, r.bottom)
            if right <= x or bottom <= y:
                return None
            out = Region(x, y, right=right, bottom=bottom)
        return out

    @_ClassOnly
    def bounding_box(*args):
        """The smallest region holding every argument; None arguments are
        skipped; None when there is nothing to bound."""
        regions = [r for r in args if r is not None]
        if not regions:
            return None
        return Region(min(r.x for r in regions), min(r.y for r in regions),
                      right=max(r.right for r in regions), bottom=max(r.bottom for r in regions))

    # ---- methods -----------------------------------------------------------
    def to_slice(self):
        """``(slice(y, bottom), slice(x, right))`` for indexing a numpy
        frame; infinite edges become open slices."""
        def edge(v):
            return None if isinstance(v, float) and math.isinf(v) else max(int(v), 0)
        return (slice(edge(self.y), edge(self.bottom)), slice(edge(self.x), edge(self.right)))

    def contains(self, other):
        """True when ``other`` (a Region or a Position/(x, y) point) lies
        wholly inside this region."""
        if other is None:
            return False
        if isinstance(other, Region):
            return (self.x <= other.x and self.y <= other.y
                    and other.right <= self.right and other.bottom <= self.bottom)
        px, py = other
        return self.x <= px < self.right and self.y <= py < self.bottom

    def translate(self, x=None, y=None):
        """The region moved by ``x`` right and ``y`` down (either may be a
        Position or ``(x, y)`` tuple given as the only argument)."""
        x, y = _xy(x, y)
        x, y = x or 0, y or 0
        return Region(self.x + x, self.y + y, right=self.right + x, bottom=self.bottom + y)

    def extend(self, x=0, y=0, right=0, bottom=0):
        """The region with each edge moved by the given amount (positive
        ``x``/``y`` move the top-left edges right/down)."""
        return Region(self.x + x, self.y + y, right=self.right + right, bottom=self.bottom + bottom)

    def replace(self, x=None, y=None, width=None, height=None, right=None, bottom=None):
        """A copy with some edges or sizes changed; every edge not named
        stays where it is. ``x=`` moves the left edge only (the right edge
        stays, so the width changes); ``width=`` sets the right edge to
        ``x + width``. Giving both ``width`` and ``right`` (or ``height``
        and ``bottom``) is a ValueError."""
        nx, right = _replace_edges(self.x, self.right, x, width, right, "x", "width", "right")
        ny, bottom = _replace_edges(self.y, self.bottom, y, height, bottom, "y", "height", "bottom")
        return Region(nx, ny, right=right, bottom=bottom)

    def dilate(self, n):
        """The region grown by ``n`` pixels on every side."""
        return self.extend(-n, -n, n, n)

    def erode(self, n):
        """The region shrunk by ``n`` pixels on every side (at least 0
        wide/high: it collapses onto its centre)."""
        x, y, right, bottom = self.x + n, self.y + n, self.right - n, self.bottom - n
        if right < x:
            x = right = (self.x + self.right) // 2
        if bottom < y:
            y = bottom = (self.y + self.bottom) // 2
        return Region(x, y, right=right, bottom=bottom)

    def above(self, height=_INF):
        """The region of ``height`` rows just above this one, as wide as it."""
        return Region(self.x, self.y - height, right=self.right, bottom=self.y)

    def below(self, height=_INF):
        """The region of ``height`` rows just below this one, as wide as it."""
        return Region(self.x, self.bottom, right=self.right, bottom=self.bottom + height)

    def right_of(self, width=_INF):
        """The region of ``width`` columns just right of this one, as high as it."""
        return Region(self.right, self.y, right=self.right + width, bottom=self.bottom)

    def left_of(self, width=_INF):
        """The region of ``width`` columns just left of this one, as high as it."""
        return Region(self.x - width, self.y, right=self.x, bottom=self.bottom)

    # ---- masks: Regions combine into a Mask -------------------------------
    def __add__(self, other):
        return _mask_module().Mask._combine("+", self, other)

    def __radd__(self, other):
        return _mask_module().Mask._combine("+", other, self)

    # ``|`` is a union too (as for sets): the same Mask as ``+``
    __or__ = __add__
    __ror__ = __radd__

    def __sub__(self, other):
        return _mask_module().Mask._combine("-", self, other)

    def __rsub__(self, other):
        return _mask_module().Mask._combine("-", other, self)

    def __invert__(self):
        return ~_mask_module().Mask(self)

    # ---- farmhand helpers (not part of stbt's documented API) ---------------
    def clip_to(self, width, height):
        """The part of this region inside a ``width`` x ``height`` frame, or
        None when they do not overlap."""
        return Region.intersect(self, Region(0, 0, width, height))


def _replace_edges(start, end, new_start, size, new_end, *names):
    """One axis of ``Region.replace``: the new ``(start, end)``."""
    if size is not None and new_end is not None:
        raise ValueError("Region.replace: give %s= or %s=, not both" % (names[1], names[2]))
    start = start if new_start is None else new_start
    if size is not None:
        end = start + size
    elif new_end is not None:
        end = new_end
    return start, end


Region.ALL = Region(-_INF, -_INF, right=_INF, bottom=_INF)
Region.__module__ = "stbt_core"
Position.__module__ = "stbt_core"
Size.__module__ = "stbt_core"
Direction.__module__ = "stbt_core"


# stb-tester's internal module of this name (``_stbt.types``, an alias of this
# one) also holds these; they are farmhand's classes from their own modules,
# looked up on first use (an import here would be circular).
_ELSEWHERE = {"Keypress": "stbt_core._remote", "NoVideo": "stbt_core._errors",
              "UITestError": "stbt_core._errors", "UITestFailure": "stbt_core._errors",
              "PDU": "stbt_core._power"}


def __getattr__(name):
    if name in _ELSEWHERE:
        import importlib  # pylint: disable=import-outside-toplevel
        return getattr(importlib.import_module(_ELSEWHERE[name]), name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
