"""Configuration values for test scripts: ``get_config(section, key)``.

farmhand passes the run's configuration (the test pack's config file, plus
the section ``result.tags`` holding the job's tags) as a JSON file named by
the environment variable ``FARMHAND_CONFIG``: ``{section: {key: value}}``,
every value a string.
"""

import enum
import json
import os

from farmhand.errors import ConfigurationError

__all__ = ["get_config"]


class _NotGiven:
    def __repr__(self):
        return "<no default>"


_NOT_GIVEN = _NotGiven()
_BOOLEANS = {"1": True, "yes": True, "true": True, "on": True,
             "0": False, "no": False, "false": False, "off": False}
_cache = {}


def _load():
    path = os.environ.get("FARMHAND_CONFIG", "")
    if path not in _cache:
        if not path:
            _cache[path] = {}
        else:
            try:
                with open(path, encoding="utf-8") as f:
                    _cache[path] = json.load(f)
            except (OSError, ValueError) as e:
                raise ConfigurationError(
                    "could not read the run's configuration %s: %s" % (path, e)
                ) from e
    return _cache[path]


def get_config(section, key, default=_NOT_GIVEN, type_=str):
    """The value of ``key`` in ``section``, converted with ``type_``.

    ``get_config("result.tags", "jenkins/BUILD_ID")`` answers a tag of the
    job. When the key is missing, ``default`` is returned as it is; without a
    default, ``ConfigurationError`` is raised. ``type_`` may be ``str``
    (the default), ``int``, ``float``, ``bool`` (``1/yes/true/on`` and
    ``0/no/false/off``, any case), an ``enum.Enum`` subclass (by value, then
    by name) or any callable taking the string.
    """
    values = _load().get(section)
    if not isinstance(values, dict) or key not in values:
        if default is _NOT_GIVEN:
            raise ConfigurationError(
                "no configuration value %s.%s (section [%s], key %r)" % (section, key, section, key)
            )
        return default
    raw = values[key]
    try:
        return _convert(raw, type_)
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigurationError(
            "configuration value %s.%s = %r is not a valid %s"
            % (section, key, raw, getattr(type_, "__name__", type_))
        ) from e


def _convert(raw, type_):
    if type_ is bool:
        return _BOOLEANS[str(raw).strip().lower()]
    if isinstance(type_, type) and issubclass(type_, enum.Enum):
        try:
            return type_(raw)
        except ValueError:
            return type_[raw]
    return type_(raw)
