"""Read the per-process launch logs a recorded program wrote (``DIR/launches/*.jsonl``, see :mod:`.capture`)."""
from __future__ import annotations

import glob
import json
import os
from collections import Counter
from dataclasses import dataclass, field

from ..errors import TileprobeError
from .model import KernelRef, Launch, merge


@dataclass
class Recording:
    """Everything the logs say: distinct launches (merged over processes), the processes that launched, the
    recording failures they reported, launches counted but not described (over the per-kernel cap), and lines that
    could not be read (e.g. the last line of a process killed mid-write)."""
    launches: list[Launch] = field(default_factory=list)
    processes: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    overflow: Counter = field(default_factory=Counter)
    unreadable: list[str] = field(default_factory=list)
    archs: set = field(default_factory=set)

    @property
    def total_launches(self) -> int:
        """Every launch the logs count, those beyond the per-process cap (``overflow``) included."""
        return sum(la.count or 0 for la in self.launches) + sum(self.overflow.values())


def kernel_ref(d: dict) -> KernelRef:
    """A :class:`KernelRef` from a ``kernel`` log line."""
    declared = d.get("declared")
    return KernelRef(name=d.get("name") or d.get("qualname") or "kernel", module=d.get("module"),
                     qualname=d.get("qualname"), file=d.get("file"), line=d.get("line"), attr=d.get("attr"),
                     ref_kind=d.get("ref_kind"),
                     declared_json=json.dumps(declared, sort_keys=True) if declared is not None else None)


#: Longest line of a launch log read, in characters (issue 25): a launch line with a few hundred arguments is a few
#: KB; a longer one (a file that is no launch log) ends the reading of that file, named.
MAX_LINE_CHARS = 1 << 20


def read_log(launch_dir: str) -> Recording:
    """Read every ``*.jsonl`` under ``launch_dir`` and merge equal launches across processes.

    Raises:
        TileprobeError: ``launch_dir`` does not exist.
    """
    if not os.path.isdir(launch_dir):
        raise TileprobeError(f"{launch_dir}: no recorded launches here (expected the launches/ folder that "
                             "`tileprobe record -o DIR -- COMMAND` or `pytest --tileprobe-record DIR` writes)")
    import stat
    rec = Recording()
    launches: list[Launch] = []
    for path in sorted(glob.glob(os.path.join(launch_dir, "*.jsonl"))):
        try:   # a FIFO or a link to /dev/zero would never end (issue 25): regular files only
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            regular = False
        if not regular:
            rec.unreadable.append(f"{path} (not a regular file: a FIFO, a device or a broken link; skipped)")
            continue
        launches.extend(_read_file(path, rec))
    rec.launches = merge(launches)
    return rec


def _read_file(path: str, rec: Recording) -> list[Launch]:
    kernels: dict[int, dict] = {}
    launches: dict[int, Launch] = {}
    overflow: dict[int, int] = {}
    counts: dict[int, int] = {}
    arch, cwd = None, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(iter(lambda: f.readline(MAX_LINE_CHARS + 1), ""), 1):
            if len(line) > MAX_LINE_CHARS:
                rec.unreadable.append(f"{path}:{lineno} (a line of more than {MAX_LINE_CHARS:,} characters; the rest "
                                      "of the file skipped)")
                break
            try:
                d = json.loads(line)
                _take_line(d, kernels, launches, overflow, counts, rec, path, cwd)
            except (ValueError, RecursionError, KeyError, TypeError, AttributeError):   # one bad line, not the log
                rec.unreadable.append(f"{path}:{lineno}")
                continue
            t = d.get("t")
            if t == "process":
                cwd = d.get("cwd")
            elif t == "arch":
                arch = d.get("arch")
    for lid, la in launches.items():
        n = max(counts.get(lid, 0), 1)     # a launch line is written before its first count
        la.count = n
        for c in (la.sites, la.launch_sites):
            for k in c:
                c[k] = n
        if arch:
            la.archs.add(arch)
            rec.archs.add(arch)
    for oid, kid in overflow.items():
        rec.overflow[kernel_ref(kernels.get(kid, {})).name] += counts.get(oid, 0)
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


def _take_line(d: dict, kernels: dict, launches: dict, overflow: dict, counts: dict, rec, path: str,
               cwd) -> None:
    """Apply one decoded log line ``d``; raises KeyError/TypeError/ValueError for a line of the wrong shape
    (the caller counts it unreadable and goes on)."""
    t = d.get("t")
    if t == "process":
        rec.processes.append(d)
    elif t == "kernel":
        kernels[d["id"]] = d
    elif t == "launch":
        kd = kernels.get(d["kernel"], {})
        launches[d["id"]] = Launch(kernel_ref(kd), dict(kd.get("hints") or {}), tuple(d.get("grid") or ()),
                                   d.get("args") or [], 0, kwargs=d.get("kwargs") or {})
        la = launches[d["id"]]
        la.sites[short_site(d.get("site") or d.get("launch_site"), cwd)] += 0
        la.launch_sites[short_site(d.get("launch_site"), cwd)] += 0
    elif t == "overflow":
        overflow[d["id"]] = d["kernel"]
    elif t == "counts":
        for lid, n in (d.get("n") or {}).items():
            counts[int(lid)] = max(counts.get(int(lid), 0), int(n))
    elif t == "error":
        rec.errors.append(f"{os.path.basename(path)}: {d.get('error')}")
