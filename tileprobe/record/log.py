"""Read the per-process launch logs a recorded program wrote (``DIR/launches/*.jsonl``, see :mod:`.capture`)."""
from __future__ import annotations

import glob
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from tileprobe.errors import TileprobeError
from tileprobe.jsonrecord import from_dict
from tileprobe.record.lines import (
    ArchLine,
    CountsLine,
    ErrorLine,
    ExitErrorLine,
    FirstCallLine,
    KernelLine,
    LaunchLine,
    MissLine,
    OverflowLine,
    ProcessLine,
    SearchAgainLine,
    SearchDoneLine,
    SearchFailedLine,
    SearchLine,
    parse_line,
)
from tileprobe.record.model import KernelRef, Launch, RecordedSearch, merge, merge_searches
from tileprobe.record.tabledoc import RecordedConfigDoc

#: What a program's error says when it ended for want of a GPU: torch built without CUDA, no CUDA device, no
#: driver (torch's, the CUDA runtime's and driver API's wordings).
NO_GPU = re.compile(r"not compiled with CUDA|no CUDA[- ]capable device|CUDA_ERROR_NO_DEVICE|cudaErrorNoDevice|"
                    r"Found no NVIDIA driver|NVIDIA driver on your system|CUDA driver initialization failed|"
                    r"libcuda\.so[^ ]* cannot open|CUDA_ERROR_NOT_INITIALIZED|no GPU", re.I)


@dataclass
class Recording:
    """Everything the logs say: distinct launches (merged over processes), the processes that launched, the
    recording failures they reported, launches counted but not described (over the per-kernel cap), and lines that
    could not be read (e.g. the last line of a process killed mid-write)."""
    launches: list[Launch] = field(default_factory=list)
    processes: list[ProcessLine] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    overflow: Counter = field(default_factory=Counter)
    unreadable: list[str] = field(default_factory=list)
    archs: set = field(default_factory=set)
    searches: list = field(default_factory=list)   # RecordedSearch, merged over processes
    undescribed: list = field(default_factory=list)   # sentences: searches seen that could not be described
    exit_errors: list = field(default_factory=list)   # the uncaught exception of each process that ended on one

    @property
    def gpu_missing(self) -> str | None:
        """The first exit error that says the program found no usable GPU (:data:`NO_GPU`: a CPU-only torch, no
        CUDA device or driver), or None."""
        return next((e for e in self.exit_errors if NO_GPU.search(e)), None)

    @property
    def total_launches(self) -> int:
        """Every launch the logs count, those beyond the per-process cap (``overflow``) included."""
        return sum(la.count or 0 for la in self.launches) + sum(self.overflow.values())


def kernel_ref(k: KernelLine | None) -> KernelRef:
    """A :class:`KernelRef` from a ``kernel`` log line (None: a kernel the log did not describe)."""
    k = k or KernelLine()
    return KernelRef(name=k.name or k.qualname or "kernel", module=k.module, qualname=k.qualname, file=k.file,
                     line=k.line, attr=k.attr, ref_kind=k.ref_kind,
                     declared_json=json.dumps(k.declared, sort_keys=True) if k.declared is not None else None)


#: Longest line of a launch log read, in characters: a launch line with a few hundred arguments is a few KB, a search
#: line of the capture's largest space (1,024 configurations) under 2 MB; a longer one (a file that is no launch log)
#: ends the reading of that file, named.
MAX_LINE_CHARS = 16 << 20


def read_log(launch_dir: str) -> Recording:
    """Read every ``*.jsonl`` under ``launch_dir`` and merge equal launches across processes.

    Raises:
        TileprobeError: ``launch_dir`` does not exist.
    """
    if not os.path.isdir(launch_dir):
        raise TileprobeError(f"{launch_dir}: no recorded launches here (expected the launches/ folder that "
                             "`tileprobe record -o DIR -- COMMAND` or `pytest --tileprobe-record DIR` writes)")
    rec = Recording()
    launches: list[Launch] = []
    for path in sorted(glob.glob(os.path.join(launch_dir, "*.jsonl"))):
        try:   # a FIFO or a link to /dev/zero would never end: regular files only
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            regular = False
        if not regular:
            rec.unreadable.append(f"{path} (not a regular file: a FIFO, a device or a broken link; skipped)")
            continue
        launches.extend(_read_file(path, rec))
    rec.launches = merge(launches)
    rec.searches = merge_searches(rec.searches)
    return rec


def search_from(d: SearchLine, kernel: KernelLine | None, cwd: str | None = None) -> RecordedSearch | None:
    """A :class:`RecordedSearch` from a ``search`` line (or a ``miss`` line, which carries its kernel), or None
    when the line is not one (no key, no configurations)."""
    configs = [from_dict(RecordedConfigDoc, c) for c in d.configs or [] if isinstance(c, Mapping)]
    if d.key is None or not configs:
        return None
    s = RecordedSearch(d.key, kernel_ref(kernel), configs, list(d.problem or []),
                       source_sha256=d.source_sha256, compiler_timeout_s=d.compiler_timeout_s,
                       same_kernel=d.same_kernel is not False,
                       skipped=[x for x in d.skipped or [] if isinstance(x, list) and len(x) == 2],
                       space_size=d.space_size,
                       options=d.options if isinstance(d.options, dict) else {})
    s.sites[short_site(d.site or d.launch_site, cwd)] += 1
    s.launch_sites[short_site(d.launch_site, cwd)] += 1
    return s


def undescribed_from(d: SearchFailedLine, kernels: dict[int, KernelLine], cwd: str | None = None) -> str:
    """The sentence for a ``search_failed`` line (a search seen that the capture could not describe): kernel,
    call site, size and reason. Raises like :func:`_take_line` for a line of the wrong shape."""
    name = d.name or kernel_ref(kernels.get(d.kernel)).name if d.kernel is not None else d.name or "a kernel"
    site = short_site(d.site or d.launch_site, cwd)
    return (f"search of {name} at {site} ({int(d.configs or 0):,} configurations) seen but not described: "
            f"{d.reason}; nothing of it is tuned")


def _search_done(s: RecordedSearch, d: SearchDoneLine) -> None:
    s.outputs = [i for i in d.outputs or [] if isinstance(i, int)]
    s.best, s.best_us, s.wall_s = d.best, d.best_us, d.wall_s
    s.error, s.failures = d.error, d.failures or []


#: Largest misses file read (bytes): one miss line describes one search (a few KB to a few hundred KB).
MISSES_LIMIT_BYTES = 256 << 20


def read_misses(path: str) -> list[RecordedSearch]:
    """The searches ``tileprobe use`` noted as misses in ``path`` (``TABLE.misses.jsonl``), merged; [] when none.
    Read only when it is a regular file of at most :data:`MISSES_LIMIT_BYTES` (opened without blocking); a line
    that is not a miss is passed over.

    Raises:
        TileprobeError: ``path`` is a FIFO, device or folder, or too large (names it and the fix).
    """
    from tileprobe.record.hook import load_capture
    out: list[RecordedSearch] = []
    if not os.path.lexists(path):
        return out
    try:
        raw = load_capture().read_regular(path, MISSES_LIMIT_BYTES)
    except (OSError, ValueError) as e:
        raise TileprobeError(f"{path}: the misses file cannot be read ({e}); move it aside (`tileprobe use` writes "
                             "a new one at the next miss)") from None
    for n, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        try:
            d = parse_line(json.loads(line), f"{path}:{n}")
            s = None
            if isinstance(d, MissLine):      # a miss carries its kernel's description
                kernel = from_dict(KernelLine, d.kernel, where=f"{path}:{n}") if d.kernel is not None else None
                s = search_from(d, kernel)
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError):   # one bad line, not the file
            continue
        if s is not None:
            out.append(s)
    return merge_searches(out)


def _read_file(path: str, rec: Recording) -> list[Launch]:
    kernels: dict[int, KernelLine] = {}
    launches: dict[int, Launch] = {}
    overflow: dict[int, int] = {}
    searches: dict[int, RecordedSearch] = {}
    counts: dict[int, int] = {}
    arch, cwd = None, None
    try:   # without blocking, and regular only on the opened descriptor (swapped for a FIFO since the stat)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        rec.unreadable.append(f"{path} ({e.strerror or e}; skipped)")
        return []
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        rec.unreadable.append(f"{path} (not a regular file: a FIFO, a device or a broken link; skipped)")
        return []
    with open(fd, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(iter(lambda: f.readline(MAX_LINE_CHARS + 1), ""), 1):
            if len(line) > MAX_LINE_CHARS:
                rec.unreadable.append(f"{path}:{lineno} (a line of more than {MAX_LINE_CHARS:,} characters; the rest "
                                      "of the file skipped)")
                break
            try:
                d = parse_line(json.loads(line), f"{path}:{lineno}")
                _take_line(d, kernels, launches, overflow, counts, rec, path, cwd)
                _take_search(d, kernels, searches, cwd, rec)
            except (ValueError, RecursionError, KeyError, TypeError, AttributeError):   # one bad line, not the log
                rec.unreadable.append(f"{path}:{lineno}")
                continue
            if isinstance(d, ProcessLine):
                cwd = d.cwd
            elif isinstance(d, ArchLine):
                arch = d.arch
    for lid, la in launches.items():
        n = max(counts.get(lid, 0), 1)     # a launch line is written before its first count
        la.count = n
        for c in (la.sites, la.launch_sites):
            for k in c:
                c[k] = n
        if arch:
            la.archs.add(arch)
            rec.archs.add(arch)
    for s in searches.values():
        if arch:
            s.archs.add(arch)
    rec.searches.extend(searches.values())
    for oid, kid in overflow.items():
        rec.overflow[kernel_ref(kernels.get(kid)).name] += counts.get(oid, 0)
    return list(launches.values())


def short_site(site: str | None, cwd: str | None = None) -> str:
    """``/abs/…/site-packages/tilegym/ops/x.py:12`` → ``tilegym/ops/x.py:12``; a path under the recorded process's
    folder ``cwd`` relative to it; others as they are."""
    if not site:
        return "?"
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in site:
            return site.split(marker, 1)[1]
    prefix = os.path.join(cwd, "") if cwd else None
    return site[len(prefix):] if prefix and site.startswith(prefix) else site


def _take_line(d: object, kernels: dict[int, KernelLine], launches: dict[int, Launch], overflow: dict[int, int],
               counts: dict[int, int], rec: Recording, path: str, cwd: str | None) -> None:
    """Apply one log line's record ``d`` (:func:`tileprobe.record.lines.parse_line`); raises ValueError/TypeError
    for a line of the wrong shape (the caller counts it unreadable and goes on)."""
    if isinstance(d, ProcessLine):
        rec.processes.append(d)
    elif isinstance(d, ExitErrorLine):
        rec.exit_errors.append(str(d.error))
    elif isinstance(d, KernelLine) and d.id is not None:
        kernels[d.id] = d
    elif isinstance(d, LaunchLine):
        kd = kernels.get(d.kernel)
        _check_arrays(d.args or [])
        _check_arrays(list((d.kwargs or {}).values()))
        la = launches[d.id] = Launch(kernel_ref(kd), dict((kd.hints if kd else None) or {}), tuple(d.grid or ()),
                                     d.args or [], 0, kwargs=d.kwargs or {})
        la.sites[short_site(d.site or d.launch_site, cwd)] += 0
        la.launch_sites[short_site(d.launch_site, cwd)] += 0
    elif isinstance(d, OverflowLine):
        overflow[d.id] = d.kernel
    elif isinstance(d, CountsLine):
        for lid, n in (d.n or {}).items():
            counts[int(lid)] = max(counts.get(int(lid), 0), int(n))
    elif isinstance(d, FirstCallLine) and d.id in launches:   # the first call's time and compiler timeout
        la = launches[d.id]
        wall, limit = d.wall_s, d.compiler_timeout_s
        la.first_call_s = float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else None
        la.compiler_timeout_s = float(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) \
            else None
        la.first_error = str(d.error or "")[:500]
    elif isinstance(d, ErrorLine):
        rec.errors.append(f"{os.path.basename(path)}: {d.error}")


def _check_arrays(args: list) -> None:
    """Raise ValueError when an array argument of a launch line has a shape or strides that are not lists of
    integers (strings, null, floats, bools mixed in: a hand-edited or hostile log made the probe writer raise a
    TypeError and lose every other launch, 2026-12-04): that line is then counted unreadable, the others kept."""
    for a in args:
        if not isinstance(a, dict) or a.get("kind") != "array":
            continue
        for name in ("shape", "strides"):
            v = a.get(name)
            if name == "strides" and v is None:
                continue
            if not isinstance(v, list) or not all(type(x) is int for x in v):
                raise ValueError(f"an array's {name} is {v!r:.80}, not a list of integers")


def _take_search(d: object, kernels: dict[int, KernelLine], searches: dict[int, RecordedSearch], cwd: str | None,
                 rec: Recording) -> None:
    """Apply one ``search`` / ``search_again`` / ``search_done`` / ``search_failed`` line's record (raises like
    :func:`_take_line` for a line of the wrong shape)."""
    if type(d) is SearchLine and d.id is not None:
        s = search_from(d, kernels.get(d.kernel) if isinstance(d.kernel, int) else None, cwd)
        if s is not None:
            searches[d.id] = s
    elif isinstance(d, SearchAgainLine) and d.id in searches:
        searches[d.id].count += 1
    elif isinstance(d, SearchDoneLine) and d.id in searches:
        _search_done(searches[d.id], d)
    elif isinstance(d, SearchFailedLine):
        text = undescribed_from(d, kernels, cwd)
        if text not in rec.undescribed:
            rec.undescribed.append(text)
