"""The results store's file: opening it, its tables and store schema, migrations of older stores, transactions
and the errors they raise, and what this process saved.

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
3 — tunes, tune_candidates. 4 — claims. 5 — ``compiles.tileiras_sha256`` (
:mod:`tileprobe.store.compiles`, "Which compiler").

Older stores are migrated in place when opened (``_migrate_to_N``); a newer one is refused; a file that is not a
tileprobe store, or is damaged, is refused and left untouched (a results store is user data, not a cache).

**What this process saved.** Each saved compile and GPU run is counted after its commit
(:func:`saved_by_this_process`), and each opened store remembered (:func:`store_opened_by_this_process`), for the
line the CLI prints when Ctrl-C or SIGTERM stops a command; :func:`begin_command` starts both again.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import pathlib
import socket
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import platformdirs

from tileprobe._version import __version__
from tileprobe.errors import StoreError
from tileprobe.store import health

SCHEMA_VERSION = 5
BUSY_TIMEOUT_S = 60.0
STORE_ENV = "TILEPROBE_STORE"
#: The class :meth:`StoreConnection.open` and ``with`` give back: :class:`~tileprobe.store.Store` when opened as one.
S = TypeVar("S", bound="StoreConnection")


def default_path() -> str:
    """``$TILEPROBE_STORE``, else ``<user data dir>/tileprobe/results.sqlite``."""
    if os.environ.get(STORE_ENV):
        return os.environ[STORE_ENV]
    return os.path.join(platformdirs.user_data_dir("tileprobe"), "results.sqlite")


def now() -> str:
    """The current UTC time as the store writes it (ISO 8601, microseconds, ``Z``): ``created`` columns, claims'
    ``since``."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
#: The compile keys behind ``_SAVED["compiles"]``: a compile saved again (its SASS facts added) counts once.
_SAVED_KEYS: set[str] = set()
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
    _SAVED_KEYS.clear()
    _OPENED.clear()


def store_opened_by_this_process() -> bool:
    """Whether this process opened a results store at all (not with ``--no-store``)."""
    return bool(_OPENED)


class StoreConnection:
    """What every part of :class:`~tileprobe.store.Store` stands on: the open SQLite connection (opened, created or
    migrated by :meth:`open`), its transactions and the :class:`~tileprobe.errors.StoreError` s they raise, and the
    ``--kernel/--arch/--tileiras`` filters of the reading calls."""

    def __init__(self, path: str, conn: sqlite3.Connection):
        self.path = path
        self._conn = conn
        self._keys: dict[int, tuple[Any, str]] = {}   # id(record) -> (record, compile key)
        self._cuda_tile: str | None = None
        self.host = socket.gethostname()
        self.read_only = False   # opened read-only (read-only media or permissions): reading only
        self.opened = False      # the file was opened as a store (a later error may be damage, and is noted)

    # --- opening -------------------------------------------------------------------------------------------------

    @classmethod
    def open(cls: type[S], path: str | os.PathLike | None = None, *, must_exist: bool = False,
             check: bool = False) -> S:
        """Open (creating or migrating) the store at ``path`` (``None``: :func:`default_path`). ``must_exist``: for
        commands that only read (history, report, compare), a missing file is an error rather than a new store.
        ``check``: run the full check (:meth:`check_health` with ``full``) before anything is read: for the commands
        that show, count or prune rows.

        Raises:
            StoreError: the file was written by a newer tileprobe, is damaged or not a tileprobe store (it is left
                untouched), cannot be created, or stays locked by another process for :data:`BUSY_TIMEOUT_S`.
        """
        if path is not None and not os.fspath(path):
            raise StoreError('--store "" names no file: give the path of a results store, or leave --store out for '
                             f"the default one ({default_path()})")
        path = os.path.abspath(os.fspath(path) if path is not None else default_path())
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
        read_only = os.path.isfile(path) and not health.writable(path)
        try:
            if read_only:    # read-only media or permissions: the reading commands read it; a write says why not
                conn = sqlite3.connect(f"{pathlib.Path(path).as_uri()}?mode=ro", timeout=BUSY_TIMEOUT_S,
                                       isolation_level=None, uri=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open the results store {path}: {e}. Check the folder's permissions, or pass "
                             "--store PATH (or set TILEPROBE_STORE) to put it elsewhere.") from e
        store = cls(path, conn)
        store.read_only = read_only
        try:
            with store._errors():
                store._prepare()
            store.opened = True
            if check:
                store.check_health(full=True)
            elif os.path.exists(health.note_path(path)):   # damage found by an earlier command: checked again
                store.check_health()
        except BaseException:
            conn.close()
            raise
        _OPENED.add(path)
        return store

    def _prepare(self) -> None:
        c = self._conn
        c.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        try:
            version = c.execute("PRAGMA user_version").fetchone()[0]   # reads the header: a non-SQLite file fails here
        except sqlite3.OperationalError:
            if not self.read_only:
                raise
            # a WAL store on read-only media whose shared-memory file cannot be made: read the file as it is
            self._conn.close()
            self._conn = c = sqlite3.connect(f"{pathlib.Path(self.path).as_uri()}?mode=ro&immutable=1",
                                             timeout=BUSY_TIMEOUT_S, isolation_level=None, uri=True)
            version = c.execute("PRAGMA user_version").fetchone()[0]
        self._refuse_newer(version)
        if self.read_only:
            if version < SCHEMA_VERSION:
                raise StoreError(f"the results store {self.path} has store schema {version} and cannot be written "
                                 f"(read-only), so it cannot be brought to schema {SCHEMA_VERSION}: copy it to a "
                                 "writable folder and pass --store with the copy")
            return
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
        """Turn sqlite3 errors into StoreErrors that say what to do (:func:`tileprobe.store.health.classify`: a
        full disk is not damage)."""
        try:
            yield
        except sqlite3.DatabaseError as e:
            kind = health.classify(e, self.path)
            if kind == "locked":
                raise StoreError(f"the results store {self.path} stayed locked by another process for "
                                 f"{BUSY_TIMEOUT_S:.0f} s ({e}). Wait for the other tileprobe to finish, or pass "
                                 "--store PATH to use another store.") from e
            if kind == "full":
                raise StoreError(health.full_message(self.path, e) + self._saved_note()) from e
            if kind == "companion":      # a folder or FIFO at S-wal / S-shm / S-journal: not read-only media
                raise StoreError(health.companion_message(self.path, e)) from e
            if kind == "read-only":
                raise StoreError(f"cannot write the results store {self.path}: {e} (it is on read-only media or not "
                                 "writable by you; history, report and compare can still read it). Pass --store "
                                 "PATH to write elsewhere.") from e
            if kind == "io":
                raise StoreError(f"the results store {self.path} met a disk I/O error (sqlite: {e}); the write was "
                                 "rolled back. Check the disk (dmesg) and run the command again.") from e
            raise self._damaged(e) from e

    @staticmethod
    def _saved_note() -> str:
        saved = saved_by_this_process()
        if not (saved["compiles"] or saved["runs"]):
            return ""
        return (f" This command kept {saved['compiles']} compile(s) and {saved['runs']} GPU run(s) saved before "
                "the disk filled; what it was saving then, and what came after, was not kept.")

    def _damaged(self, e: Exception) -> StoreError:
        if getattr(self, "opened", False) and not getattr(self, "read_only", False):
            health.write_note(self.path, [f"sqlite: {e}"])   # the next open checks the file again
        return StoreError(f"the results store {self.path} is damaged or is not a tileprobe store (sqlite: {e}). "
                          "tileprobe does not delete results: move the file aside (e.g. mv it to *.bad) or pass "
                          f"--store PATH to start another store; `sqlite3 {self.path} .recover` may salvage its rows.")

    def check_health(self, full: bool = False) -> None:
        """Run :func:`tileprobe.store.health.quick_check` on the file; call it after a command in which untrusted
        code (probe code, compilers) could reach it (``save_audit`` and ``save_tune`` do). A sound file clears an
        earlier damage note; a damaged one leaves one (every later open checks again). ``full``: ``PRAGMA
        integrity_check``, which also matches each index against its table.

        Raises:
            StoreError: the file is damaged (the message says how to recover).
        """
        problems = health.quick_check(self._conn, full=full)
        if not problems:
            if not self.read_only:
                health.clear_note(self.path)
            return
        if not self.read_only:
            health.write_note(self.path, problems)
        raise StoreError(health.damaged_message(self.path, problems, "integrity_check" if full else "quick_check"))

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

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def schema_version(self) -> int:
        """The store schema version of the open file (``PRAGMA user_version``; :data:`SCHEMA_VERSION` once open)."""
        return self._query("PRAGMA user_version")[0][0]

    def meta(self) -> dict[str, str]:
        """The ``meta`` table as a dict."""
        return dict(self._query("SELECT key, value FROM meta"))

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
