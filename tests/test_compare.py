"""compare and bisect on hand-made records; the report's regression found between two real compilers."""

import re

import pytest

from tileprobe.analyses.bisect import Step, bisect_versions, candidates
from tileprobe.analyses.compare import Comparison, compare_records, split_by_compiler
from tileprobe.errors import TileprobeError
from tileprobe.records import PtxFacts, SassFacts
from tileprobe.report.markdown import compare_markdown
from tileprobe.schema import VariantRecord, VariantRun, Verdict
from tileprobe.toolchain import Toolchain


def rec(build, occ, threads, regs, smem, ctas, code, status="honoured", stack=0, run=None, case=None):
    return VariantRecord(kernel="w4a16", probe="p.py", case=case or {"GATHER": True, "LOOP": True},
                         hints={"occupancy": occ}, arch="sm_120", tileiras=build, status="ok", threads=threads,
                         registers=regs, shared_bytes=smem, stack_bytes=stack, ctas_per_sm=ctas, code_sha256=code,
                         verdicts={"occupancy": Verdict(status, "")}, run=run)


A, B = "release 13.3, V13.3.36", "release 13.4, V13.4.92"


def test_regression_first_with_what_changed():
    a = [rec(A, 1, 384, 168, 44092, 1, "a1"), rec(A, 2, 256, 128, 44068, 2, "a2")]
    b = [rec(B, 1, 384, 168, 100484, 1, "b1"), rec(B, 2, 384, 168, 100484, 1, "b1", status="ignored")]
    changes = compare_records(a, b)
    assert [c.kind for c in changes] == ["regression", "changed"]
    reg = changes[0]
    assert reg.mark == "!" and reg.a.hints == {"occupancy": 2}
    assert reg.details[:2] == ["occupancy honoured → ignored", "CTAs/SM 2 → 1"]
    assert "threads 256 → 384" in reg.details
    assert changes[1].details == ["shared B 44,092 → 100,484"]
    md = compare_markdown(Comparison(changes, A, B))
    assert "| ! | w4a16 sm_120 GATHER=True LOOP=True occupancy=2 |" in md


def test_honoured_and_met_rank_alike_and_no_goal_statuses_are_changes():
    """Schema 2: honoured → met (the hint no longer makes the difference, the goal still holds) is a change, not a
    regression; met → ignored is one; changed/unchanged of a no-goal hint are changes."""
    a = [rec(A, 2, 256, 128, 1000, 2, "x"), rec(A, 4, 256, 128, 1000, 2, "y", status="met")]
    b = [rec(B, 2, 256, 128, 1000, 2, "x", status="met"), rec(B, 4, 256, 128, 1000, 1, "y", status="ignored")]
    by_occ = {c.a.hints["occupancy"]: c for c in compare_records(a, b)}
    assert (by_occ[2].kind, by_occ[2].details) == ("changed", ["occupancy honoured → met"])
    assert by_occ[4].kind == "regression" and by_occ[4].details[:2] == ["occupancy met → ignored", "CTAs/SM 2 → 1"]
    c, u = rec(A, 2, 256, 128, 1000, 2, "x"), rec(B, 2, 256, 128, 1000, 2, "x")
    c.verdicts, u.verdicts = {"opt_level": Verdict("changed")}, {"opt_level": Verdict("unchanged")}
    (only,) = compare_records([c], [u])
    assert (only.kind, only.details) == ("changed", ["opt_level changed → unchanged"])


def test_a_change_to_or_from_unverified_is_a_change():
    """Honoured → unverified (a rule no driver has checked now decides the goal) is neither better nor
    worse for certain."""
    a = [rec(A, 2, 256, 128, 1000, 2, "x"), rec(A, 4, 256, 64, 1000, 4, "y", status="unverified")]
    b = [rec(B, 2, 256, 128, 1000, 2, "x", status="unverified"), rec(B, 4, 256, 64, 1000, 4, "y", status="ignored")]
    by_occ = {c.a.hints["occupancy"]: c for c in compare_records(a, b)}
    assert (by_occ[2].kind, by_occ[2].details) == ("changed", ["occupancy honoured → unverified"])
    assert (by_occ[4].kind, by_occ[4].details) == ("changed", ["occupancy unverified → ignored"])


def test_same_code_is_same_and_unmatched_reported():
    a = [rec(A, 1, 256, 128, 1000, 2, "x"), rec(A, 4, 256, 128, 1000, 2, "y")]
    b = [rec(B, 1, 256, 128, 1000, 2, "x")]
    kinds = {c.a.hints["occupancy"] if c.a else None: c.kind for c in compare_records(a, b)}
    assert kinds == {1: "same", 4: "unmatched"}


def test_new_spills_and_failures_are_regressions():
    a = [rec(A, 1, 256, 128, 0, 2, "x"), rec(A, 2, 256, 128, 0, 2, "y")]
    b = [rec(B, 1, 256, 128, 0, 2, "z", stack=40), rec(B, 2, 256, 128, 0, 2, "y")]
    b[1].status = "compile_error"
    ch = {c.a.hints["occupancy"]: c for c in compare_records(a, b)}
    assert ch[1].kind == "regression" and "stack 0 → 40 B (new stack use, SASS not read: spills or a local array)" in ch[1].details
    assert ch[2].kind == "regression" and ch[2].details == ["status ok → compile_error"]


def test_time_beyond_noise_only():
    gpu = {"name": "NVIDIA H200"}
    run = lambda m, q: VariantRun(status="ok", median_us=m, p25_us=m - q, p75_us=m + q, reps=100,
                                  gpu=gpu)
    a = [rec(A, 1, 256, 128, 0, 2, "x", run=run(100.0, 0.5)), rec(A, 2, 256, 128, 0, 2, "y", run=run(100.0, 0.5))]
    b = [rec(B, 1, 256, 128, 0, 2, "x", run=run(100.8, 0.5)), rec(B, 2, 256, 128, 0, 2, "y", run=run(130.0, 0.5))]
    ch = {c.a.hints["occupancy"]: c for c in compare_records(a, b)}
    assert ch[1].kind == "same"
    assert ch[2].kind == "regression" and ch[2].details[0].startswith("time 100.0 → 130.0 µs (1.30× slower, p ")


def test_split_by_compiler_needs_two_builds():
    with pytest.raises(TileprobeError, match="need exactly two compiler builds"):
        split_by_compiler([rec(A, 1, 1, 1, 1, 1, "x")])


def test_bisect_finds_first_change_and_logs_steps():
    versions = ["13.3.36", "13.4.59", "13.4.92"]
    seen = []
    res = bisect_versions(versions, lambda v: Step(v, v == "13.3.36", v), seen.append)
    assert (res.last_good, res.first_bad) == ("13.3.36", "13.4.59")
    assert [s.version for s in seen] == ["13.3.36", "13.4.92", "13.4.59"]
    with pytest.raises(TileprobeError, match="nothing to bisect"):
        bisect_versions(versions, lambda v: Step(v, True, ""))


def test_candidates_between_good_and_bad():
    pub = ["13.1.80", "13.2.51", "13.2.78", "13.2.86", "13.3.36", "13.4.59", "13.4.92", "13.5.37"]
    assert candidates(pub, "13.3.36", "13.4.92") == ["13.3.36", "13.4.59", "13.4.92"]
    assert candidates(pub, "13.4", "13.2.78") == ["13.4.92", "13.4.59", "13.3.36", "13.2.86", "13.2.78"]


# --- the CLI: golden output ---------------------------------------------------------------------------------------

def _result_files(tmp_path):
    import json

    from tileprobe.schema import dump
    a = [rec(A, 1, 384, 168, 44092, 1, "a1"), rec(A, 2, 256, 128, 44068, 2, "a2"), rec(A, 4, 256, 128, 44068, 2, "a4")]
    b = [rec(B, 1, 384, 168, 100484, 1, "b1"), rec(B, 2, 384, 168, 100484, 1, "b1", status="ignored")]
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(dump(a, {"tileiras": [A]})))
    pb.write_text(json.dumps(dump(b, {"tileiras": [B]})))
    return str(pa), str(pb)


COMPARE_ROWS = """\
│ ! │ w4a16 sm_120 GATHER=True LOOP=True occupancy=2 │ 256×128r 44,068B 2/SM occupancy honoured │ 384×168r 100,484B 1/SM occupancy ignored  │ occupancy honoured → ignored; CTAs/SM 2 → 1; threads 256 │
│   │                                                │                                          │                                           │ → 384; registers 128 → 168; shared B 44,068 → 100,484    │
│ x │ w4a16 sm_120 GATHER=True LOOP=True occupancy=1 │ 384×168r 44,092B 1/SM occupancy honoured │ 384×168r 100,484B 1/SM occupancy honoured │ shared B 44,092 → 100,484                                │
│ ? │ w4a16 sm_120 GATHER=True LOOP=True occupancy=4 │ 256×128r 44,068B 2/SM occupancy honoured │ -                                         │ only in A                                                │
└───┴────────────────────────────────────────────────┴──────────────────────────────────────────┴───────────────────────────────────────────┴──────────────────────────────────────────────────────────┘
! regression (new crashes and hangs first)   * improvement   x code, resources or failure class changed, same residency and verdicts   = same machine code   ? on one side only
1 regression(s), 0 improvement(s), 1 changed, 0 same, 1 on one side only"""


COMPARE_SHORT = """\
1 regression(s), 0 improvement(s), 1 changed, 0 same, 1 on one side only
w4a16:
! sm_120 GATHER=True LOOP=True occupancy=2: occupancy honoured → ignored; CTAs/SM 2 → 1 · also threads 256 → 384, registers 128 → 168, shared B 44,068 → 100,484
? sm_120 GATHER=True LOOP=True occupancy=4: only in A
x changed (1 variant), by kind of change (--details lists each variant):
    shared B: 1 variant, +56,392 (44,092 → 100,484)
why:
  - a hint's goal no longer met
  - fewer CTAs/SM: less latency hidden (lost residency)
! regression   * improvement   x changed, same residency and verdicts   ? on one side only"""


def test_compare_cli_prints_the_counts_first_then_each_change_short(tmp_path, capsys):
    from tileprobe.cli import main
    pa, pb = _result_files(tmp_path)
    assert main(["compare", pa, pb]) == 0
    lines = [ln.rstrip() for ln in capsys.readouterr().out.splitlines()]
    assert lines[:2] == [f"A: {pa} (tileiras 13.3.36)", f"B: {pb} (tileiras 13.4.92)"]
    assert "\n".join(lines[2:]) == COMPARE_SHORT


def test_compare_cli_details_lists_each_changed_variant(tmp_path, capsys):
    from tileprobe.cli import main
    pa, pb = _result_files(tmp_path)
    assert main(["compare", pa, pb, "--details"]) == 0
    out = capsys.readouterr().out
    assert "x sm_120 GATHER=True LOOP=True occupancy=1: shared B 44,092 → 100,484" in out
    assert "x changed (1 variant), by kind of change:\n    shared B: 1 variant" in out


def test_compare_cli_prints_the_changes_table(tmp_path, capsys):
    from tileprobe.cli import main
    pa, pb = _result_files(tmp_path)
    assert main(["compare", pa, pb, "--wide"]) == 0
    lines = [ln.rstrip() for ln in capsys.readouterr().out.splitlines()]
    assert lines[:2] == [f"A: {pa} (tileiras 13.3.36)", f"B: {pb} (tileiras 13.4.92)"]
    assert lines[3].split() == ["┃", "┃", "variant", "┃", "A", "┃", "B", "┃", "what", "changed", "┃"]
    assert "\n".join(lines[5:]) == COMPARE_ROWS


def test_compare_cli_markdown_and_json(tmp_path, capsys):
    import json

    from tileprobe.cli import main
    pa, pb = _result_files(tmp_path)
    out_json = tmp_path / "changes.json"
    assert main(["compare", pa, pb, "--format", "markdown", "--json", str(out_json)]) == 0
    md = capsys.readouterr().out
    # a side names its frontend too when its records carry the cuda-tile version (records made in a process that
    # imported cuda.tile do; these hand-made ones may not)
    assert re.match(rf"## tileprobe compare\n\n- A: {re.escape(pa)} \((cuda-tile [\d.]+, )?tileiras 13\.3\.36\)\n"
                    rf"- B: {re.escape(pb)} \((cuda-tile [\d.]+, )?tileiras 13\.4\.92\)[^\n]*\n\nReproduce:\n\n```\n"
                    "tileprobe ", md), md[:400]
    assert ("| ! | w4a16 sm_120 GATHER=True LOOP=True occupancy=2 | 256×128r 44,068B 2/SM occupancy honoured | "
            "384×168r 100,484B 1/SM occupancy ignored | occupancy honoured → ignored; CTAs/SM 2 → 1; threads 256 → "
            "384; registers 128 → 168; shared B 44,068 → 100,484 |\n") in md
    assert "| ? | w4a16 sm_120 GATHER=True LOOP=True occupancy=4 | 256×128r 44,068B 2/SM occupancy honoured | - | only in A |" in md
    assert md.endswith("\n0 variant(s) identical (same machine code and resources).\n")
    doc = json.loads(out_json.read_text())
    assert [(c["kind"], c["mark"], c["details"][0]) for c in doc] == [
        ("regression", "!", "occupancy honoured → ignored"), ("changed", "x", "shared B 44,092 → 100,484"),
        ("unmatched", "?", "only in A")]
    assert doc[0]["a"]["registers"] == 128 and doc[2]["b"] is None


def test_compare_cli_says_what_to_give(tmp_path, capsys):
    from tileprobe.cli import main
    pa, _ = _result_files(tmp_path)
    assert main(["compare"]) == 2                                     # a missing input is a usage error
    assert "compare what? give two result files (or stored audit ids)" in capsys.readouterr().err
    assert main(["compare", pa, pa, pa]) == 2
    assert f"compare what? (got 3: {pa} {pa} {pa}) give two result files" in capsys.readouterr().err
    assert main(["compare", pa]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "need exactly two compiler builds to compare, found 1: tileiras 13.3.36. Audit with --tileiras A,B" in err
    assert "[" not in err and "'" not in err                          # text, not a Python list
    assert main(["compare", "--probe", pa, "--tileiras", "13.4"]) == 2
    assert "with --probe, give two compilers: --tileiras A,B" in capsys.readouterr().err
    assert main(["compare", "17", "nope.json", "--store", str(tmp_path / "s.sqlite")]) == 1
    assert "no results store at" in capsys.readouterr().err
    from tileprobe.store import Store
    Store.open(tmp_path / "s.sqlite").close()
    assert main(["compare", "17", "nope.json", "--store", str(tmp_path / "s.sqlite")]) == 1
    assert "'17' is neither a result file nor a stored audit id" in capsys.readouterr().err


def test_compare_two_stored_audits_by_id(tmp_path):
    from tileprobe.analyses.compare import compare_results
    from tileprobe.store import Store
    pa, pb = _result_files(tmp_path)
    with Store.open(tmp_path / "s.sqlite") as store:
        ids = []
        for path in (pa, pb):
            from tileprobe.schema import load
            records, env = load(path)
            for i, r in enumerate(records):
                store._remember(r, _fake_compile(store, r, i))
            ids.append(store.save_audit(_Audit(records, env), f"audit {path}"))
    c = compare_results([str(i) for i in ids], store=str(tmp_path / "s.sqlite"))
    assert (c.name_a, c.name_b) == (f"stored audit {ids[0]}", f"stored audit {ids[1]}")
    assert [ch.kind for ch in c.changes] == ["regression", "changed", "unmatched"]
    assert c.changes[0].details[0] == "occupancy honoured → ignored"


class _Audit:
    def __init__(self, records, env):
        self.records, self.environment, self.wall_s = records, env, 1.0


def _fake_compile(store, r, i) -> str:
    """Save ``r`` as a stored compile (a synthetic variant; no compiler) and return its key."""
    from tileprobe.compile.job import CompileResult, Variant
    v = Variant("/tmp/p.py", 0, r.kernel, tuple(r.case.items()), tuple(r.hints.items()), r.arch, f"{i}" * 64)
    res = CompileResult(v, "ok", tileiras=r.tileiras, cuda_tile="1.7.0", symbol="k", cubin=None)
    return store.save_compile(res, r, Toolchain.at("/fake", build=r.tileiras))


def test_bisect_cli_prints_each_step_and_the_release(monkeypatch, capsys):
    """``tileprobe bisect`` with the registry's list and the per-release audit faked (no network, no compiler)."""
    import tileprobe.analyses.bisect as bisect_mod
    import tileprobe.toolchain as tcm
    from tileprobe.cli import main
    monkeypatch.setattr(tcm, "_PUBLISHED", {tcm.TILEIRAS_PKG: ["13.2.86", "13.3.36", "13.4.59", "13.4.92"]})
    holds = {"13.3.36": True, "13.4.59": True, "13.4.92": False}
    seen = []

    def evaluator(probe, arch, where, prop, jobs=None, store=None, install=False):
        seen.append((probe, arch, where, prop))
        return lambda v: Step(v, holds[v], f"384 threads × 168 regs at {v}")
    monkeypatch.setattr(bisect_mod, "make_evaluator", evaluator)
    assert main(["bisect", "p.py", "--arch", "sm_120", "--where", "GATHER=True,occupancy=2", "--property",
                 "occupancy honoured", "--good", "13.3", "--bad", "13.4.92", "--install"]) == 0
    assert seen == [("p.py", "sm_120", {"GATHER": True, "occupancy": 2}, "occupancy honoured")]
    assert capsys.readouterr().out.splitlines() == [
        "bisecting 3 releases: 13.3.36, 13.4.59, 13.4.92",
        "  tileiras 13.3.36: holds — 384 threads × 168 regs at 13.3.36",
        "  tileiras 13.4.92: does not hold — 384 threads × 168 regs at 13.4.92",
        "  tileiras 13.4.59: holds — 384 threads × 168 regs at 13.4.59",
        "first release where `occupancy honoured` changed: tileiras 13.4.92 (last like 13.3.36: 13.4.59)"]


# --- a failure change is a change -------------------------------------------------------------------------------------

def _failed(build, occ, failure, status=None, message=""):
    r = rec(build, occ, 256, 128, 0, 2, "x")
    r.status = status or {"compiler_crash": "compiler_crash", "timeout": "timeout"}.get(failure, "compile_error")
    r.failure, r.message, r.verdicts = failure, message, {}
    return r


def _ran(build, occ, status):
    return rec(build, occ, 256, 128, 0, 2, "x",
               run=VariantRun(status=status, median_us=10.0 if status == "ok" else None))


def test_failure_changes_are_changes_with_new_crashes_and_hangs_first():
    a = [_failed(A, 1, "compiler_crash", message="tileiras was killed by SIGSEGV (signal 11)"),
         _failed(A, 2, "compile_error"), rec(A, 4, 256, 128, 0, 2, "x"), _ran(A, 8, "hang"), _ran(A, 16, "wrong"),
         _ran(A, 32, "ok"), _failed(A, 3, "unsupported_target"), _failed(A, 5, "compile_error"),
         rec(A, 6, 256, 128, 0, 2, "x"), _ran(A, 7, "ok")]
    b = [_failed(B, 1, "compile_error"), rec(B, 2, 256, 128, 0, 2, "x"),
         _failed(B, 4, "compiler_crash"), _ran(B, 8, "ok"), _ran(B, 16, "ok"), _ran(B, 32, "crash"),
         _failed(B, 3, "compile_error"), _failed(B, 5, "compile_error"), _failed(B, 6, "compile_error"),
         _ran(B, 7, "hang")]
    changes = compare_records(a, b)
    got = {c.a.hints["occupancy"]: (c.kind, c.details) for c in changes}
    assert got[1] == ("improvement", ["status compiler_crash → compile_error"])       # crash → error
    assert got[2] == ("improvement", ["status compile_error → ok"])                    # error → ok
    assert got[4] == ("regression", ["status ok → compiler_crash (new crash)"])        # ok → crash
    assert got[8] == ("improvement", ["run hang → ok"])                                # hang → ok
    assert got[16] == ("improvement", ["run wrong → ok"])                              # wrong → ok
    assert got[32] == ("regression", ["run ok → crash (new crash)"])
    assert got[7] == ("regression", ["run ok → hang (new hang)"])
    assert got[3] == ("changed", ["status unsupported_target → compile_error"])        # same rank, other class
    assert got[5] == ("same", [])
    assert got[6] == ("regression", ["status ok → compile_error"])
    regressions = [c.a.hints["occupancy"] for c in changes if c.kind == "regression"]
    assert set(regressions[:3]) == {4, 32, 7} and regressions[3] == 6                 # new crashes and hangs first
    md = compare_markdown(Comparison(changes, A, B))
    assert "| * | w4a16 sm_120 GATHER=True LOOP=True occupancy=1 | compiler_crash: tileiras was killed by SIGSEGV " \
           "(signal 11) | compile_error | status compiler_crash → compile_error |" in md


def test_status_properties_for_gate_and_bisect():
    from tileprobe.analyses.gate import check, parse_expectation
    crash, error, ok = _failed(B, 1, "compiler_crash"), _failed(B, 2, "compile_error"), rec(B, 4, 1, 1, 0, 1, "x")
    hang, wrong, ran = _ran(B, 8, "hang"), _ran(B, 16, "wrong"), _ran(B, 32, "ok")
    timeout = _failed(B, 64, "timeout")
    for text, kind in (("no crash", "no_crash"), ("no hang", "no_hang"), ("correct", "correct")):
        assert parse_expectation(text).kind == kind

    def holds(prop, r):
        fails = check([r], [prop])
        return "unchecked" if fails and fails[0].unchecked else not fails
    assert [holds("no crash", r) for r in (crash, error, ok, hang, _ran(B, 1, "crash"))] == [False, True, True, True,
                                                                                           False]
    assert [holds("compiles", r) for r in (crash, error, ok)] == [False, False, True]
    assert [holds("no hang", r) for r in (hang, ran, timeout, ok)] == [False, True, False, "unchecked"]
    assert [holds("correct", r) for r in (wrong, ran, error, ok)] == [False, True, False, "unchecked"]


def test_bisect_on_no_crash_finds_where_the_crash_became_an_error():
    """The steps cutile-python #94's kernel gives (tests/test_versions.py runs it for real): compiles is false at
    both ends; no crash is false at 13.3.36 and true from 13.4.59."""
    versions = ["13.3.36", "13.4.59", "13.4.92"]
    state = {"13.3.36": "compiler_crash: tileiras was killed by SIGSEGV (signal 11)",
             "13.4.59": "compile_error: error: failed to compile Tile IR program",
             "13.4.92": "compile_error: error: failed to compile Tile IR program"}
    with pytest.raises(TileprobeError, match=r"false at both 13\.3\.36 \(compiler_crash: tileiras was killed by "
                                             r"SIGSEGV \(signal 11\)\) and 13\.4\.92 .*bisect a status property such "
                                             r"as --property \"no crash\""):
        bisect_versions(versions, lambda v: Step(v, False, state[v]))
    res = bisect_versions(versions, lambda v: Step(v, state[v].startswith("compile_error"), state[v]))
    assert (res.last_good, res.first_bad) == ("13.3.36", "13.4.59")


def test_spill_amounts_are_shown_when_both_sides_spill():
    a = [rec(A, 1, 256, 255, 1000, 1, "a")]
    b = [rec(B, 1, 256, 255, 1000, 1, "b")]
    a[0].sass, b[0].sass = SassFacts(spill_loads=172, spill_stores=94), SassFacts(spill_loads=23, spill_stores=23)
    (c,) = compare_records(a, b)
    # judged by amount: 266 → 46 LDL+STL is an improvement, with its ratio and reason
    assert c.kind == "improvement" and c.details == ["spills 172 LDL/94 STL → 23 LDL/23 STL (×0.2)"]
    assert c.why == ["fewer spills: less local-memory traffic"]
    b[0].sass = SassFacts(spill_loads=180, spill_stores=94)     # +8: within SPILL_MIN, shown, not judged
    (c,) = compare_records(a, b)
    assert c.kind == "changed" and c.details == ["spills 172 LDL/94 STL → 180 LDL/94 STL (both spill)"]


def test_spill_growth_is_a_regression_even_with_more_ctas_and_mma_switch_is_listed():
    """A group GEMM: spills doubling is a regression; spills tripling with CTAs/SM 1 → 2 too; HMMA with
    no TMA → HGMMA with 33 TMA and a register cap that moved are listed as changes, with their reasons."""
    a = [rec(A, 1, 384, 168, 198984, 1, "a1"), rec(A, 2, 384, 168, 100812, 1, "a2"),
         rec(A, 4, 256, 255, 167056, 1, "a4")]
    b = [rec(B, 1, 384, 168, 166280, 1, "b1"), rec(B, 2, 128, 255, 33868, 2, "b2"),
         rec(B, 4, 384, 168, 166280, 1, "b4")]
    for r, (ldl, stl) in zip(a + b, [(3323, 3317), (61, 74), (1096, 1051), (6640, 6600), (204, 271), (6640, 6600)]):
        r.sass = SassFacts(spill_loads=ldl, spill_stores=stl, matrix_families=["HGMMA"], tma={"UTMALDG": 33})
    a[2].sass = a[2].sass.replace(matrix_families=["HMMA"], tma={})
    a[2].ptx, b[2].ptx = PtxFacts(maxnreg=256), PtxFacts(maxnreg=168)
    by = {c.a.hints["occupancy"]: c for c in compare_records(a, b)}
    assert by[1].kind == "regression" and by[1].details[0] == "spills 3323 LDL/3317 STL → 6640 LDL/6600 STL (×2.0)"
    assert by[2].kind == "regression" and by[2].details[:2] == ["spills 61 LDL/74 STL → 204 LDL/271 STL (×3.5)",
                                                                "CTAs/SM 1 → 2"]
    assert by[4].kind == "regression" and by[4].details[1:3] == ["MMA HMMA → HGMMA, TMA 0 → 33",
                                                                 "register cap (.maxnreg) 256 → 168"]
    assert any(w.startswith("MMA family switch") for w in by[4].why)
    assert [c.a.hints["occupancy"] for c in compare_records(a, b)] == [4, 1, 2]   # most spills added first


def test_a_comparison_with_nothing_in_common_says_so(capsys):
    from rich.console import Console

    from tileprobe.report.terminal import render_compare
    a = [rec(A, 1, 384, 168, 44092, 1, "a1")]
    b = [rec(B, 1, 384, 168, 44092, 1, "a1")]
    b[0].arch = "sm_90"
    changes = compare_records(a, b)
    assert [c.kind for c in changes] == ["unmatched", "unmatched"]
    con = Console(width=200, record=True, color_system=None)
    render_compare(Comparison(changes, A, B), con)
    out = con.export_text()
    assert "0 regression(s), 0 improvement(s), 0 changed, 0 same, 2 on one side only" in out
    assert ("nothing was compared: no variant is on both sides (variants match by kernel, case, hints and arch; "
            "A has w4a16 on sm_120, B has w4a16 on sm_90)") in out


def test_compare_json_to_stdout_is_json_alone(tmp_path, capsys, monkeypatch):
    """`--json -` wrote a file named '-' (a tester, 2026-12-01); now standard output holds the JSON alone."""
    import json

    from tileprobe.cli import main
    pa, pb = _result_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["compare", pa, pb, "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["mark"] for c in doc][:1] == ["!"] and not (tmp_path / "-").exists()


def test_compare_claims_no_comparison_it_did_not_make(tmp_path, capsys):
    """--regressions with none, Markdown, two empty results say so; a
    --where that matches nothing exits 2, as audit does."""
    import json

    from tileprobe.cli import main
    from tileprobe.schema import dump
    pa, pb = _result_files(tmp_path)
    same = tmp_path / "same.json"
    same.write_text(json.dumps(dump([rec(B, 1, 384, 168, 44092, 1, "a1")], {"tileiras": [B]})))
    assert main(["compare", pa, str(same), "--regressions"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "no regression among the 3 variant(s) compared" in out and "│" not in out
    assert main(["compare", pa, str(same), "--regressions", "--format", "markdown"]) == 0
    assert "No regression among the 3 variant(s) compared." in capsys.readouterr().out
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(dump([], {"tileiras": [B]})))
    assert main(["compare", str(empty), str(empty)]) == 0
    assert "nothing was compared: both sides are empty" in capsys.readouterr().out
    assert main(["compare", str(empty), str(empty), "--format", "markdown"]) == 0
    assert "Nothing was compared: both sides are empty." in capsys.readouterr().out
    assert main(["compare", pa, pb, "--where", "occupancy=7"]) == 2
    assert "--where occupancy=7 matches no" in " ".join(capsys.readouterr().err.split())


def test_bisect_shows_what_it_measured_and_the_toolkit_parts(monkeypatch, capsys):
    """Each step prints the property's value and the ptxas/nvvm releases it ran with; a ptxas or nvvm
    change between the last good and the first bad release, a part from another patch release and a release
    whose machine code varies between compiles are warned about."""
    import tileprobe.analyses.bisect as bisect_mod
    import tileprobe.toolchain as tcm
    from tileprobe.analyses.bisect import measured
    from tileprobe.cli import main
    r = rec(B, 1, 384, 168, 1000, 1, "x")
    r.sass, r.stack_bytes = SassFacts(spill_loads=3323, spill_stores=3317), 8720
    assert measured("no spills", r) == "3323 LDL/3317 STL, 8,720 B stack"
    assert measured("registers<=128", r) == "registers 168" and measured("occupancy honoured", r) == \
        "occupancy honoured"
    monkeypatch.setattr(tcm, "_PUBLISHED", {tcm.TILEIRAS_PKG: ["13.3.36", "13.4.59", "13.4.92"]})
    parts = {"13.3.36": "13.3.73", "13.4.59": "13.4.92", "13.4.92": "13.4.92"}
    spills = {"13.3.36": 3323, "13.4.59": 6640, "13.4.92": 6640}

    def evaluator(probe, arch, where, prop, jobs=None, store=None, install=False):
        return lambda v: Step(v, spills[v] < 5000, "…", measured=f"{spills[v]} LDL",
                              parts={"tileiras": v, "ptxas": parts[v], "nvvm": parts[v]},
                              warnings=["2 different machine codes over repeated compiles"] if v == "13.4.59" else [])
    monkeypatch.setattr(bisect_mod, "make_evaluator", evaluator)
    assert main(["bisect", "p.py", "--arch", "sm_90", "--property", "no spills", "--good", "13.3.36", "--bad",
                 "13.4.92", "--no-store", "--install"]) == 0
    out = capsys.readouterr().out
    assert "  tileiras 13.4.59: does not hold (6640 LDL) [with ptxas 13.4.92, nvvm 13.4.92] — …" in out
    assert ("warning: tileiras 13.3.36 → 13.4.59 also changed ptxas 13.3.73 → 13.4.92, nvvm 13.3.73 → 13.4.92: the "
            "change may come from those, not from tileiras") in out
    assert "warning: tileiras 13.4.59 ran with ptxas 13.4.92, nvvm 13.4.92" in out
    assert "warning: tileiras 13.4.59: 2 different machine codes over repeated compiles" in out
