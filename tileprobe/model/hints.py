"""The compiler hints a cuTile kernel takes and the values cuTile accepts for each: the vocabulary every stage checks
(a probe's ``hints=``, ``--hint``, ``--where``, the gate's rules, the verdicts).

Source: ``cuda/tile/_compiler_options.py`` (cuda-tile 1.7.0), its ``_validate_*`` functions.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from tileprobe.errors import ProbeError

#: Compiler hints a kernel takes (``ct.kernel(...)`` / ``kernel.replace_hints``), with allowed values
#: (cuda/tile/_compiler_options.py, cuda-tile 1.7.0).
KERNEL_HINTS = ("occupancy", "num_ctas", "opt_level", "num_worker_warps")
#: The values cuTile accepts for each kernel hint (``_validate_*`` in cuda/tile/_compiler_options.py, cuda-tile
#: 1.7.0): occupancy 1 … 32, num_ctas a power of two in 1 … 16, opt_level 0 … 3, num_worker_warps a power of two in
#: 1 … 32 (values other than 4 and 8 need tileiras 13.5). ``None`` (as the kernel declares) is always allowed.
HINT_VALUES = {"occupancy": tuple(range(1, 33)), "num_ctas": (1, 2, 4, 8, 16), "opt_level": (0, 1, 2, 3),
               "num_worker_warps": (1, 2, 4, 8, 16, 32)}
#: How :data:`HINT_VALUES` reads in an error message.
HINT_VALUES_TEXT = {"occupancy": "an int in 1 … 32", "num_ctas": "a power of two in 1 … 16 (1, 2, 4, 8, 16)",
                    "opt_level": "an int in 0 … 3", "num_worker_warps": "a power of two in 1 … 32 (1, 2, 4, 8, 16, 32)"}
#: Per-load/store hints (arguments of ``ct.load`` / ``ct.store``) a probe can map to a case constant.
LOAD_KNOBS = ("allow_tma", "latency")


def check_hints(hints: Mapping[str, Any]) -> None:
    """Refuse a hint cuTile does not take (with a "did you mean") and values it would refuse
    (:func:`_check_hint_values`): a probe's ``hints=`` and ``--hint`` overrides.

    Raises:
        ProbeError: naming the hint, the value and the allowed ones (no file: the caller adds it).
    """
    for h, values in hints.items():
        if not isinstance(h, str):
            raise ProbeError(f"hints key {h!r}: a hint is named by a string, one of {', '.join(KERNEL_HINTS)}")
        if h in LOAD_KNOBS:
            raise ProbeError(f"{h!r} is a per-load knob (ct.load(…, {h}=…)), not a kernel hint: make it a ct.Constant "
                             f"parameter of the kernel, pass it to ct.load and list its values in cases= (then "
                             f"--case {h}=…); kernel hints are {', '.join(KERNEL_HINTS)}")
        if h not in KERNEL_HINTS:
            near = difflib.get_close_matches(h, KERNEL_HINTS + LOAD_KNOBS, n=1)
            maybe = f" (did you mean {near[0]!r}?)" if near else ""
            raise ProbeError(f"unknown hint {h!r}{maybe}; kernel hints are {', '.join(KERNEL_HINTS)} "
                             "(per-load knobs such as latency or allow_tma: make them ct.Constant parameters "
                             "of the kernel and list them in cases=)")
        check_values("hints", h, values)
        _check_hint_values(h, values)


def _check_hint_values(hint: str, values) -> None:
    """Refuse a hint value cuTile would refuse (or choke on: ``occupancy='two'`` used to end in a TypeError about
    comparing str and int), naming the value and the allowed ones (:data:`HINT_VALUES`). ``None`` and
    ``ct.ByTarget`` values pass (cuTile checks a ByTarget's entries when the hints are applied)."""
    for value in values:
        if value is None or type(value).__name__ == "ByTarget":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value not in HINT_VALUES[hint]:
            raise ProbeError(f"hints[{hint!r}] holds {value!r}: {hint} takes {HINT_VALUES_TEXT[hint]}, or None for "
                             "the kernel's declared value (cuda/tile/_compiler_options.py)")


def check_values(kind: str, name: str, values) -> None:
    """Refuse a grid entry that is not a non-empty list of values (``cases[name]`` / ``hints[name]``).

    Raises:
        ProbeError: naming the entry and what it holds.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise ProbeError(f"{kind}[{name!r}] must be a non-empty list of values, got {values!r}")
