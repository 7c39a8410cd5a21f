"""``get_config``: the test pack's stbt.conf, layered as stb-tester reads it.

Layers, the later one winning key by key:

1. the built-in defaults below (``[press] interpress_delay_secs = 0.3`` ...);
2. ``.stbt.conf`` at the test pack's root;
3. ``config/stbt.conf``;
4. the configuration the daemon handed to the run (``FARMHAND_CONFIG``: the
   first of ``config/farmhand.conf``, ``config/stbt.conf``, ``.stbt.conf``);
5. the node's own ``config/test-farm/<node_id>.conf`` (``FARMHAND_NODE_ID``);
6. the per-user file, ``$XDG_CONFIG_HOME/stbt/stbt.conf`` (``~/.config``
   when unset), as in stb-tester; in a farmhand run only when that file is
   inside the run's own folder (a test user's home), so that it never outlives
   the run; else what ``set_config`` set in this process;
7. the files of ``STBT_CONFIG_FILE`` (colon-separated, the first winning);
8. the section ``result.tags``: the job's tags.

Files are read from the checkout the test runs in (``FARMHAND_TEST_PACK_DIR``),
with Python's ``configparser`` (no interpolation, keys lower-cased), once per
process.
"""

import configparser
import contextlib
import enum
import json
import os

from farmhand.config import _BOOLEANS, _NOT_GIVEN  # one sentinel and one table of booleans for both APIs
from stbt_core._errors import ConfigurationError

__all__ = ["get_config"]

# stb-tester's documented built-in values (see docs/migrating-from-stb-tester.md).
BUILTIN = {
    "global": {},
    "press": {"interpress_delay_secs": "0.3"},
    "press_until_match": {"interval_secs": "3", "max_presses": "10"},
    "match": {
        "match_method": "sqdiff",
        "match_threshold": "0.98",
        "confirm_method": "normed-absdiff",
        "confirm_threshold": "0.70",
        "erode_passes": "1",
        "pyramid_levels": "3",
    },
    "is_screen_black": {"threshold": "20"},
    "motion": {"threshold": "25", "consecutive_frames": "10/20", "noise_threshold": "0.84"},
    "ocr": {"lang": "eng", "upsample": "True", "text_color_threshold": "25", "engine": "LSTM",
            "auto_single_line": "True"},
}


_layers = None


def _read_ini(path):
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f, source=path)
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, configparser.Error) as e:
        raise ConfigurationError("could not read %s: %s" % (path, e)) from e
    return {s: dict(parser.items(s)) for s in parser.sections()}


def _read_run_config():
    path = os.environ.get("FARMHAND_CONFIG", "")
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError) as e:
        raise ConfigurationError("could not read the run's configuration %s: %s" % (path, e)) from e
    return value if isinstance(value, dict) else {}


def test_pack_root():
    """The root of the test pack's checkout: ``FARMHAND_TEST_PACK_DIR``, else the working directory."""
    return os.path.abspath(os.environ.get("FARMHAND_TEST_PACK_DIR") or os.getcwd())


def _load():
    global _layers  # pylint: disable=global-statement
    if _layers is None:
        root = test_pack_root()
        run = _read_run_config()
        tags = run.pop("result.tags", None)
        layers = [BUILTIN, _read_ini(os.path.join(root, ".stbt.conf")),
                  _read_ini(os.path.join(root, "config", "stbt.conf")), run]
        node = os.environ.get("FARMHAND_NODE_ID", "")
        if node and "/" not in node and node not in (".", ".."):
            layers.append(_read_ini(os.path.join(root, "config", "test-farm", node + ".conf")))
        user = _user_file()
        layers.append(_read_ini(user) if user else _set_in_process)
        layers.extend(_read_ini(p) for p in reversed(_explicit_files()))
        if isinstance(tags, dict):
            layers.append({"result.tags": tags})
        merged = {}
        for layer in layers:
            for section, values in layer.items():
                if isinstance(values, dict):
                    merged.setdefault(section, {}).update({str(k).lower(): str(v) for k, v in values.items()})
        _layers = merged
    return _layers


def _reset():
    """Forget what was read (tests change the files and the environment)."""
    global _layers  # pylint: disable=global-statement
    _layers = None


def _explicit_files():
    """``STBT_CONFIG_FILE``: a colon-separated list of files read over the
    test pack's, the first one winning (and the one ``set_config`` writes)."""
    return [p for p in os.environ.get("STBT_CONFIG_FILE", "").split(":") if p]


def _user_file():
    """stb-tester's per-user file, ``$XDG_CONFIG_HOME/stbt/stbt.conf`` (``$HOME/.config`` when
    unset); None when there is no home, or in a farmhand run (``FARMHAND_REPORT``) whose home is
    not the run's own folder: the daemon's home is shared by every run, and a value one run set
    would be read by the next."""
    config_home = os.environ.get("XDG_CONFIG_HOME") or (
        os.path.join(os.environ["HOME"], ".config") if os.environ.get("HOME") else "")
    if not config_home:
        return None
    path = os.path.abspath(os.path.join(config_home, "stbt", "stbt.conf"))
    report = os.environ.get("FARMHAND_REPORT")
    if report:
        run_folder = os.path.dirname(os.path.abspath(report))
        if os.path.commonpath([run_folder, path]) != run_folder:
            return None
    return path


# set_config's values when there is neither a STBT_CONFIG_FILE nor a per-user file to write. They
# sit where that file would: over the test pack's files, under STBT_CONFIG_FILE's.
_set_in_process = {}


def set_config(section, option, value):
    """Set ``[section] option = value``: written to the first file of
    ``STBT_CONFIG_FILE`` when there is one, else to the per-user file
    (either created, folders and all, if need be), else kept for the rest of
    this process (under the files of a ``STBT_CONFIG_FILE`` set later).
    ``value`` None removes the option."""
    files = _explicit_files() or [f for f in [_user_file()] if f]
    if files:
        _write_option(files[0], section, option, value)
    elif value is None:
        _set_in_process.get(section, {}).pop(option.lower(), None)
    else:
        _set_in_process.setdefault(section, {})[option.lower()] = str(value)
    _reset()


def _write_option(path, section, option, value):
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read(path, encoding="utf-8")
    if value is None:
        if parser.has_section(section):
            parser.remove_option(section, option)
    else:
        if not parser.has_section(section):
            parser.add_section(section)
        parser.set(section, option, str(value))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with _sponge(path) as f:
        parser.write(f)


@contextlib.contextmanager
def _sponge(path):
    """Write a file all at once: yields a text file (UTF-8) to write to, which
    replaces ``path`` when the block ends. If the block raises, ``path`` is
    left as it was, so a reader never sees half a configuration file. The
    file keeps its permissions (a new one gets the usual ones)."""
    path = os.path.abspath(path)
    folder, name = os.path.split(path)
    for _ in range(100):
        temporary = os.path.join(folder, ".%s.%s.tmp" % (name, os.urandom(4).hex()))
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError("no free temporary name beside %s" % path)
    try:
        with open(fd, "w", encoding="utf-8") as f:
            yield f
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temporary, os.stat(path).st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _config_init(force=False):
    """The merged configuration as a ``configparser.ConfigParser`` (for code
    written against stb-tester's internal module); ``force`` re-reads the
    files first."""
    if force:
        _reset()
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read_dict(_load())
    return parser


def get_config(section, key, default=_NOT_GIVEN, type_=str):
    """The value of ``key`` in ``section`` converted with ``type_``; ``default``
    (returned as it is) when the key is missing, else ``ConfigurationError``."""
    values = _load().get(section, {})
    k = key.lower()
    if k not in values:
        if default is _NOT_GIVEN:
            raise ConfigurationError("no configuration value %s.%s" % (section, key))
        return default
    raw = values[k]
    try:
        return _convert(raw, type_)
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigurationError(
            "configuration value %s.%s = %r is not a valid %s%s"
            % (section, key, raw, getattr(type_, "__name__", type_),
               ". %s" % (e,) if isinstance(e, _NotAMember) else "")) from e


def _convert(raw, type_):
    if type_ is bool:
        return _BOOLEANS[raw.strip().lower()]
    if isinstance(type_, type) and issubclass(type_, enum.Enum):
        return _to_enum(raw, type_)
    return type_(raw)


def _to_enum(raw, type_):
    """The member of ``type_`` whose value is ``raw`` (an int for an
    ``IntEnum``) or whose name is ``raw`` in any case (``-`` for ``_``)."""
    candidates = [raw, raw.strip()]
    if issubclass(type_, int):
        with contextlib.suppress(ValueError):
            candidates.append(int(raw.strip()))
    for candidate in candidates:
        with contextlib.suppress(ValueError):
            return type_(candidate)
    name = raw.strip()
    for n in (name, name.upper(), name.upper().replace("-", "_")):
        if n in type_.__members__:
            return type_[n]
    raise _NotAMember("Valid values are %s" % ", ".join(type_.__members__))


class _NotAMember(ValueError):
    """A configured value that names no member of the Enum asked for."""
