"""Named tuples as cheap to define as a plain class: :class:`TypedTuple` keeps ``typing.NamedTuple``'s
declaration and API, but makes a class in microseconds instead of ~0.1 ms (NamedTuple compiles a
``__new__`` for each class at import). A cold ``zs chunk`` lookup defines dozens of record views and
is mostly import time (docs/benchmarks.rst), so the modules it imports declare their tuples with this."""

from __future__ import annotations

from collections import _tuplegetter  # type: ignore[attr-defined]  # namedtuple's own field accessor (C): as fast to read as NamedTuple's
from typing import Any

_tuple_new = tuple.__new__  # a global, as namedtuple's: one attribute lookup less per tuple made


class _Maker(type):
    """Turns the annotated names of a class body into fields: read-only accessors by position, their
    defaults in ``_field_defaults``, and no instance ``__dict__``."""

    def __new__(mcls, name: str, bases: tuple, namespace: dict[str, Any]):
        if "_fields" in namespace:  # TypedTuple itself
            return super().__new__(mcls, name, bases, namespace)
        fields = tuple(namespace.get("__annotations__", ()))
        defaults = {field: namespace[field] for field in fields if field in namespace}
        if any(field not in defaults for field in fields[len(fields) - len(defaults) :]):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        namespace.update(__slots__=(), _fields=fields, _field_defaults=defaults, __match_args__=fields)
        for i, field in enumerate(fields):
            namespace[field] = _tuplegetter(i, f"Alias for field number {i}")
        return super().__new__(mcls, name, bases, namespace)


class TypedTuple(tuple, metaclass=_Maker):
    """A tuple whose elements are named by the subclass's annotations, in order (a value after one of
    them is its default), as ``typing.NamedTuple`` declares them; ``_fields``, ``_field_defaults`` and
    ``_replace`` as there."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _field_defaults: dict[str, Any] = {}

    def __new__(cls, *args: Any, **kwargs: Any):
        if kwargs or len(args) != len(cls._fields):
            args = cls._bind(args, kwargs)
        return _tuple_new(cls, args)

    @classmethod
    def _bind(cls, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """The elements of a call with keywords or defaults left out; TypeError as a function's."""
        fields = cls._fields
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__}() takes {len(fields)} arguments, {len(args)} given")
        values = list(args)
        for field in fields[len(args) :]:
            if field in kwargs:
                values.append(kwargs.pop(field))
            elif field in cls._field_defaults:
                values.append(cls._field_defaults[field])
            else:
                raise TypeError(f"{cls.__name__}() missing argument {field!r}")
        if kwargs:
            raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {next(iter(kwargs))!r}")
        return tuple(values)

    def _replace(self, **changes: Any):
        """A copy with the named fields changed."""
        values = [changes.pop(field, value) for field, value in zip(self._fields, self)]
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return tuple.__new__(type(self), values)

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={v!r}' for f, v in zip(self._fields, self))})"
