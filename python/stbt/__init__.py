"""``import stbt``: the same module as ``stbt_core`` (the name most test packs use).

After ``import stbt``, ``stbt`` *is* ``stbt_core``; ``import stbt.X`` gives the
module ``stbt_core.X`` itself, not a second copy of it.
"""

import importlib
import importlib.abc
import importlib.util
import sys

import stbt_core


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``stbt.X`` as ``stbt_core.X``."""

    def find_spec(self, fullname, path=None, target=None):  # pylint: disable=unused-argument
        if fullname.startswith("stbt.") and importlib.util.find_spec("stbt_core." + fullname[5:]) is not None:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("stbt_core." + spec.name[5:])

    def exec_module(self, module):
        pass


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
sys.modules[__name__] = stbt_core
