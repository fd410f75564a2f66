"""One recorded argument as a record: the JSON object the capture writes for each argument of a launch or a search
(:func:`tileprobe.record.capture.describe.to_json` writes it into ``record.json``, the misses files, the tables'
``problem_args`` and the coverage events), read once here into an :class:`ArgDesc`.

Kinds and the fields each has (others read None):

* ``array``: ``dtype`` (``float32``, ``torch.bfloat16``), ``shape`` and ``strides`` (elements), ``align`` (bytes the
  base address is aligned to), ``output`` (true: the program wrote it during a recorded search);
* ``scalar``: ``type`` (``int``, ``float``, …) and ``value``;
* ``sequence``: ``type`` (``tuple`` | ``list``) and ``items`` (argument objects);
* ``dtype``: ``origin`` (``torch`` | ``cuda.tile``) and ``name``;
* ``object``: ``type`` only (what tileprobe could not describe).

Standard library and :mod:`tileprobe.jsonrecord` only; it is not loaded into users' programs (the capture writes the
objects, this reads them back).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tileprobe.jsonrecord import from_dict


@dataclass(frozen=True)
class ArgDesc:
    """One argument's description (module doc). Every field is taken as it comes (``Any``): the objects are read
    from files a program or an older tileprobe wrote, and each reader checks what it uses."""
    kind: Any = None
    dtype: Any = None
    shape: Any = None
    strides: Any = None
    align: Any = None
    output: Any = None
    type: Any = None
    value: Any = None
    items: Any = None
    origin: Any = None
    name: Any = None

    def item_descs(self) -> list[ArgDesc | None]:
        """A sequence's items as records (None for an item that is no JSON object); [] when it has none."""
        items = self.items if isinstance(self.items, (list, tuple)) else []
        return [arg_desc(x) for x in items]


def arg_desc(d: object) -> ArgDesc | None:
    """The :class:`ArgDesc` of a JSON object (an ArgDesc as it is), or None when ``d`` is no object (a line no
    tileprobe wrote)."""
    if isinstance(d, ArgDesc):
        return d
    return from_dict(ArgDesc, d) if isinstance(d, Mapping) else None
