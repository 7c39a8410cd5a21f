"""Masks of the stbt API: ``Mask``, ``load_mask``, ``MaskTypes``.

A mask says which pixels of a frame an API looks at (white) and which it
ignores (black). It is built from Regions, a black-and-white image file, an
array, or the alpha channel of an image, and combined with ``+`` (either),
``-`` (the first but not the second) and ``~`` (the opposite): ``Region``s
combine the same way (``~region``, ``r1 + r2``, ``"mask.png" - r``), and
``None`` in a sum or difference is the empty mask (what ``Region.intersect``
returns for regions that do not overlap).

A Mask is an immutable expression: its repr is the expression as written
(``Region(...) + Region(...) - ~Mask('file.png')``), two masks built the same
way are equal (a Mask of one Region equals that Region), and the pixels of an
expression are computed once per frame size and kept (``to_array`` returns
the same read-only array each time).

farmhand's own code, written from stb-tester's manual and observed behaviour.
"""

import collections
import hashlib
import os
import threading
import typing

from stbt_core._types import Region

__all__ = ["Mask", "MaskTypes", "load_mask"]

_CACHE_SIZE = 64


def _np():
    import numpy  # pylint: disable=import-outside-toplevel
    return numpy


def _cv2():
    import cv2  # pylint: disable=import-outside-toplevel
    return cv2


class Mask:
    """``Mask(m, *, invert=False)``. ``m`` is a Region (white inside it), a
    filename of a black-and-white image as big as the frame, an array as big
    as the frame (2-D, or 3-D with 1, 3 or 4 channels: white where any
    colour channel is non-zero), another Mask, or None (the empty mask).
    ``invert=True`` gives ``~Mask(m)``."""

    __slots__ = ("_kind", "_args", "_key")
    __array_ufunc__ = None  # ``array + mask``: numpy leaves it to Mask.__radd__

    def __init__(self, m, *, invert=False):
        if isinstance(m, Mask):
            kind, args, key = m._kind, m._args, m._key
        elif isinstance(m, Region):
            kind, args, key = "region", (m,), ("region", tuple(m))
        elif m is None:
            inner = Mask(Region.ALL)
            kind, args, key = "invert", (inner,), ("invert", inner._key)
        elif isinstance(m, (str, bytes)) or hasattr(m, "__fspath__"):
            kind, args, key = _file_leaf(m)
        elif hasattr(m, "shape") or isinstance(m, (list, tuple)):
            kind, args, key = _array_leaf(m)
        else:
            raise TypeError("a mask is a Region, a Mask, a filename, an array or None, not %r"
                            % (type(m).__name__,))
        if invert:
            kind, args, key = _inverted(Mask._node(kind, args, key))
        self._kind, self._args, self._key = kind, args, key

    @classmethod
    def _node(cls, kind, args, key):
        m = cls.__new__(cls)
        m._kind, m._args, m._key = kind, args, key
        return m

    @staticmethod
    def from_alpha_channel(image):
        """The mask of an image's opaque pixels: white where its alpha is
        255. ``image`` is a filename (found as ``load_image`` finds it) or an
        array; an image without transparency gives the Region of its whole
        size."""
        from stbt_core._frames import load_image  # pylint: disable=import-outside-toplevel
        img = load_image(image, color_channels=(3, 4))
        height, width = img.shape[:2]
        if img.ndim == 3 and img.shape[2] == 4:
            alpha = _np().asarray(img)[:, :, 3]
            if not (alpha == 255).all():
                return Mask(alpha == 255)
        return Mask(Region(0, 0, width, height))

    # ---- the algebra ----------------------------------------------------------
    @staticmethod
    def _combine(op, a, b):
        """``a + b`` or ``a - b`` of two mask-like operands (NotImplemented
        when either is not one, so Python raises its usual TypeError)."""
        if not (_is_operand(a) and _is_operand(b)) or (a is None and b is None):
            return NotImplemented
        a, b = load_mask(a), load_mask(b)
        kind = "add" if op == "+" else "sub"
        return Mask._node(kind, (a, b), (kind, a._key, b._key))

    def __add__(self, other):
        return Mask._combine("+", self, other)

    def __radd__(self, other):
        return Mask._combine("+", other, self)

    # ``|`` is a union too (as for sets): the same Mask as ``+``
    __or__ = __add__
    __ror__ = __radd__

    def __sub__(self, other):
        return Mask._combine("-", self, other)

    def __rsub__(self, other):
        return Mask._combine("-", other, self)

    def __invert__(self):
        return Mask._node(*_inverted(self))

    # ---- comparison and display --------------------------------------------------
    def __eq__(self, other):
        if isinstance(other, Region):
            other = Mask(other)
        if not isinstance(other, Mask):
            return NotImplemented
        return self._key == other._key

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self):
        # a Mask of one Region equals that Region, so it hashes as it does
        return hash(self._args[0]) if self._kind == "region" else hash(self._key)

    def __repr__(self):
        if self._kind == "region":
            return repr(self._args[0])
        if self._kind in ("file", "array"):
            return "Mask(%s)" % (self._args[0],)
        if self._kind == "invert":
            return "~" + _operand_repr(self._args[0])
        a, b = self._args
        return "%r %s %s" % (a, "+" if self._kind == "add" else "-", _operand_repr(b))

    __str__ = __repr__

    # ---- pixels -------------------------------------------------------------------
    def to_array(self, region=None, color_channels=1, *, shape=None):
        """``(array, bounding_box)`` for a frame whose region is ``region``
        (the frame's own ``Region(0, 0, width, height)``).

        ``bounding_box`` is the smallest Region holding every white pixel.
        ``array`` is the mask inside that box, a read-only uint8 array of 0
        and 255 with shape ``(height, width, color_channels)``, or None when
        every pixel of the box is white (a plain rectangle). ValueError when
        no pixel of the frame is white, or when an image in the mask is not
        the frame's size.

        ``to_array(shape=(height, width[, channels]))`` (the older form, which
        test packs written for earlier stb-tester releases call) is the whole
        frame instead: one read-only uint8 array of 0 and 255, shape
        ``(height, width, channels)`` (1 channel when the shape gives none),
        all 0 for an empty mask rather than a ValueError. A tuple given as
        ``region`` is taken as such a shape."""
        if shape is None and isinstance(region, tuple) and not isinstance(region, Region):
            shape = region
        if shape is not None:
            return self._whole_frame(tuple(int(n) for n in shape))
        if region is None:
            raise TypeError("to_array needs the frame's region (or shape=)")
        width, height = int(region.width), int(region.height)
        color_channels = int(color_channels)
        if self._kind == "region":
            box = Region.intersect(self._args[0], Region(0, 0, width, height))
            if box is None:
                raise ValueError("%r doesn't overlap with the frame's %r" % (self, region))
            return None, box
        cache_key = (self._key, width, height, color_channels)
        hit = _cache.get(cache_key)
        if hit is None:
            hit = self._cropped(width, height, color_channels, region)
            _remember(cache_key, hit)
        return hit

    def _whole_frame(self, shape):
        if len(shape) not in (2, 3):
            raise ValueError("a mask's shape is (height, width) or (height, width, channels), not %r"
                             % (shape,))
        cache_key = (self._key, "whole") + shape
        hit = _cache.get(cache_key)
        if hit is None:
            height, width = shape[:2]
            hit = _as_uint8(_pixels(self, width, height), shape[2] if len(shape) == 3 else 1)
            _remember(cache_key, hit)
        return hit

    def _cropped(self, width, height, color_channels, region):
        np = _np()
        pixels = _pixels(self, width, height)
        rows = np.flatnonzero(pixels.any(axis=1))
        if len(rows) == 0:
            raise ValueError("%r doesn't overlap with the frame's %r" % (self, region))
        cols = np.flatnonzero(pixels.any(axis=0))
        box = Region(int(cols[0]), int(rows[0]), right=int(cols[-1]) + 1, bottom=int(rows[-1]) + 1)
        inside = pixels[box.to_slice()]
        if inside.all():
            return None, box
        return _as_uint8(inside, color_channels), box


def _is_operand(m):
    if m is None or isinstance(m, (Mask, Region, str)) or hasattr(m, "__fspath__"):
        return True
    return getattr(m, "ndim", None) in (2, 3) and hasattr(m, "shape")  # an image array


def _inverted(m):
    """``(kind, args, key)`` of ``~m``: a double inversion cancels."""
    if m._kind == "invert":
        inner = m._args[0]
        return inner._kind, inner._args, inner._key
    return "invert", (m,), ("invert", m._key)


def _operand_repr(m):
    text = repr(m)
    return "(%s)" % text if m._kind in ("add", "sub") else text


def _file_leaf(filename):
    filename = os.fsdecode(filename)
    from stbt_core._frames import find_file  # pylint: disable=import-outside-toplevel
    path = find_file(filename)
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        stamp = None
    return "file", (repr(filename), path), ("file", path, stamp)


def _array_leaf(array):
    np = _np()
    # an image that load_image read (or a slice of one, such as its alpha channel) shows its file
    # in the repr, so a log or failure message says which mask it was
    name = getattr(array, "relative_filename", None)
    a = np.asarray(array)
    if a.ndim == 3:
        a = a[:, :, :3].any(axis=2) if a.shape[2] in (3, 4) else a[:, :, 0] != 0
    elif a.ndim == 2:
        a = a != 0
    else:
        raise ValueError("a mask array is 2-D or 3-D, not of shape %r" % (a.shape,))
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    digest = hashlib.blake2b(a.tobytes(), digest_size=16).hexdigest()
    return "array", (repr(name) if name else "<Image>", a), ("array", a.shape, digest)


def _read_file_mask(path):
    img = _cv2().imread(path, _cv2().IMREAD_GRAYSCALE)
    if img is None:
        raise OSError("could not read the mask image %s" % path)
    return img > 127


def _pixels(mask, width, height):
    """The whole frame's mask: a ``height`` x ``width`` bool array."""
    np = _np()
    kind, args = mask._kind, mask._args
    if kind == "region":
        out = np.zeros((height, width), bool)
        box = Region.intersect(args[0], Region(0, 0, width, height))
        if box is not None:
            out[box.to_slice()] = True
        return out
    if kind in ("file", "array"):
        leaf = _leaf_pixels(mask)
        if leaf.shape != (height, width):
            raise ValueError("%r: shape %r doesn't match required shape %r"
                             % (mask, leaf.shape + (1,), (height, width, 1)))
        return leaf
    if kind == "invert":
        return ~_pixels(args[0], width, height)
    a, b = _pixels(args[0], width, height), _pixels(args[1], width, height)
    return (a | b) if kind == "add" else (a & ~b)


def _leaf_pixels(mask):
    if mask._kind == "array":
        return mask._args[1]
    key = ("pixels",) + mask._key
    hit = _cache.get(key)
    if hit is None:
        hit = _read_file_mask(mask._args[1])
        hit.flags.writeable = False
        _remember(key, hit)
    return hit


def _as_uint8(bools, color_channels):
    np = _np()
    out = np.repeat((bools.astype(np.uint8) * 255)[:, :, None], color_channels, axis=2)
    out.flags.writeable = False
    return out


_cache = collections.OrderedDict()  # the last _CACHE_SIZE arrays made, by expression and frame size
_cache_lock = threading.Lock()


def _remember(key, value):
    with _cache_lock:
        _cache[key] = value
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def _to_array(mask, region, color_channels=1):
    """The whole frame's mask (``region`` is the frame's Region) as a uint8
    array of 0 and 255, shape ``(height, width, color_channels)``; all 0 for
    an empty mask."""
    width, height = int(region.width), int(region.height)
    return _as_uint8(_pixels(load_mask(mask), width, height), int(color_channels))


def load_mask(mask):
    """``mask`` as a ``Mask``: a Mask as it is; a Region, filename, array or
    None (empty) converted."""
    if isinstance(mask, Mask):
        return mask
    return Mask(mask)


MaskTypes = typing.Union[str, "numpy.ndarray", Mask, Region, None]

Mask.__module__ = "stbt_core"
