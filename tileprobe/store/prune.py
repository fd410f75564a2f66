"""Store hygiene: what the results store holds and takes (:meth:`PruneMixin.size`), and deleting old
compiles with the runs, cubins and audits only they use (:meth:`PruneMixin.prune`): ``tileprobe store size|prune``."""
from __future__ import annotations

import dataclasses
import os

from tileprobe.errors import StoreError
from tileprobe.store.connection import StoreConnection

#: The columns that name one variant of one compiler (``prune`` keeps the newest compiles of each).
_VARIANT_COLUMNS = "kernel, probe, case_json, hints_json, arch, tileiras"


@dataclasses.dataclass
class PrunePlan:
    """What a prune deletes: the compiles (keys), their GPU runs (ids), the cubins only they use (SHA-256) and the
    audits made only of them (ids)."""
    compiles: list[str]
    runs: list[int]
    cubins: list[str]
    audits: list[int]


class PruneMixin(StoreConnection):
    """``size`` and ``prune`` of :class:`~tileprobe.store.Store`."""

    # --- hygiene: size and prune ---------------------------------------------------------------------------------

    def file_bytes(self) -> int:
        """Bytes the store takes on disk: the database, its WAL and shared-memory files (those that exist)."""
        files = [self.path, self.path + "-wal", self.path + "-shm"]
        return sum(os.path.getsize(f) for f in files if os.path.exists(f))

    def size(self) -> dict:
        """What the store holds and takes: ``path``, ``file_bytes`` (the database, its WAL and shared-memory
        files), ``cubin_bytes`` (stored cubins), row counts per table (``compiles``, ``cubins``, ``audits``, ``runs``,
        ``tunes``), ``variants`` (distinct kernel, probe, case, hints, arch and compiler), ``oldest`` and ``newest``
        compile times (UTC)."""
        out = {"path": self.path, "file_bytes": self.file_bytes()}
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
        before = self.file_bytes()
        if dry_run:
            plan = self._prune_plan(self._doomed(older_than, keep_latest))
        else:   # planned and deleted in one write transaction: an audit saved meanwhile is seen whole or not at all
            with self._transaction():
                plan = self._prune_plan(self._doomed(older_than, keep_latest))
                self._delete(plan)
        if not dry_run and plan.compiles:
            with self._errors():
                self._conn.execute("VACUUM")
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")   # VACUUM in WAL mode goes through the WAL
        counts = {k: len(v) for k, v in dataclasses.asdict(plan).items()}
        return {**counts, "bytes_before": before, "bytes_after": self.file_bytes()}

    def _doomed(self, older_than: str | None, keep_latest: int) -> list[str]:
        """The keys of the compiles :meth:`prune` deletes (its rules)."""
        rows = self._query(f"SELECT key, created, {_VARIANT_COLUMNS} FROM compiles ORDER BY created DESC")
        seen: dict[tuple, int] = {}
        doomed = []
        for key, created, *variant in rows:
            rank = seen.get(tuple(variant), 0)
            seen[tuple(variant)] = rank + 1
            if rank >= keep_latest and (older_than is None or created < older_than):
                doomed.append(key)
        return doomed

    def _prune_plan(self, keys: list[str]) -> PrunePlan:
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
        return PrunePlan(compiles=list(keys), runs=runs, cubins=cubins, audits=audits)

    def _delete(self, plan: PrunePlan) -> None:
        """Delete what ``plan`` names, inside the caller's transaction. No row is left pointing at a deleted compile:
        an audit that keeps some of its compiles counts only those (``n_variants``; how many went is kept in its
        ``environment`` as ``pruned_variants``), and a tune's candidates lose the key of a deleted compile (their
        measured row stays)."""
        c = self._conn
        gone = plan.compiles
        touched: dict[int, int] = {}
        for i in range(0, len(gone), 500):
            chunk = gone[i:i + 500]
            for audit_id, n in c.execute(f"SELECT audit_id, COUNT(*) FROM audit_compiles WHERE compile_key IN "
                                         f"({','.join('?' * len(chunk))}) GROUP BY audit_id", chunk):
                touched[audit_id] = touched.get(audit_id, 0) + n
        deletions: tuple[tuple[str, str, list], ...] = (
            ("runs", "id", plan.runs), ("compiles", "key", gone), ("audit_compiles", "compile_key", gone),
            ("audits", "id", plan.audits), ("cubins", "sha256", plan.cubins))
        for table, column, values in deletions:
            for i in range(0, len(values), 500):
                chunk = values[i:i + 500]
                c.execute(f"DELETE FROM {table} WHERE {column} IN ({','.join('?' * len(chunk))})", chunk)
        for i in range(0, len(gone), 500):
            chunk = gone[i:i + 500]
            c.execute(f"UPDATE tune_candidates SET compile_key = NULL WHERE compile_key IN "
                      f"({','.join('?' * len(chunk))})", chunk)
        for audit_id, n in touched.items():
            c.execute("UPDATE audits SET n_variants = (SELECT COUNT(*) FROM audit_compiles WHERE audit_id = ?), "
                      "environment = json_set(CASE WHEN json_valid(environment) THEN environment ELSE '{}' END, "
                      "'$.pruned_variants', COALESCE(json_extract(CASE WHEN json_valid(environment) THEN "
                      "environment ELSE '{}' END, '$.pruned_variants'), 0) + ?) WHERE id = ?",
                      (audit_id, n, audit_id))
