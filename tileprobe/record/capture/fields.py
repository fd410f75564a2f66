"""The capture's records: JSON objects read into attributes by their fields. Standard library only, and not even
``dataclasses`` or ``typing`` (see :mod:`tileprobe.record.capture`): a process under ``tileprobe record`` loads the
capture at start-up, where importing ``dataclasses`` (and ``inspect`` with it) cost about 200 ms more on the 2-core
machine under load (2026-12-05); the capture cannot import :mod:`tileprobe.jsonrecord` either."""
from __future__ import annotations


class Record:
    """A record of the capture: its fields are its ``__slots__`` (declared by each subclass, annotated for the
    type checker), given by name; a field not given is None. Nothing is checked: values are taken as the JSON
    held them, and the readers check what they use.

    Raises (constructing): TypeError for a name that is no field."""
    __slots__: tuple[str, ...] = ()

    def __init__(self, **named: object) -> None:
        names = self.__slots__
        unknown = [n for n in named if n not in names]
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {', '.join(unknown)} (its fields: {', '.join(names)})")
        for name in names:
            object.__setattr__(self, name, named[name] if name in named else None)

    @classmethod
    def from_json(cls, d: dict):
        """A record from the JSON object ``d``: each field from its key, a missing key None, other keys ignored."""
        return cls(**{name: d[name] for name in cls.__slots__ if name in d})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"
