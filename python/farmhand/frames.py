"""Frames of the device under test: read, save, and check for a black screen.

With numpy, a frame is a numpy array of shape (height, width, 3), dtype
uint8, in **BGR** order (OpenCV's and stb-tester's convention): ``frame[y,
x]`` is ``[blue, green, red]``. Without numpy it is a ``farmhand.Frame``
holding the same bytes.
"""

import os

from farmhand import _deps, control
from farmhand._png import encode_png, swap_rb

__all__ = ["Frame", "Region", "get_frame", "is_screen_black", "save_frame"]


class Region:
    """A rectangle of a frame: ``x``, ``y`` (top left, pixels) and
    ``width``, ``height``. ``right`` and ``bottom`` are exclusive."""

    __slots__ = ("x", "y", "width", "height")

    def __init__(self, x, y, width, height):
        if width < 0 or height < 0:
            raise ValueError("Region width and height must not be negative")
        self.x, self.y, self.width, self.height = int(x), int(y), int(width), int(height)

    @property
    def right(self):
        return self.x + self.width

    @property
    def bottom(self):
        return self.y + self.height

    def clip(self, width, height):
        """This region cut to a frame of ``width`` x ``height`` (may be empty)."""
        x, y = max(self.x, 0), max(self.y, 0)
        return Region(x, y, max(0, min(self.right, width) - x), max(0, min(self.bottom, height) - y))

    def __eq__(self, other):
        return isinstance(other, Region) and tuple(self) == tuple(other)

    def __hash__(self):
        return hash(tuple(self))

    def __iter__(self):
        return iter((self.x, self.y, self.width, self.height))

    def __repr__(self):
        return "Region(x=%d, y=%d, width=%d, height=%d)" % tuple(self)


class Frame:
    """A frame without numpy: ``width``, ``height``, ``data`` (bytes, BGR,
    row after row) and ``time`` (capture time, seconds since the epoch, or
    None)."""

    __slots__ = ("width", "height", "data", "time")

    def __init__(self, width, height, data, time=None):
        if len(data) != width * height * 3:
            raise ValueError("%d bytes are not a %dx%d BGR frame" % (len(data), width, height))
        self.width, self.height, self.data, self.time = width, height, bytes(data), time

    def pixel(self, x, y):
        """``(blue, green, red)`` of the pixel at column ``x``, row ``y``."""
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise IndexError("pixel (%d, %d) is outside the %dx%d frame" % (x, y, self.width, self.height))
        i = (y * self.width + x) * 3
        return tuple(self.data[i:i + 3])

    def __repr__(self):
        return "Frame(width=%d, height=%d)" % (self.width, self.height)


def fetch_frame():
    """``(frame, seq)``: the latest frame and the daemon's frame counter (or None)."""
    np = _deps.numpy()
    if np is None:
        header, body = control.request("get_frame")
        at = header.get("at")
        frame = Frame(header["width"], header["height"], swap_rb(body), at / 1000.0 if at else None)
        return frame, header.get("seq")
    holder = []

    def into(header):
        holder.append(np.empty((header["height"], header["width"], 3), dtype=np.uint8))
        return holder[0]

    header, _ = control.request("get_frame", into=into)
    rgb = holder[0]
    cv2 = _deps.cv2()
    bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR, dst=rgb) if cv2 is not None else np.ascontiguousarray(rgb[:, :, ::-1])
    return bgr, header.get("seq")


def get_frame():
    """The latest frame from the capture device. Raises ``ControlError``
    (``device_unavailable``) when capture is offline."""
    return fetch_frame()[0]


def save_frame(frame, path):
    """Write ``frame`` as a PNG file. A relative ``path`` is relative to the
    working directory, the run's result folder, so the file becomes an
    artifact of the run. Missing folders are created."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    if isinstance(frame, Frame):
        png = encode_png(frame.width, frame.height, swap_rb(frame.data))
    else:
        cv2 = _deps.cv2()
        if cv2 is not None:
            if not cv2.imwrite(os.fspath(path), frame):
                raise OSError("could not write %s" % path)
            return
        png = _png_of_array(frame)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(png)
    os.replace(tmp, path)


def _png_of_array(frame):
    if frame.ndim == 2:
        return encode_png(frame.shape[1], frame.shape[0], frame.astype("uint8").tobytes(), channels=1)
    if frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError("a frame must be height x width x 3 (BGR) or height x width (grey), not %r" % (frame.shape,))
    return encode_png(frame.shape[1], frame.shape[0], frame[:, :, ::-1].astype("uint8").tobytes())


def is_screen_black(frame=None, threshold=20, region=None):
    """True when every pixel's brightness (OpenCV's grey: 0.299 R + 0.587 G
    + 0.114 B) is at most ``threshold`` (0-255), in ``region`` when given.
    ``frame`` defaults to a new ``get_frame()``."""
    if frame is None:
        frame = get_frame()
    if isinstance(frame, Frame):
        return _frame_is_black(frame, threshold, region)
    np = _deps.numpy()
    if region is not None:
        r = region.clip(frame.shape[1], frame.shape[0])
        frame = frame[r.y:r.bottom, r.x:r.right]
    if frame.ndim == 2:
        return not bool((frame > threshold).any())
    c = frame.astype(np.uint32)
    grey = (c[:, :, 0] * 3735 + c[:, :, 1] * 19235 + c[:, :, 2] * 9798 + 16384) >> 15
    return not bool((grey > threshold).any())


def _frame_is_black(frame, threshold, region):
    r = (region or Region(0, 0, frame.width, frame.height)).clip(frame.width, frame.height)
    data = frame.data
    for y in range(r.y, r.bottom):
        row = data[(y * frame.width + r.x) * 3:(y * frame.width + r.right) * 3]
        if max(row, default=0) <= threshold:
            continue  # no channel is brighter, so neither is the grey
        for b, g, red in zip(row[0::3], row[1::3], row[2::3]):
            if (b * 3735 + g * 19235 + red * 9798 + 16384) >> 15 > threshold:
                return False
    return True

