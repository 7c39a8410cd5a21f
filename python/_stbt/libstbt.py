"""``_stbt.libstbt``: the colour-difference routine of stb-tester's native
helper library, for code that calls it directly.

farmhand has no native library: ``threshold_diff_bgr`` is computed with
numpy, with the same answer. farmhand's own code.
"""

import numpy

__all__ = ["threshold_diff_bgr"]


def threshold_diff_bgr(a, b, threshold):
    """Which pixels of two BGR images (same size) differ: a uint8 array
    (height x width), 1 where the squared colour distance (the sum over blue,
    green and red of the squared difference) is ``threshold`` or more, else
    0. The images may be views with any strides (crops)."""
    a = numpy.asarray(a)
    b = numpy.asarray(b)
    if a.shape != b.shape or a.ndim != 3 or a.shape[2] != 3:
        raise ValueError("threshold_diff_bgr takes two BGR images of the same size, not %r and %r"
                         % (a.shape, b.shape))
    d = a.astype(numpy.int32) - b.astype(numpy.int32)
    distance = numpy.einsum("ijk,ijk->ij", d, d)
    return (distance >= threshold).astype(numpy.uint8)
