"""Frames and images: ``Frame``, ``Image``, ``get_frame``, ``frames``,
``load_image``, ``find_file``, ``save_frame``, ``crop`` and ``Color``.

Frames come from the daemon over the run's control socket (see
``python/farmhand/control.py`` and ``src/runner/control.ts``): ``get_frame``
asks for the latest frame, ``frames`` asks for the next frame after the one it
has (op ``next_frame``), so it yields every frame the capture delivers while
the loop keeps up.
"""

import inspect
import os
import re
import time as _time

import numpy

from farmhand import control
from farmhand.errors import ControlError
from stbt_core._errors import NoVideo

__all__ = ["Color", "Frame", "Image", "crop", "find_file", "frames", "get_frame", "load_image", "save_frame"]


def _region_of(array):
    from stbt_core._types import Region  # pylint: disable=import-outside-toplevel
    return Region(0, 0, array.shape[1], array.shape[0])


class _Dimensions:
    """``width``, ``height`` and ``region`` of a Frame or an Image."""

    @property
    def width(self):
        return self.shape[1]

    @property
    def height(self):
        return self.shape[0]

    @property
    def region(self):
        return _region_of(self)


class Frame(_Dimensions, numpy.ndarray):
    """A captured frame: an 8-bit BGR image (height x width x 3) with
    ``time``, the moment of capture in seconds since the epoch."""

    def __new__(cls, array, dtype=None, order=None, time=None, _seq=None):
        obj = numpy.asarray(array, dtype=dtype, order=order).view(cls)
        obj.time = time
        obj._seq = _seq
        return obj

    def __array_finalize__(self, obj):
        if obj is not None:
            self.time = getattr(obj, "time", None)
            self._seq = getattr(obj, "_seq", None)

    def __reduce__(self):
        state = super().__reduce__()
        return (state[0], state[1], (state[2], self.time))

    def __setstate__(self, state):
        nd_state, self.time = state
        self._seq = None
        super().__setstate__(nd_state)

    def __repr__(self):
        if self.ndim != 3:
            return super().__repr__()
        return "<Frame(time=%s, dimensions=%dx%dx%d)>" % (
            "None" if self.time is None else "%.3f" % self.time, self.width, self.height, self.shape[2])


class Image(_Dimensions, numpy.ndarray):
    """An image read by ``load_image``: BGR, or BGRA when it has transparency.
    ``filename`` is what was asked for, ``absolute_filename`` where it was
    found, ``relative_filename`` that path relative to the test pack's root."""

    def __new__(cls, array, dtype=None, order=None, filename=None, absolute_filename=None):
        obj = numpy.asarray(array, dtype=dtype, order=order).view(cls)
        obj.filename = filename
        obj.absolute_filename = absolute_filename
        return obj

    def __array_finalize__(self, obj):
        if obj is not None:
            self.filename = getattr(obj, "filename", None)
            self.absolute_filename = getattr(obj, "absolute_filename", None)

    @property
    def relative_filename(self):
        if self.absolute_filename is None:
            return None
        from stbt_core._config import test_pack_root  # pylint: disable=import-outside-toplevel
        return os.path.relpath(self.absolute_filename, test_pack_root())

    def __repr__(self):
        if self.ndim < 2:
            return super().__repr__()
        return "<Image(filename=%r, dimensions=%dx%dx%d)>" % (
            self.filename, self.width, self.height, self.shape[2] if self.ndim == 3 else 1)


# ---------------------------------------------------------------- frames from the daemon

def _receive(op, **fields):
    holder = []

    def into(header):
        holder.append(numpy.empty((header["height"], header["width"], 3), dtype=numpy.uint8))
        return holder[0]

    try:
        header, _ = control.request(op, into=into, **fields)
    except ControlError as e:
        if e.code == "device_unavailable":
            raise NoVideo(str(e)) from e
        raise
    if not holder:
        return None  # next_frame's timeout: no new frame
    import cv2  # pylint: disable=import-outside-toplevel

    rgb = holder[0]
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR, dst=rgb)  # in place
    at = header.get("at")
    frame = Frame(bgr, time=at / 1000.0 if at is not None else None, _seq=header.get("seq"))
    frame.flags.writeable = False
    return frame


def get_frame():
    """The latest frame (possibly the same one twice). ``NoVideo`` when capture is offline."""
    return _receive("get_frame")


def frames(timeout_secs=None):
    """Yield each new frame, in order, until ``timeout_secs`` have passed
    (for ever when None). A loop slower than the capture skips the frames it
    was too slow for (it always gets the newest). Frames come at the
    capture's ``preview_fps`` (docs/migrating-from-stb-tester.md)."""
    import cv2  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    # (imported before the clock starts: a first import can take longer than a short timeout)
    deadline = None if timeout_secs is None else _time.monotonic() + float(timeout_secs)
    seq = None
    while True:
        if deadline is None:
            wait = 10.0
        else:
            wait = deadline - _time.monotonic()
            if wait <= 0:
                return
        fields = {"timeout_ms": int(min(wait, 10.0) * 1000)}
        if seq is not None:
            fields["after_seq"] = seq
        frame = _receive("next_frame", timeout=control.DEFAULT_TIMEOUT_SECS + fields["timeout_ms"] / 1000.0, **fields)
        if frame is None:
            continue
        seq = frame._seq  # pylint: disable=protected-access
        yield frame


# ---------------------------------------------------------------- files

_OWN_DIR = os.path.dirname(os.path.abspath(__file__))


def _caller_dirs():
    """Folders of the Python files on the call stack, innermost first,
    leaving out this package's own."""
    seen = []
    frame = inspect.currentframe()
    try:
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename and not filename.startswith("<"):
                folder = os.path.dirname(os.path.abspath(filename))
                if folder != _OWN_DIR and folder not in seen:
                    seen.append(folder)
            frame = frame.f_back
    finally:
        del frame
    return seen


def _search(filename):
    filename = os.fspath(filename)
    if os.path.isabs(filename):
        return filename if os.path.isfile(filename) else None
    for folder in _caller_dirs() + [os.getcwd()]:
        candidate = os.path.join(folder, filename)
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    return None


def find_file(filename):
    """The absolute path of ``filename``: as it is when absolute, else looked
    for in the folder of the calling file, then of its caller and so on up the
    stack, then in the working directory. ``FileNotFoundError`` when absent."""
    found = _search(filename)
    if found is None:
        raise FileNotFoundError("no such file: %s (looked beside the calling files and in the working directory)" % filename)
    return found


def load_image(filename, flags=None, color_channels=None):
    """Read an image found as ``find_file`` finds it: 8-bit BGR, or BGRA when
    it has transparent pixels (``color_channels`` (3, 4), the default); pass
    ``color_channels=(3,)`` for BGR always, ``(1,)`` for greyscale. An array
    given instead of a filename is returned as an ``Image``."""
    import cv2  # pylint: disable=import-outside-toplevel

    if isinstance(filename, numpy.ndarray):
        return filename if isinstance(filename, Image) else Image(filename)
    path = find_file(filename)
    if flags is not None:
        # The legacy form: cv2.IMREAD_* flags, read as OpenCV reads them.
        img = cv2.imread(path, flags)
    else:
        img = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if img is None:
        raise OSError("could not read the image %s" % path)
    if img.dtype != numpy.uint8:
        img = (img / 257).astype(numpy.uint8) if img.dtype == numpy.uint16 else img.astype(numpy.uint8)
    if color_channels is None:
        color_channels = (3, 4)
    elif isinstance(color_channels, int):
        color_channels = (color_channels,)
    if flags is None:
        img = _to_channels(cv2, img, tuple(color_channels))
    return Image(img, filename=os.fspath(filename), absolute_filename=path)


def _to_channels(cv2, img, wanted):
    if img.ndim == 2:
        have = 1
    else:
        have = img.shape[2]
    if have == 4 and (img[:, :, 3] == 255).all() and 3 in wanted:
        img, have = img[:, :, :3], 3  # opaque everywhere: no transparency to keep
    if have in wanted:
        return numpy.ascontiguousarray(img)
    if 3 in wanted or (4 in wanted and have == 1):
        code = {1: cv2.COLOR_GRAY2BGR, 4: cv2.COLOR_BGRA2BGR}[have]
        img = cv2.cvtColor(img, code)
        return cv2.cvtColor(img, cv2.COLOR_BGR2BGRA) if 3 not in wanted else img
    if 1 in wanted:
        return cv2.cvtColor(img, {3: cv2.COLOR_BGR2GRAY, 4: cv2.COLOR_BGRA2GRAY}[have])
    if 4 in wanted:
        return cv2.cvtColor(img, cv2.COLOR_BGR2BGRA)
    raise ValueError("color_channels must name 1, 3 or 4 channels, not %r" % (wanted,))


def save_frame(image, filename):
    """Write ``image`` to ``filename`` (PNG, or any format OpenCV knows by its
    extension). A relative name is relative to the working directory: the
    run's result folder, so the file is an artifact of the run."""
    import cv2  # pylint: disable=import-outside-toplevel

    folder = os.path.dirname(os.path.abspath(filename))
    os.makedirs(folder, exist_ok=True)
    if not cv2.imwrite(os.fspath(filename), numpy.asarray(image)):
        raise OSError("could not write %s" % filename)


def crop(frame, region):
    """The part of ``frame`` inside ``region``, as a view (no copy). The
    region is clipped to the frame; ``ValueError`` when nothing is left."""
    h, w = frame.shape[:2]
    x0, y0 = max(0, _int(region.x, 0)), max(0, _int(region.y, 0))
    x1, y1 = min(w, _int(region.right, w)), min(h, _int(region.bottom, h))
    if x1 <= x0 or y1 <= y0:
        raise ValueError("%r is outside the %dx%d frame" % (region, w, h))
    return frame[y0:y1, x0:x1]


def _int(v, infinite):
    if v is None:
        return infinite
    try:
        return int(v)
    except OverflowError:  # float('inf') in Region.ALL
        return infinite if v > 0 else 0


# ---------------------------------------------------------------- colours

_HEX = re.compile(r"^#?([0-9a-fA-F]{6})([0-9a-fA-F]{2})?$")


class Color:
    """A colour in BGR order, with an optional alpha: ``Color("#ff8000")``
    (red, green, blue as written in CSS), ``Color(0, 128, 255)`` (blue, green,
    red), ``Color((0, 128, 255))``, ``Color("#ff800080")`` with alpha, or
    another ``Color``."""

    __slots__ = ("array",)

    def __init__(self, *args):
        if len(args) == 1:
            value = args[0]
            if isinstance(value, Color):
                self.array = value.array.copy()
                return
            if isinstance(value, str):
                m = _HEX.match(value.strip())
                if not m:
                    raise ValueError("a colour string is '#rrggbb' or '#rrggbbaa', not %r" % value)
                rgb = bytes.fromhex(m.group(1))
                values = [rgb[2], rgb[1], rgb[0]] + ([int(m.group(2), 16)] if m.group(2) else [])
            else:
                values = list(value)
        else:
            values = list(args)
        if len(values) not in (3, 4) or any(not 0 <= int(v) <= 255 for v in values):
            raise ValueError("a colour is 3 or 4 numbers from 0 to 255 (blue, green, red[, alpha]), not %r" % (values,))
        self.array = numpy.array([int(v) for v in values], dtype=numpy.uint8)

    @property
    def hexstring(self):
        b, g, r = (int(v) for v in self.array[:3])
        alpha = "%02x" % int(self.array[3]) if len(self.array) == 4 else ""
        return "#%02x%02x%02x%s" % (r, g, b, alpha)

    def __iter__(self):
        return iter(int(v) for v in self.array)

    def __len__(self):
        return len(self.array)

    def __getitem__(self, i):
        return int(self.array[i])

    def __eq__(self, other):
        try:
            other = Color(other)
        except (TypeError, ValueError):
            return NotImplemented
        return tuple(self) == tuple(other)

    def __hash__(self):
        return hash(tuple(self))

    def __repr__(self):
        return "Color(%r)" % self.hexstring
