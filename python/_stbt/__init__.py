"""``_stbt``: stb-tester's internal module names, as aliases of farmhand's own modules.

Some test packs (and helper libraries written for stb-tester) import from
stb-tester's internal package rather than from ``stbt``: ``from _stbt.types
import Region``, ``from _stbt.mask import Mask``, ``import _stbt.logging``.
Here ``_stbt.<name>`` is the farmhand module that holds the same public names
(``_stbt.types`` *is* ``stbt_core._types``), so such imports keep working and
give the same classes as ``import stbt``. Only the public names of those
modules are promised; a private helper of stb-tester's may be absent.
A few internal modules of stb-tester's that test code imports are small
modules of this package instead: ``cv2_compat`` (the OpenCV version),
``utils`` (temporary folders, ``to_unicode``) and ``libstbt`` (the colour
difference of its native library, computed with numpy).

farmhand's own code, not stb-tester's: the names below are module names only.
"""

import importlib
import importlib.abc
import importlib.util
import sys

# stb-tester's module name -> the farmhand module that holds its public names.
_MODULES = {
    "android": "stbt_core.android",
    "black": "stbt_core._black",
    "config": "stbt_core._config",
    "core": "stbt_core",
    "diff": "stbt_core._motion",
    "frameobject": "stbt_core._frameobject",
    "grid": "stbt_core._grid",
    "imgproc_cache": "stbt_core._imgproc_cache",
    "imgutils": "stbt_core._frames",
    "keyboard": "stbt_core._keyboard",
    "logging": "stbt_core._logging",
    "mask": "stbt_core._mask",
    "match": "stbt_core._match",
    "motion": "stbt_core._motion",
    "multipress": "stbt_core._remote",
    "ocr": "stbt_core._ocr",
    "power": "stbt_core._power",
    "precondition": "stbt_core._precondition",
    "transition": "stbt_core._transition",
    "types": "stbt_core._types",
    "wait": "stbt_core._wait",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``_stbt.X`` as the farmhand module ``_MODULES[X]``."""

    def find_spec(self, fullname, path=None, target=None):  # pylint: disable=unused-argument
        prefix, _, name = fullname.partition(".")
        if prefix != "_stbt" or name not in _MODULES:
            return None
        if importlib.util.find_spec(_MODULES[name]) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(_MODULES[spec.name.partition(".")[2]])
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        # The import system has just set the module's __spec__ to the alias's; give it back its own, so
        # that the module still names itself (pickling, reloading and tracebacks see one module).
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
