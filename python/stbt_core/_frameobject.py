"""``FrameObject`` (page objects) and ``for_object_repository`` of the stbt API.

farmhand's own code, written from the behaviour stb-tester documents:

- an instance is about one frame (``self._frame``; default ``get_frame()``);
- it is truthy when its ``is_visible`` property is (``is_visible`` itself
  reads as a bool);
- every other public property is None when the object is not visible (while
  ``is_visible`` itself is being computed, they work normally, so it may use
  them); properties whose name starts with ``_`` always work;
- each property, public or not, is computed at most once per instance, also
  when several threads read it at the same time (a thread reading a public
  property while another is deciding ``is_visible`` waits for that answer);
- once constructed, an instance is immutable: its public attributes cannot
  be set or deleted (``__init__`` may set any; names starting with ``_`` can
  always be set, for a subclass's own bookkeeping);
- ``Class._fields`` names the public properties, ``is_visible`` first, then
  the others in alphabetical order;
- two instances are equal when one's class is the other's or a subclass of
  it, they have the same ``_fields`` and equal values for them (the frames
  may differ); the hash follows;
- the repr shows the frame (its time, or a loaded image's name and size)
  and every property's value (computing those not computed yet, once as
  always); an invisible object shows only ``is_visible``:
  ``<Menu(_frame=<Frame(time=None)>, is_visible=True, selection='Home', title='Menu')>``;
- ``refresh(frame=None, **kwargs)`` is a new instance for a new frame.
"""

import threading

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


class _State:
    """An instance's computed properties, and what guards them."""

    __slots__ = ("lock", "values", "deciding")

    def __init__(self):
        self.lock = threading.RLock()
        self.values = {}
        self.deciding = None  # the thread computing is_visible, while it does


def _state(obj):
    # set by FrameObject.__init__; made here for a subclass whose __init__ does not call it
    return obj.__dict__.setdefault("_FrameObject__state", _State())


def _computed(obj, name, fget):
    """The value of property ``name``, computed once (under the instance's lock)."""
    state = _state(obj)
    with state.lock:
        if name not in state.values:
            if name == "is_visible":
                state.deciding = threading.get_ident()
                try:
                    state.values[name] = bool(fget(obj))
                finally:
                    state.deciding = None
            else:
                state.values[name] = fget(obj)
        return state.values[name]


def _wrap(name, prop):
    fget = prop.fget
    gated = not name.startswith("_") and name != "is_visible"

    def getter(self):
        if gated and _state(self).deciding != threading.get_ident() and not self.is_visible:
            return None
        return _computed(self, name, fget)

    getter.__name__ = getattr(fget, "__name__", name)
    getter.__doc__ = getattr(fget, "__doc__", None)
    return property(getter, doc=prop.__doc__)


def _public_properties(cls):
    kinds = {}
    for klass in reversed(cls.__mro__):
        for key, value in vars(klass).items():
            kinds[key] = isinstance(value, property)
    names = sorted(k for k, is_prop in kinds.items() if is_prop and not k.startswith("_"))
    if "is_visible" in names:
        names.remove("is_visible")
        names.insert(0, "is_visible")
    return tuple(names)


class _FrameObjectMeta(type):
    def __new__(mcs, name, bases, namespace):
        for key, value in list(namespace.items()):
            if isinstance(value, property) and not (key.startswith("__") and key.endswith("__")):
                if value.fset is not None or value.fdel is not None:
                    raise TypeError("%s.%s: FrameObject properties are read-only" % (name, key))
                namespace[key] = _wrap(key, value)
        cls = super().__new__(mcs, name, bases, namespace)
        cls._fields = _public_properties(cls)
        if namespace.get("__module__") != __name__:
            for_object_repository(cls)
        return cls

    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        obj.__dict__["_FrameObject__frozen"] = True  # constructed: immutable from now on
        return obj


class FrameObject(metaclass=_FrameObjectMeta):
    """A page object about one frame. Subclass it and define ``is_visible``
    and other read-only ``@property``s that look at ``self._frame``."""

    def __init__(self, frame=None):
        if frame is None:
            from stbt_core._frames import get_frame  # pylint: disable=import-outside-toplevel
            frame = get_frame()
        self.__dict__["_FrameObject__state"] = _State()
        self._frame = frame

    @property
    def is_visible(self):
        """Override this: True when this page is on the screen."""
        return True

    def __setattr__(self, name, value):
        if self.__dict__.get("_FrameObject__frozen") and not name.startswith("_"):
            raise AttributeError("%s is immutable: cannot set %s" % (type(self).__name__, name))
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if self.__dict__.get("_FrameObject__frozen") and not name.startswith("_"):
            raise AttributeError("%s is immutable: cannot delete %s" % (type(self).__name__, name))
        object.__delattr__(self, name)

    def __bool__(self):
        return self.is_visible

    def _values(self):
        return tuple(getattr(self, n) for n in type(self)._fields)

    def __repr__(self):
        parts = ["_frame=%s" % _frame_text(self.__dict__.get("_frame")), "is_visible=%r" % self.is_visible]
        if self.is_visible:
            for n in type(self)._fields:
                if n != "is_visible":
                    parts.append("%s=%r" % (n, getattr(self, n)))
        return "<%s(%s)>" % (type(self).__name__, ", ".join(parts))

    def __eq__(self, other):
        if not isinstance(other, FrameObject) or not (
                isinstance(other, type(self)) or isinstance(self, type(other))):
            return NotImplemented
        return type(self)._fields == type(other)._fields and self._values() == other._values()

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        values = []
        for v in self._values():
            try:
                hash(v)
                values.append(v)
            except TypeError:
                values.append(repr(v))
        return hash((type(self)._fields, tuple(values)))

    def refresh(self, frame=None, **kwargs):
        """A new instance of this class for ``frame`` (default: a new
        ``get_frame()``); ``kwargs`` go to the constructor."""
        return type(self)(frame=frame, **kwargs)


def _frame_text(frame):
    """The frame in a FrameObject's repr: its capture time, never its pixels."""
    if frame is None:
        return "None"
    if type(frame).__name__ == "Image" and hasattr(frame, "filename"):
        return repr(frame)  # <Image(filename=..., dimensions=...)>
    t = getattr(frame, "time", None)
    return "<Frame(time=%s)>" % ("None" if t is None else "%.3f" % t)


FrameObject.__module__ = "stbt_core"
