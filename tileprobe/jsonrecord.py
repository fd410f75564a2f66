"""Dataclasses from and to the JSON objects (and SQLite rows) at tileprobe's edges, by their fields, with type checks.

Inside tileprobe data travels as dataclasses; a dict is read or written only where JSON or SQLite is. This is the one
crossing: :func:`from_dict` builds a dataclass from an object, checking each field's value against the field's
annotation and naming the field, the record and the place on a mismatch (:class:`FieldError`); :func:`to_dict` is
the way back. Keys the dataclass has no field for are ignored (a newer writer's); a missing key takes the field's
default, and a field without a default is required.

Checked annotations: ``int`` (a bool is no int), ``float`` (an int is accepted and made a float), ``str``, ``bool``,
``None``, unions (``X | None``), ``list[X]`` and ``tuple[X, ...]`` (from a JSON array), ``dict[K, V]`` (from an
object), ``Any``, and nested dataclasses (from an object, recursively). Any other annotation is taken as it comes.

A leaf: standard library only, no import of tileprobe (pyproject.toml's layers), so every layer may use it.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["FieldError", "from_dict", "to_dict"]

T = TypeVar("T")
_MISSING = dataclasses.MISSING


class FieldError(ValueError):
    """A JSON object that does not fit its record: the message names the place, the record, the field, what it
    holds and what the field takes. ``field``: the field's dotted path (``"search.configs[2]"``)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of dataclass ``cls`` (string annotations of ``from __future__ import annotations``
    evaluated once per class)."""
    return typing.get_type_hints(cls)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(tp: Any, value: Any, path: str, where: str, record: str) -> Any:
    """``value`` checked against annotation ``tp`` (nested dataclasses and their lists built). Raises FieldError."""
    def bad(what: str) -> FieldError:
        place = f"{where}: " if where else ""
        return FieldError(f"{place}{record}.{path} holds {_shown(value)} ({type(value).__name__}), {what}", path)

    origin = typing.get_origin(tp)
    if tp is Any or tp is object:
        return value
    if origin is typing.Union or origin is types.UnionType:
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        kinds = [o for o in options if o is not type(None)]
        if len(kinds) == 1:               # X | None holding something: X's own message (a nested field named)
            return _convert(kinds[0], value, path, where, record)
        for option in kinds:
            try:
                return _convert(option, value, path, where, record)
            except FieldError:
                continue
        raise bad(f"not {' or '.join(_type_name(o) for o in options)}")
    if tp is type(None):
        if value is not None:
            raise bad("not null")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise bad("not true/false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("not an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("not a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise bad("not a string")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise bad("not an array")
        args = typing.get_args(tp)
        item = args[0] if args and (origin is list or (len(args) == 2 and args[1] is Ellipsis)) else Any
        items = [_convert(item, x, f"{path}[{i}]", where, record) for i, x in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise bad("not an object")
        args = typing.get_args(tp)
        vt = args[1] if len(args) == 2 else Any
        return {k: _convert(vt, v, f"{path}.{k}", where, record) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise bad(f"not an object ({tp.__name__})")
        return _build(tp, value, where, record, f"{path}.")
    return value


def _build(cls: Any, d: Mapping, where: str, record: str, prefix: str = "") -> Any:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in d:
            kwargs[f.name] = _convert(hints.get(f.name, Any), d[f.name], prefix + f.name, where, record)
        elif f.default is _MISSING and f.default_factory is _MISSING:
            place = f"{where}: " if where else ""
            raise FieldError(f"{place}{record}{'.' + prefix[:-1] if prefix else ''} lacks its field {f.name!r} "
                             f"(it has: {', '.join(map(str, d)) or 'none'})", prefix + f.name)
    return cls(**kwargs)


def from_dict(cls: type[T], d: Any, *, where: str = "") -> T:
    """A ``cls`` (a dataclass) from the JSON object ``d``: each field from its key, checked against its annotation
    (see the module's list); a missing key takes the field's default; keys without a field are ignored.

    ``where``: the place for the message (``"run.jsonl:12"``, ``"store row 3"``).

    Raises:
        FieldError: ``d`` is not an object, a required field is missing, or a value does not fit its field — the
        message names the place, the record, the field, the value and what the field takes.
    """
    if not isinstance(d, Mapping):
        place = f"{where}: " if where else ""
        raise FieldError(f"{place}{cls.__name__} must be a JSON object, not {_shown(d)} ({type(d).__name__})")
    return _build(cls, d, where, cls.__name__)


def to_dict(obj: Any) -> dict[str, Any]:
    """The JSON object of dataclass ``obj`` (nested dataclasses, lists and tuples converted; tuples become lists).

    Raises:
        TypeError: ``obj`` is not a dataclass instance.
    """
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"to_dict takes a dataclass instance, not {type(obj).__name__}")
    return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_dict(value)
    if isinstance(value, (list, tuple)):
        return [_plain(x) for x in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
