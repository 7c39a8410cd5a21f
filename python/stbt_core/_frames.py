"""Frames and images: ``Frame``, ``Image``, ``get_frame``, ``frames``,
``load_image``, ``find_file``, ``save_frame``, ``crop`` and ``Color``.

Frames come from the daemon over the run's control socket (see
``python/farmhand/control.py`` and ``src/runner/control.ts``): ``get_frame``
asks for the latest frame, ``frames`` asks for the next frame after the one it
has (op ``next_frame``), so it yields every frame the capture delivers while
the loop keeps up.
"""

import errno
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
    ``time``, the moment of capture in seconds since the epoch. Slices,
    copies and ``Frame(frame)`` keep the ``time``."""

    def __new__(cls, array, dtype=None, order=None, time=None, _seq=None):
        obj = numpy.asarray(array, dtype=dtype, order=order).view(cls)
        if time is None:
            time = getattr(array, "time", None)
        obj.time = time
        obj._seq = _seq if _seq is not None else getattr(array, "_seq", None)
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
        return "<Frame(time=%s)>" % ("None" if self.time is None else "%.3f" % self.time)


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
        """``absolute_filename`` relative to the test pack's root
        (``stbt.TEST_PACK_ROOT``); None for an image not read from a file."""
        if self.absolute_filename is None:
            return None
        return os.path.relpath(self.absolute_filename, _pack_root())

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
    capture's ``preview_fps`` (docs/migrating-from-stb-tester.md).

    A test pack whose ``[test_pack] stbt_version`` is below 29 gets the form
    of those versions: ``(frame, timestamp)`` tuples, the timestamp the
    frame's ``time`` in integer nanoseconds."""
    if _legacy_frame_tuples():
        return ((frame, int(round(frame.time * 1e9)) if frame.time is not None else None)
                for frame in live_frames(timeout_secs))
    return live_frames(timeout_secs)


def _legacy_frame_tuples():
    """``[test_pack] stbt_version`` (stb-tester's API version pin) below 29:
    ``frames()`` yields ``(frame, timestamp)`` tuples, as it did before v29."""
    from stbt_core._config import get_config  # pylint: disable=import-outside-toplevel
    version = get_config("test_pack", "stbt_version", None)
    if version is None:
        return False
    try:
        return int(str(version).strip().split(".", 1)[0]) < 29
    except ValueError:
        return False


def live_frames(timeout_secs=None):
    """The daemon's frames, each new one in order, until ``timeout_secs``
    (``frames()`` without the legacy tuples: what the API's own loops use)."""
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
    found = _search(os.fsdecode(filename))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, "No such file", os.fsdecode(filename))
    return found


def _pack_root():
    import stbt_core  # pylint: disable=import-outside-toplevel,cyclic-import
    root = getattr(stbt_core, "TEST_PACK_ROOT", None)
    if root:
        return root
    from stbt_core._config import test_pack_root  # pylint: disable=import-outside-toplevel
    return test_pack_root()


def _image_region(image):
    """The Region of a whole image: ``Region(0, 0, width, height)``."""
    from stbt_core._types import Region  # pylint: disable=import-outside-toplevel
    return Region(0, 0, image.shape[1], image.shape[0])


def load_image(filename, flags=None, color_channels=None):
    """Read an image found as ``find_file`` finds it (``FileNotFoundError``
    when it is nowhere): 8-bit, 3-D (height x width x channels).

    ``color_channels`` says which numbers of channels the caller takes, a
    tuple of 1 (greyscale), 3 (BGR) and 4 (BGRA); the default ``(3, 4)``
    gives BGR, or BGRA when the image has transparency. The image keeps its
    own channels when they are among those; else it is converted. Alpha is
    made all-or-nothing: a pixel that is not fully opaque becomes fully
    transparent. A 16-bit image is scaled to 8 bits.

    An array given instead of a filename goes through the same rules
    (returned without a copy when nothing changes); an ``Image`` is returned
    as it is when it already has acceptable channels. ``flags`` (legacy) are
    ``cv2.IMREAD_*`` flags, and read the file as OpenCV does."""
    import cv2  # pylint: disable=import-outside-toplevel

    wanted = _wanted_channels(color_channels)
    if isinstance(filename, numpy.ndarray):
        return _image_from_array(cv2, filename, wanted)
    path = find_file(filename)
    img = cv2.imread(path, cv2.IMREAD_UNCHANGED if flags is None else flags)
    if img is None:
        raise OSError("could not read the image %s" % path)
    if flags is None:
        img = _to_channels(cv2, _normalised(img), wanted)
    return Image(img, filename=os.fsdecode(filename), absolute_filename=path)


def _wanted_channels(color_channels):
    if color_channels is None:
        return (3, 4)
    if isinstance(color_channels, int):
        color_channels = (color_channels,)
    wanted = tuple(color_channels)
    if not wanted or any(c not in (1, 3, 4) for c in wanted):
        raise ValueError("color_channels is a tuple of 1, 3 and 4, not %r" % (color_channels,))
    return wanted


def _image_from_array(cv2, array, wanted):
    have = 1 if array.ndim == 2 else array.shape[2]
    if isinstance(array, Image) and have in wanted and array.dtype == numpy.uint8:
        return array
    img = _to_channels(cv2, _normalised(array), wanted)
    out = img if isinstance(img, Image) else Image(img)
    if out is not array and isinstance(array, Image):
        out.filename, out.absolute_filename = array.filename, array.absolute_filename
    return out


def _normalised(img):
    """8 bits, at least 3-D, and all-or-nothing alpha (a copy only when
    something changes)."""
    if img.dtype == numpy.uint16:
        img = (img >> 8).astype(numpy.uint8)
    elif img.dtype != numpy.uint8:
        img = img.astype(numpy.uint8)
    if img.ndim == 2:
        img = img[:, :, None]
    if img.shape[2] == 4:
        alpha = img[:, :, 3]
        if ((alpha != 0) & (alpha != 255)).any():
            img = img.copy()
            img[:, :, 3] = numpy.where(img[:, :, 3] == 255, 255, 0).astype(numpy.uint8)
    return img


def _to_channels(cv2, img, wanted):
    """``img`` (3-D, 8-bit) with a number of channels in ``wanted``."""
    have = img.shape[2]
    if have == 2:  # greyscale + alpha, as a few libraries write it
        grey, alpha = img[:, :, 0], img[:, :, 1]
        img = numpy.dstack([grey, grey, grey, alpha])
        have = 4
    if have == 4 and 3 in wanted and (img[:, :, 3] == 255).all():
        return numpy.ascontiguousarray(img[:, :, :3])  # opaque everywhere: no transparency to keep
    if have in wanted:
        return img
    if have == 4 and 3 in wanted:
        target = 3
    elif have == 1:
        target = 3 if 3 in wanted else 4
    else:
        target = max(wanted) if have < max(wanted) else min(wanted)
    code = {(1, 3): cv2.COLOR_GRAY2BGR, (1, 4): cv2.COLOR_GRAY2BGRA, (3, 1): cv2.COLOR_BGR2GRAY,
            (3, 4): cv2.COLOR_BGR2BGRA, (4, 1): cv2.COLOR_BGRA2GRAY, (4, 3): cv2.COLOR_BGRA2BGR}
    out = cv2.cvtColor(numpy.ascontiguousarray(img), code[(have, target)])
    return out[:, :, None] if out.ndim == 2 else out


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
    """The part of ``frame`` inside ``region``, as a view (no copy) of the
    same type (a Frame keeps its ``time``, an Image its filenames). The
    region is clipped to the frame; ``ValueError`` when nothing is left,
    ``TypeError`` for None."""
    if region is None:
        raise TypeError("crop: region=None is the empty region; give a Region")
    h, w = frame.shape[:2]
    x0, y0 = max(0, _int(region.x, 0)), max(0, _int(region.y, 0))
    x1, y1 = min(w, _int(region.right, w)), min(h, _int(region.bottom, h))
    if x1 <= x0 or y1 <= y0:
        raise ValueError("%r doesn't overlap with the frame dimensions %dx%d" % (region, w, h))
    return frame[y0:y1, x0:x1]


def _int(v, infinite):
    if v is None:
        return infinite
    try:
        return int(v)
    except OverflowError:  # float('inf') in Region.ALL
        return infinite if v > 0 else 0


# ---------------------------------------------------------------- colours

_HEX_DIGITS = re.compile(r"^#?([0-9a-fA-F]{3,4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$")
_MISSING = object()


class Color:
    """A colour in BGR order, with an optional alpha channel.

    Any of: a CSS-style hex string ``"#f77f00"`` (red, green, blue; the
    ``#`` is optional; short ``"#0a3"`` means ``"#00aa33"``; 4 or 8 digits
    add alpha), ``Color(hexstring=...)``; a BGR or BGRA sequence or pixel
    (``Color((0, 127, 247))``, ``Color(frame[y, x])``, ``bgr=``/``bgra=``);
    3 or 4 numbers ``Color(blue, green, red[, alpha])`` or as keywords; or
    another Color. Numbers are 0 to 255 (``ValueError`` otherwise); a
    missing channel is a ``TypeError``. Colours are equal (and hash alike)
    when their channels are."""

    __slots__ = ("array",)

    def __init__(self, *args, hexstring=None, bgr=None, bgra=None,
                 blue=_MISSING, green=_MISSING, red=_MISSING, alpha=_MISSING):
        keywords = [v for v in (blue, green, red, alpha) if v is not _MISSING]
        given = [x for x in (hexstring, bgr, bgra) if x is not None]
        if (1 if args else 0) + len(given) + (1 if keywords else 0) > 1:
            raise TypeError("Color takes one form of colour, not several")
        if hexstring is not None:
            values = _from_hex(hexstring)
        elif bgr is not None or bgra is not None:
            values = _from_sequence(bgr if bgr is not None else bgra)
        elif keywords:
            if _MISSING in (blue, green, red):
                raise TypeError("Color needs blue=, green= and red= (and optionally alpha=)")
            values = [blue, green, red] + ([] if alpha is _MISSING else [alpha])
        elif len(args) == 1:
            values = _from_one(args[0])
        elif len(args) in (3, 4):
            values = list(args)
        else:
            raise TypeError("Color takes a hex string, a BGR(A) sequence or 3 or 4 numbers, not %d arguments"
                            % len(args))
        self.array = _channels(values)

    @property
    def hexstring(self):
        """``"#rrggbb"`` (``"#rrggbbaa"`` with alpha), lower case."""
        b, g, r = (int(v) for v in self.array[:3])
        alpha = "%02x" % int(self.array[3]) if len(self.array) == 4 else ""
        return "#%02x%02x%02x%s" % (r, g, b, alpha)

    def __iter__(self):
        return iter([int(v) for v in self.array])

    def __len__(self):
        return len(self.array)

    def __getitem__(self, i):
        return int(self.array[i])

    def __eq__(self, other):
        if not isinstance(other, Color):
            try:
                other = Color(other)
            except (TypeError, ValueError):
                return NotImplemented
        return tuple(self) == tuple(other)

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self):
        return hash(tuple(self))

    def __repr__(self):
        return "Color(%r)" % self.hexstring

    __str__ = __repr__


def _from_one(value):
    if isinstance(value, Color):
        return list(value)
    if isinstance(value, str):
        return _from_hex(value)
    return _from_sequence(value)


def _from_hex(text):
    m = _HEX_DIGITS.match(text.strip()) if isinstance(text, str) else None
    if not m:
        raise ValueError("a colour string is '#rgb', '#rgba', '#rrggbb' or '#rrggbbaa', not %r" % (text,))
    digits = m.group(1)
    if len(digits) <= 4:
        digits = "".join(d + d for d in digits)
    rgba = bytes.fromhex(digits)
    return [rgba[2], rgba[1], rgba[0]] + list(rgba[3:])


def _from_sequence(value):
    try:
        values = [v for v in numpy.asarray(value).reshape(-1)] if hasattr(value, "shape") else list(value)
    except TypeError as e:
        raise TypeError("a colour is a hex string or a sequence of 3 or 4 numbers, not %r" % (value,)) from e
    if len(values) not in (3, 4):
        raise ValueError("a colour has 3 or 4 channels (blue, green, red[, alpha]), not %r" % (values,))
    return values


def _channels(values):
    out = []
    for v in values:
        n = int(v)
        if n != v or not 0 <= n <= 255:
            raise ValueError("a colour channel is a whole number from 0 to 255, not %r" % (v,))
        out.append(n)
    return numpy.array(out, dtype=numpy.uint8)
