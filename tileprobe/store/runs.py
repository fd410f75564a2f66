"""Audits, GPU runs and tunes of the results store: each saved in its own transaction (tables ``audits``,
``audit_compiles``, ``runs``, ``tunes``, ``tune_candidates``: :mod:`tileprobe.store.connection`) and read back,
newest first."""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tileprobe._version import __version__
from tileprobe.errors import StoreError
from tileprobe.jsonrecord import from_dict
from tileprobe.schema import VariantRun, value_key, verdicts_to_dict
from tileprobe.store.connection import _SAVED, StoreConnection, now


class RunsMixin(StoreConnection):
    """The audits, GPU runs and tunes of :class:`~tileprobe.store.Store`. A record's compile key comes from
    :meth:`~tileprobe.store.compiles.CompilesMixin.key_of`."""

    if TYPE_CHECKING:     # CompilesMixin's, beside this part in Store (the parts never import each other)
        def key_of(self, record: Any) -> str | None: ...

    def save_audit(self, result, command_line: str) -> int:
        """Store an audit: when, where, the command line, its environment and its records' keys and verdicts; then
        check the file (:meth:`check_health`). A record whose compile a concurrent ``store prune`` deleted after it
        was saved is left out and counted in the environment's ``pruned_variants`` (as the prune counts what it takes
        from stored audits). Raises StoreError when it is damaged (the audit row is saved)."""
        rows = [(self.key_of(r), json.dumps(verdicts_to_dict(r.verdicts), default=str)) for r in result.records]
        with self._transaction() as c:
            # a `store prune` beside this audit may have deleted some of its compiles since they were saved: those
            # rows are left out and counted as pruned, as the prune does with the audits it finds stored
            kept = [(i, k, v) for i, (k, v) in enumerate(rows)
                    if k is None or c.execute("SELECT 1 FROM compiles WHERE key = ?", (k,)).fetchone() is not None]
            pruned = len(rows) - len(kept)
            environment = {**result.environment, **({"pruned_variants": pruned} if pruned else {})}
            cur = c.execute("INSERT INTO audits (created, host, tileprobe, command_line, environment, wall_s, "
                            "n_variants) VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (now(), self.host, __version__, command_line, json.dumps(environment, default=str),
                             result.wall_s, len(kept)))
            audit_id = _row_id(cur)
            c.executemany("INSERT INTO audit_compiles (audit_id, position, compile_key, verdicts) VALUES (?, ?, ?, ?)",
                          [(audit_id, i, k, verdicts) for i, k, verdicts in kept])
        self.check_health()   # probe code and compilers ran while the file was open (raises StoreError if damaged)
        return audit_id

    def save_run(self, record_key, run: VariantRun, gpu: dict) -> int:
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
                             run.status, run.median_us, json.dumps(run.to_dict(), default=str)))
        _SAVED["runs"] += 1
        return _row_id(cur)

    def save_tune(self, problem: dict, environment: dict) -> int:
        """Store one problem's tune; return its id.

        Args:
            problem: ``ProblemResult.to_dict()`` (``tileprobe/tune/result.py``); each candidate row may carry its
                ``compile_key``.
            environment: the tune's environment: ``gpu`` (name, uuid, driver …), ``timing``, ``strategy``.

        Raises:
            tileprobe.jsonrecord.FieldError: a stored column's value of the wrong type (the field named; nothing
            saved).
        """
        p = from_dict(_TunedProblem, problem, where="the tune's problem result")
        env = from_dict(_TuneEnvironment, environment, where="the tune's environment")
        gpu = from_dict(_Gpu, env.gpu or {}, where="the tune's environment.gpu")
        pick = from_dict(_TunedRow, p.pick, where="the tune's pick") if p.pick else None
        row = (now(), self.host, __version__, p.kernel, p.probe, p.source_sha256, value_key(p.problem), p.arch,
               gpu.name, gpu.uuid, str(gpu.driver or ""), p.tileiras, p.cuda_tile, env.timing, env.strategy,
               p.verdict, json.dumps(pick.config) if pick else None, pick.median_us if pick else None,
               pick.ci_lo_us if pick else None, pick.ci_hi_us if pick else None, json.dumps(problem, default=str))
        rows = [(from_dict(_TunedRow, r, where=f"the tune's candidates[{i}]"), r)
                for i, r in enumerate(p.candidates or [])]
        with self._transaction() as c:
            cur = c.execute("INSERT INTO tunes (created, host, tileprobe, kernel, probe, source_sha256, problem_json, "
                            "arch, gpu_name, gpu_uuid, driver, tileiras, cuda_tile, timing, strategy, verdict, "
                            "pick_json, median_us, ci_lo_us, ci_hi_us, result) "
                            f"VALUES ({', '.join('?' * len(row))})", row)
            tune_id = _row_id(cur)
            c.executemany("INSERT INTO tune_candidates (tune_id, position, compile_key, config_json, status, "
                          "same_launch_as, n_samples, median_us, ci_lo_us, ci_hi_us, clocks_moved, summary) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          [(tune_id, i, r.compile_key, json.dumps(r.config), r.status or "", r.same_launch_as, r.n,
                            r.median_us, r.ci_lo_us, r.ci_hi_us, None if r.clocks_moved is None else int(r.clocks_moved),
                            json.dumps(raw, default=str)) for i, (r, raw) in enumerate(rows)])
        self.check_health()   # probe code, compilers and the GPU workers ran while the file was open
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

    def _attach_runs(self, items: list[tuple]) -> None:
        keys = [k for k, _, _ in items]
        latest: dict[str, VariantRun] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            sql = (f"SELECT compile_key, run, gpu FROM runs WHERE compile_key IN ({','.join('?' * len(chunk))}) "
                   "ORDER BY created")
            for key, run, gpu in self._query(sql, chunk):
                d = json.loads(run)
                d.setdefault("gpu", json.loads(gpu or "{}").get("name"))
                latest[key] = VariantRun.from_dict(d)
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
            keys = [k for (k,) in self._query("SELECT x.compile_key FROM audit_compiles x JOIN compiles c ON "
                                               "c.key = x.compile_key WHERE x.audit_id = ? ORDER BY x.position",
                                               (id_,))]
            count = self.audit_count(id_)
            out.append({"id": id_, "created": created, "host": host, "tileprobe": tp, "command_line": cmd,
                        "n_variants": count.variants if n is not None else n, "pruned_variants": count.pruned,
                        "wall_s": wall, "environment": json.loads(env or "{}"), "compile_keys": keys})
        return out

    def pruned_audits(self) -> list[tuple[int, AuditCount]]:
        """The stored audits ``store prune`` took variants from, newest first, with their counts
        (:meth:`audit_count`)."""
        ids = [i for (i,) in self._query(
            "SELECT a.id FROM audits a WHERE (json_valid(a.environment) AND json_extract(a.environment, "
            "'$.pruned_variants') > 0) OR EXISTS (SELECT 1 FROM audit_compiles x WHERE x.audit_id = a.id AND "
            "x.compile_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM compiles c WHERE c.key = x.compile_key)) "
            "ORDER BY a.id DESC")]
        return [(i, self.audit_count(i)) for i in ids]

    def last_audit_id(self) -> int:
        """The highest audit id this store ever gave (the ``audits`` table's AUTOINCREMENT sequence: an id at or
        below it that is not stored was removed, by ``store prune``); 0 for a store that saved none.

        Raises:
            StoreError: the store is damaged or locked.
        """
        rows = self._query("SELECT seq FROM sqlite_sequence WHERE name = 'audits'")
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0

    def audit_count(self, audit_id: int) -> AuditCount:
        """How many variants stored audit ``audit_id`` holds now and how many ``store prune`` took from it.

        ``pruned``: what the prune noted in the audit's environment (``pruned_variants``) plus the rows that point
        at a compile no longer stored (left by a prune of before 2026-12-05, which noted nothing); ``variants``:
        the audit's count less those rows. An audit that is not stored counts (0, 0).

        Raises:
            StoreError: the store is damaged or locked.
        """
        rows = self._query("SELECT n_variants, CASE WHEN json_valid(environment) THEN json_extract(environment, "
                           "'$.pruned_variants') END FROM audits WHERE id = ?", (audit_id,))
        if not rows:
            return AuditCount(0, 0)
        n, noted = rows[0]
        ((dangling,),) = self._query("SELECT COUNT(*) FROM audit_compiles x WHERE x.audit_id = ? AND x.compile_key "
                                     "IS NOT NULL AND NOT EXISTS (SELECT 1 FROM compiles c WHERE c.key = "
                                     "x.compile_key)", (audit_id,))
        noted = noted if type(noted) is int and noted > 0 else 0
        return AuditCount(max(0, (n or 0) - dangling), noted + dangling)

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


@dataclass(frozen=True)
class AuditCount:
    """A stored audit's variants now (``variants``) and those ``store prune`` deleted from it (``pruned``):
    :meth:`RunsMixin.audit_count`, what ``history`` and ``compare`` say."""
    variants: int
    pruned: int

    def pruned_text(self, audit_id: int) -> str:
        """``"15 variants of audit 1 were pruned (`tileprobe store prune`)"``, or ``""`` when none were."""
        if not self.pruned:
            return ""
        many = self.pruned != 1
        return (f"{self.pruned} variant{'s' if many else ''} of audit {audit_id} {'were' if many else 'was'} pruned "
                "(`tileprobe store prune`)")


def _row_id(cur: sqlite3.Cursor) -> int:
    """The id of the row ``cur``'s INSERT just added (``lastrowid``, None only when no row was inserted).

    Raises:
        StoreError: no row was inserted (the INSERT failed without raising: a bug of ours).
    """
    if cur.lastrowid is None:
        raise StoreError("the store did not give the id of the row just inserted")
    return cur.lastrowid


# What save_tune stores in columns of a tune's JSON (tileprobe.tune.result's ProblemResult.to_dict(), the tune's
# environment); the whole object is kept beside them. Read with tileprobe.jsonrecord (a wrong type names the field).

@dataclass
class _TunedRow:
    """A candidate row's (or the pick's) indexed columns: its configuration, status, timing summary (µs)."""
    config: Any = None
    status: str | None = None
    same_launch_as: str | None = None
    n: int | None = None
    median_us: float | None = None
    ci_lo_us: float | None = None
    ci_hi_us: float | None = None
    clocks_moved: bool | None = None
    compile_key: str | None = None


@dataclass
class _TunedProblem:
    """A problem's tune: kernel, problem (``{name: value}``), where and with what it was tuned, its verdict, pick
    and candidate rows (JSON objects, read as :class:`_TunedRow`)."""
    kernel: str
    problem: Any
    probe: str | None = None
    source_sha256: str | None = None
    arch: str | None = None
    tileiras: str | None = None
    cuda_tile: str | None = None
    verdict: Any = None
    pick: dict[str, Any] | None = None
    candidates: list[dict[str, Any]] | None = None


@dataclass
class _TuneEnvironment:
    """The tune's environment: its GPU (an object), timing mode and strategy."""
    gpu: dict[str, Any] | None = None
    timing: str | None = None
    strategy: str | None = None


@dataclass
class _Gpu:
    """The GPU a tune ran on, as the tune's environment names it."""
    name: Any = None
    uuid: Any = None
    driver: Any = None
