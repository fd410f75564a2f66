"""The results store: round trip, warm re-audit, a sweep killed with SIGKILL, concurrent writers, migrations, errors.

Compiles use a tiny probe (``vec_add`` from ``tests/data/kernels.py``, sm_90, a handful of variants); everything
else uses synthetic compile results, so it needs no compiler.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import write_vec_probe

import tileprobe.audit.pipeline as audit_mod
from tileprobe.compile.job import CompileResult, Variant
from tileprobe.errors import StoreError
from tileprobe.judge.verdict import judge_records
from tileprobe.records import SassFacts
from tileprobe.schema import VariantRecord, VariantRun, load
from tileprobe.store import SCHEMA_VERSION, Store, compile_key
from tileprobe.toolchain import Toolchain

ROOT = Path(__file__).resolve().parents[1]
TC = Toolchain.at("/opt/fake/tileiras", build="Cuda compilation tools, release 13.4, V13.4.92")
B133 = "Cuda compilation tools, release 13.3, V13.3.36"


class CountingCompiles:
    """Wraps ``audit.compile_variants`` and counts the variants handed to the compiler."""

    def __init__(self, monkeypatch):
        self.variants: list[Variant] = []
        real = audit_mod.compile_variants

        def counting(variants, **kw):
            variants = list(variants)
            self.variants.extend(variants)
            return real(variants, **kw)
        monkeypatch.setattr(audit_mod, "compile_variants", counting)


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """One cold audit of 4 variants into a fresh store (shared read-only by the tests below; copy to mutate)."""
    d = tmp_path_factory.mktemp("cold")
    probe = write_vec_probe(d / "probe_vec.py", tiles=(1024, 2048))
    path = str(d / "results.sqlite")
    with Store.open(path) as store:
        result = audit_mod.audit([probe], ["sm_90"], jobs=2, store=store)
        audit_id = store.save_audit(result, "audit probe_vec.py --arch sm_90")
    return {"probe": probe, "store": path, "result": result, "audit_id": audit_id}


def copy_store(src: str, dst: Path) -> str:
    """A consistent copy of a WAL-mode store (sqlite's backup API)."""
    with sqlite3.connect(src) as a, sqlite3.connect(str(dst)) as b:
        a.backup(b)
    return str(dst)


# --- round trip and warm re-audit -------------------------------------------------------------------------------

def test_round_trip_records_cubins_and_audits(cold):
    result = cold["result"]
    assert len(result.records) == 4 and all(r.ok for r in result.records)
    with Store.open(cold["store"]) as store:
        assert store.schema_version() == SCHEMA_VERSION
        got = store.records(judge=judge_records)
        assert [r.to_dict() for r in got] == [r.to_dict() for r in result.records]
        by_audit = store.records(audit_id=cold["audit_id"])
        assert [r.verdicts for r in by_audit] == [r.verdicts for r in result.records]
        for r in got:
            data = store.cubin(r.cubin_sha256)
            assert data is not None and data[:4] == b"\x7fELF"
            assert data == result.cubins[r.cubin_sha256]
        (audit,) = [a for a in store.audits() if a["id"] == cold["audit_id"]]
        assert audit["command_line"] == "audit probe_vec.py --arch sm_90"
        assert len(audit["compile_keys"]) == 4 and None not in audit["compile_keys"]
        rows = store.compiles()
        assert {c["source_sha256"] for c in rows} == {audit_mod.source_sha256(audit_mod.load_probes(cold["probe"])[0])}
        assert {c["tileiras"] for c in rows} == {result.records[0].tileiras}
        assert all(c["symbol"] and c["host"] and c["cuda_tile"] for c in rows)


def test_cubins_are_stored_once_by_content(cold):
    with Store.open(cold["store"]) as store:
        n_cubins = store._query("SELECT count(*) FROM cubins")[0][0]
        distinct = {r.cubin_sha256 for r in store.records()}
    assert n_cubins == len(distinct)


def test_warm_reaudit_compiles_nothing(cold, tmp_path, monkeypatch):
    path = copy_store(cold["store"], tmp_path / "warm.sqlite")
    counter = CountingCompiles(monkeypatch)
    with Store.open(path) as store:
        warm = audit_mod.audit([cold["probe"]], ["sm_90"], jobs=2, store=store)
    assert counter.variants == []          # nothing compiled (its speed: benchmarks/store/bench_store.py)
    assert [r.to_dict() for r in warm.records] == [r.to_dict() for r in cold["result"].records]


def test_edited_source_or_other_compiler_is_a_miss(cold, tmp_path, monkeypatch):
    path = copy_store(cold["store"], tmp_path / "s.sqlite")
    with Store.open(path) as store:
        variants = audit_mod.plan_variants(audit_mod.load_probes(cold["probe"]), ["sm_90"])
        build = cold["result"].records[0].tileiras
        found, todo = store.lookup(variants, Toolchain.at("x", build=build))
        assert len(found) == 4 and todo == []
        found, todo = store.lookup(variants, Toolchain.at("x", build=B133))
        assert found == [] and todo == variants
        edited = [Variant(v.probe_path, v.probe_index, v.probe_name, v.case, v.hints, v.arch, "0" * 64)
                  for v in variants]
        assert store.lookup(edited, Toolchain.at("x", build=build))[1] == edited


def test_key_covers_each_field_and_not_the_path():
    v = Variant("/a/p.py", 0, "k", (("TILE", 1024),), (("occupancy", 2),), "sm_90", "ab" * 32)
    key = compile_key(v, TC.build, "1.7.0")
    same = Variant("/elsewhere/p.py", 0, "k", (("TILE", 1024),), (("occupancy", 2),), "sm_90", "ab" * 32)
    assert compile_key(same, TC.build, "1.7.0") == key
    changed = [
        Variant("/a/p.py", 1, "k", v.case, v.hints, "sm_90", v.source_sha256),
        Variant("/a/p.py", 0, "k2", v.case, v.hints, "sm_90", v.source_sha256),
        Variant("/a/p.py", 0, "k", (("TILE", 2048),), v.hints, "sm_90", v.source_sha256),
        Variant("/a/p.py", 0, "k", (("TILE", True),), v.hints, "sm_90", v.source_sha256),
        Variant("/a/p.py", 0, "k", v.case, (("occupancy", 1),), "sm_90", v.source_sha256),
        Variant("/a/p.py", 0, "k", v.case, v.hints, "sm_120", v.source_sha256),
        Variant("/a/p.py", 0, "k", v.case, v.hints, "sm_90", "cd" * 32),
    ]
    keys = {compile_key(c, TC.build, "1.7.0") for c in changed}
    keys |= {compile_key(v, B133, "1.7.0"), compile_key(v, TC.build, "1.6.0")}
    assert key not in keys and len(keys) == len(changed) + 2
    assert compile_key(Variant("/a", 0, "k", (("A", 1),), (), "sm_90", "x"), "b", "c") != \
        compile_key(Variant("/a", 0, "k", (), (("A", 1),), "sm_90", "x"), "b", "c")


# --- synthetic results (no compiler) -------------------------------------------------------------------------------

def fake(i: int, status: str = "ok", kernel: str = "fake") -> tuple[CompileResult, VariantRecord]:
    v = Variant("/tmp/fake_probe.py", 0, kernel, (("I", i),), (("occupancy", 1 + i % 2),), "sm_90", "f" * 64)
    cubin = b"\x7fELF" + i.to_bytes(4, "big") * 8 if status == "ok" else None
    res = CompileResult(v, status, tileiras=TC.build, cuda_tile="1.7.0", symbol=f"k{i}", cubin=cubin,
                        error="" if status == "ok" else "boom")
    rec = VariantRecord(kernel=kernel, probe=v.probe_path, case=v.case_dict, hints=v.hints_dict, arch="sm_90",
                        tileiras=TC.build, status=status, threads=128, registers=32 + i, shared_bytes=0,
                        stack_bytes=0, ctas_per_sm=16, warps_per_sm=64, occupancy_pct=100.0, limiter="threads",
                        cubin_sha256=None, code_sha256="c" * 64)
    return res, rec


def test_failed_compiles_reuse_policy(tmp_path):
    """A stored failure is the answer (not compiled on every audit) unless --retry-failed; probe errors
    and broken environments are compiled again (neither is in the key)."""
    with Store.open(tmp_path / "s.sqlite") as store:
        results = [fake(0, "ok"), fake(1, "compile_error"), fake(2, "timeout"), fake(3, "compiler_crash"),
                   fake(4, "probe_error"), fake(5, "compile_error")]
        results[5][1].failure = "broken_environment"
        for res, rec in results:
            store.save_compile(res, rec, TC)
        variants = [res.variant for res, _ in results]
        found, todo = store.lookup(variants, TC)
        assert sorted(r.status for r in found) == ["compile_error", "compiler_crash", "ok", "timeout"]
        assert sorted(v.case_dict["I"] for v in todo) == [4, 5]
        # stored before failure classes existed: the class is derived on load from status and error
        assert {r.status: r.failure for r in found} == {"ok": None, "compile_error": "compile_error",
                                                         "compiler_crash": "compiler_crash", "timeout": "timeout"}
        found, todo = store.lookup(variants, TC, retry_failed=True)
        assert [r.status for r in found] == ["ok"]
        assert sorted(v.case_dict["I"] for v in todo) == [1, 2, 3, 4, 5]


def test_runs_history_and_exports(tmp_path, capsys):
    from tileprobe.cli import main
    path = str(tmp_path / "s.sqlite")
    with Store.open(path) as store:
        keys = [store.save_compile(*fake(i), TC) for i in range(3)]
        run_id = store.save_run(keys[1], VariantRun(status="ok", median_us=12.5, stdev_us=0.2),
                                {"name": "NVIDIA H200", "driver": "580.159", "clocks": {"sm_mhz": 1980}})
        assert run_id >= 1
        with pytest.raises(StoreError, match=r"no stored compile with key 'nope'"):
            store.save_run("nope", VariantRun(median_us=1.0), {})
        recs = store.records()
        assert [r.run.median_us if r.run else None for r in recs] == [None, 12.5, None]
        assert recs[1].run.gpu == "NVIDIA H200"
        (run,) = store.runs()
        assert run["gpu"] == "NVIDIA H200" and run["driver"] == "580.159" and run["clocks"] == {"sm_mhz": 1980}
    out_json, out_csv = tmp_path / "h.json", tmp_path / "h.csv"
    assert main(["history", "--store", path, "--json", str(out_json), "--csv", str(out_csv), "--arch", "sm_90"]) == 0
    records, env = load(str(out_json))
    assert len(records) == 3 and env["store"] == path
    assert len(json.loads(out_json.read_text())["runs"]) == 1
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 3 and {r["median_us"] for r in rows} == {"", "12.5"} and rows[0]["gpu"] in ("", "NVIDIA H200")
    err = " ".join(capsys.readouterr().err.split())       # says what it wrote, as `report -o FILE` does
    assert err == f"wrote {out_json}: 3 variants wrote {out_csv}: 3 rows"
    assert main(["history", "--store", path, "--kernel", "fake", "--tileiras", "13.4"]) == 0
    assert "fake" in capsys.readouterr().out
    assert main(["history", "--store", path, "--json", str(out_json), "--kernel", "fake", "--arch", "sm_100"]) == 0
    assert load(str(out_json))[0] == []                     # a known kernel, nothing on that arch: an empty export
    assert main(["history", "--store", path, "--json", str(out_json), "--kernel", "other"]) == 2   # a typo: an error


# --- SIGKILL in the middle of a sweep --------------------------------------------------------------------------------

def _stored(path: str) -> dict[str, tuple]:
    if not os.path.exists(path):
        return {}
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as c:
            rows = c.execute("SELECT key, created, record FROM compiles")
            return {k: (created, record) for k, created, record in rows}
    except sqlite3.OperationalError:   # not created yet
        return {}


def test_sweep_killed_with_sigkill_loses_nothing_and_resumes(tmp_path):
    probe = write_vec_probe(tmp_path / "probe_kill.py", tiles=(256, 512, 1024), occupancy=(1, 2))  # 6 variants
    path = str(tmp_path / "kill.sqlite")
    cmd = [sys.executable, "-m", "tileprobe.cli", "audit", probe, "--arch", "sm_90", "--jobs", "1",
           "--store", path, "--format", "none"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not _stored(path):
            assert proc.poll() is None, f"the audit ended before storing anything: {proc.stderr.read().decode()}"
            assert time.monotonic() < deadline, "no variant stored within 240 s"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # the orphaned compile workers of the killed sweep (own session)
        except ProcessLookupError:
            pass
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    before = _stored(path)
    assert 1 <= len(before) < 6, f"{len(before)} variants stored at the kill: the kill came too late to test resume"

    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    after = _stored(path)
    assert len(after) == 6
    for key, (created, record) in before.items():
        # not compiled again (same time of saving), and the same record but for the SASS facts, which a compile
        # saved just before the kill may still lack (the store fills them in from its cubin when it reads it back)
        assert after[key][0] == created, "a variant finished before the kill was compiled again"
        def without_sass(text):
            return {k: v for k, v in json.loads(text).items() if k not in ("sass", "register_pool")}
        assert without_sass(after[key][1]) == without_sass(record), "a finished variant changed on resume"
    with Store.open(path) as store:
        (audit,) = store.audits()
        assert audit["n_variants"] == 6 and set(audit["compile_keys"]) == set(after)
        assert store._query("PRAGMA integrity_check")[0][0] == "ok"


def test_ctrl_c_keeps_finished_variants(tmp_path):
    probe = write_vec_probe(tmp_path / "probe_int.py", tiles=(256, 512, 1024), occupancy=(1, 2))
    path = str(tmp_path / "int.sqlite")
    cmd = [sys.executable, "-m", "tileprobe.cli", "audit", probe, "--arch", "sm_90", "--jobs", "1", "--store", path,
           "--format", "none"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_ctrl_c_default)
    try:
        deadline = time.monotonic() + 240
        while not _stored(path):
            assert proc.poll() is None and time.monotonic() < deadline, "no variant stored"
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)     # Ctrl-C: the whole foreground group, compile workers included
        _, err = proc.communicate(timeout=120)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    before = _stored(path)
    assert proc.returncode == 130
    n = len(before)
    assert f"interrupted; {n} compile{'s' if n > 1 else ''} finished before it {'are' if n > 1 else 'is'} kept in " \
           "the results store" in err
    assert 1 <= len(before) < 6
    with Store.open(path) as store:
        assert store._query("PRAGMA integrity_check")[0][0] == "ok"
        assert len(store.records()) == len(before)


# --- two writers at once -------------------------------------------------------------------------------------------

WRITER = """
import sys
sys.path.insert(0, {tests!r})
from test_store import fake, TC
from tileprobe.store import Store
from tileprobe.audit.pipeline import AuditResult
start, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with Store.open(path) as store:
    recs = []
    for i in range(start, start + n):
        res, rec = fake(i)
        store.save_compile(res, rec, TC)
        recs.append(rec)
        if i % 50 == 0:
            store.save_audit(AuditResult(records=list(recs)), f"writer {{start}}")
"""


def test_two_concurrent_writers(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    code = WRITER.format(tests=str(ROOT / "tests"))
    # Overlapping ranges: both write 100-199; the store starts empty, so both also race to create the schema.
    procs = [subprocess.Popen([sys.executable, "-c", code, str(start), "200", path], cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for start in (0, 100)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    with Store.open(path) as store:
        assert store._query("PRAGMA integrity_check")[0][0] == "ok"
        assert store._query("SELECT count(*) FROM compiles")[0][0] == 300
        assert store._query("SELECT count(*) FROM cubins")[0][0] == 300
        assert len(store.audits()) == 8
        assert store.meta()["schema_version"] == str(SCHEMA_VERSION)


# --- schema versions and damaged files --------------------------------------------------------------------------------

#: The store as tileprobe wrote it at schema 1 (frozen here: the test must not build it with today's code).
SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE cubins (sha256 TEXT PRIMARY KEY, size_bytes INTEGER NOT NULL, arch TEXT, code_sha256 TEXT,
                     data BLOB NOT NULL, created TEXT NOT NULL);
CREATE TABLE compiles (key TEXT PRIMARY KEY, created TEXT NOT NULL, host TEXT, tileprobe TEXT, kernel TEXT NOT NULL,
                       probe TEXT, probe_index INTEGER, source_sha256 TEXT, symbol TEXT, signature TEXT, case_json TEXT,
                       hints_json TEXT, arch TEXT NOT NULL, tileiras TEXT, tileiras_path TEXT, cuda_tile TEXT,
                       status TEXT NOT NULL, cubin_sha256 TEXT, compile_s REAL, record TEXT NOT NULL);
CREATE TABLE audits (id INTEGER PRIMARY KEY AUTOINCREMENT, created TEXT NOT NULL, host TEXT, tileprobe TEXT,
                     command_line TEXT, environment TEXT, wall_s REAL, n_variants INTEGER);
CREATE TABLE audit_compiles (audit_id INTEGER NOT NULL, position INTEGER NOT NULL, compile_key TEXT, verdicts TEXT,
                             PRIMARY KEY (audit_id, position));
INSERT INTO meta VALUES ('schema_version', '1'), ('created', '2026-11-01T00:00:00.000000Z');
PRAGMA user_version = 1;
"""


def test_existing_schema_1_store_is_migrated(tmp_path):
    path = str(tmp_path / "old.sqlite")
    res, rec = fake(7)
    key = compile_key(res.variant, TC.build, "1.7.0")
    with sqlite3.connect(path) as c:
        c.executescript(SCHEMA_1)
        c.execute("INSERT INTO compiles (key, created, kernel, probe, case_json, hints_json, arch, tileiras, "
                  "cuda_tile, status, record) VALUES (?, '2026-11-01T00:00:00Z', 'fake', ?, '[[\"I\",7]]', "
                  "'[[\"occupancy\",2]]', 'sm_90', ?, '1.7.0', 'ok', ?)",
                  (key, res.variant.probe_path, TC.build, json.dumps(rec.to_dict())))
        c.execute("INSERT INTO audits (created, command_line, n_variants) VALUES ('2026-11-01T00:00:00Z', 'old', 1)")
        c.execute("INSERT INTO audit_compiles VALUES (1, 0, ?, '{}')", (key,))
    with Store.open(path) as store:
        assert store.schema_version() == SCHEMA_VERSION == 5
        meta = store.meta()
        assert meta["migrated_from"] == "1" and meta["created"] == "2026-11-01T00:00:00.000000Z"
        (old,) = store.records()
        assert old.registers == rec.registers and old.kernel == "fake"
        assert store.audits()[0]["compile_keys"] == [key]
        store.save_run(key, VariantRun(status="ok", median_us=3.0), {"name": "GPU"})   # the table schema 2 added
        assert store.records()[0].run.median_us == 3.0
    with Store.open(path) as store:       # opening again migrates nothing
        assert store.meta()["migrated_from"] == "1"


def test_stored_compiles_are_reused_only_for_the_same_compiler_files(tmp_path):
    """A compiler is what its files are (tc.identity); a fake tileiras that prints 13.4.92's version
    stores its failures against its own files, and the real 13.4.92 does not reuse them (nor its ok rows). Rows of
    a schema-4 store (no hash) are reused when ok and compiled again when failed."""
    real, fake_tc = dataclasses.replace(TC, identity="a" * 64), dataclasses.replace(TC, identity="b" * 64)
    path = tmp_path / "s.sqlite"
    with Store.open(path) as store:
        ok, hung = fake(0, "ok"), fake(1, "timeout")
        store.save_compile(*ok, fake_tc)
        store.save_compile(*hung, fake_tc)
        variants = [ok[0].variant, hung[0].variant]
        assert [r.status for r in store.lookup(variants, fake_tc)[0]] == ["ok", "timeout"]   # its own: reused
        found, todo = store.lookup(variants, real)
        assert found == [] and todo == variants                                           # another's: compiled
        store.save_compile(*fake(1, "ok"), real)                                          # replaces the fake's row
        found, todo = store.lookup(variants, real)
        assert [r.status for r in found] == ["ok"] and todo == [ok[0].variant]
    with sqlite3.connect(path) as c:      # as a schema-4 store held them: no hash
        c.execute("UPDATE compiles SET tileiras_sha256 = NULL")
    with Store.open(path) as store:
        store.save_compile(*fake(2, "compile_error"), TC)
        with sqlite3.connect(path) as c:
            c.execute("UPDATE compiles SET tileiras_sha256 = NULL")
        found, todo = store.lookup([ok[0].variant, hung[0].variant, fake(2)[0].variant], real)
        assert [r.status for r in found] == ["ok", "ok"] and todo == [fake(2)[0].variant]


def test_a_schema_4_store_gets_the_compiler_hash_column_and_keeps_its_rows(tmp_path):
    path = str(tmp_path / "v4.sqlite")
    with Store.open(path) as store:
        store.save_compile(*fake(0), TC)
    with sqlite3.connect(path) as c:      # back to schema 4: no tileiras_sha256 column
        c.execute("ALTER TABLE compiles DROP COLUMN tileiras_sha256")
        c.execute("PRAGMA user_version = 4")
    with Store.open(path) as store:
        assert store.schema_version() == 5 and store.meta()["migrated_from"] == "4"
        (rec,) = store.records()
        assert rec.registers == 32 and rec.ok
        assert store.lookup([fake(0)[0].variant], dataclasses.replace(TC, identity="a" * 64))[0][0].registers == 32


def test_a_store_with_a_negative_schema_is_refused_and_left_as_it_is(tmp_path):
    path = str(tmp_path / "neg.sqlite")
    Store.open(path).close()
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA user_version = -1")
    before = open(path, "rb").read()
    with pytest.raises(StoreError, match=r"has store schema -1 \(PRAGMA user_version\), which no tileprobe writes"):
        Store.open(path)
    assert open(path, "rb").read() == before


def test_newer_store_is_refused(tmp_path):
    path = str(tmp_path / "new.sqlite")
    Store.open(path).close()
    with sqlite3.connect(path) as c:
        c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 7}")
    with pytest.raises(StoreError, match=rf"store schema {SCHEMA_VERSION + 7}, written by a newer tileprobe; "
                                         rf"tileprobe .* reads up to schema {SCHEMA_VERSION}\. Upgrade tileprobe "
                                         r"\(pip install -U tileprobe\)"):
        Store.open(path)


def test_corrupt_file_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "bad.sqlite"
    garbage = b"this is not sqlite, it is someone's notes\n" * 200
    path.write_bytes(garbage)
    with pytest.raises(StoreError, match=r"is damaged or is not a tileprobe store \(sqlite: file is not a database\)\. "
                                         r"tileprobe does not delete results: move the file aside"):
        Store.open(path)
    assert path.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sqlite"]


def test_truncated_store_fails_with_store_error(cold, tmp_path):
    path = Path(copy_store(cold["store"], tmp_path / "t.sqlite"))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(StoreError, match=r"damaged or is not a tileprobe store \(sqlite: database disk image is "
                                         r"malformed"):
        with Store.open(path) as store:
            store.records()
    assert path.stat().st_size == len(data) // 3


def test_foreign_sqlite_database_is_refused(tmp_path):
    path = str(tmp_path / "other.sqlite")
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE photos (id INTEGER)")
    with pytest.raises(StoreError, match=r"is an SQLite database but not a tileprobe results store \(tables: photos"):
        Store.open(path)


def test_store_location(tmp_path, monkeypatch):
    from tileprobe.store import default_path
    monkeypatch.setenv("TILEPROBE_STORE", str(tmp_path / "env.sqlite"))
    assert default_path() == str(tmp_path / "env.sqlite")
    with Store.open(None) as store:
        assert store.path == str(tmp_path / "env.sqlite")
    monkeypatch.delenv("TILEPROBE_STORE")
    assert default_path().endswith(os.path.join("tileprobe", "results.sqlite"))
    with pytest.raises(StoreError, match="is a directory"):
        Store.open(tmp_path)


def test_lookup_with_sass_fills_traits_from_the_stored_cubin(cold, tmp_path):
    path = copy_store(cold["store"], tmp_path / "sass.sqlite")
    with Store.open(path) as store:
        variants = audit_mod.plan_variants(audit_mod.load_probes(cold["probe"]), ["sm_90"])
        tc = Toolchain.at("x", build=cold["result"].records[0].tileiras)
        found, todo = store.lookup(variants, tc)
        assert todo == [] and all(r.sass is None for r in found)
        found, todo = store.lookup(variants, tc, with_sass=True)
        assert todo == [] and all(isinstance(r.sass, SassFacts) and "spill_stores" in r.sass for r in found), found[0].sass
        assert all(r.sass is not None for r in store.lookup(variants, tc)[0])   # kept in the store


def test_lookup_with_the_sass_gate_reads_only_the_ptx_where_it_has_no_setmaxnreg(cold, tmp_path, monkeypatch):
    """The tune's lookup (SASS_GATE) gives a stored record without traits the register-pool verdict from
    its PTX (vec_add has no setmaxnreg), with no nvdisasm run, keeps it, and a full lookup still reads the traits."""
    from tileprobe.model import sass as sass_mod
    path = copy_store(cold["store"], tmp_path / "gate.sqlite")
    with Store.open(path) as store:
        variants = audit_mod.plan_variants(audit_mod.load_probes(cold["probe"]), ["sm_90"])
        tc = Toolchain.at("x", build=cold["result"].records[0].tileiras)
        with monkeypatch.context() as m:
            m.setattr(sass_mod, "sass_facts", lambda *a: pytest.fail("nvdisasm was run"))
            found, todo = store.lookup(variants, tc, with_sass=sass_mod.SASS_GATE)
        assert todo == [] and len(found) == 4
        assert all(r.sass is None and r.pool_verdict == "none" for r in found), found[0].register_pool
        again = store.lookup(variants, tc)[0]
        assert all(r.sass is None and r.pool_verdict == "none" for r in again)      # kept in the store
        if sass_mod.have_nvdisasm():
            full = store.lookup(variants, tc, with_sass=True)[0]
            assert all(isinstance(r.sass, SassFacts) and "spill_stores" in r.sass for r in full)


def test_the_gated_lookup_checks_again_what_has_no_verdict_or_a_gate_of_other_rules():
    """Hostile test 9: a record whose nvdisasm failed (traits with an error, no register-pool verdict) was never
    checked again, and the tune launched it unchecked; a gated 'none' of older gate rules is checked again too."""
    from tileprobe.model.sass import GATE_VERSION, SASS_GATE
    from tileprobe.records import RegisterPool
    from tileprobe.store.compiles import _wants_sass
    rec = VariantRecord(kernel="k", probe="p.py", case={}, hints={}, arch="sm_90", tileiras="t", status="ok")
    rec.sass = SassFacts(error="nvdisasm could not decode the cubin")
    assert _wants_sass(rec, SASS_GATE) and not _wants_sass(rec, True)     # audit: the error stays the answer
    rec.sass = None
    rec.register_pool = RegisterPool(verdict="none", model_version=1, gate_version=GATE_VERSION - 1)
    assert _wants_sass(rec, SASS_GATE) and _wants_sass(rec, True)
    rec.register_pool = RegisterPool(verdict="none", model_version=1, gate_version=GATE_VERSION)
    assert not _wants_sass(rec, SASS_GATE) and _wants_sass(rec, True)


def test_a_gated_audit_compiles_without_reading_the_sass(tmp_path):
    """The compile worker in SASS_GATE mode: vec_add's records carry the verdict none from the PTX and no traits."""
    from tileprobe.model.sass import SASS_GATE
    probe = write_vec_probe(tmp_path / "probe_vec.py", tiles=(1024,))
    result = audit_mod.audit([probe], ["sm_90"], jobs=1, with_sass=SASS_GATE)
    assert [r.status for r in result.records] == ["ok", "ok"]
    assert all(r.sass is None and r.pool_verdict == "none" for r in result.records)
    assert "no setmaxnreg in the embedded PTX" in result.records[0].pool_reason


def test_history_cli_prints_audits_compiles_and_runs(tmp_path, capsys):
    """Golden output of ``tileprobe history`` on a store built here (cells compared word by word)."""
    import re

    from tileprobe.audit import AuditResult
    from tileprobe.cli import main
    path = str(tmp_path / "h.sqlite")
    with Store.open(path) as store:
        keys = [store.save_compile(*fake(i), TC) for i in range(3)]
        store.save_run(keys[1], VariantRun(status="ok", median_us=12.5), {"name": "NVIDIA H200", "driver": "580.159"})
        records = [fake(i)[1] for i in range(2)]
        for r, k in zip(records, keys):
            store._remember(r, k)
        store.save_audit(AuditResult(records=records, wall_s=2.5), "audit p.py --arch sm_90")
        host = store.host
    assert main(["history", "--store", path, "--limit", "2"]) == 0
    when = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
    rows = [when.sub("WHEN", ln).replace(f" {host} ", " HOST ").split()
            for ln in capsys.readouterr().out.splitlines()]
    cells = [" ".join(w for w in row if w not in "│┃") for row in rows if row and row[0] in "│┃"]
    assert rows[0] == ["store:", path]
    # one value in every row: kernel, arch and compiler move into the title (the version, not the whole banner)
    assert ["compiles", "·", "kernel", "fake", "·", "arch", "sm_90", "·", "compiler", "tileiras", "13.4.92"] in rows
    assert cells == [
        "id when (UTC) host variants s command",
        "1 WHEN HOST 2 2.5 audit p.py --arch sm_90",
        "when (UTC) case hints status regs CTAs/SM compile s µs",
        "WHEN I=2 occupancy=1 ok 34 16 0.00 -",
        "WHEN I=1 occupancy=2 ok 33 16 0.00 12.5",
        "when (UTC) kernel case hints arch GPU driver status µs",
        "WHEN fake I=1 occupancy=2 sm_90 NVIDIA H200 580.159 ok 12.5"]
    assert " ".join(rows[-1]) == "(newest 2 of each; --limit 0 lists all, --json/--csv export all)"


def test_history_of_a_kernel_the_store_never_compiled_is_a_usage_error(tmp_path, capsys):
    """`history --kernel nosuch` listed empty tables and exit 0 (a new user, 2026-12-01)."""
    from tileprobe.cli import main
    path = str(tmp_path / "h.sqlite")
    with Store.open(path) as store:
        store.save_compile(*fake(0), TC)
        assert store.kernels() == ["fake"]
    assert main(["history", "--store", path, "--kernel", "fak"]) == 2
    assert "--kernel 'fak': no stored compile of that kernel (did you mean 'fake'?); the store has fake" in \
        capsys.readouterr().err
    assert main(["history", "--store", path, "--kernel", "fake"]) == 0
    with Store.open(str(tmp_path / "empty.sqlite")) as store:
        pass
    assert main(["history", "--store", str(tmp_path / "empty.sqlite"), "--kernel", "x"]) == 2
    assert "the store holds no compile yet" in capsys.readouterr().err


def test_the_interrupt_message_says_what_was_kept_or_that_no_store_was_used(monkeypatch, capsys):
    """With --no-store, Ctrl-C said "nothing had been saved to the results store yet" (a tester, 2026-12-01)."""
    import tileprobe.cli._common as common
    import tileprobe.store.connection as st  # the counters live there (store/ a package)
    from tileprobe.cli._common import print_interrupted
    monkeypatch.setattr(common, "COMMAND_ARGV", ["compile", "p.py", "--no-store"])
    for saved, opened, text in (({"compiles": 0, "runs": 0}, set(), "nothing is kept: no results store was used "
                                                                    "(--no-store)"),
                                ({"compiles": 0, "runs": 0}, {"s"}, "nothing had been saved to the results store yet"),
                                ({"compiles": 2, "runs": 1}, {"s"}, "2 compiles and 1 run finished before it are kept "
                                                                    "in the results store")):
        monkeypatch.setattr(st, "_SAVED", saved)
        monkeypatch.setattr(st, "_OPENED", opened)
        print_interrupted()
        assert capsys.readouterr().err.strip() == f"interrupted; {text}"
    # `use` (no store, no --no-store; the program's own --no-store after --): --no-store is not named
    monkeypatch.setattr(common, "COMMAND_ARGV", ["use", "t.json", "--", "prog", "--no-store"])
    monkeypatch.setattr(st, "_SAVED", {"compiles": 0, "runs": 0})
    monkeypatch.setattr(st, "_OPENED", set())
    print_interrupted("terminated by SIGTERM")
    assert capsys.readouterr().err.strip() == "terminated by SIGTERM; nothing is kept: no results store was used"


def _ctrl_c_default() -> None:
    """In the child before exec: SIGINT as a terminal's foreground job has it (default), whatever this process
    inherited or a test left (conftest's ``_sigint_as_it_was``): the test is of Ctrl-C, not of an ignored SIGINT."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)



def test_history_csv_writes_a_tuple_tile_as_one_word(tmp_path):
    """A new user (session 16): TileGym's ``TILE=(256, 256, 64)`` came out of ``history --csv`` as
    ``TILE=[256, 256, 64]``, three space-separated words in a column of NAME=VALUE words; now one word, as the
    tables write it."""
    from tileprobe.cli import main
    path = str(tmp_path / "s.sqlite")
    res, rec = fake(0)
    v = res.variant
    res.variant = Variant(v.probe_path, 0, v.probe_name, (("TILE", (256, 256, 64)),), v.hints, v.arch, v.source_sha256)
    rec.case = {"TILE": [256, 256, 64]}
    with Store.open(path) as store:
        store.save_compile(res, rec, TC)
    out_csv = tmp_path / "h.csv"
    assert main(["history", "--store", path, "--csv", str(out_csv)]) == 0
    (row,) = list(csv.DictReader(out_csv.open(encoding="utf-8")))
    assert row["case"] == "TILE=256×256×64" and row["hints"] == "occupancy=1"


def test_history_names_a_failure_by_its_class_as_the_audit_does(tmp_path, capsys):
    """A new user (session 17): the audit called w4a16_gemm's sm_90 failures unsupported_feature, `history` only
    compile_error. The table's status cell and a `failure` CSV column now give the class (derived for a record
    stored before classes existed)."""
    from tileprobe.cli import main
    path = str(tmp_path / "s.sqlite")
    res, rec = fake(1, "compile_error")
    rec.failure = "unsupported_feature"
    old_res, old_rec = fake(2, "timeout")          # stored without a class: derived from its status
    with Store.open(path) as store:
        store.save_compile(res, rec, TC)
        store.save_compile(old_res, old_rec, TC)
    out_csv = tmp_path / "h.csv"
    assert main(["history", "--store", path, "--csv", str(out_csv)]) == 0
    rows = {r["case"]: r for r in csv.DictReader(out_csv.open(encoding="utf-8"))}
    assert (rows["I=1"]["status"], rows["I=1"]["failure"]) == ("compile_error", "unsupported_feature")
    assert (rows["I=2"]["status"], rows["I=2"]["failure"]) == ("timeout", "timeout")
    capsys.readouterr()
    assert main(["history", "--store", path]) == 0
    assert "unsupported_feature" in capsys.readouterr().out
