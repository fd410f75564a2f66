"""Store hygiene (issue 14): what the results store holds and takes (:meth:`PruneMixin.size`), and deleting old
compiles with the runs, cubins and audits only they use (:meth:`PruneMixin.prune`): ``tileprobe store size|prune``."""
from __future__ import annotations

import os

from tileprobe.errors import StoreError
from tileprobe.store.connection import StoreConnection

#: The columns that name one variant of one compiler (``prune`` keeps the newest compiles of each).
_VARIANT_COLUMNS = "kernel, probe, case_json, hints_json, arch, tileiras"


class PruneMixin(StoreConnection):
    """``size`` and ``prune`` of :class:`~tileprobe.store.Store`."""

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
