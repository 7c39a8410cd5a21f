"""Optional dependencies, imported on first use.

numpy and OpenCV (Debian: python3-numpy, python3-opencv) make frames numpy
arrays and enable ``match``; without them frames are ``farmhand.Frame``
objects. They are imported lazily because ``import cv2`` alone takes about
a quarter of a second, which test cases that never look at the screen should
not pay.
"""

_UNSET = object()
_modules = {"numpy": _UNSET, "cv2": _UNSET}


def _load(name):
    if _modules[name] is _UNSET:
        try:
            _modules[name] = __import__(name)
        except ImportError:
            _modules[name] = None
    return _modules[name]


def numpy():
    """The numpy module, or None when it cannot be imported."""
    return _load("numpy")


def cv2():
    """The cv2 module (OpenCV), or None when it or numpy cannot be imported."""
    return _load("cv2") if numpy() is not None else None
