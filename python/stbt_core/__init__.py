"""farmhand's implementation of stb-tester's test-script API.

``import stbt_core`` and ``import stbt`` give this module (``stbt.press is
stbt_core.press``). The reference is docs/test-scripts.md; what differs from
stb-tester is in docs/migrating-from-stb-tester.md. farmhand's own
``farmhand`` module stays as it is beside it.

Written from stb-tester's public documentation; no code of stb-tester's.
"""

import importlib as _importlib

from stbt_core._config import get_config, test_pack_root as _test_pack_root
from stbt_core._errors import ConfigurationError, NoVideo, UITestError, UITestFailure
from stbt_core._frames import (Color, Frame, Image, crop, find_file, frames, get_frame, load_image,
                               save_frame)
from stbt_core._logging import debug, draw_text
from stbt_core._remote import Keypress, MultiPress, last_keypress, press, press_until_match, pressing

# The root of the test pack's checkout (the folder holding tests/ and config/).
TEST_PACK_ROOT = _test_pack_root()

__all__ = [
    "Color", "ConfigurationError", "Frame", "Image", "Keypress", "MultiPress", "NoVideo",
    "UITestError", "UITestFailure", "crop", "debug", "draw_text", "find_file", "frames",
    "get_config", "get_frame", "last_keypress", "load_image", "press", "press_until_match",
    "pressing", "save_frame",
]

# The other modules of this package; each one's public names (its __all__) join this module's.
_MODULES = ("_types", "_mask", "_match", "_frameobject", "_grid", "_precondition", "_wait", "_black",
            "_motion", "_transition", "_keyboard", "_ocr", "_power")


def _import_all():
    for name in _MODULES:
        try:
            module = _importlib.import_module("stbt_core." + name)
        except ModuleNotFoundError as e:
            if e.name != "stbt_core." + name:
                raise
            continue  # not written yet
        for public in getattr(module, "__all__", ()):
            globals()[public] = getattr(module, public)
            if public not in __all__:
                __all__.append(public)
    __all__.sort()


_import_all()
del _import_all

# ``stbt.android`` is a submodule, as in stb-tester: its names stay out of this module's namespace.
from stbt_core import android  # noqa: E402  pylint: disable=wrong-import-position

__all__.append("android")
__all__.sort()
