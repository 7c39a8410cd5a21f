"""A small PNG writer for when OpenCV is missing: 8-bit RGB or greyscale,
no filtering, zlib level 6. Enough for screenshots; not fast."""

import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def encode_png(width, height, pixels, channels=3):
    """PNG bytes of ``pixels``: rows top to bottom, ``channels`` bytes per
    pixel (3: R, G, B; 1: grey)."""
    stride = width * channels
    if len(pixels) != stride * height:
        raise ValueError("%d bytes are not a %dx%dx%d image" % (len(pixels), width, height, channels))
    colour_type = {3: 2, 1: 0}[channels]
    raw = b"".join(b"\x00" + bytes(pixels[y * stride:(y + 1) * stride]) for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return PNG_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")


def swap_rb(data):
    """RGB <-> BGR of packed 3-byte pixels, as a new bytearray."""
    out = bytearray(data)
    out[0::3], out[2::3] = data[2::3], data[0::3]
    return out
