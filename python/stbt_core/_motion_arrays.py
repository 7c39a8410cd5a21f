"""Reusable arrays and constant kernels of the motion differs
(``stbt_core._motion``). farmhand's own code."""

import threading

_cache = {}
_thread = threading.local()


def _np():
    import numpy  # pylint: disable=import-outside-toplevel
    return numpy


def _scratch(name, shape, dtype):
    """This thread's reusable array for an intermediate result: a fresh
    array of a few megabytes for each frame costs more (in page faults)
    than the arithmetic on it. What is written there never leaves ``diff``."""
    arrays = getattr(_thread, "arrays", None)
    if arrays is None:
        arrays = _thread.arrays = {}
    a = arrays.get(name)
    if a is None or a.shape != shape or a.dtype != dtype:
        a = arrays[name] = _np().empty(shape, dtype)
    return a


def _kernel():
    if "kernel" not in _cache:
        # 2x2: a change survives unless it is only 1 pixel wide or high
        _cache["kernel"] = _np().ones((2, 2), _np().uint8)
    return _cache["kernel"]


def _quarters():
    if "quarters" not in _cache:
        _cache["quarters"] = _np().full((1, 3), 0.25, _np().float32)
    return _cache["quarters"]
