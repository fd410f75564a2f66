"""What a recording is made of, once read: kernels (where they live, their declared hints) and distinct launches.

Both sources — a recorded program (:mod:`.log`) and cuTile's compile cache (:mod:`.cache`) — produce these, and
grouping (:mod:`.group`) and writing (:mod:`.write`) work on them alone.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field

from tileprobe.record.tabledoc import RecordedConfigDoc

#: cuTile's defaults for kernel hints (``ct.kernel`` signature, cuda-tile 1.7.0 ``_execution.py``).
HINT_DEFAULTS = {"num_ctas": None, "occupancy": None, "opt_level": 3, "num_worker_warps": None}


@dataclass(frozen=True)
class KernelRef:
    """A kernel function and how a probe can import it.

    ``attr`` is the name in ``module`` (or, for a script, in ``file``) of either the ``@ct.kernel`` object
    (``ref_kind="kernel"``) or the plain function the program wraps with ``ct.kernel(...)`` at run time
    (``ref_kind="function"``); ``None`` when the kernel cannot be imported (defined inside a function).
    ``declared``: the hints of that ``@ct.kernel`` object (``None``: cuTile's defaults).
    """
    name: str
    module: str | None = None
    qualname: str | None = None
    file: str | None = None
    line: int | None = None
    attr: str | None = None
    ref_kind: str | None = None
    declared_json: str | None = None   # JSON of the declared hints (a frozen dataclass needs hashable fields)

    @property
    def declared(self) -> dict:
        """Declared hints, cuTile's defaults filled in; ``ByTarget`` values as ``{"by_target": …, "default": …}``."""
        return {**HINT_DEFAULTS, **(json.loads(self.declared_json) if self.declared_json else {})}

    @property
    def key(self) -> tuple:
        """Identity of the kernel function (a script's kernels by file, a module's by module)."""
        return (None if self.module == "__main__" else self.module, self.qualname or self.name,
                self.file if self.module in (None, "__main__") else None)

    @property
    def in_script(self) -> bool:
        """Whether the kernel lives in the program's main script (importing it runs the script's top level)."""
        return self.module == "__main__"

    @property
    def installed(self) -> bool:
        """Whether the kernel's file is in an installed package (site-packages / dist-packages)."""
        parts = (self.file or "").replace("\\", "/").split("/")
        return "site-packages" in parts or "dist-packages" in parts

    def import_root(self) -> str | None:
        """For a module of a package that is not installed: the folder the recorded program imported the package
        from (the file's path without the module's parts), which a probe puts on ``sys.path``; else None."""
        if not self.module or "." not in self.module or self.in_script or not self.file or self.installed:
            return None
        root = os.path.dirname(self.file)
        for _ in self.module.split(".")[1:]:
            root = os.path.dirname(root)
        return root

    def spec(self, probe_dir: str | None = None) -> str | None:
        """How a probe names the kernel: ``"module:attr"`` for an installed module or a package's module (see
        :meth:`import_root`), else ``"path.py:attr"`` (a top-level module next to the program, or the script itself;
        relative to ``probe_dir`` when near it), or None when it cannot be named. Decided from the recorded file
        alone, so it does not depend on this process's ``sys.path``."""
        if not self.attr:
            return None
        if self.module and not self.in_script and ("." in self.module or self.installed):
            return f"{self.module}:{self.attr}"
        if not self.file:
            return None
        path = self.file
        if probe_dir:
            rel = os.path.relpath(self.file, probe_dir)
            if rel.split(os.sep).count(os.pardir) <= 3:   # near the probes: keep the pair movable together
                path = rel
        return f"{path}:{self.attr}"


@dataclass
class Launch:
    """One distinct launch: kernel, the hints of the launched kernel object, grid, arguments, and counts.

    ``args``: JSON argument descriptions (:func:`tileprobe.record.capture.to_json`). ``count``: launches seen
    (None: unknown, e.g. from the compile cache). ``sites``: call site → count (the first frame in user code);
    ``launch_sites``: the code that called ``ct.launch`` → count. ``archs``: targets seen (e.g. ``sm_90``).
    """
    kernel: KernelRef
    hints: dict
    grid: tuple | None
    args: list
    count: int | None = 1
    sites: Counter = field(default_factory=Counter)
    launch_sites: Counter = field(default_factory=Counter)
    kwargs: dict = field(default_factory=dict)
    archs: set = field(default_factory=set)
    symbol: str | None = None          # known from the compile cache; computed later for recordings
    source: str = "record"             # "record" | "cache"
    note: str = ""
    first_call_s: float | None = None          # the first call's wall time (JIT compile included)
    compiler_timeout_s: float | None = None    # the compiler timeout in force at that call (None: no limit)
    first_error: str = ""                      # what the first call raised ("CompilerTimeoutError: …")

    @property
    def launch_hints(self) -> dict:
        """Hints the launched kernel object sets differently from the declared kernel (``replace_hints`` or a
        ``ct.kernel(...)`` made at run time): what a probe must set to reproduce the launch."""
        declared = self.kernel.declared
        return {h: v for h, v in self.hints.items() if h in HINT_DEFAULTS and v != declared.get(h)}

    def merge_key(self) -> tuple:
        """Launches equal under this key are the same launch (seen in several processes)."""
        return (self.kernel.key, self.kernel.attr, _json(self.launch_hints), self.grid, _json(self.args))

    def absorb(self, other: Launch) -> None:
        """Add another process's counts and sites of the same launch."""
        self.count = None if self.count is None or other.count is None else self.count + other.count
        self.sites.update(other.sites)
        self.launch_sites.update(other.launch_sites)
        self.archs |= other.archs
        if other.first_call_s is not None and (self.first_call_s is None or other.first_call_s > self.first_call_s):
            self.first_call_s, self.compiler_timeout_s = other.first_call_s, other.compiler_timeout_s
            self.first_error = other.first_error or self.first_error


def _json(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=repr)


def merge(launches) -> list[Launch]:
    """Merge equal launches (same kernel, launch hints, grid, arguments) and return them, most frequent first."""
    out: dict[tuple, Launch] = {}
    for la in launches:
        key = la.merge_key()
        if key in out:
            out[key].absorb(la)
        else:
            out[key] = la
    return sorted(out.values(), key=lambda x: -(x.count or 0))


@dataclass
class RecordedSearch:
    """One ``cuda.tile.tune.exhaustive_search`` of a recorded program (or a miss noted by ``tileprobe use``),
    merged over the processes that made it.

    ``key``: the search key (SHA-256 prefix of the kernel, the problem's arguments and the space; the capture's
    ``Search.key``); ``configs``: per configuration of the program, in its order, its config, hints, grid and
    argument descriptions (:class:`~tileprobe.record.tabledoc.RecordedConfigDoc`); ``problem``: argument positions equal in every configuration;
    ``outputs``: positions the search wrote (values changed: the outputs a tune checks); ``best``: the index of the
    program's own pick (None: it failed or was not seen); ``best_us``: its mean time by cuda.tile.tune (µs);
    ``wall_s``: the search's wall time (s); ``count``: searches seen; ``source_sha256``: the kernel file's hash;
    ``skipped``: configurations the capture could not describe (the program's ``grid_fn`` / ``args_fn`` raised for
    them), ``[position, reason]``, left out of ``configs``; ``space_size``: the program's configurations, all;
    ``options``: the keyword arguments the program passed (``flush_l2``, ``single_run_timeout_sec``, ``quiet``, and
    any other, a function as ``{"callable": name}``).
    """
    key: str
    kernel: KernelRef
    configs: list[RecordedConfigDoc]
    problem: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    source_sha256: str | None = None
    sites: Counter = field(default_factory=Counter)
    launch_sites: Counter = field(default_factory=Counter)
    count: int = 1
    best: int | None = None
    best_us: float | None = None
    wall_s: float | None = None
    error: str | None = None
    failures: list = field(default_factory=list)
    compiler_timeout_s: float | None = None
    archs: set = field(default_factory=set)
    same_kernel: bool = True
    skipped: list = field(default_factory=list)   # [position among the program's configurations, why] left out
    space_size: int | None = None                 # the program's configurations, those left out included
    options: dict = field(default_factory=dict)   # its keyword arguments (flush_l2, …) as JSON: search_options()

    def absorb(self, other: RecordedSearch) -> None:
        """Add another process's sighting of the same search (counts, sites; outputs and pick when unknown)."""
        self.count += other.count
        self.sites.update(other.sites)
        self.launch_sites.update(other.launch_sites)
        self.archs |= other.archs
        self.outputs = self.outputs or other.outputs
        if self.best is None:
            self.best, self.best_us, self.wall_s = other.best, other.best_us, other.wall_s


def merge_searches(searches) -> list[RecordedSearch]:
    """Merge searches with the same key (seen in several processes), most frequent first."""
    out: dict[str, RecordedSearch] = {}
    for s in searches:
        if s.key in out:
            out[s.key].absorb(s)
        else:
            out[s.key] = s
    return sorted(out.values(), key=lambda s: -s.count)
