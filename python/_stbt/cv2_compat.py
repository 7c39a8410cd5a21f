"""``_stbt.cv2_compat``: the OpenCV version, for code written against stb-tester's internal module.

``version`` is OpenCV's version as a list of integers (``[4, 6, 0]``), so
``cv2_compat.version >= [3, 0, 0]`` reads as it does with stb-tester.
farmhand's own code.
"""

import re

import cv2

version = [int(part) for part in re.findall(r"\d+", cv2.__version__)[:3]]
