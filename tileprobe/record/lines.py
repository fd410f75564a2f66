"""The lines of a launch log (``DIR/launches/*.jsonl``, written by :mod:`tileprobe.record.capture`) and of a misses
file (``TABLE.misses.jsonl``), as records: one dataclass per line type (its ``"t"``), read with
:func:`tileprobe.jsonrecord.from_dict` so that a value of the wrong type is a :class:`~tileprobe.jsonrecord.FieldError`
(a ValueError: the reader counts the line unreadable and goes on). Fields the capture writes but nothing reads are
left out (the reader ignores them).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tileprobe.jsonrecord import from_dict


@dataclass
class ProcessLine:
    """``process``: one recorded Python process (its command line and folder)."""
    argv: list[str] = field(default_factory=list)
    cwd: str | None = None
    pid: int | None = None


@dataclass
class KernelLine:
    """``kernel``: one kernel object (``id``: its number in this process's log; a miss line's kernel has none):
    where its function lives, how to import it, its hints (launched and ``declared``)."""
    id: int | None = None
    name: str | None = None
    module: str | None = None
    qualname: str | None = None
    file: str | None = None
    line: int | None = None
    attr: str | None = None
    ref_kind: str | None = None
    declared: Any = None
    hints: dict[str, Any] | None = None


@dataclass
class LaunchLine:
    """``launch``: one distinct launch (kernel id, grid, argument descriptions, call site)."""
    id: int
    kernel: int
    grid: list[int] | None = None
    args: list[Any] | None = None
    kwargs: dict[str, Any] | None = None
    site: str | None = None
    launch_site: str | None = None


@dataclass
class CountsLine:
    """``counts``: absolute launch counts per launch id (the last line wins; the reader takes the largest)."""
    n: dict[str, Any] | None = None


@dataclass
class OverflowLine:
    """``overflow``: a negative launch id counting a kernel's launches beyond the per-process limit."""
    id: int
    kernel: int


@dataclass
class FirstCallLine:
    """``first_call``: a launch's first call (its wall time, the compiler timeout then, the error it raised);
    ``wall_s`` and ``compiler_timeout_s`` are taken only when they are numbers (the reader checks)."""
    id: int
    wall_s: Any = None
    compiler_timeout_s: Any = None
    error: Any = None


@dataclass
class ErrorLine:
    """``error``: why recording stopped in that process."""
    error: Any = None


@dataclass
class ArchLine:
    """``arch``: the process's GPU (``sm_90``), once the driver is up."""
    arch: str | None = None


@dataclass
class SearchLine:
    """``search`` (and a misses file's ``miss``): one ``exhaustive_search`` described before it ran. ``kernel``:
    the kernel's id (a ``search`` line) or its description (a ``miss`` line: :class:`KernelLine` without id)."""
    id: int | None = None
    kernel: Any = None
    key: str | None = None
    configs: list[Any] | None = None
    problem: list[Any] | None = None
    skipped: list[Any] | None = None
    space_size: int | None = None
    source_sha256: str | None = None
    site: str | None = None
    launch_site: str | None = None
    compiler_timeout_s: float | None = None
    same_kernel: bool | None = True
    options: dict[str, Any] | None = None       # the search's keyword arguments (flush_l2, …), when it passed any


@dataclass
class MissLine(SearchLine):
    """``miss`` (a misses file's line): a search ``tileprobe use`` could not answer, with its kernel described."""


@dataclass
class SearchAgainLine:
    """``search_again``: the same search once more."""
    id: int


@dataclass
class SearchDoneLine:
    """``search_done``: a search's pick, the arguments it wrote, its wall time, its error and failed configurations."""
    id: int
    outputs: list[Any] | None = None
    best: int | None = None
    best_us: float | None = None
    wall_s: float | None = None
    error: str | None = None
    failures: list[Any] | None = None


@dataclass
class SearchFailedLine:
    """``search_failed``: a search seen that the capture could not describe (its size and why)."""
    configs: Any = None
    reason: Any = None
    kernel: int | None = None
    name: str | None = None
    site: str | None = None
    launch_site: str | None = None


#: The record of each line type (``"t"``); a line of another type is passed over.
@dataclass
class ExitErrorLine:
    """``exit_error``: the process's uncaught exception (its type and first 500 characters), logged before the
    program's own ``sys.excepthook`` printed it."""
    error: str | None = None


LINE_TYPES: dict[str, type] = {
    "process": ProcessLine, "kernel": KernelLine, "launch": LaunchLine, "counts": CountsLine,
    "overflow": OverflowLine, "first_call": FirstCallLine, "error": ErrorLine, "arch": ArchLine,
    "search": SearchLine, "miss": MissLine, "search_again": SearchAgainLine, "search_done": SearchDoneLine,
    "search_failed": SearchFailedLine, "exit_error": ExitErrorLine,
}


def parse_line(d: Any, where: str = "") -> Any:
    """The record of one decoded log line ``d`` (an instance of a :data:`LINE_TYPES` class), or None for a line of
    a type this reader does not know.

    Raises:
        FieldError (a ValueError): ``d`` is not an object, or a field holds a value of the wrong type.
        AttributeError: ``d`` is not an object (no ``"t"`` to read).
    """
    kind = LINE_TYPES.get(d.get("t"))
    return None if kind is None else from_dict(kind, d, where=where)
