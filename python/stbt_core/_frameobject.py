"""``FrameObject`` (page objects) and ``for_object_repository`` of the stbt API.

farmhand's own code, written from the behaviour stb-tester documents:

- an instance is about one frame (``self._frame``; default ``get_frame()``);
- it is truthy when its ``is_visible`` property is;
- every other public property is None when the object is not visible (while
  ``is_visible`` itself is being computed, they work normally, so it may
  use them);
- each property is computed at most once per instance;
- public attributes cannot be set or deleted (names starting with ``_`` can,
  for a subclass's own bookkeeping);
- two instances are equal when they are of the same class and their public
  properties are equal; the hash follows;
- the repr lists the properties: ``Menu(is_visible=True, selection='Home')``;
- ``refresh(frame=None, **kwargs)`` is a new instance for a new frame.
"""

__all__ = ["FrameObject", "for_object_repository"]

_object_repository = []


def for_object_repository(cls=None):
    """Mark a class or function for the portal's Object Repository (kept in a
    list; farmhand has no Object Repository page). Works with and without
    parentheses; returns what it decorates unchanged."""
    def mark(obj):
        if obj not in _object_repository:
            _object_repository.append(obj)
        return obj
    if cls is None:
        return mark
    return mark(cls)


def _wrap(name, prop):
    fget = prop.fget

    def getter(self):
        cache = self._FrameObject__cache  # pylint: disable=protected-access
        if name == "is_visible":
            if "is_visible" not in cache:
                cache["is_visible"] = _Evaluating
                try:
                    cache["is_visible"] = fget(self)
                except BaseException:
                    del cache["is_visible"]
                    raise
            return cache["is_visible"]
        if cache.get("is_visible") is not _Evaluating and not self.is_visible:
            return None
        raw = self._FrameObject__raw  # pylint: disable=protected-access
        if name not in raw:
            raw[name] = fget(self)
        return raw[name]

    getter.__name__ = getattr(fget, "__name__", name)
    getter.__doc__ = getattr(fget, "__doc__", None)
    return property(getter, doc=prop.__doc__)


class _Evaluating:
    """Marks ``is_visible`` as being computed."""


class _FrameObjectMeta(type):
    def __new__(mcs, name, bases, namespace):
        props = []
        for key, value in list(namespace.items()):
            if isinstance(value, property) and not key.startswith("_"):
                if value.fset is not None or value.fdel is not None:
                    raise TypeError("%s.%s: FrameObject properties are read-only" % (name, key))
                namespace[key] = _wrap(key, value)
                props.append(key)
        cls = super().__new__(mcs, name, bases, namespace)
        names = []
        for klass in reversed(cls.__mro__):
            for key in getattr(klass, "_FrameObject__own_props", ()):
                if key not in names:
                    names.append(key)
        for key in props:
            if key not in names:
                names.append(key)
        cls._FrameObject__own_props = tuple(props)
        ordered = [n for n in names if n == "is_visible"] + [n for n in names if n != "is_visible"]
        cls._FrameObject__props = tuple(ordered)
        if namespace.get("__module__") != __name__:
            for_object_repository(cls)
        return cls


class FrameObject(metaclass=_FrameObjectMeta):
    """A page object about one frame. Subclass it and define ``is_visible``
    and other read-only ``@property``s that look at ``self._frame``."""

    def __init__(self, frame=None):
        if frame is None:
            from stbt_core._frames import get_frame  # pylint: disable=import-outside-toplevel
            frame = get_frame()
        object.__setattr__(self, "_FrameObject__cache", {})
        object.__setattr__(self, "_FrameObject__raw", {})
        object.__setattr__(self, "_frame", frame)

    @property
    def is_visible(self):
        """Override this: True when this page is on the screen."""
        return True

    def __setattr__(self, name, value):
        if not name.startswith("_"):
            raise AttributeError("%s is immutable: cannot set %s" % (type(self).__name__, name))
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if not name.startswith("_"):
            raise AttributeError("%s is immutable: cannot delete %s" % (type(self).__name__, name))
        object.__delattr__(self, name)

    def __bool__(self):
        return bool(self.is_visible)

    def _fields(self):
        return tuple((n, getattr(self, n)) for n in type(self)._FrameObject__props)  # pylint: disable=no-member

    def __repr__(self):
        if not self:
            return "%s(is_visible=%r)" % (type(self).__name__, self.is_visible)
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % f for f in self._fields()))

    def __eq__(self, other):
        if type(self) is not type(other):
            return NotImplemented
        return self._fields() == other._fields()

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        values = []
        for _, v in self._fields():
            try:
                hash(v)
                values.append(v)
            except TypeError:
                values.append(repr(v))
        return hash((type(self), tuple(values)))

    def refresh(self, frame=None, **kwargs):
        """A new instance of this class for ``frame`` (default: a new
        ``get_frame()``); ``kwargs`` go to the constructor."""
        return type(self)(frame=frame, **kwargs)


FrameObject.__module__ = "stbt_core"
