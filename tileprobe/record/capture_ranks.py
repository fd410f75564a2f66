"""One search per key across the ranks of one program on one machine (``tileprobe use``): a miss that N ranks make is
searched by one of them, and every rank answers with that rank's pick.

STANDALONE like :mod:`capture` (standard library only, no import of the tileprobe package): the capture loads it by
path, beside itself, the first time a rank misses (:func:`capture._ranks`).

Under torchrun (or any launcher that sets ``WORLD_SIZE`` > 1 and ``RANK`` / ``LOCAL_RANK``), every rank makes the same
``exhaustive_search`` calls; a table that misses one would have every rank run the program's own search, each picking
its own winner from its own noise (vLLM #48980, FlashInfer's autotuner v2 and Inductor answer this by tuning on one
rank, or sharding the misses, and sharing one atomic entry per key). Here the ranks share a folder,
``TABLE.shared/<run>/``, ``<run>`` naming this run (:func:`run_id`): per search key

* ``<key>.lock``: whoever holds its exclusive ``flock`` searches (the first rank to take it; a rank that dies lets go
  of it with its last descriptor, so another takes over — no pid files, no stale claims);
* ``<key>.json``: the pick, one small JSON object written to a temporary file and renamed into place (atomic: a rank
  reads the whole entry or none), read by every rank that waited on the lock.

Different keys take different locks, so the ranks' distinct misses are searched side by side (sharded by whoever
comes first). Nothing here raises into the program: any failure of ours runs the program's own search.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, NamedTuple

#: Environment variable ``tileprobe use`` sets for every process of one run (its own id), so that ranks of one run
#: share answers and another run of the same table starts afresh.
ENV_RUN = "TILEPROBE_USE_RUN"
#: Seconds between two tries of a held lock while a rank waits for the one searching.
POLL_S = 0.05
#: The most bytes of a rank's pick this reads (one written by :meth:`Shared._publish` is about 200).
ENTRY_LIMIT_BYTES = 1 << 16


def _read_regular(path: str, limit_bytes: int) -> bytes:
    """The bytes of the regular file ``path``: opened ``O_NONBLOCK`` (a FIFO does not block), refused unless
    regular (a link to ``/dev/zero`` is not read), refused above ``limit_bytes``.

    Raises:
        OSError: it cannot be opened or is not a regular file; FileNotFoundError when there is none.
        ValueError: it holds more than ``limit_bytes``.
    """
    import stat
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
                 | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file (a FIFO, device or directory)")
        if st.st_size > limit_bytes:
            raise ValueError(f"{st.st_size:,} bytes, more than the {limit_bytes:,} a pick may hold")
        chunks, n = [], 0
        while n <= limit_bytes:
            b = os.read(fd, limit_bytes + 1 - n)
            if not b:
                break
            chunks.append(b)
            n += len(b)
        if n > limit_bytes:
            raise ValueError(f"more than the {limit_bytes:,} bytes a pick may hold")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _number(v, allow_none: bool = True) -> bool:
    import math
    if v is None:
        return allow_none
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v >= 0


class Pick(NamedTuple):
    """A rank's pick as :meth:`Shared._publish` writes it: the search ``key``, the position of the picked
    configuration among the program's (``config_index``), its mean and error margin (µs) and samples by
    cuda.tile.tune, and who wrote it (``rank``, ``pid``, ``time``). Fields as read; :func:`entry_problem` checks
    them. A named tuple, not a dataclass: this module is loaded by path without a ``sys.modules`` entry, which
    ``dataclasses`` needs."""
    key: Any = None
    config_index: Any = None
    mean_us: Any = None
    error_margin_us: Any = None
    num_samples: Any = None
    rank: Any = None
    pid: Any = None
    time: Any = None


def pick_of(doc: dict) -> Pick:
    """The :class:`Pick` of an entry's JSON object (missing fields None, other keys ignored)."""
    return Pick(**{name: doc[name] for name in Pick._fields if name in doc})


def entry_problem(doc, key: str) -> str | None:
    """Why ``doc`` is not a pick of search ``key`` as :meth:`Shared._publish` writes it (None: it is one)."""
    if not isinstance(doc, dict):
        return f"a JSON {type(doc).__name__}, not an object"
    pick = pick_of(doc)
    if pick.key != key:
        return "the pick of another search"
    i = pick.config_index
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        return "config_index is not a configuration's position"
    for name, value in (("mean_us", pick.mean_us), ("error_margin_us", pick.error_margin_us)):
        if not _number(value):
            return f"{name} is not a non-negative number of µs"
    n = pick.num_samples
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        return "num_samples is not a count"
    return None


def world_size(env=None) -> int:
    """``WORLD_SIZE`` as an int (1 when unset or not a number): the ranks of the program."""
    try:
        return int((env if env is not None else os.environ).get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def run_id(env=None) -> str | None:
    """The id ranks of one run share: ``$TILEPROBE_USE_RUN`` (set by ``tileprobe use``), else torchrun's
    ``TORCHELASTIC_RUN_ID`` with the launcher's pid (the ranks' parent: torchrun's agent), else None (not ranks of a
    run we can tell apart from another's: no sharing)."""
    env = env if env is not None else os.environ
    if env.get(ENV_RUN):
        return "".join(c for c in env[ENV_RUN] if c.isalnum() or c in "-_")[:64] or None
    if env.get("TORCHELASTIC_RUN_ID"):
        rid = "".join(c for c in env["TORCHELASTIC_RUN_ID"] if c.isalnum() or c in "-_")[:48]
        return f"torchrun-{rid}-{os.getppid()}"
    return None


def shared_folder(table: str, env=None) -> str | None:
    """``TABLE.shared/<run>`` for a rank of a run of more than one rank, else None."""
    rid = run_id(env)
    if world_size(env) <= 1 or rid is None:
        return None
    return os.path.abspath(table) + ".shared" + os.sep + rid


class Shared:
    """The shared folder of one run (module doc); :meth:`search_once` is the only entry point."""

    def __init__(self, folder: str):
        self.folder = folder
        self.searched = 0          # searches this process ran for the ranks
        self.answered = 0          # searches this process answered from another rank's entry
        self.said: set = set()     # entries said unusable (once each)

    def _path(self, key: str, ext: str) -> str:
        safe = "".join(c for c in key if c.isalnum())[:64] or "key"
        return os.path.join(self.folder, safe + ext)

    def read_entry(self, key: str):
        """The entry of ``key`` (a dict whose fields have the types :meth:`_publish` writes) or None when there is
        none; one that cannot be read (not a regular file, larger than :data:`ENTRY_LIMIT_BYTES`, not JSON, nested
        too deep, a field of another type) is said once on stderr and is None too: this rank searches."""
        path = self._path(key, ".json")
        try:
            raw = _read_regular(path, ENTRY_LIMIT_BYTES)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            return self._unusable(path, str(e))
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as e:       # not UTF-8 / not JSON / too deep / a 5,000-digit integer
            return self._unusable(path, f"not a JSON pick ({type(e).__name__})")
        problem = entry_problem(doc, key)
        if problem:
            return self._unusable(path, problem)
        return doc

    def _unusable(self, path: str, why: str):
        if path not in self.said:
            self.said.add(path)
            sys.stderr.write(f"tileprobe use: the pick another rank left in {path[-200:]!r} is unusable ({why[:200]}); "
                             "this rank runs the program's own search\n")
        return None

    def write_entry(self, key: str, doc: dict) -> None:
        """Write ``doc`` as the entry of ``key``: a temporary file renamed into place."""
        path = self._path(key, ".json")
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, path)

    def search_once(self, key: str, index_of, run_search, answer_with):
        """The result of the search ``key`` for this rank: another rank's pick when it has one (waiting while a rank
        searches), else this rank's own search (``run_search()``), whose pick it writes for the others.

        ``index_of(result) -> int | None``: the position of a result's best configuration among the program's;
        ``answer_with(entry) -> result | None``: the program's own result object for an entry (None: it does not
        fit this search, which then runs). Exceptions of ``run_search`` propagate (the lock is let go, so a waiting
        rank searches in turn)."""
        import fcntl
        try:
            os.makedirs(self.folder, exist_ok=True)
            fd = os.open(self._path(key, ".lock"), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            sys.stderr.write(f"tileprobe use: cannot share searches between ranks in {self.folder} ({e}); this rank "
                             "runs its own\n")
            return run_search()
        try:
            _lock(fd, fcntl)
            entry = self.read_entry(key)
            if entry is not None:
                result = answer_with(entry)
                if result is not None:
                    self.answered += 1
                    return result
            result = run_search()
            self.searched += 1
            self._publish(key, result, index_of)
            return result
        finally:
            os.close(fd)        # lets go of the lock: the ranks waiting read the entry

    def _publish(self, key: str, result, index_of) -> None:
        best = getattr(result, "best", None)
        i = index_of(result) if best is not None else None
        if i is None:
            return                  # no pick (every configuration failed): the others search for themselves
        try:
            self.write_entry(key, {"key": key, "config_index": i, "mean_us": getattr(best, "mean_us", None),
                                   "num_samples": getattr(best, "num_samples", None),
                                   "error_margin_us": getattr(best, "error_margin_us", None),
                                   "rank": os.environ.get("RANK"), "pid": os.getpid(), "time": time.time()})
        except OSError as e:
            sys.stderr.write(f"tileprobe use: cannot write the pick of search {key} for the other ranks ({e}); they "
                             "run their own\n")


_SHARED: dict = {}


def for_table(table: str):
    """The :class:`Shared` folder of this rank's run for ``table`` (one per process and table), or None when this
    process is not one of several ranks of a run (:func:`shared_folder`)."""
    folder = shared_folder(table)
    if folder is None:
        return None
    if folder not in _SHARED:
        _SHARED[folder] = Shared(folder)
    return _SHARED[folder]


def search_once(table: str, search, run_search, tuning_result):
    """``run_search()`` for a search that missed ``table``, searched once across the ranks of this run (module doc);
    just ``run_search()`` in a process that is not a rank. ``search``: the capture's ``Search`` (``key``,
    ``configs``, ``index_of``); ``tuning_result(config, median_us=, samples=, ci_us=)``: the capture's result
    maker."""
    shared = for_table(table)
    if shared is None:
        return run_search()

    def answer_with(entry: dict):
        pick = pick_of(entry)
        i = pick.config_index
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(search.configs):
            return None
        margin = pick.error_margin_us or 0.0
        return tuning_result(search.configs[i], median_us=pick.mean_us, samples=pick.num_samples,
                             ci_us=[-margin, margin])

    return shared.search_once(search.key, lambda r: search.index_of(r.best.config), run_search, answer_with)


def _lock(fd: int, fcntl) -> None:
    """Take the exclusive lock on ``fd``, waiting while another rank holds it (polled, so a signal handler of the
    program runs as usual while it waits)."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(POLL_S)
