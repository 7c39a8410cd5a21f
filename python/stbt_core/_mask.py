"""Masks of the stbt API: ``Mask``, ``load_mask``, ``MaskTypes``.

A mask says which pixels of a frame an API looks at (white) and which it
ignores (black). It is built from Regions, a black-and-white image file, an
array, or the alpha channel of an image, and combined with ``+`` (either),
``-`` (the first but not the second) and ``~`` (the opposite). farmhand's own
code, written from stb-tester's manual.
"""

import os
import typing

from stbt_core._types import Region

__all__ = ["Mask", "MaskTypes", "load_mask"]


def _np():
    import numpy  # pylint: disable=import-outside-toplevel
    return numpy


def _cv2():
    import cv2  # pylint: disable=import-outside-toplevel
    return cv2


class Mask:
    """``Mask(m, *, invert=False)``: ``m`` is a Region, a filename of a
    black-and-white image (as big as the frame), a 2-D (or 3-D, any channel
    non-zero) array as big as the frame, or another Mask."""

    def __init__(self, m, *, invert=False):
        if isinstance(m, Mask):
            self._op, self._args = m._op, m._args
        elif isinstance(m, Region):
            self._op, self._args = "region", (m,)
        elif m is None:
            self._op, self._args = "region", (Region.ALL,)
        elif isinstance(m, (str, bytes)) or hasattr(m, "__fspath__"):
            self._op, self._args = "array", (_read_mask_file(m), os.fspath(m))
        else:
            a = _np().asarray(m)
            if a.ndim == 3:
                a = a.any(axis=2)
            elif a.ndim != 2:
                raise ValueError("a mask array must be 2-D (or 3-D), not %r" % (a.shape,))
            self._op, self._args = "array", (a != 0, "<array>")
        if invert:
            self._op, self._args = "invert", (Mask(self),)

    @classmethod
    def _make(cls, op, *args):
        m = cls.__new__(cls)
        m._op, m._args = op, args
        return m

    @staticmethod
    def from_alpha_channel(image):
        """The mask of an image's opaque pixels (alpha 255); a BGR image
        without alpha is opaque everywhere."""
        np = _np()
        if isinstance(image, (str, bytes)) or hasattr(image, "__fspath__"):
            image = _read_image(image, _cv2().IMREAD_UNCHANGED)
        a = np.asarray(image)
        if a.ndim == 3 and a.shape[2] == 4:
            return Mask._make("array", a[:, :, 3] == 255, "<alpha channel>")
        return Mask._make("array", np.ones(a.shape[:2], bool), "<opaque image>")

    def __add__(self, other):
        return Mask._make("union", self, load_mask(other))

    __radd__ = __add__

    def __sub__(self, other):
        return Mask._make("difference", self, load_mask(other))

    def __rsub__(self, other):
        return Mask._make("difference", load_mask(other), self)

    def __invert__(self):
        return Mask._make("invert", self)

    def __repr__(self):
        if self._op == "region":
            return "Mask(%r)" % (self._args[0],)
        if self._op == "array":
            return "Mask(%s)" % (self._args[1],)
        if self._op == "invert":
            return "~%r" % (self._args[0],)
        return "(%r %s %r)" % (self._args[0], "+" if self._op == "union" else "-", self._args[1])

    def _bool_array(self, width, height):
        """A ``height`` x ``width`` bool array: True where the mask is white."""
        np = _np()
        if self._op == "region":
            out = np.zeros((height, width), bool)
            r = Region.intersect(self._args[0], Region(0, 0, width, height))
            if r is not None:
                out[r.to_slice()] = True
            return out
        if self._op == "array":
            a = self._args[0]
            if a.shape != (height, width):
                raise ValueError("mask %s is %dx%d, the frame %dx%d" % (
                    self._args[1], a.shape[1], a.shape[0], width, height))
            return a
        if self._op == "invert":
            return ~self._args[0]._bool_array(width, height)
        a = self._args[0]._bool_array(width, height)
        b = self._args[1]._bool_array(width, height)
        return (a | b) if self._op == "union" else (a & ~b)

    def _region_only(self):
        return self._args[0] if self._op == "region" else None

    def to_array(self, region, color_channels=1):
        """``(array, bounding_region)`` for a frame of ``region``'s size
        (``region`` is the frame's region, e.g. ``frame.region``):
        ``bounding_region`` is the bounding box of the white pixels (None
        when there are none) and ``array`` the mask cropped to it, uint8
        255/0, with ``color_channels`` channels (2-D for 1) — or None when
        every pixel of the bounding box is white (a plain rectangle)."""
        np = _np()
        width, height = int(region.width), int(region.height)
        simple = self._region_only()
        if simple is not None:
            return None, Region.intersect(simple, Region(0, 0, width, height))
        a = self._bool_array(width, height)
        ys = np.flatnonzero(a.any(axis=1))
        if len(ys) == 0:
            return None, None
        xs = np.flatnonzero(a.any(axis=0))
        box = Region(int(xs[0]), int(ys[0]), right=int(xs[-1]) + 1, bottom=int(ys[-1]) + 1)
        crop = a[box.to_slice()]
        if crop.all():
            return None, box
        out = crop.astype(np.uint8) * 255
        if color_channels != 1:
            out = np.repeat(out[:, :, None], color_channels, axis=2)
        return out, box


def _read_image(filename, flags):
    try:
        from stbt_core._frames import find_file  # pylint: disable=import-outside-toplevel
        path = find_file(filename)
    except ImportError:
        path = os.fspath(filename)
    a = _cv2().imread(path, flags)
    if a is None:
        raise IOError("No such file or not an image: %s" % (filename,))
    return a


def _read_mask_file(filename):
    return _read_image(filename, _cv2().IMREAD_GRAYSCALE) > 127


def load_mask(mask):
    """``mask`` as a ``Mask``: a Mask as it is; a Region, filename or array
    converted; None means the whole frame."""
    if isinstance(mask, Mask):
        return mask
    return Mask(mask)


MaskTypes = typing.Union[str, "numpy.ndarray", Mask, Region, None]

Mask.__module__ = "stbt_core"
