"""The per-process launch log: one JSON-lines file written with ``os.write`` (a new launch at once, repeats
as counts). Standard library only (see :mod:`tileprobe.record.capture`).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time

from .describe import _DESCRIBERS, _plain, _site, _Sites, _where, describe, describe_kernel, to_json
from .facts import _cutile_version, compiler_timeout_s
from .names import DEFAULT_MAX_DISTINCT, ENV_MAX_DISTINCT, FLUSH_INTERVAL_S, SCHEMA


class Recorder:
    """Per-process launch log under ``out_dir`` (one ``launches-<pid>-<ns>.jsonl`` file, opened at the first launch).

    Never raises into the program: the first failure is reported once on stderr (and in the log when it can be
    written) and recording stops for this process.
    """

    def __init__(self, out_dir: str, max_distinct: int | None = None):
        self.out_dir = out_dir
        env_max = os.environ.get(ENV_MAX_DISTINCT, "")
        self.max_distinct = max_distinct or (int(env_max) if env_max.isdigit() else DEFAULT_MAX_DISTINCT)
        self.lock = threading.Lock()
        self.sites = _Sites()
        self._reset()

    def _reset(self):
        self.pid = os.getpid()
        self.fd = None
        self.path = None
        self.failed = False
        self.kernels: dict = {}       # id(kernel object) -> (object, kernel id); the object pins the id
        self.kernel_ids: dict = {}    # JSON of the kernel description -> kernel id
        self.func_of: list = []       # kernel id -> function key (module, qualname, file)
        self.launches: dict = {}      # launch key -> _Launch
        self.distinct: dict = {}      # function key -> distinct launches described
        self.overflow: dict = {}      # function key -> _Launch counting the launches not described
        self.dirty: set = set()
        self.last_flush = time.monotonic()
        self.calls = 0
        self.arch_written = False
        self.searches: dict = {}      # search key -> search id
        self.undescribed: set = set()  # (call site, reason) of searches seen but not described

    def after_fork(self):
        """In a forked child: start a new log (the parent's counts and file are the parent's)."""
        self.lock = threading.Lock()
        self._reset()

    # writing
    def _write(self, obj: dict) -> None:
        if self.fd is None:
            os.makedirs(self.out_dir, exist_ok=True)
            self.path = os.path.join(self.out_dir, f"launches-{self.pid}-{time.time_ns()}.jsonl")
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._write({"t": "process", "v": SCHEMA, "pid": self.pid, "ppid": os.getppid(), "argv": list(sys.argv),
                         "cwd": os.getcwd(), "python": sys.version.split()[0], "executable": sys.executable,
                         "time": time.time(), "cuda_tile": _cutile_version()})
        os.write(self.fd, (json.dumps(obj, default=repr) + "\n").encode())

    def flush(self) -> None:
        """Write the counts changed since the last flush."""
        if self.dirty and self.fd is not None and not self.failed:
            counts = {str(e.lid): e.n for e in self.dirty}
            self.dirty = set()
            self._write({"t": "counts", "n": counts})
        self.last_flush = time.monotonic()

    def close(self) -> None:
        """Flush the counts (atexit)."""
        if os.getpid() != self.pid or self.failed:
            return
        try:
            self.flush()
        except Exception as e:  # the program is exiting: report, never raise
            self.fail(e)

    def fail(self, exc: BaseException) -> None:
        """Stop recording in this process and say so once."""
        if self.failed:
            return
        self.failed = True
        msg = f"{type(exc).__name__}: {exc}"
        sys.stderr.write(f"tileprobe record: recording stopped in process {os.getpid()} "
                         f"({_plain(' '.join(sys.argv)[:200])}): {_plain(msg)}; the program goes on unrecorded\n")
        try:
            if self.fd is not None:
                os.write(self.fd, (json.dumps({"t": "error", "error": msg}) + "\n").encode())
        except Exception:
            pass

    # capturing
    def _kernel_id(self, kernel) -> int:
        ent = self.kernels.get(id(kernel))
        if ent is not None and ent[0] is kernel:
            return ent[1]
        desc = describe_kernel(kernel)
        text = json.dumps(desc, sort_keys=True, default=repr)
        kid = self.kernel_ids.get(text)
        if kid is None:
            kid = self.kernel_ids[text] = len(self.func_of)
            self.func_of.append((desc.get("module"), desc.get("qualname"), desc.get("file")))
            self._write({"t": "kernel", "id": kid, **desc})
        if len(self.kernels) > 4096:      # a program making a kernel object per launch: drop the pins
            self.kernels.clear()
        self.kernels[id(kernel)] = (kernel, kid)
        return kid

    def capture(self, grid, kernel, kernel_args, kwargs, frame):
        """Count one launch; describe it (one line) the first time it is seen. Returns the new entry on its first
        sighting (the caller times that call: it includes cuTile's JIT compile), else None."""
        kid = self._kernel_id(kernel)
        get = _DESCRIBERS.get
        args = tuple([(get(type(a)) or describe)(a) for a in kernel_args])
        call, launch = self.sites.frames(frame)
        grid_key = grid if type(grid) is tuple else tuple(grid) if isinstance(grid, list) else (grid,)
        key = (kid, grid_key, args, _where(call), _where(launch), tuple(sorted(kwargs.items())) if kwargs else ())
        entry = self.launches.get(key)
        new = None
        if entry is None:
            entry = new = self._new_launch(key, _site(call), _site(launch))
        entry.n += 1
        n = entry.n
        self.dirty.add(entry)
        self.calls += 1
        if n & (n - 1) == 0 or (self.calls & 1023 == 0 and time.monotonic() - self.last_flush >= FLUSH_INTERVAL_S):
            self.flush()
        return new if new is not None and new.lid >= 0 else None

    def first_call(self, entry, wall_s: float, exc: BaseException | None) -> None:
        """A distinct launch's first call — its wall time (cuTile compiles there unless its cache has the
        cubin), the compiler timeout in force (``ct.compiler_timeout`` / ``CUDA_TILE_COMPILER_TIMEOUT_SEC``) and the
        exception it raised, if any (a ``TileCompilerTimeoutError`` is the compile timing out)."""
        line = {"t": "first_call", "id": entry.lid, "wall_s": round(wall_s, 6),
                "compiler_timeout_s": compiler_timeout_s()}
        if exc is not None:
            line["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
        self._write(line)
    def _new_launch(self, key, call, launch_site):
        kid, grid, args, _, _, kw = key
        func = self.func_of[kid]
        with self.lock:
            if self.distinct.get(func, 0) >= self.max_distinct:
                # Counted under the kernel's overflow entry (one per function), not described.
                entry = self.overflow.get(func)
                if entry is None:
                    entry = self.overflow[func] = _Launch(-1 - len(self.overflow))
                    self._write({"t": "overflow", "id": entry.lid, "kernel": kid})
                return entry
            self.distinct[func] = self.distinct.get(func, 0) + 1
            entry = self.launches[key] = _Launch(len(self.launches))
            lid = entry.lid
        self._write({"t": "launch", "id": lid, "kernel": kid, "grid": list(grid),
                     "args": [to_json(a) for a in args], "site": call, "launch_site": launch_site,
                     "kwargs": dict(kw)})
        if not self.arch_written:
            self._write_arch()
        return entry

    def _write_arch(self) -> None:
        """The device's compute capability, once cuTile has loaded the driver (never loads it ourselves)."""
        if "cuda.tile._load_libcuda" not in sys.modules:
            return
        self.arch_written = True
        try:
            from cuda.tile._cext import get_compute_capability
            major, minor = get_compute_capability()
            self._write({"t": "arch", "arch": f"sm_{major}{minor}"})
        except Exception:
            pass


class _Launch:
    """One distinct launch of this process: its id in the log and how often it happened (hashed by identity)."""
    __slots__ = ("lid", "n")

    def __init__(self, lid: int):
        self.lid, self.n = lid, 0
