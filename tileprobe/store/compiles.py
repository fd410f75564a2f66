"""Compiles and cubins: the compile key, what a lookup reuses and for which compiler, saving a compile, importing a
bundle's compiles, and reading stored records back.

**The compile key.** A compile is identified by the SHA-256 of these fields, each written as a 4-byte big-endian
length and then its UTF-8 bytes (the length-prefixed scheme of cutile-python's ``cutile_cache/_cache.py::cache_key``),
in this order:

1. :data:`KEY_VERSION` (one byte; bumped when this list changes or when what a record holds changes — a new field, a
   different reading of the cubin — which makes every stored compile a miss)
2. what the compiled code depends on: ``"compile:" + Variant.compile_sha256``, the SHA-256 of the file
   that defines the kernel and of the launch signature the probe's ``args`` gave for this variant (constants,
   dtypes, divisibility; :meth:`tileprobe.probe.contained.ProbePlan.compile_sha256`) — so editing a probe without
   changing any compiled variant (a comment, ``tunable=``, a reference) compiles nothing again. When the loader did
   not try ``args`` (a grid over ``--max-variants``), ``Variant.source_sha256``: SHA-256 of the probe file and the
   kernel's file (:func:`tileprobe.audit.source_sha256`), the key of older stores (their records
   stay readable; their compiles are found again under this fallback only)
3. the probe's index in its file, 4. the probe's name (its label in reports)
5. the case, 6. the hints: each as JSON of its ``[name, value]`` pairs sorted by name (``true`` ≠ ``1``)
7. the arch (``sm_90``)
8. the tileiras build string (``tc.build``, from ``tileiras --version``)
9. the cuda-tile version (it writes the bytecode tileiras compiles)

Not in the key: the probe file's path (a moved file keeps its results), the tileiras path (two installs of one
build are one compiler), the timeout, ``--jobs``, the host. Helper modules the kernel imports are not hashed:
after editing one, audit with ``--no-store`` or another ``--store``.

**What a lookup reuses.** A stored compile is the answer: ``ok`` and every compile failure (``compile_error``,
``compiler_crash``, ``timeout``, ``unsupported_target``, ``unsupported_feature``) are not compiled again — a failing
variant does not cost a compile on every audit. Compiled again: ``probe_error`` (the probe's code, or an
import it makes, may be fixed without the probe file changing) and ``broken_environment`` (the environment is not
in the key), and with ``retry_failed`` (``tileprobe audit --retry-failed``, e.g. after raising ``--timeout``) every
failure.

**Which compiler.** The key names the compiler by its build string (what ``--version`` says); each
compile also stores ``tileiras_sha256``, the hash of the compiler's files
(:func:`tileprobe.model.toolkit.compiler_identity`: tileiras, its ptxas and libnvvm). A stored compile is reused only
for a compiler with the same hash: a ``--tileiras`` that prints 13.4.92's version but hangs or crashes stores its
failures against its own files, and a later audit with the real 13.4.92 compiles those variants again (and
replaces the rows). Compiles stored before schema 5 (no hash) are reused when ``ok``; their failures are compiled
again once.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING

from tileprobe.errors import StoreError
from tileprobe.records import RegisterPool, SassFacts, keyed_from_dict
from tileprobe.schema import value_key, verdicts_from_dict
from tileprobe.store.connection import _SAVED, _SAVED_KEYS, StoreConnection, now

# Imports inside functions here are lazy on purpose: at the module head they would add 0.16 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

if TYPE_CHECKING:
    from tileprobe.schema import VariantRecord
    from tileprobe.toolchain import Toolchain

KEY_VERSION = b"\x01"
#: Statuses a lookup reuses; other stored statuses are compiled again (see module doc).
REUSED_STATUSES = ("ok", "compile_error", "compiler_crash", "timeout")
#: Failure classes (``record["failure"]``) compiled again although their status is reused (see module doc).
RETRIED_FAILURES = ("broken_environment", "probe_error")

_COMPILE_COLUMNS = ("key", "created", "host", "tileprobe", "kernel", "probe", "probe_index", "source_sha256",
                    "symbol", "signature", "case_json", "hints_json", "arch", "tileiras", "tileiras_path",
                    "cuda_tile", "status", "cubin_sha256", "compile_s", "record")


def _lp(*fields: str | bytes) -> bytes:
    out = b""
    for f in fields:
        b = f if isinstance(f, bytes) else str(f).encode()
        out += len(b).to_bytes(4, "big") + b
    return out


def _pairs_json(pairs: Iterable) -> str:
    return json.dumps(sorted([str(k), v] for k, v in pairs), default=repr, separators=(",", ":"))


def _same_compiler(stored_sha256: str | None, status: str, tc: Toolchain) -> bool:
    """Whether a stored compile (its compiler's ``tileiras_sha256`` and status) is the answer for compiler ``tc``:
    the same files (``tc.identity``); a compile stored without a hash (before schema 5, or by a caller that
    gave none) only when ``ok``; any compile when ``tc`` names no identity (a caller that did not resolve it)."""
    want = tc.identity
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
    """new key -> the key of the same compile in an older store (probe file + kernel file instead
    of kernel file + signature), for variants whose ``args`` take no ``num_sms`` (the old key did not hold it)."""
    out = {}
    for key, v in keyed.items():
        if getattr(v, "compile_sha256", "") and getattr(v, "num_sms", None) is None and dataclasses.is_dataclass(v) \
                and not isinstance(v, type):
            out[key] = key_of(dataclasses.replace(v, compile_sha256=""))
    return {k: old for k, old in out.items() if old != k}


def _pool_verdict(raw: dict) -> str | None:
    """The register-pool verdict of a stored record's JSON (derived from its SASS when stored before the check)."""
    from tileprobe.schema import derive_register_pool
    pool = keyed_from_dict(RegisterPool, raw["register_pool"]) if "register_pool" in raw else \
        derive_register_pool(SassFacts.from_dict(raw["sass"]) if isinstance(raw.get("sass"), dict) else None)
    return pool.verdict if pool is not None else None


def _wants_sass(rec: VariantRecord, with_sass: bool | str) -> bool:
    """Whether a reused record gets SASS facts from its stored cubin: ``with_sass`` True, when it has no traits or
    a stale register-pool check; :data:`~tileprobe.model.sass.SASS_GATE` (the tune), only when it has no
    register-pool verdict (a record stored by a gated compile has the verdict and no traits; one whose nvdisasm
    failed has neither) or a stale one: of an older walk, or a gated ``none`` of other gate rules."""
    from tileprobe.model.sass import GATE_VERSION, SASS_GATE
    if not with_sass or not rec.ok:
        return False
    pool = rec.register_pool
    if with_sass == SASS_GATE:   # no verdict (not read, or nvdisasm failed), or a gate of other rules: again
        return pool is None or _stale_pool(rec) or (rec.sass is None and pool.gate_version != GATE_VERSION)
    return rec.sass is None or _stale_pool(rec)


def _stale_pool(rec: VariantRecord) -> bool:
    """Whether a stored record's register-pool check is missing or from an older model while its SASS
    has setmaxnreg: then the store checks the stored cubin again."""
    from tileprobe.model.regpool import MODEL_VERSION
    if not (rec.sass and rec.sass.setmaxnreg):
        return False
    return rec.register_pool is None or rec.register_pool.model_version != MODEL_VERSION


class CompilesMixin(StoreConnection):
    """The compiles and cubins of :class:`~tileprobe.store.Store` (module doc): keys, lookup, save, import, read
    back. ``records(runs=True)`` attaches GPU runs through :class:`~tileprobe.store.runs.RunsMixin`."""

    if TYPE_CHECKING:     # RunsMixin's, beside this part in Store (the parts never import each other)
        def _attach_runs(self, items: list[tuple]) -> None: ...

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
        """:func:`compile_key` with this process's cuda-tile version, and the bytecode version when it is fixed
        (``$TILEPROBE_BYTECODE``, ``audit --fixed-bytecode``: other bytes than the newest each tileiras reads)."""
        fixed = os.environ.get("TILEPROBE_BYTECODE", "").strip()
        return compile_key(variant, build, self.cuda_tile() + (f"+bytecode{fixed}" if fixed else ""))

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

    def lookup(self, variants: Sequence, tc: Toolchain, *, with_sass: bool = False,
               retry_failed: bool = False, any_status: bool = False) -> tuple[list, list]:
        """Split ``variants`` into records already stored for compiler ``tc`` and the variants still to compile.
        ``any_status``: every stored record is the answer (a compile another process just made).

        ``tc.build`` is the tileiras build string, ``tc.identity`` the hash of its files: a stored compile of
        other files is not reused (module doc, "Which compiler"). Reused records get the variant's current probe path and
        name, and no verdicts (the audit judges them with the rest). ``with_sass``: a reused record stored without
        SASS traits gets them from its stored cubin (nvdisasm here, no compile), and the store keeps them.
        Stored failures are reused too (module doc) unless ``retry_failed``.
        """
        from tileprobe.schema import VariantRecord
        keyed = {self.compile_key(v, tc.build): v for v in variants}
        legacy = _legacy_keys(keyed, lambda v: self.compile_key(v, tc.build))
        stored: dict[str, tuple[str, str, str | None]] = {}   # key -> (status, record JSON, tileiras hash)
        keys = list(keyed) + list(legacy.values())
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            sql = (f"SELECT key, status, record, tileiras_sha256 FROM compiles "
                   f"WHERE key IN ({','.join('?' * len(chunk))})")
            stored.update((k, (s, r, h)) for k, s, r, h in self._query(sql, chunk))
        found, todo = [], []
        for key, v in keyed.items():
            hit = stored.get(key)
            if hit is None and legacy.get(key) in stored:   # an older store's key
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
            if _wants_sass(rec, with_sass):
                self._add_sass(key, rec, with_sass)
            self._remember(rec, key)
            found.append(rec)
        return found, todo

    def _add_sass(self, key: str, rec, with_sass: bool | str = True) -> None:
        from tileprobe.model.sass import SASS_GATE, gated_summary, sass_facts, split_register_pool
        cubin = self.cubin(rec.cubin_sha256) if rec.cubin_sha256 else None   # the workers' summary: stored = fresh
        if cubin is None:
            return
        if with_sass == SASS_GATE:
            sass, rec.register_pool = split_register_pool(gated_summary(cubin, rec.symbol))
            rec.sass = sass or rec.sass
        else:
            rec.sass, rec.register_pool = sass_facts(cubin, rec.symbol)
        record = rec.to_dict()
        record.update(verdicts={}, run=None)
        with self._transaction() as c:
            c.execute("UPDATE compiles SET record = ? WHERE key = ?", (json.dumps(record, default=str), key))

    def save_compile(self, res, rec, tc: Toolchain) -> str:
        """Store one finished compile (its record, provenance and cubin) in its own transaction; return its key."""
        from tileprobe._version import __version__
        v = res.variant
        key = self.compile_key(v, tc.build)
        cubin_sha = hashlib.sha256(res.cubin).hexdigest() if res.cubin is not None else None
        record = rec.to_dict()
        record.update(verdicts={}, run=None)
        row = (key, now(), self.host, __version__, v.probe_name, v.probe_path, v.probe_index, v.source_sha256,
               res.symbol, json.dumps(res.signature, default=str), _pairs_json(v.case), _pairs_json(v.hints), v.arch,
               tc.build, tc.tileiras or res.tileiras_path, self.cuda_tile(), rec.status, cubin_sha,
               res.compile_s, json.dumps(record, default=str))
        try:
            with self._transaction() as c:
                if res.cubin is not None:
                    c.execute("INSERT OR IGNORE INTO cubins (sha256, size_bytes, arch, code_sha256, data, created) "
                              "VALUES (?, ?, ?, ?, ?, ?)", (cubin_sha, len(res.cubin), v.arch, rec.code_sha256,
                                                            sqlite3.Binary(res.cubin), now()))
                c.execute(f"INSERT OR REPLACE INTO compiles ({', '.join(_COMPILE_COLUMNS)}) "
                          f"VALUES ({', '.join('?' * len(_COMPILE_COLUMNS))})", row)
                c.execute("UPDATE compiles SET tileiras_sha256 = ? WHERE key = ?", (tc.identity, key))
                c.execute("DELETE FROM claims WHERE key = ?", (key,))
        except StoreError as e:
            if str(e).startswith("no space left on "):   # say which compile was not kept (the store is intact)
                label = " ".join([rec.kernel, *(f"{k}={x}" for k, x in (*v.case, *v.hints)), v.arch])
                raise StoreError(f"{e} The compile not kept: {label} ({rec.status}); the kept ones are not compiled "
                                 "again.") from e
            raise
        _SAVED_KEYS.add(key)
        _SAVED["compiles"] = len(_SAVED_KEYS)
        self._remember(rec, key)
        return key

    def import_records(self, records: Sequence, cubin_of: Callable[[str], bytes | None], cuda_tile: str | None) -> int:
        """Store the compiles of records audited on another machine (a bundle's) so their runs can be
        stored and compared here; return how many were new. The key is :func:`compile_key` of the record's own
        fields (kernel, case, hints, arch, build; no probe source hash: the bundle carries none, so
        ``source_sha256`` is ``"bundle"``) under the bundle's ``cuda_tile``; the cubin is stored when
        ``cubin_of(sha)`` has it. Records already stored are left as they are."""
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

    def cubin(self, sha256: str) -> bytes | None:
        """A stored cubin by its SHA-256, or None."""
        rows = self._query("SELECT data FROM cubins WHERE sha256 = ?", (sha256,))
        return bytes(rows[0][0]) if rows else None

    # --- reading back ----------------------------------------------------------------------------------------------

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
                rec.verdicts = verdicts_from_dict(json.loads(row[3] or "{}"))
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
                        "status": status, "failure": _failure(status, rec), "threads": rec.get("threads"),
                        "registers": rec.get("registers"),
                        "shared_bytes": rec.get("shared_bytes"), "stack_bytes": rec.get("stack_bytes"),
                        "ctas_per_sm": rec.get("ctas_per_sm"), "cubin_sha256": cubin, "compile_s": comp_s,
                        "reg_pool": _pool_verdict(rec), "median_us": median, "gpu": gpu})
        return out


def _failure(status: str, raw: dict) -> str | None:
    """The failure class of a stored record's JSON (``unsupported_feature`` …; None when ok), derived from its
    status and error when it was stored before failure classes (:func:`tileprobe.outcomes.derive_failure`)."""
    if status == "ok":
        return None
    from tileprobe.schema import VariantRecord
    return VariantRecord.from_dict(raw).failure      # from_dict derives it for a record older than the classes


def _natural_order(r) -> tuple:
    """Kernel, arch (by compute capability), compiler (by version), then case and hint values (numbers by value)."""
    from tileprobe.errors import TileprobeError
    from tileprobe.model.arch import get_arch

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
