"""Store hygiene: ``tileprobe store size`` and ``store prune`` (the newest compile of a variant stays unless
``--keep-latest 0``; runs and cubins only the pruned compiles used go with them; the file shrinks: VACUUM)."""
from __future__ import annotations

import datetime
import os
import subprocess
import sys

import pytest

from tileprobe.cli import main
from tileprobe.cli.store import cutoff
from tileprobe.compile.job import CompileResult, Variant
from tileprobe.errors import TileprobeError
from tileprobe.schema import VariantRecord, VariantRun
from tileprobe.store import Store
from tileprobe.toolchain import Toolchain

B1 = "Cuda compilation tools, release 13.4, V13.4.92"
B2 = "Cuda compilation tools, release 13.3, V13.3.36"


def _save(store: Store, i: int, build: str, created: str, payload: int) -> str:
    """One compile of variant I=i under ``build``, with a cubin of ``payload`` distinct bytes, dated ``created``."""
    v = Variant("/tmp/p.py", 0, "k", (("I", i),), (("occupancy", 1),), "sm_90", f"{payload:064x}")
    cubin = b"\x7fELF" + payload.to_bytes(8, "big") * 20_000          # 160 kB each, distinct per payload
    rec = VariantRecord(kernel="k", probe=v.probe_path, case=v.case_dict, hints=v.hints_dict, arch="sm_90",
                        tileiras=build, status="ok", threads=128, registers=32, shared_bytes=0, stack_bytes=0,
                        ctas_per_sm=16, warps_per_sm=64, occupancy_pct=100.0, limiter="threads")
    res = CompileResult(v, "ok", tileiras=build, cuda_tile="1.7.0", symbol="k", cubin=cubin)
    key = store.save_compile(res, rec, Toolchain.at("/fake", build=build))
    store._conn.execute("UPDATE compiles SET created = ? WHERE key = ?", (created, key))
    return key


@pytest.fixture
def filled(tmp_path):
    """Variant I=0 compiled 3 times (Oct, Nov, Dec: an edited kernel, so 3 keys), I=1 once in Oct, I=0 under
    another compiler in Oct; a run of the October I=0 compile; an audit of the Oct compiles."""
    path = tmp_path / "s.sqlite"
    with Store.open(path) as s:
        old = _save(s, 0, B1, "2026-10-01T00:00:00.000000Z", 1)
        _save(s, 0, B1, "2026-11-01T00:00:00.000000Z", 2)
        newest = _save(s, 0, B1, "2026-12-01T00:00:00.000000Z", 3)
        _save(s, 1, B1, "2026-10-01T00:00:00.000000Z", 4)
        _save(s, 0, B2, "2026-10-01T00:00:00.000000Z", 5)
        s.save_run(old, VariantRun(status="ok", median_us=1.0), {"name": "H200"})
    return {"path": str(path), "old": old, "newest": newest}



def test_prune_keeps_the_newest_of_each_variant(filled):
    with Store.open(filled["path"]) as s:
        assert s.size()["compiles"] == 5 and s.size()["variants"] == 3 and s.size()["runs"] == 1
        dry = s.prune(older_than="2026-12-31", keep_latest=1, dry_run=True)
        assert (dry["compiles"], dry["runs"], dry["cubins"]) == (2, 1, 2) and s.size()["compiles"] == 5
        done = s.prune(older_than="2026-12-31", keep_latest=1)
        size = s.size()
        assert (done["compiles"], done["runs"], done["cubins"]) == (2, 1, 2)
        assert size["compiles"] == 3 and size["variants"] == 3 and size["runs"] == 0 and size["cubins"] == 3
        kept = {k for (k,) in s._query("SELECT key FROM compiles")}
        assert filled["newest"] in kept and filled["old"] not in kept
        assert done["bytes_after"] < done["bytes_before"] - 250_000      # two 160 kB cubins gone, file compacted


def test_prune_by_age_and_keep_latest_zero(filled):
    with Store.open(filled["path"]) as s:
        assert s.prune(older_than="2026-10-15", keep_latest=1)["compiles"] == 1       # only I=0's October one
        assert s.prune(older_than="2026-10-15", keep_latest=0)["compiles"] == 2       # now I=1 and B2 go too
        assert s.size()["variants"] == 1
        with pytest.raises(TileprobeError, match="--keep-latest -1"):
            s.prune(keep_latest=-1)


def test_store_cli_size_and_prune(filled, capsys):
    assert main(["store", "--store", filled["path"], "size"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "5 compiles of 3 variants, 5 cubins, 0 audits, 1 runs, 0 tunes" in out
    assert "compiles from 2026-10-01T00:00:00.000000Z to 2026-12-01T00:00:00.000000Z" in out
    assert main(["store", "--store", filled["path"], "prune", "--older-than", "2026-11-15"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("deleted 2 compiles, 1 runs, 2 cubins, 0 audits (kept the 1 newest of each variant, and "
                          "everything since 2026-11-15T00:00:00 UTC); ")
    assert main(["store", "--store", filled["path"], "prune", "--older-than", "soon"]) == 1
    assert "--older-than 'soon': give an age such as 30d" in capsys.readouterr().err


def test_cutoff_ages():
    now = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)
    assert cutoff("30d", now) == "2026-11-01T00:00:00.000000Z"
    assert cutoff("12h", now) == "2026-11-30T12:00:00.000000Z"
    assert cutoff("2026-11-01") == "2026-11-01T00:00:00.000000Z"
    assert cutoff(None) is None
    assert cutoff("2026-11-01T02:00:00+02:00") == "2026-11-01T00:00:00.000000Z"
    # older than the calendar (was an OverflowError): nothing is that old; the year keeps 4 digits so it sorts first
    assert cutoff("100000000000000000000d", now) == "0001-01-01T00:00:00.000000Z" < "2026-11-01"


def test_prune_leaves_no_row_pointing_at_a_deleted_compile(filled):
    """A hostile tester (2026-12-04): after a prune, audits still counted their deleted compiles (history said 16
    variants of an audit that kept 1). Now an audit counts what it kept, says how many were pruned, and a tune's
    candidate of a deleted compile keeps its row without the key."""
    with Store.open(filled["path"]) as s:
        with s._transaction() as c:
            c.execute("INSERT INTO audits (id, created, host, tileprobe, command_line, environment, wall_s, "
                      "n_variants) VALUES (7, '2026-12-02', 'h', 't', 'audit', '{\"tileiras\": \"x\"}', 1.0, 2)")
            c.executemany("INSERT INTO audit_compiles (audit_id, position, compile_key, verdicts) VALUES (7, ?, ?, '{}')",
                          [(0, filled["old"]), (1, filled["newest"])])
            c.execute("INSERT INTO tunes (id, created, kernel, problem_json, result) VALUES (3, 'x', 'k', '{}', '{}')")
            c.execute("INSERT INTO tune_candidates (tune_id, position, compile_key, status, summary) "
                      "VALUES (3, 0, ?, 'slower', '{}')", (filled["old"],))
        assert s.prune(older_than="2026-12-31", keep_latest=1)["compiles"] == 2
        assert s._query("SELECT n_variants, json_extract(environment, '$.pruned_variants'), "
                        "json_extract(environment, '$.tileiras') FROM audits WHERE id = 7") == [(1, 1, "x")]
        for table, column in (("audit_compiles", "compile_key"), ("runs", "compile_key"),
                              ("tune_candidates", "compile_key")):
            assert s._query(f"SELECT COUNT(*) FROM {table} WHERE {column} IS NOT NULL AND {column} NOT IN "
                            "(SELECT key FROM compiles)") == [(0,)], table
        assert s._query("SELECT status FROM tune_candidates WHERE tune_id = 3") == [("slower",)]


def _audit(c, audit_id: int, keys: list[str]) -> None:
    c.execute("INSERT INTO audits (id, created, host, tileprobe, command_line, environment, wall_s, n_variants) "
              "VALUES (?, '2026-12-02', 'h', 't', 'audit', '{}', 1.0, ?)", (audit_id, len(keys)))
    c.executemany("INSERT INTO audit_compiles (audit_id, position, compile_key, verdicts) VALUES (?, ?, ?, '{}')",
                  [(audit_id, i, k) for i, k in enumerate(keys)])


def test_history_and_compare_say_what_a_prune_took(tmp_path, capsys):
    """A hostile tester (2026-12-04): after `store prune`, `compare 1 2` said "1 same" and nothing of the variants
    that were gone. Now history counts what is still stored and both say how many variants of which audit were
    pruned."""
    path = str(tmp_path / "s.sqlite")
    with Store.open(path) as s:
        old0 = _save(s, 0, B1, "2026-10-01T00:00:00.000000Z", 1)
        old1 = _save(s, 1, B1, "2026-10-01T00:00:00.000000Z", 2)
        old2 = _save(s, 2, B1, "2026-10-01T00:00:00.000000Z", 3)
        new0 = _save(s, 0, B1, "2026-12-01T00:00:00.000000Z", 4)
        new2 = _save(s, 2, B1, "2026-12-01T00:00:00.000000Z", 5)
        with s._transaction() as c:
            _audit(c, 1, [old0, old1, old2])
            _audit(c, 2, [new0, old1, new2])
        assert s.prune(older_than="2026-12-31", keep_latest=1)["compiles"] == 2     # old0 and old2
        assert s.audit_count(1).variants == 1 and s.audit_count(1).pruned == 2
        assert s.audit_count(2).pruned == 0
    assert main(["compare", "1", "2", "--store", path]) == 0
    out = capsys.readouterr().out
    assert "A: stored audit 1 (1 compared; 2 variants of audit 1 were pruned (`tileprobe store prune`))" in out
    assert "B: stored audit 2\n" in out
    assert "1 same, 2 on one side only" in out
    assert main(["history", "--store", path]) == 0
    out = capsys.readouterr().out
    assert "2 variants of audit 1 were pruned (`tileprobe store prune`): the variants counted are those still " \
           "stored" in out
    assert "audit 2 were" not in out and "of audit 2 was" not in out


def test_an_audit_pruned_by_an_older_tileprobe_counts_only_its_stored_compiles(filled):
    """Rows an older prune left pointing at deleted compiles (it noted nothing) count as pruned, not as variants."""
    with Store.open(filled["path"]) as s:
        with s._transaction() as c:
            _audit(c, 5, [filled["newest"], "f" * 64, "e" * 64])
        count = s.audit_count(5)
        assert (count.variants, count.pruned) == (1, 2)
        assert count.pruned_text(5) == "2 variants of audit 5 were pruned (`tileprobe store prune`)"
        assert [(a["id"], a["n_variants"], a["pruned_variants"]) for a in s.audits()] == [(5, 1, 2)]
        assert [i for i, _ in s.pruned_audits()] == [5]
        assert s.audit_count(99).pruned_text(99) == ""


def test_compare_of_an_audit_that_a_prune_removed_says_so(tmp_path, capsys):
    """A new user (2026-12-05): after `store prune --keep-latest 0` took every variant, `compare 1 2` said "'1' is
    neither a result file nor a stored audit id". Now it says the prune removed it; an id never given is still
    "neither"."""
    path = str(tmp_path / "s.sqlite")
    with Store.open(path) as s:
        k0 = _save(s, 0, B1, "2026-10-01T00:00:00.000000Z", 1)
        k1 = _save(s, 1, B1, "2026-10-01T00:00:00.000000Z", 2)
        with s._transaction() as c:
            _audit(c, 1, [k0])
            _audit(c, 2, [k1])
        s.prune(older_than="2026-12-31", keep_latest=0)
        assert s.records(audit_id=1) == [] and s.last_audit_id() == 2
    assert main(["compare", "1", "2", "--store", path]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "stored audit 1 is no longer in the store: `tileprobe store prune` removed it" in err, err
    assert main(["compare", "7", "2", "--store", path]) == 1
    assert "'7' is neither a result file nor a stored audit id" in capsys.readouterr().err


PRUNER = """
import os, sys, time
from tileprobe.store import Store
path, stop = sys.argv[1], sys.argv[2]
deleted = 0
while not os.path.exists(stop):
    if os.path.exists(path):
        with Store.open(path) as store:
            deleted += store.prune(keep_latest=0)["compiles"]
    time.sleep(0.05)
print(deleted)
"""


def test_two_writers_and_a_prune_at_once_leave_a_sound_store_with_no_row_pointing_at_a_deleted_compile(tmp_path):
    """A case of the containment issue's tester (held then, tested here): two processes saving compiles and audits
    into one store while a third prunes everything it finds, again and again. Every process ends 0, the file passes
    ``PRAGMA integrity_check``, and no audit row points at a compile the prunes deleted."""
    from test_store import ROOT, WRITER
    path, stop = str(tmp_path / "shared.sqlite"), tmp_path / "stop"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pruner = subprocess.Popen([sys.executable, "-c", PRUNER, path, str(stop)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    code = WRITER.format(tests=str(ROOT / "tests"))
    writers = [subprocess.Popen([sys.executable, "-c", code, str(start), "150", path], cwd=ROOT, env=env,
                                stderr=subprocess.PIPE, text=True) for start in (0, 100)]
    try:
        for w in writers:
            _, err = w.communicate(timeout=300)
            assert w.returncode == 0, err
    finally:
        stop.touch()
        out, err = pruner.communicate(timeout=120)
    assert pruner.returncode == 0 and int(out) > 0, err          # the prunes ran beside the writers and deleted
    with Store.open(path) as s:
        assert s._query("PRAGMA integrity_check") == [("ok",)]
        assert s._query("SELECT COUNT(*) FROM audit_compiles WHERE compile_key IS NOT NULL AND compile_key NOT IN "
                        "(SELECT key FROM compiles)") == [(0,)]
        assert s._query("SELECT COUNT(*) FROM compiles WHERE cubin_sha256 IS NOT NULL AND cubin_sha256 NOT IN "
                        "(SELECT sha256 FROM cubins)") == [(0,)]
