"""JSON objects into the capture's records by their fields. Standard library only (see :mod:`tileprobe.record.capture`):
the capture cannot import :mod:`tileprobe.jsonrecord`, which checks types; the readers here check what they use."""
from __future__ import annotations

from dataclasses import fields


def from_fields(cls, d: dict):
    """A ``cls`` (a dataclass whose fields have defaults) from the JSON object ``d``: each field from its key, a
    missing key its default, other keys ignored. Nothing is checked (values are taken as they come)."""
    return cls(**{f.name: d[f.name] for f in fields(cls) if f.init and f.name in d})
