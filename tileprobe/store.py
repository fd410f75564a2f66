"""The results store: every compile, cubin, GPU run and audit in one local SQLite file.

Where: ``--store PATH``, else ``$TILEPROBE_STORE``, else ``platformdirs.user_data_dir("tileprobe")/results.sqlite``.

**The compile key.** A compile is identified by the SHA-256 of these fields, each written as a 4-byte big-endian
length and then its UTF-8 bytes (the length-prefixed scheme of cutile-python's ``cutile_cache/_cache.py::cache_key``),
in this order:

1. :data:`KEY_VERSION` (one byte; bumped when this list changes or when what a record holds changes — a new field, a
   different reading of the cubin — which makes every stored compile a miss)
2. what the compiled code depends on (issue 27): ``"compile:" + Variant.compile_sha256``, the SHA-256 of the file
   that defines the kernel and of the launch signature the probe's ``args`` gave for this variant (constants,
   dtypes, divisibility; :meth:`tileprobe.probe.contained.ProbePlan.compile_sha256`) — so editing a probe without
   changing any compiled variant (a comment, ``tunable=``, a reference) compiles nothing again. When the loader did
   not try ``args`` (a grid over ``--max-variants``), ``Variant.source_sha256``: SHA-256 of the probe file and the
   kernel's file (:func:`tileprobe.audit.source_sha256`), the key of stores written before issue 27 (their records
   stay readable; their compiles are found again under this fallback only)
3. the probe's index in its file, 4. the probe's name (its label in reports)
5. the case, 6. the hints: each as JSON of its ``[name, value]`` pairs sorted by name (``true`` ≠ ``1``)
7. the arch (``sm_90``)
8. the tileiras build string (``tc["build"]``, from ``tileiras --version``)
9. the cuda-tile version (it writes the bytecode tileiras compiles)

Not in the key: the probe file's path (a moved file keeps its results), the tileiras path (two installs of one
build are one compiler), the timeout, ``--jobs``, the host. Helper modules the kernel imports are not hashed:
after editing one, audit with ``--no-store`` or another ``--store``.

**What a lookup reuses.** A stored compile is the answer: ``ok`` and every compile failure (``compile_error``,
``compiler_crash``, ``timeout``, ``unsupported_target``, ``unsupported_feature``) are not compiled again — a failing
variant does not cost a compile on every audit (issue 9). Compiled again: ``probe_error`` (the probe's code, or an
import it makes, may be fixed without the probe file changing) and ``broken_environment`` (the environment is not
in the key), and with ``retry_failed`` (``tileprobe audit --retry-failed``, e.g. after raising ``--timeout``) every
failure.

**Safe to interrupt, safe to share.** The file is in WAL mode with ``synchronous=NORMAL`` and a busy timeout of
:data:`BUSY_TIMEOUT_S`; each save is one ``BEGIN IMMEDIATE`` transaction. A sweep killed at any point (Ctrl-C,
``kill -9``) keeps every variant saved before the kill, and concurrent writers wait for each other. (On power loss
the last transactions may be lost; the file stays consistent.)

**Tables** (store schema :data:`SCHEMA_VERSION`, kept in ``PRAGMA user_version`` and in ``meta``):

=============== ====================================================================================================
meta            key → value: ``schema_version``, ``created``, ``created_by`` (tileprobe version), ``migrated_from``
cubins          ``sha256`` (whole file) → ``data``, ``size_bytes``, ``arch``, ``code_sha256``: each cubin once
compiles        ``key`` → provenance (kernel, probe, probe_index, source_sha256, symbol, signature, case, hints,
                arch, tileiras build and path, cuda_tile, created, host, tileprobe), ``status``, ``cubin_sha256``,
                ``compile_s`` and the :class:`~tileprobe.schema.VariantRecord` as JSON (verdicts left out: they
                depend on the other variants of an audit)
audits          ``id``, ``created``, ``host``, ``command_line``, ``environment`` (JSON), ``wall_s``, ``n_variants``
audit_compiles  (``audit_id``, ``position``) → ``compile_key`` and that audit's ``verdicts`` (JSON)
runs            ``id``, ``compile_key``, ``created``, ``host``, ``gpu_name``, ``driver``, ``clocks`` (JSON),
                ``gpu`` (JSON), ``status``, ``median_us``, ``run`` (JSON, as ``VariantRecord.run``)
tunes           one row per (kernel, problem case) a ``tileprobe tune`` finished: ``id``, ``created``, ``host``,
                ``tileprobe``, ``kernel``, ``probe``, ``source_sha256``, ``problem_json``, ``arch``, ``gpu_name``,
                ``gpu_uuid``, ``driver``, ``tileiras`` (build), ``cuda_tile``, ``timing`` (sustained | burst),
                ``strategy``, ``verdict`` (winner | tie | none), ``pick_json`` (the picked case values and hints),
                ``median_us``, ``ci_lo_us``, ``ci_hi_us`` and ``result`` (JSON: the whole problem result,
                ``tileprobe/tune/result.py``)
tune_candidates (``tune_id``, ``position``) → ``compile_key``, ``config_json``, ``status`` (its fate), ``same_launch_as``,
                ``n_samples``, ``median_us``, ``ci_lo_us``, ``ci_hi_us``, ``clocks_moved``, ``summary`` (JSON row)
=============== ====================================================================================================

Version history: 1 — meta, cubins, compiles, audits, audit_compiles. 2 — runs, indexes for history filters.
3 — tunes, tune_candidates. 4 — claims. 5 — ``compiles.tileiras_sha256`` (issue 25, below).

**Which compiler (issue 25).** The key names the compiler by its build string (what ``--version`` says); each
compile also stores ``tileiras_sha256``, the hash of the compiler's files
(:func:`tileprobe.model.toolkit.compiler_identity`: tileiras, its ptxas and libnvvm). A stored compile is reused only
for a compiler with the same hash: a ``--tileiras`` that prints 13.4.92's version but hangs or crashes stores its
failures against its own files, and a later audit with the real 13.4.92 compiles those variants again (and
replaces the rows). Compiles stored before schema 5 (no hash) are reused when ``ok``; their failures are compiled
again once.

**Claims (issue 15).** Processes that share a store (two audits, an audit and a tune, a Ray driver) never compile
one variant twice at once: before a variant is handed to a compile worker, its key is claimed in a
``BEGIN IMMEDIATE`` transaction (:meth:`Store.claim`); a process that finds a live claim of another waits for that
compile's result in the store instead of compiling. A claim is live while its owner holds it: same host and the pid
alive, and its lease (the compile's deadline) not past. A stale claim (owner dead, lease expired) is taken over.
Saving the compile releases the claim in the same transaction; a process releases what it still holds when it ends.
Older stores are migrated in place when opened (``_migrate_to_N``); a newer one is refused; a file that is not a
tileprobe store, or is damaged, is refused and left untouched (a results store is user data, not a cache).
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import socket
import sqlite3
from typing import Any, Callable, Iterable, Iterator, Sequence

from tileprobe.errors import StoreError
from tileprobe.schema import value_key

SCHEMA_VERSION = 5
KEY_VERSION = b"\x01"
BUSY_TIMEOUT_S = 60.0
#: Statuses a lookup reuses; other stored statuses are compiled again (see module doc).
REUSED_STATUSES = ("ok", "compile_error", "compiler_crash", "timeout")
#: Failure classes (``record["failure"]``) compiled again although their status is reused (see module doc).
RETRIED_FAILURES = ("broken_environment", "probe_error")
STORE_ENV = "TILEPROBE_STORE"

#: The columns that name one variant of one compiler (``prune`` keeps the newest compiles of each).
_VARIANT_COLUMNS = "kernel, probe, case_json, hints_json, arch, tileiras"
_COMPILE_COLUMNS = ("key", "created", "host", "tileprobe", "kernel", "probe", "probe_index", "source_sha256",
                    "symbol", "signature", "case_json", "hints_json", "arch", "tileiras", "tileiras_path",
                    "cuda_tile", "status", "cubin_sha256", "compile_s", "record")


def default_path() -> str:
    """``$TILEPROBE_STORE``, else ``<user data dir>/tileprobe/results.sqlite``."""
    if os.environ.get(STORE_ENV):
        return os.environ[STORE_ENV]
    import platformdirs
    return os.path.join(platformdirs.user_data_dir("tileprobe"), "results.sqlite")


def now() -> str:
    """The current UTC time as the store writes it (ISO 8601, microseconds, ``Z``): ``created`` columns, claims'
    ``since``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _lp(*fields: str | bytes) -> bytes:
    out = b""
    for f in fields:
        b = f if isinstance(f, bytes) else str(f).encode()
        out += len(b).to_bytes(4, "big") + b
    return out


def _pairs_json(pairs: Iterable) -> str:
    return json.dumps(sorted([str(k), v] for k, v in pairs), default=repr, separators=(",", ":"))


def _same_compiler(stored_sha256: str | None, status: str, tc: dict) -> bool:
    """Whether a stored compile (its compiler's ``tileiras_sha256`` and status) is the answer for compiler ``tc``:
    the same files (``tc["identity"]``); a compile stored without a hash (before schema 5, or by a caller that
    gave none) only when ``ok``; any compile when ``tc`` names no identity (a caller that did not resolve it)."""
    want = tc.get("identity")
    if not want:
        return True
    return stored_sha256 == want if stored_sha256 else status == "ok"


def compile_key(variant, build: str, cuda_tile: str) -> str:
    """The store key of compiling ``variant`` with tileiras ``build`` under cuda-tile ``cuda_tile`` (module doc)."""
    h = hashlib.sha256(KEY_VERSION)
    code = getattr(variant, "compile_sha256", "")
    code = f"compile:{code}" if code else variant.source_sha256
    h.update(_lp(code, str(variant.probe_index), variant.probe_name, _pairs_json(variant.case),
                 _pairs_json(variant.hints), variant.arch, build, cuda_tile))
    return h.hexdigest()


def _legacy_keys(keyed: dict, key_of: Callable) -> dict[str, str]:
    """new key -> the key of the same compile in a store written before issue 27 (probe file + kernel file instead
    of kernel file + signature), for variants whose ``args`` take no ``num_sms`` (the old key did not hold it)."""
    import dataclasses
    out = {}
    for key, v in keyed.items():
        if getattr(v, "compile_sha256", "") and getattr(v, "num_sms", None) is None and dataclasses.is_dataclass(v):
            out[key] = key_of(dataclasses.replace(v, compile_sha256=""))
    return {k: old for k, old in out.items() if old != k}


# --- schema migrations: _migrate_to_N takes a store at version N-1 to N, inside one transaction -------------------

def _migrate_to_1(c: sqlite3.Connection) -> None:
    c.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    c.execute("CREATE TABLE cubins (sha256 TEXT PRIMARY KEY, size_bytes INTEGER NOT NULL, arch TEXT, "
              "code_sha256 TEXT, data BLOB NOT NULL, created TEXT NOT NULL)")
    c.execute("CREATE TABLE compiles (key TEXT PRIMARY KEY, created TEXT NOT NULL, host TEXT, tileprobe TEXT, "
              "kernel TEXT NOT NULL, probe TEXT, probe_index INTEGER, source_sha256 TEXT, symbol TEXT, "
              "signature TEXT, case_json TEXT, hints_json TEXT, arch TEXT NOT NULL, tileiras TEXT, "
              "tileiras_path TEXT, cuda_tile TEXT, status TEXT NOT NULL, cubin_sha256 TEXT, compile_s REAL, "
              "record TEXT NOT NULL)")
    c.execute("CREATE TABLE audits (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, host TEXT, "
              "tileprobe TEXT, command_line TEXT, environment TEXT, wall_s REAL, n_variants INTEGER)")
    c.execute("CREATE TABLE audit_compiles (audit_id INTEGER NOT NULL, position INTEGER NOT NULL, "
              "compile_key TEXT, verdicts TEXT, PRIMARY KEY (audit_id, position))")


def _migrate_to_2(c: sqlite3.Connection) -> None:
    c.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, compile_key TEXT NOT NULL, "
              "created TEXT NOT NULL, host TEXT, gpu_name TEXT, driver TEXT, clocks TEXT, gpu TEXT, status TEXT, "
              "median_us REAL, run TEXT NOT NULL)")
    c.execute("CREATE INDEX runs_by_compile ON runs (compile_key, created)")
    c.execute("CREATE INDEX compiles_by_kernel ON compiles (kernel, arch, created)")
    c.execute("CREATE INDEX audit_compiles_by_key ON audit_compiles (compile_key)")


def _migrate_to_3(c: sqlite3.Connection) -> None:
    c.execute("CREATE TABLE tunes (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, host TEXT, "
              "tileprobe TEXT, kernel TEXT NOT NULL, probe TEXT, source_sha256 TEXT, problem_json TEXT NOT NULL, "
              "arch TEXT, gpu_name TEXT, gpu_uuid TEXT, driver TEXT, tileiras TEXT, cuda_tile TEXT, timing TEXT, "
              "strategy TEXT, verdict TEXT, pick_json TEXT, median_us REAL, ci_lo_us REAL, ci_hi_us REAL, "
              "result TEXT NOT NULL)")
    c.execute("CREATE TABLE tune_candidates (tune_id INTEGER NOT NULL, position INTEGER NOT NULL, compile_key TEXT, "
              "config_json TEXT, status TEXT NOT NULL, same_launch_as TEXT, n_samples INTEGER, median_us REAL, "
              "ci_lo_us REAL, ci_hi_us REAL, clocks_moved INTEGER, summary TEXT NOT NULL, "
              "PRIMARY KEY (tune_id, position))")
    c.execute("CREATE INDEX tunes_by_problem ON tunes (kernel, problem_json, gpu_name, created)")


def _migrate_to_4(c: sqlite3.Connection) -> None:
    c.execute("CREATE TABLE claims (key TEXT PRIMARY KEY, owner_host TEXT NOT NULL, owner_pid INTEGER NOT NULL, "
              "claimed REAL NOT NULL, lease_until REAL NOT NULL)")


def _migrate_to_5(c: sqlite3.Connection) -> None:
    c.execute("ALTER TABLE compiles ADD COLUMN tileiras_sha256 TEXT")   # NULL for compiles stored before it


_MIGRATIONS = {1: _migrate_to_1, 2: _migrate_to_2, 3: _migrate_to_3, 4: _migrate_to_4, 5: _migrate_to_5}


#: What this process has written to results stores so far (every Store): ``compiles`` and ``runs``, counted
#: after each commit; the CLI says it when Ctrl-C or SIGTERM stops a command (:func:`saved_by_this_process`).
_SAVED = {"compiles": 0, "runs": 0}
#: Results stores this process opened (none with ``--no-store``).
_OPENED: set[str] = set()


def saved_by_this_process() -> dict[str, int]:
    """``{"compiles": n, "runs": m}``: the compiles and GPU runs this process committed to any results store."""
    return dict(_SAVED)


def begin_command() -> None:
    """Start the counts of :func:`saved_by_this_process` and :func:`store_opened_by_this_process` again: each
    ``tileprobe.cli.main()`` call is one command, and what it says was kept is what that command kept (a process
    that runs several, a test suite or a notebook, would otherwise report the earlier ones' compiles)."""
    _SAVED.update(compiles=0, runs=0)
    _OPENED.clear()


def store_opened_by_this_process() -> bool:
    """Whether this process opened a results store at all (not with ``--no-store``)."""
    return bool(_OPENED)



def _pool_verdict(raw: dict) -> str | None:
    """The register-pool verdict of a stored record (derived from its SASS when stored before the check)."""
    from tileprobe.schema import derive_register_pool
    pool = raw.get("register_pool") if "register_pool" in raw else derive_register_pool(raw.get("sass"))
    return (pool or {}).get("verdict")


def _stale_pool(raw: dict) -> bool:
    """Whether a stored record's register-pool check (issue 23) is missing or from an older model while its SASS
    has setmaxnreg: then the store checks the stored cubin again."""
    from tileprobe.model.regpool import MODEL_VERSION
    if not (raw.get("sass") or {}).get("setmaxnreg"):
        return False
    return (raw.get("register_pool") or {}).get("model_version") != MODEL_VERSION

class Store:
    """A tileprobe results store (see module doc). Open with :meth:`Store.open`; usable as a context manager."""

    def __init__(self, path: str, conn: sqlite3.Connection):
        self.path = path
        self._conn = conn
        self._keys: dict[int, tuple[Any, str]] = {}   # id(record) -> (record, compile key)
        self._cuda_tile: str | None = None
        self.host = socket.gethostname()

    # --- opening -------------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, *, must_exist: bool = False) -> "Store":
        """Open (creating or migrating) the store at ``path`` (``None``: :func:`default_path`). ``must_exist``: for
        commands that only read (history, report, compare), a missing file is an error rather than a new store.

        Raises:
            StoreError: the file was written by a newer tileprobe, is damaged or not a tileprobe store (it is left
                untouched), cannot be created, or stays locked by another process for :data:`BUSY_TIMEOUT_S`.
        """
        path = os.path.abspath(os.fspath(path) if path else default_path())
        if must_exist and not os.path.exists(path):
            raise StoreError(f"no results store at {path}; check --store (audits create one there)")
        if os.path.isdir(path):
            raise StoreError(f"store {path} is a directory; give a file path such as {path}/results.sqlite")
        if os.path.exists(path) and (not os.path.isfile(path) or (must_exist and os.path.getsize(path) == 0)):
            # a FIFO or a device is never a store; an empty file is not one for a command that only reads (opening it
            # would turn it into one: hostile test); a command that writes (audit) makes a store of an empty file
            what = "is empty (0 bytes)" if os.path.isfile(path) else "is not a regular file"
            raise StoreError(f"{path} {what}: not a tileprobe results store, and it is left as it is; give the path "
                             "of a store (--store), or of a file that does not exist yet to create one")
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open the results store {path}: {e}. Check the folder's permissions, or pass "
                             "--store PATH (or set TILEPROBE_STORE) to put it elsewhere.") from e
        store = cls(path, conn)
        try:
            with store._errors():
                store._prepare()
        except BaseException:
            conn.close()
            raise
        _OPENED.add(path)
        return store

    def _prepare(self) -> None:
        c = self._conn
        c.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        version = c.execute("PRAGMA user_version").fetchone()[0]   # reads the header: a non-SQLite file fails here
        self._refuse_newer(version)
        if version < SCHEMA_VERSION:
            self._migrate()       # before WAL: a file that is not ours is refused before anything changes it
        c.execute("PRAGMA journal_mode = WAL")
        c.execute("PRAGMA synchronous = NORMAL")

    def _refuse_newer(self, version: int) -> None:
        if version < 0:
            raise StoreError(f"the results store {self.path} has store schema {version} (PRAGMA user_version), which "
                             "no tileprobe writes: the file is damaged or not a tileprobe store. It was left "
                             "untouched; pass --store PATH to use another file.")
        if version > SCHEMA_VERSION:
            from tileprobe._version import __version__
            raise StoreError(f"the results store {self.path} has store schema {version}, written by a newer "
                             f"tileprobe; tileprobe {__version__} reads up to schema {SCHEMA_VERSION}. Upgrade "
                             "tileprobe (pip install -U tileprobe), or pass --store PATH to use another store.")

    def _check_ours(self, version: int) -> None:
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        tables.discard("sqlite_sequence")
        if (version == 0 and tables) or (version > 0 and "meta" not in tables):
            raise StoreError(f"{self.path} is an SQLite database but not a tileprobe results store (tables: "
                             f"{', '.join(sorted(tables)) or 'none'}; user_version {version}). It was left untouched; "
                             "pass --store PATH (or set TILEPROBE_STORE) to use another file.")

    def _migrate(self) -> None:
        from tileprobe._version import __version__
        with self._transaction() as c:
            version = c.execute("PRAGMA user_version").fetchone()[0]   # again: another process may have migrated
            self._refuse_newer(version)
            if version < SCHEMA_VERSION:
                self._check_ours(version)
            for n in range(version + 1, SCHEMA_VERSION + 1):
                _MIGRATIONS[n](c)
                c.execute(f"PRAGMA user_version = {n}")
            meta = {"schema_version": str(SCHEMA_VERSION)}
            if version == 0:
                meta.update(created=now(), created_by=f"tileprobe {__version__}")
            elif version < SCHEMA_VERSION:
                meta.update(migrated_from=str(version), migrated=now(), migrated_by=f"tileprobe {__version__}")
            c.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", meta.items())

    # --- plumbing ------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn sqlite3 errors into StoreErrors that say what to do."""
        try:
            yield
        except sqlite3.OperationalError as e:
            text = str(e).lower()
            if "locked" in text or "busy" in text:
                raise StoreError(f"the results store {self.path} stayed locked by another process for "
                                 f"{BUSY_TIMEOUT_S:.0f} s ({e}). Wait for the other tileprobe to finish, or pass "
                                 "--store PATH to use another store.") from e
            if "readonly" in text or "unable to open" in text or "disk" in text and "full" in text:
                raise StoreError(f"cannot write the results store {self.path}: {e}. Check free space and "
                                 "permissions, or pass --store PATH.") from e
            raise self._damaged(e) from e
        except sqlite3.DatabaseError as e:
            raise self._damaged(e) from e

    def _damaged(self, e: Exception) -> StoreError:
        return StoreError(f"the results store {self.path} is damaged or is not a tileprobe store (sqlite: {e}). "
                          "tileprobe does not delete results: move the file aside (e.g. mv it to *.bad) or pass "
                          f"--store PATH to start another store; `sqlite3 {self.path} .recover` may salvage its rows.")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back on any exception (KeyboardInterrupt included)."""
        c = self._conn
        with self._errors():
            c.execute("BEGIN IMMEDIATE")
            try:
                yield c
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    c.execute("ROLLBACK")
                raise
            c.execute("COMMIT")

    def _query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        with self._errors():
            return self._conn.execute(sql, params).fetchall()

    def close(self) -> None:
        """Close the connection (saved data is already committed)."""
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def schema_version(self) -> int:
        """The store schema version of the open file (``PRAGMA user_version``; :data:`SCHEMA_VERSION` once open)."""
        return self._query("PRAGMA user_version")[0][0]

    def meta(self) -> dict[str, str]:
        """The ``meta`` table as a dict."""
        return dict(self._query("SELECT key, value FROM meta"))

    def cuda_tile(self) -> str:
        """This process's cuda-tile version (part of every compile key), read once.

        Raises:
            TileprobeError: cuda-tile is not installed.
        """
        if self._cuda_tile is None:
            from tileprobe.schema import cutile_version
            self._cuda_tile = cutile_version()
        return self._cuda_tile

    def compile_key(self, variant, build: str) -> str:
        """:func:`compile_key` with this process's cuda-tile version."""
        return compile_key(variant, build, self.cuda_tile())

    def key_of(self, record) -> str | None:
        """The compile key of a record this store returned or saved, else the newest compile that matches it."""
        hit = self._keys.get(id(record))
        if hit is not None and hit[0] is record:
            return hit[1]
        rows = self._query(
            "SELECT key FROM compiles WHERE kernel = ? AND probe = ? AND arch = ? AND tileiras = ? AND case_json = ? "
            "AND hints_json = ? ORDER BY created DESC LIMIT 1",
            (record.kernel, record.probe, record.arch, record.tileiras, _pairs_json(record.case.items()),
             _pairs_json(record.hints.items())))
        return rows[0][0] if rows else None

    def _remember(self, record, key: str) -> None:
        self._keys[id(record)] = (record, key)

    # --- the audit's calls ---------------------------------------------------------------------------------------

    def lookup(self, variants: Sequence, tc: dict, *, with_sass: bool = False,
               retry_failed: bool = False, any_status: bool = False) -> tuple[list, list]:
        """Split ``variants`` into records already stored for compiler ``tc`` and the variants still to compile.
        ``any_status``: every stored record is the answer (a compile another process just made, issue 15).

        ``tc["build"]`` is the tileiras build string, ``tc["identity"]`` the hash of its files: a stored compile of
        other files is not reused (module doc, "Which compiler"). Reused records get the variant's current probe path and
        name, and no verdicts (the audit judges them with the rest). ``with_sass``: a reused record stored without
        SASS traits gets them from its stored cubin (nvdisasm here, no compile), and the store keeps them.
        Stored failures are reused too (module doc) unless ``retry_failed``.
        """
        from tileprobe.schema import VariantRecord
        keyed = {self.compile_key(v, tc["build"]): v for v in variants}
        legacy = _legacy_keys(keyed, lambda v: self.compile_key(v, tc["build"]))
        stored: dict[str, tuple[str, str]] = {}
        keys = list(keyed) + list(legacy.values())
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            sql = (f"SELECT key, status, record, tileiras_sha256 FROM compiles "
                   f"WHERE key IN ({','.join('?' * len(chunk))})")
            stored.update((k, (s, r, h)) for k, s, r, h in self._query(sql, chunk))
        found, todo = [], []
        for key, v in keyed.items():
            hit = stored.get(key)
            if hit is None and legacy.get(key) in stored:   # a store written before issue 27's key
                key = legacy[key]
                hit = stored[key]
            if hit is None or not _same_compiler(hit[2], hit[0], tc) or (
                    not any_status and (hit[0] not in REUSED_STATUSES or (retry_failed and hit[0] != "ok"))):
                todo.append(v)
                continue
            raw = json.loads(hit[1])
            rec = VariantRecord.from_dict(raw)
            if rec.failure in RETRIED_FAILURES and not any_status:
                todo.append(v)
                continue
            rec.probe, rec.kernel, rec.verdicts = v.probe_path, v.probe_name, {}
            if with_sass and rec.ok and (rec.sass is None or _stale_pool(raw)):
                self._add_sass(key, rec)
            self._remember(rec, key)
            found.append(rec)
        return found, todo

    def _add_sass(self, key: str, rec) -> None:
        from tileprobe.model.sass import sass_summary, split_register_pool   # the workers' SASS summary: stored = fresh
        cubin = self.cubin(rec.cubin_sha256) if rec.cubin_sha256 else None
        if cubin is None:
            return
        rec.sass, rec.register_pool = split_register_pool(sass_summary(cubin, rec.symbol))
        record = rec.to_dict()
        record.update(verdicts={}, run=None)
        with self._transaction() as c:
            c.execute("UPDATE compiles SET record = ? WHERE key = ?", (json.dumps(record, default=str), key))

    def save_compile(self, res, rec, tc: dict) -> str:
        """Store one finished compile (its record, provenance and cubin) in its own transaction; return its key."""
        from tileprobe._version import __version__
        v = res.variant
        key = self.compile_key(v, tc["build"])
        cubin_sha = hashlib.sha256(res.cubin).hexdigest() if res.cubin is not None else None
        record = rec.to_dict()
        record.update(verdicts={}, run=None)
        row = (key, now(), self.host, __version__, v.probe_name, v.probe_path, v.probe_index, v.source_sha256,
               res.symbol, json.dumps(res.signature, default=str), _pairs_json(v.case), _pairs_json(v.hints), v.arch,
               tc["build"], tc.get("tileiras") or res.tileiras_path, self.cuda_tile(), rec.status, cubin_sha,
               res.compile_s, json.dumps(record, default=str))
        with self._transaction() as c:
            if res.cubin is not None:
                c.execute("INSERT OR IGNORE INTO cubins (sha256, size_bytes, arch, code_sha256, data, created) "
                          "VALUES (?, ?, ?, ?, ?, ?)", (cubin_sha, len(res.cubin), v.arch, rec.code_sha256,
                                                        sqlite3.Binary(res.cubin), now()))
            c.execute(f"INSERT OR REPLACE INTO compiles ({', '.join(_COMPILE_COLUMNS)}) "
                      f"VALUES ({', '.join('?' * len(_COMPILE_COLUMNS))})", row)
            c.execute("UPDATE compiles SET tileiras_sha256 = ? WHERE key = ?", (tc.get("identity"), key))
            c.execute("DELETE FROM claims WHERE key = ?", (key,))
        _SAVED["compiles"] += 1
        self._remember(rec, key)
        return key

    # --- claims: one compile of a variant at a time among the processes sharing this store (issue 15) ----------

    def claim(self, key: str, lease_s: float, *, since: str = "", pid: int | None = None) -> str:
        """Claim compile ``key`` for this process for ``lease_s`` seconds, in one ``BEGIN IMMEDIATE`` transaction.

        Returns ``"mine"`` (claimed now, or already ours: compile it), ``"stored"`` (a compile of ``key`` was saved
        at or after ``since``, an ISO time as :func:`now`: another process finished it meanwhile, read it from the
        store) or ``"theirs"`` (a live claim of another process: wait for its result, :meth:`claim_state`). A claim
        whose owner is dead (same host, pid gone) or whose lease is past is taken over (``"mine"``).
        """
        import time
        pid = os.getpid() if pid is None else pid
        t = time.time()
        with self._transaction() as c:
            if c.execute("SELECT 1 FROM compiles WHERE key = ? AND created >= ?", (key, since)).fetchone():
                return "stored"
            held = c.execute("SELECT owner_host, owner_pid, lease_until FROM claims WHERE key = ?", (key,)).fetchone()
            if held is not None and (held[0], held[1]) != (self.host, pid) and self._live(held, t):
                return "theirs"
            c.execute("INSERT OR REPLACE INTO claims (key, owner_host, owner_pid, claimed, lease_until) "
                      "VALUES (?, ?, ?, ?, ?)", (key, self.host, pid, t, t + lease_s))
        return "mine"

    def _live(self, held: tuple, now: float) -> bool:
        host, pid, lease_until = held
        if lease_until < now:
            return False
        if host != self.host:
            return True        # another machine: only its lease says it is gone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def claim_state(self, key: str, since: str = "") -> str:
        """``"stored"`` (a compile of ``key`` saved at or after ``since``), ``"claimed"`` (a live claim of another
        process) or ``"free"`` (neither: the claim was released or went stale without a result)."""
        import time
        if self._query("SELECT 1 FROM compiles WHERE key = ? AND created >= ?", (key, since)):
            return "stored"
        held = self._query("SELECT owner_host, owner_pid, lease_until FROM claims WHERE key = ?", (key,))
        return "claimed" if held and self._live(held[0], time.time()) else "free"

    def release_claims(self, pid: int | None = None) -> int:
        """Drop every claim this process (``pid`` on this host) still holds; return how many."""
        pid = os.getpid() if pid is None else pid
        with self._transaction() as c:
            return c.execute("DELETE FROM claims WHERE owner_host = ? AND owner_pid = ?", (self.host, pid)).rowcount

    def import_records(self, records: Sequence, cubin_of: Callable[[str], bytes | None], cuda_tile: str | None) -> int:
        """Store the compiles of records audited on another machine (a bundle's, issue 17) so their runs can be
        stored and compared here; return how many were new. The key is :func:`compile_key` of the record's own
        fields (kernel, case, hints, arch, build; no probe source hash: the bundle carries none, so
        ``source_sha256`` is ``"bundle"``) under the bundle's ``cuda_tile``; the cubin is stored when
        ``cubin_of(sha)`` has it. Records already stored are left as they are."""
        from types import SimpleNamespace
        from tileprobe._version import __version__
        new = 0
        for rec in records:
            v = SimpleNamespace(source_sha256="bundle", probe_index=0, probe_name=rec.kernel,
                                case=list(rec.case.items()), hints=list(rec.hints.items()), arch=rec.arch)
            key = compile_key(v, rec.tileiras, cuda_tile or "")
            record = rec.to_dict()
            record.update(verdicts={}, run=None)
            cubin = cubin_of(rec.cubin_sha256) if rec.cubin_sha256 else None
            row = (key, now(), self.host, __version__, rec.kernel, rec.probe, 0, "bundle", rec.symbol,
                   json.dumps(rec.signature, default=str), _pairs_json(rec.case.items()),
                   _pairs_json(rec.hints.items()), rec.arch, rec.tileiras, None, cuda_tile, rec.status,
                   rec.cubin_sha256, None, json.dumps(record, default=str))
            with self._transaction() as c:
                if cubin is not None:
                    c.execute("INSERT OR IGNORE INTO cubins (sha256, size_bytes, arch, code_sha256, data, created) "
                              "VALUES (?, ?, ?, ?, ?, ?)", (rec.cubin_sha256, len(cubin), rec.arch, rec.code_sha256,
                                                            sqlite3.Binary(cubin), now()))
                cur = c.execute(f"INSERT OR IGNORE INTO compiles ({', '.join(_COMPILE_COLUMNS)}) "
                                f"VALUES ({', '.join('?' * len(_COMPILE_COLUMNS))})", row)
                new += cur.rowcount
            self._remember(rec, key)
        return new

    def save_audit(self, result, command_line: str) -> int:
        """Store an audit: when, where, the command line, its environment and its records' keys and verdicts."""
        from tileprobe._version import __version__
        rows = [(self.key_of(r), json.dumps(r.verdicts, default=str)) for r in result.records]
        with self._transaction() as c:
            cur = c.execute("INSERT INTO audits (created, host, tileprobe, command_line, environment, wall_s, "
                            "n_variants) VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (now(), self.host, __version__, command_line, json.dumps(result.environment, default=str),
                             result.wall_s, len(result.records)))
            audit_id = cur.lastrowid
            c.executemany("INSERT INTO audit_compiles (audit_id, position, compile_key, verdicts) VALUES (?, ?, ?, ?)",
                          [(audit_id, i, k, verdicts) for i, (k, verdicts) in enumerate(rows)])
        return audit_id

    def save_run(self, record_key, run: dict, gpu: dict) -> int:
        """Store one GPU run of a stored compile; return its id.

        Args:
            record_key: a compile key, or a record this store returned or saved.
            run: the run result as in ``VariantRecord.run`` (``status``, ``median_us``, …).
            gpu: the GPU it ran on: ``name``, ``driver``, ``clocks`` (dict) and anything else worth keeping.

        Raises:
            StoreError: no stored compile has that key.
        """
        key = record_key if isinstance(record_key, str) else self.key_of(record_key)
        if not key or not self._query("SELECT 1 FROM compiles WHERE key = ?", (key,)):
            raise StoreError(f"no stored compile with key {key!r}: save the compile (audit with this store) first")
        with self._transaction() as c:
            cur = c.execute("INSERT INTO runs (compile_key, created, host, gpu_name, driver, clocks, gpu, status, "
                            "median_us, run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (key, now(), self.host, gpu.get("name"), str(gpu.get("driver") or ""),
                             json.dumps(gpu.get("clocks"), default=str), json.dumps(gpu, default=str),
                             run.get("status"), run.get("median_us"), json.dumps(run, default=str)))
        _SAVED["runs"] += 1
        return cur.lastrowid

    def save_tune(self, problem: dict, environment: dict) -> int:
        """Store one problem's tune; return its id.

        Args:
            problem: ``ProblemResult.to_dict()`` (``tileprobe/tune/result.py``); each candidate row may carry its
                ``compile_key``.
            environment: the tune's environment: ``gpu`` (name, uuid, driver …), ``timing``, ``strategy``.
        """
        from tileprobe._version import __version__
        gpu, pick = environment.get("gpu") or {}, problem.get("pick") or {}
        row = (now(), self.host, __version__, problem["kernel"], problem.get("probe"), problem.get("source_sha256"),
               value_key(problem["problem"]), problem.get("arch"), gpu.get("name"), gpu.get("uuid"),
               str(gpu.get("driver") or ""), problem.get("tileiras"), problem.get("cuda_tile"),
               environment.get("timing"), environment.get("strategy"), problem.get("verdict"),
               json.dumps(pick.get("config")) if pick else None, pick.get("median_us"), pick.get("ci_lo_us"),
               pick.get("ci_hi_us"), json.dumps(problem, default=str))
        with self._transaction() as c:
            cur = c.execute("INSERT INTO tunes (created, host, tileprobe, kernel, probe, source_sha256, problem_json, "
                            "arch, gpu_name, gpu_uuid, driver, tileiras, cuda_tile, timing, strategy, verdict, "
                            "pick_json, median_us, ci_lo_us, ci_hi_us, result) "
                            f"VALUES ({', '.join('?' * len(row))})", row)
            tune_id = cur.lastrowid
            c.executemany("INSERT INTO tune_candidates (tune_id, position, compile_key, config_json, status, "
                          "same_launch_as, n_samples, median_us, ci_lo_us, ci_hi_us, clocks_moved, summary) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          [(tune_id, i, r.get("compile_key"), json.dumps(r.get("config")), r.get("status") or "",
                            r.get("same_launch_as"), r.get("n"), r.get("median_us"), r.get("ci_lo_us"),
                            r.get("ci_hi_us"), None if r.get("clocks_moved") is None else int(r["clocks_moved"]),
                            json.dumps(r, default=str)) for i, r in enumerate(problem.get("candidates") or [])])
        return tune_id

    def tunes(self, *, kernel: str | None = None, problem: dict | None = None, gpu_name: str | None = None,
              limit: int | None = None) -> list[dict]:
        """Stored tunes, newest first: each the stored problem result plus ``id``, ``created``, ``host``,
        ``gpu_name``, ``driver``, ``timing`` and ``strategy``."""
        conds, params = [], []
        for col, value in (("kernel", kernel), ("problem_json", None if problem is None else value_key(problem)),
                           ("gpu_name", gpu_name)):
            if value is not None:
                conds.append(f"{col} = ?")
                params.append(value)
        sql = (f"SELECT id, created, host, gpu_name, driver, timing, strategy, result FROM tunes WHERE "
               f"{' AND '.join(conds) or '1'} ORDER BY id DESC" + (f" LIMIT {int(limit)}" if limit else ""))
        return [{**json.loads(res), "id": i, "created": cr, "host": h, "gpu_name": g, "driver": d, "timing": t,
                 "strategy": st} for i, cr, h, g, d, t, st, res in self._query(sql, params)]

    def previous_tune(self, kernel: str, problem: dict, gpu_name: str | None, timing: str | None,
                      other_than_tileiras: str) -> dict | None:
        """The newest stored tune of ``kernel`` at ``problem`` on that GPU and timing mode, made with a tileiras
        build other than ``other_than_tileiras`` (what ``tune`` compares with after a compiler upgrade)."""
        for t in self.tunes(kernel=kernel, problem=problem, gpu_name=gpu_name):
            if t.get("tileiras") != other_than_tileiras and t.get("timing") == timing and t.get("pick"):
                return t
        return None

    def cubin(self, sha256: str) -> bytes | None:
        """A stored cubin by its SHA-256, or None."""
        rows = self._query("SELECT data FROM cubins WHERE sha256 = ?", (sha256,))
        return bytes(rows[0][0]) if rows else None

    # --- reading back ----------------------------------------------------------------------------------------------

    def _where(self, kernel=None, arch=None, tileiras=None, prefix="c.") -> tuple[str, list]:
        conds, params = [], []
        if kernel:
            conds.append(f"{prefix}kernel = ?")
            params.append(kernel)
        if arch:
            from tileprobe.model.arch import get_arch
            conds.append(f"{prefix}arch = ?")
            params.append(get_arch(arch).name)
        if tileiras:
            conds.append(f"instr({prefix}tileiras, ?) > 0")
            params.append(tileiras)
        return (" AND ".join(conds) or "1"), params

    def records(self, *, kernel: str | None = None, arch: str | None = None, tileiras: str | None = None,
                audit_id: int | None = None, keys: Sequence[str] | None = None, latest: bool = True,
                runs: bool = True, judge: Callable[[list], None] | None = None) -> list:
        """Stored compiles as :class:`~tileprobe.schema.VariantRecord` s, for compare and report.

        Args:
            kernel, arch: exact filters; tileiras: a substring of the build string (``"13.4"``).
            audit_id: only that audit's records, in its order. With ``judge``, their verdicts are judged afresh, like every
                record's (the stored ones may use older rules or words, e.g. before result schema 2); the
                verdicts the audit gave stay in ``audit_compiles`` as history.
            keys: only these compile keys.
            latest: keep the newest compile per (kernel, probe, case, hints, arch, tileiras) — an edited kernel
                shows its last version.
            runs: attach each compile's newest GPU run as ``record.run``.
            judge: called with the returned records to judge their verdicts afresh (stored compiles keep none: a
                verdict depends on the other variants), e.g. :func:`tileprobe.judge.verdict.judge_records`; ``None``
                leaves ``verdicts`` empty (with ``audit_id``: as the audit stored them).

        Raises:
            StoreError: the store is damaged or locked (see :meth:`Store.open`); an unknown ``arch`` raises
                :class:`~tileprobe.errors.TileprobeError`.
        """
        from tileprobe.schema import VariantRecord
        where, params = self._where(kernel, arch, tileiras)
        sql = f"SELECT c.key, c.record, c.created FROM compiles c WHERE {where}"
        if audit_id is not None:
            sql = (f"SELECT c.key, c.record, c.created, a.verdicts FROM audit_compiles a JOIN compiles c "
                   f"ON c.key = a.compile_key WHERE a.audit_id = ? AND {where} ORDER BY a.position")
            params = [audit_id, *params]
        rows = self._query(sql, params)
        if keys is not None:
            wanted = set(keys)
            rows = [r for r in rows if r[0] in wanted]
        out = []
        for row in rows:
            rec = VariantRecord.from_dict(json.loads(row[1]))
            if audit_id is not None:
                rec.verdicts = json.loads(row[3] or "{}")
            out.append((row[0], row[2], rec))
        if audit_id is None and latest:
            newest: dict[tuple, tuple] = {}
            for item in sorted(out, key=lambda x: x[1]):
                r = item[2]
                newest[(r.kernel, r.probe, value_key(r.case), value_key(r.hints), r.arch,
                        r.tileiras)] = item
            out = list(newest.values())
        if runs:
            self._attach_runs(out)
        for key, _, rec in out:
            self._remember(rec, key)
        records = [rec for _, _, rec in out]
        if audit_id is None:
            records.sort(key=_natural_order)
        if judge is not None:
            judge(records)
        return records

    def _attach_runs(self, items: list[tuple]) -> None:
        keys = [k for k, _, _ in items]
        latest: dict[str, dict] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            sql = (f"SELECT compile_key, run, gpu FROM runs WHERE compile_key IN ({','.join('?' * len(chunk))}) "
                   "ORDER BY created")
            for key, run, gpu in self._query(sql, chunk):
                d = json.loads(run)
                d.setdefault("gpu", json.loads(gpu or "{}").get("name"))
                latest[key] = d
        for key, _, rec in items:
            if key in latest:
                rec.run = latest[key]

    def attach_runs(self, records: Sequence) -> None:
        """Set ``record.run`` to the newest stored GPU run of each record's compile (when there is one)."""
        self._attach_runs([(k, None, r) for r in records if (k := self.key_of(r))])

    def audits(self, *, kernel=None, arch=None, tileiras=None, limit: int | None = None) -> list[dict]:
        """Stored audits, newest first; with filters, those holding at least one matching compile."""
        where, params = self._where(kernel, arch, tileiras)
        sql = ("SELECT a.id, a.created, a.host, a.tileprobe, a.command_line, a.n_variants, a.wall_s, a.environment "
               "FROM audits a WHERE ")
        if where != "1":
            sql += (f"EXISTS (SELECT 1 FROM audit_compiles x JOIN compiles c ON c.key = x.compile_key "
                    f"WHERE x.audit_id = a.id AND {where})")
        else:
            sql += "1"
        sql += " ORDER BY a.id DESC" + (f" LIMIT {int(limit)}" if limit else "")
        out = []
        for id_, created, host, tp, cmd, n, wall, env in self._query(sql, params):
            keys = [k for (k,) in self._query("SELECT compile_key FROM audit_compiles WHERE audit_id = ? "
                                               "ORDER BY position", (id_,))]
            out.append({"id": id_, "created": created, "host": host, "tileprobe": tp, "command_line": cmd,
                        "n_variants": n, "wall_s": wall, "environment": json.loads(env or "{}"),
                        "compile_keys": keys})
        return out

    def kernels(self) -> list[str]:
        """The kernel (probe) names with a stored compile, sorted."""
        return [k for (k,) in self._query("SELECT DISTINCT kernel FROM compiles ORDER BY kernel")]

    def compiles(self, *, kernel=None, arch=None, tileiras=None, limit: int | None = None) -> list[dict]:
        """Stored compiles, newest first, as flat dicts (provenance, resources, newest run's median)."""
        where, params = self._where(kernel, arch, tileiras)
        sql = (f"SELECT c.key, c.created, c.host, c.kernel, c.probe, c.source_sha256, c.symbol, c.case_json, "
               f"c.hints_json, c.arch, c.tileiras, c.cuda_tile, c.status, c.cubin_sha256, c.compile_s, c.record, "
               f"(SELECT r.median_us FROM runs r WHERE r.compile_key = c.key ORDER BY r.created DESC LIMIT 1), "
               f"(SELECT r.gpu_name FROM runs r WHERE r.compile_key = c.key ORDER BY r.created DESC LIMIT 1) "
               f"FROM compiles c WHERE {where} ORDER BY c.created DESC" + (f" LIMIT {int(limit)}" if limit else ""))
        out = []
        for (key, created, host, kernel_, probe, src, symbol, case, hints, arch_, build, cut, status, cubin, comp_s,
             record, median, gpu) in self._query(sql, params):
            rec = json.loads(record)
            out.append({"key": key, "created": created, "host": host, "kernel": kernel_, "probe": probe,
                        "source_sha256": src, "symbol": symbol, "case": dict(json.loads(case)),
                        "hints": dict(json.loads(hints)), "arch": arch_, "tileiras": build, "cuda_tile": cut,
                        "status": status, "threads": rec.get("threads"), "registers": rec.get("registers"),
                        "shared_bytes": rec.get("shared_bytes"), "stack_bytes": rec.get("stack_bytes"),
                        "ctas_per_sm": rec.get("ctas_per_sm"), "cubin_sha256": cubin, "compile_s": comp_s,
                        "reg_pool": _pool_verdict(rec), "median_us": median, "gpu": gpu})
        return out

    def runs(self, *, kernel=None, arch=None, tileiras=None, limit: int | None = None) -> list[dict]:
        """Stored GPU runs, newest first, with their compile's kernel, case, hints, arch and tileiras."""
        where, params = self._where(kernel, arch, tileiras)
        sql = (f"SELECT r.id, r.compile_key, r.created, r.host, r.gpu_name, r.driver, r.clocks, r.status, "
               f"r.median_us, c.kernel, c.case_json, c.hints_json, c.arch, c.tileiras FROM runs r "
               f"JOIN compiles c ON c.key = r.compile_key WHERE {where} ORDER BY r.created DESC"
               + (f" LIMIT {int(limit)}" if limit else ""))
        return [{"id": i, "compile_key": k, "created": cr, "host": h, "gpu": g, "driver": d,
                 "clocks": json.loads(cl or "null"), "status": s, "median_us": m, "kernel": kn,
                 "case": dict(json.loads(case)), "hints": dict(json.loads(hints)), "arch": a, "tileiras": t}
                for i, k, cr, h, g, d, cl, s, m, kn, case, hints, a, t in self._query(sql, params)]


    # --- hygiene: size and prune (issue 14) ----------------------------------------------------------------------

    def size(self) -> dict:
        """What the store holds and takes: ``path``, ``file_bytes`` (the database, its WAL and shared-memory
        files), ``cubin_bytes`` (stored cubins), row counts per table (``compiles``, ``cubins``, ``audits``, ``runs``,
        ``tunes``), ``variants`` (distinct kernel, probe, case, hints, arch and compiler), ``oldest`` and ``newest``
        compile times (UTC)."""
        files = [self.path, self.path + "-wal", self.path + "-shm"]
        out = {"path": self.path, "file_bytes": sum(os.path.getsize(f) for f in files if os.path.exists(f))}
        out["cubin_bytes"] = self._query("SELECT COALESCE(SUM(size_bytes), 0) FROM cubins")[0][0]
        for table in ("compiles", "cubins", "audits", "runs", "tunes"):
            out[table] = self._query(f"SELECT COUNT(*) FROM {table}")[0][0]
        out["variants"] = self._query(f"SELECT COUNT(*) FROM (SELECT 1 FROM compiles GROUP BY {_VARIANT_COLUMNS})")[0][0]
        out["oldest"], out["newest"] = self._query("SELECT MIN(created), MAX(created) FROM compiles")[0]
        return out

    def prune(self, *, older_than: str | None = None, keep_latest: int = 1, dry_run: bool = False) -> dict:
        """Delete stored compiles created before ``older_than`` (an ISO time, UTC: ``2026-11-01`` or
        ``2026-11-01T12:00:00``) except the ``keep_latest`` newest compiles of each variant (kernel, probe, case,
        hints, arch and compiler build); ``keep_latest=0`` lets the newest go too. With no ``older_than`` only the
        ``keep_latest`` rule applies. Their GPU runs and the cubins no compile uses any more go with them, audits
        left with no compile are deleted, and the file is compacted (``VACUUM``). ``dry_run`` counts, deletes
        nothing.

        Returns ``{"compiles", "runs", "cubins", "audits"}`` (rows deleted, or that would be) and ``bytes_before``,
        ``bytes_after``.

        Raises:
            StoreError: ``keep_latest`` below 0, or the store is locked or damaged.
        """
        if keep_latest < 0:
            raise StoreError(f"--keep-latest {keep_latest}: give 0 or more compiles to keep per variant")
        before = self.size()["file_bytes"]
        rows = self._query(f"SELECT key, created, {_VARIANT_COLUMNS} FROM compiles ORDER BY created DESC")
        seen: dict[tuple, int] = {}
        doomed = []
        for key, created, *variant in rows:
            rank = seen.get(tuple(variant), 0)
            seen[tuple(variant)] = rank + 1
            if rank >= keep_latest and (older_than is None or created < older_than):
                doomed.append(key)
        plan = self._prune_plan(doomed)
        if not dry_run and doomed:
            self._delete(plan)
            with self._errors():
                self._conn.execute("VACUUM")
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")   # VACUUM in WAL mode goes through the WAL
        counts = {k: len(v) for k, v in plan.items()}
        return {**counts, "bytes_before": before, "bytes_after": self.size()["file_bytes"]}

    def _prune_plan(self, keys: list[str]) -> dict[str, list]:
        """What goes with these compiles: their runs, the cubins only they use, the audits made only of them."""
        gone = set(keys)
        runs = [i for i, k in self._query("SELECT id, compile_key FROM runs") if k in gone]
        used: dict[str, set] = {}
        for key, sha in self._query("SELECT key, cubin_sha256 FROM compiles WHERE cubin_sha256 IS NOT NULL"):
            used.setdefault(sha, set()).add(key)
        cubins = [sha for sha, keys_ in used.items() if keys_ <= gone]
        members: dict[int, set] = {}
        for audit_id, key in self._query("SELECT audit_id, compile_key FROM audit_compiles"):
            members.setdefault(audit_id, set()).add(key)
        audits = [i for i, keys_ in members.items() if keys_ <= gone]
        return {"compiles": list(keys), "runs": runs, "cubins": cubins, "audits": audits}

    def _delete(self, plan: dict[str, list]) -> None:
        with self._transaction() as c:
            for table, column, values in (("runs", "id", plan["runs"]), ("compiles", "key", plan["compiles"]),
                                          ("audit_compiles", "compile_key", plan["compiles"]),
                                          ("audits", "id", plan["audits"]), ("cubins", "sha256", plan["cubins"])):
                for i in range(0, len(values), 500):
                    chunk = values[i:i + 500]
                    c.execute(f"DELETE FROM {table} WHERE {column} IN ({','.join('?' * len(chunk))})", chunk)


def _natural_order(r) -> tuple:
    """Kernel, arch (by compute capability), compiler (by version), then case and hint values (numbers by value)."""
    import re
    from tileprobe.model.arch import get_arch
    from tileprobe.errors import TileprobeError

    def val(v):   # numbers by value, sequences of numbers (tiles) element by element, the rest by text
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return (0, (v,), "")
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                      for x in v):
            return (0, tuple(v), "")
        return (1, (), repr(v))
    try:
        cc = get_arch(r.arch).cc
    except TileprobeError:
        cc = (999, 0)
    m = re.search(r"V(\d+(?:\.\d+)+)", r.tileiras or "")
    version = tuple(int(x) for x in m.group(1).split(".")) if m else ()
    return (r.kernel, r.probe, cc, r.arch, version, r.tileiras, [(k, val(v)) for k, v in r.case.items()],
            [(k, val(v)) for k, v in r.hints.items()])
