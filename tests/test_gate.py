"""``tileprobe gate`` and the ``tileprobe_audit`` pytest fixture: strict expectation parsing, readable failures,
exit codes, the store reused, baselines, and a kernel repository's test run through the plugin.

Compiles: one tiny probe (``vec_add``, sm_90, TILE 1024/2048 × occupancy 1/2: 4 variants), once per module.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import write_vec_probe

from tileprobe.analyses.gate import GateError, check, parse_expectation, parse_where, run_gate, select
from tileprobe.cli import main
from tileprobe.records import SassFacts
from tileprobe.report.terminal import gate_text
from tileprobe.schema import VariantRecord, VariantRun, Verdict, dump
from tileprobe.store import Store

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
B133 = "Cuda compilation tools, release 13.3, V13.3.36"
B134 = "Cuda compilation tools, release 13.4, V13.4.92"


def rec(build=B134, gather=True, occ=2, *, verdict="honoured", reason="2 CTAs/SM ≥ 2", ctas=2, regs=80, stack=0,
        status="ok", run=None, error="") -> VariantRecord:
    r = VariantRecord(kernel="w4a16_gemm", probe="/p/w4a16.py", case={"GATHER": gather, "LOOP": True},
                      hints={"occupancy": occ}, arch="sm_120", tileiras=build, status=status, threads=384,
                      registers=regs, max_regs=168, shared_bytes=100_484, stack_bytes=stack, ctas_per_sm=ctas,
                      limiter="registers", run=run, error=error)
    if status == "ok":
        r.verdicts = {"occupancy": Verdict(verdict, reason)}
    return r


IGNORED = rec(verdict="ignored", ctas=1, regs=168,
              reason="same machine code and resources as occupancy=1: 1 CTA(s)/SM < 2 (384 threads × 168 registers)")


# --- parsing -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, kind, field, op, value", [
    ("occupancy honoured", "verdict", "occupancy", "", None),
    ("  num_ctas   honoured ", "verdict", "num_ctas", "", None),
    ("occupancy not ignored", "not_ignored", "occupancy", "", None),
    ("occupancy met", "verdict", "occupancy", "", None),
    ("occupancy honored", "verdict", "occupancy", "", None),
    ("num_ctas took  effect", "took_effect", "num_ctas", "", None),
    ("no spills", "no_spills", "", "", None),
    ("compiles", "compiles", "", "", None),
    ("ctas_per_sm>=2", "compare", "ctas_per_sm", ">=", 2.0),
    ("registers <= 128", "compare", "registers", "<=", 128.0),
    ("regs<128", "compare", "registers", "<", 128.0),
    ("CTAs/SM == 2", "compare", "ctas_per_sm", "==", 2.0),
    ("stack_bytes == 0", "compare", "stack_bytes", "==", 0.0),
    ("registers <= baseline", "compare", "registers", "<=", None),
    ("time <= 12.5us", "time", "time", "<=", 12.5),
    ("time <= baseline", "time", "time", "<=", None),
    ("time <= baseline + 5%", "time", "time", "<=", None),
])
def test_accepted_expectations(text, kind, field, op, value):
    e = parse_expectation(text)
    assert (e.kind, e.field, e.op, e.value) == (kind, field, op, value)
    if text.endswith("5%"):
        assert e.baseline_pct == 5.0


@pytest.mark.parametrize("text, why", [
    ("occupancy respected", r"not an expectation tileprobe knows"),
    ("latency honoured", r"'latency' is not a kernel hint"),
    ("regs2 <= 128", r"unknown field 'regs2'"),
    ("registers <= lots", r"'lots' is not a number \(or 'baseline'\)"),
    ("registers <= 12us", r"'12us' is not a number"),
    ("registers <= baseline + 5%", r"'\+ N%' is accepted for time only"),
    ("time >= baseline", r"time compares with the baseline as 'time <= baseline'"),
    ("", r"not an expectation"),
])
def test_unknown_expectations_are_errors_naming_the_accepted_forms(text, why):
    with pytest.raises(GateError, match=rf"(?s)cannot parse expectation '.*': {why}.*Accepted forms:\n"
                                        r"  HINT honoured .*"
                                        r"FIELD OP NUMBER .*time <= baseline \[\+ N%\]"):
        parse_expectation(text)


def test_where_parsing_and_selection():
    assert parse_where("GATHER=True, LOOP=False,occupancy=2,NAME=abc,X=None") == \
        {"GATHER": True, "LOOP": False, "occupancy": 2, "NAME": "abc", "X": None}
    assert parse_where(None) == {}
    with pytest.raises(GateError, match=r"'GATHER' is not NAME=VALUE"):
        parse_where("GATHER")
    recs = [rec(gather=g, occ=o) for g in (False, True) for o in (1, 2)]
    assert [(r.case["GATHER"], r.hints["occupancy"]) for r in select(recs, {"GATHER": True, "occupancy": 2})] == \
        [(True, 2)]
    assert select(recs, {"GATHER": 1}) == []      # True is not 1 here: a bool case wants a bool


# --- check() -------------------------------------------------------------------------------------------------------

def test_ignored_occupancy_fails_with_variant_expected_got_and_reason():
    (f,) = check([rec(), IGNORED], ["occupancy honoured"])
    assert f.expectation == "occupancy honoured" and (f.expected, f.got) == ("honoured or met", "ignored")
    assert str(f) == ("w4a16_gemm sm_120 tileiras 13.4.92 GATHER=True LOOP=True occupancy=2: expected honoured or met, "
                      "got ignored — same machine code and resources as occupancy=1: 1 CTA(s)/SM < 2 "
                      "(384 threads × 168 registers)")
    assert check([IGNORED], ["occupancy not ignored"])[0].got == "ignored"
    assert check([rec(verdict="partial")], ["occupancy not ignored"]) == []


def test_schema1_gate_words_keep_passing_when_the_goal_is_met_without_the_hint():
    """A gate written before schema 2 says "occupancy honoured"; a variant whose goal is met with the reference's
    code is now ``met``: the old gate still passes, "took effect" asks for the stricter ``honoured``."""
    met = rec(verdict="met", reason="2 CTAs/SM ≥ 2; same machine code and resources as occupancy=1")
    assert check([met], ["occupancy honoured"]) == [] and check([met], ["occupancy met"]) == []
    (f,) = check([met], ["occupancy took effect"])
    assert (f.expected, f.got) == ("honoured (the hint met a goal its reference fell short of)", "met")
    assert check([rec()], ["occupancy took effect"]) == []


def test_an_unverified_verdict_cannot_be_checked():
    """A goal that a rule no driver has checked decides is neither passed nor failed as if known: the
    expectation cannot be checked (the gate fails unless --allow-unchecked), and the reason says why."""
    why = ("honoured by readings no driver has checked — the cubin's shared size read as including the 1 KB "
           "per-CTA reserve (from the cubin's layout; no driver has checked it on sm_120): the other reading gives "
           "1 CTA/SM, short of 2 — 2 CTAs/SM ≥ 2")
    for expectation in ("occupancy honoured", "occupancy took effect", "occupancy not ignored"):
        (f,) = check([rec(verdict="unverified", reason=why)], [expectation])
        assert f.unchecked and f.got == "unverified"
        assert str(f) == ("w4a16_gemm sm_120 tileiras 13.4.92 GATHER=True LOOP=True occupancy=2: cannot check — "
                          f"unverified: {why}")


def test_no_goal_hint_expectations_read_changed_and_unchanged():
    def opt(status):
        r = rec(verdict=status)
        r.verdicts = {"opt_level": r.verdicts.pop("occupancy")}
        return r
    assert check([opt("changed")], ["opt_level honoured", "opt_level took effect", "opt_level not ignored"]) == []
    (f,) = check([opt("unchanged")], ["opt_level honoured"])
    assert (f.expected, f.got) == ("changed (no goal to meet: the code changed)", "unchanged")
    assert check([opt("unchanged")], ["opt_level not ignored"])[0].got == "unchanged"
    assert check([opt("baseline")], ["opt_level not ignored"]) == []


def test_resource_expectations():
    r = rec(ctas=1, regs=168, stack=24)
    fails = check([r], ["no spills", "ctas_per_sm>=2", "registers<=128", "registers<=168", "compiles"])
    assert [f.expectation for f in fails] == ["no spills", "ctas_per_sm>=2", "registers<=128"]
    assert fails[0].got == "24 B stack frame per thread" and "168 registers per thread (cap 168)" in fails[0].reason
    assert (fails[1].expected, fails[1].got) == ("ctas_per_sm >= 2", "ctas_per_sm = 1")
    assert "limiter: registers" in fails[1].reason
    spills = rec()
    spills.sass = SassFacts(kernels=[{"name": "k", "spill_loads": 3, "spill_stores": 2}])
    assert check([spills], ["no spills"])[0].got == "0 B stack frame per thread, 3 LDL / 2 STL in SASS"


def test_failed_compile_and_empty_selection_fail():
    bad = rec(occ=4, status="compile_error", error="error: failed to compile Tile IR program\nmore")
    (f,) = check([bad], ["ctas_per_sm>=1"])
    assert (f.got, f.reason) == ("compile_error", "error: failed to compile Tile IR program")
    (f,) = check([], ["occupancy honoured"])
    assert f.variant == "(no variant)" and "matched no audited variant" in f.reason


def test_time_needs_runs_and_respects_baseline_noise():
    (f,) = check([rec()], ["time <= 700us"])
    assert f.unchecked and "no GPU run record" in f.reason and str(f).endswith(
        "cannot check — no GPU run record for this variant (run it with `tileprobe run` into the store first)")
    now = rec(run=VariantRun(status="ok", median_us=612.0, stdev_us=1.0))
    base = [rec(build=B133, run=VariantRun(status="ok", median_us=600.0, stdev_us=5.0, gpu="RTX 5090"))]
    assert check([now], ["time <= 700us"]) == []
    assert check([now], ["time <= baseline + 2%"], base) == []            # 600 × 1.02 + 5 = 617 ≥ 612
    (f,) = check([now], ["time <= baseline"], base)                      # 600 + 5 = 605 < 612
    assert f.expected == "time <= 605.00 µs (baseline 600.00 µs + noise 5.00 µs)" and f.got == "612.00 µs"
    assert f.reason == "baseline: tileiras 13.3.36 on RTX 5090" and not f.unchecked
    (f,) = check([now], ["time <= baseline"], [])
    assert f.unchecked and f.got == "no baseline run"


def test_field_against_baseline_and_ambiguous_baseline():
    base = [rec(build=B133, regs=80, ctas=2)]
    (f,) = check([IGNORED], ["registers <= baseline", "ctas_per_sm >= baseline"][:1], base)
    assert (f.expected, f.got) == ("registers <= 80", "registers = 168") and f.reason.startswith(
        "vs baseline (tileiras 13.3.36)")
    with pytest.raises(GateError, match=r"holds w4a16_gemm .* under several compilers .*--baseline-tileiras"):
        check([IGNORED], ["registers <= baseline"], base + [rec(build=B134)])


def test_gate_text_lists_each_expectation():
    from tileprobe.analyses.gate import GateResult
    exps = [parse_expectation(e) for e in ("occupancy honoured", "no spills", "time <= 1us")]
    g = GateResult([IGNORED], exps, check([IGNORED], exps))
    text = gate_text(g)
    assert text.splitlines()[0] == "FAIL  occupancy honoured: 1 of 1 variant(s)"
    assert "ok    no spills (1 variant(s))" in text and "FAIL  time <= 1us: cannot be checked" in text
    assert text.endswith("gate FAILED: 2 of 3 expectation(s) not met on 1 variant(s)") and not g.passed
    g.allow_unchecked = True
    assert "SKIP  time <= 1us: cannot be checked" in gate_text(g)


# --- the real thing: a tiny probe, the CLI, the store -------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("gate")
    probe = write_vec_probe(d / "probe_vec.py", tiles=(1024, 2048))
    store = str(d / "gate.sqlite")
    with Store.open(store) as s:
        g = run_gate(str(probe), "sm_90", ["compiles"], store=s, jobs=2, command_line="gate warm-up")
    assert len(g.records) == 4 and g.passed
    return {"probe": str(probe), "store": store, "dir": d, "records": g.records}


class Count:
    def __init__(self, monkeypatch):
        from conftest import CompileCounter
        self._c = CompileCounter(monkeypatch)

    @property
    def n(self) -> int:
        return self._c.n


def test_gate_cli_passes_and_reuses_the_store(tiny, monkeypatch, capsys):
    counter = Count(monkeypatch)
    rc = main(["gate", tiny["probe"], "--arch", "sm_90", "--store", tiny["store"], "--where", "TILE=1024",
               "--expect", "occupancy honoured", "--expect", "no spills", "--expect", "ctas_per_sm>=2",
               "--expect", "registers<=128"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert counter.n == 0, "a gate over stored variants compiled again"
    assert "ok    occupancy honoured (2 variant(s))" in out and out.rstrip().endswith(
        "gate passed: 4 expectation(s) on 2 variant(s)")
    with Store.open(tiny["store"]) as s:
        assert s.audits()[0]["command_line"] == (f"gate {tiny['probe']} --arch sm_90 --where TILE=1024 --expect "
                                                 "'occupancy honoured' --expect 'no spills' --expect 'ctas_per_sm>=2' "
                                                 "--expect 'registers<=128'")
        assert s.audits()[0]["n_variants"] == 2


def test_gate_cli_fails_with_a_readable_reason(tiny, tmp_path, capsys):
    regs = {r.case["TILE"]: r.registers for r in tiny["records"]}
    limit = min(regs.values())
    assert max(regs.values()) > limit, f"the fixture needs TILE values with different register counts: {regs}"
    rc = main(["gate", tiny["probe"], "--arch", "sm_90", "--store", tiny["store"], "--expect", f"registers<={limit}",
               "--expect", "occupancy honoured", "--json", str(tmp_path / "gate.json")])
    out = capsys.readouterr().out
    assert rc == 1
    doc = json.loads((tmp_path / "gate.json").read_text())
    assert doc["passed"] is False and len(doc["failures"]) == 2 and len(doc["variants"]) == 4
    worst = max(regs, key=regs.get)
    assert f"FAIL  registers<={limit}: 2 of 4 variant(s)" in out
    assert (f"vec_add sm_90 tileiras 13.4.92 TILE={worst} occupancy=1: expected registers <= {limit}, "
            f"got registers = {regs[worst]} — limiter: ") in out
    assert out.rstrip().endswith("gate FAILED: 1 of 2 expectation(s) not met on 4 variant(s)")


def test_gate_cli_time_cannot_be_checked_without_runs(tiny, capsys):
    args = ["gate", tiny["probe"], "--arch", "sm_90", "--store", tiny["store"], "--where", "TILE=1024,occupancy=1",
            "--expect", "compiles", "--expect", "time <= 10us"]
    assert main(args) == 1
    assert "FAIL  time <= 10us: cannot be checked" in capsys.readouterr().out
    assert main(args + ["--allow-unchecked"]) == 0
    assert "SKIP  time <= 10us: cannot be checked" in capsys.readouterr().out


def test_gate_cli_against_a_json_baseline(tiny, tmp_path, capsys):
    base = []
    for r in tiny["records"]:
        b = VariantRecord.from_dict(r.to_dict())
        b.tileiras, b.registers = B133, r.registers - 1
        base.append(b)
    js = tmp_path / "base.json"
    js.write_text(json.dumps(dump(base, {})))
    rc = main(["gate", tiny["probe"], "--arch", "sm_90", "--store", tiny["store"], "--where", "TILE=1024",
               "--baseline", str(js), "--expect", "registers <= baseline"])
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL  registers <= baseline: 2 of 2 variant(s)" in out
    assert "vs baseline (tileiras 13.3.36)" in out


def test_gate_cli_usage_errors(tiny, capsys):
    assert main(["gate", tiny["probe"], "--arch", "sm_90", "--store", tiny["store"], "--expect", "fast please"]) == 2
    assert "cannot parse expectation 'fast please'" in capsys.readouterr().err
    assert main(["gate", tiny["probe"], "--arch", "sm_90", "--store", tiny["store"], "--where", "NOPE=1",
                 "--expect", "compiles"]) == 2
    err = capsys.readouterr().err
    assert "--where names 'NOPE', which is neither a case constant of the probe (TILE) nor a hint" in err
    assert main(["gate", tiny["probe"], "--arch", "sm_90", "--store", tiny["store"], "--expect",
                 "registers <= baseline"]) == 2
    assert "no --baseline" in capsys.readouterr().err


# --- the pytest plugin ----------------------------------------------------------------------------------------------

def test_plugin_is_registered_as_a_pytest11_entry_point():
    text = (ROOT / "pyproject.toml").read_text()      # (tomllib is 3.11+; tileprobe supports 3.10)
    assert re.search(r'^\[project\.entry-points\.pytest11\]\ntileprobe = "tileprobe\.pytest_plugin"$', text, re.M)
    import tileprobe.pytest_plugin as plugin
    assert callable(plugin.tileprobe_audit) and hasattr(plugin, "pytest_addoption")


def test_plugin_fixture_in_a_kernel_repository(tiny, pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")     # load it once, by -p, installed or not
    monkeypatch.syspath_prepend(str(ROOT))
    Path(pytester.path / "probe_vec.py").write_text(Path(tiny["probe"]).read_text())
    regs = min(r.registers for r in tiny["records"])
    pytester.makepyfile(test_kernels=f"""
        def test_occupancy(tileprobe_audit):
            tileprobe_audit("probe_vec.py", arch="sm_90").where(TILE=1024).expect("occupancy honoured", "no spills")

        def test_registers(tileprobe_audit):
            tileprobe_audit("probe_vec.py", arch="sm_90").expect("registers<={regs}")

        def test_records(tileprobe_audit):
            check = tileprobe_audit("probe_vec.py", arch="sm_90").where(TILE=2048, occupancy=2)
            assert [(r.case, r.hints) for r in check.records] == [({{"TILE": 2048}}, {{"occupancy": 2}})]
        """)
    counter = Count(monkeypatch)
    result = pytester.runpytest("-p", "tileprobe.pytest_plugin", "--tileprobe-store", tiny["store"], "-q")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*tileprobe: 1 expectation(s) failed for *probe_vec.py on sm_90",
                                 f"*registers<={regs}: vec_add sm_90 tileiras 13.4.92 TILE=2048 occupancy=1: "
                                 f"expected registers <= {regs}, got registers = *"])
    assert counter.n == 0, "the fixture compiled variants the store already held"


def test_audit_cli_prints_tables_reasons_and_markdown(tiny, monkeypatch, capsys):
    """Golden output of ``tileprobe audit`` over stored variants (nothing compiled): the table title, header and
    one row per variant with its verdict, each verdict's reason, the summary line; then the Markdown form."""
    from tileprobe.report.common import LIMITER_SHORT
    from tileprobe.schema import short_build
    counter = Count(monkeypatch)
    assert main(["audit", tiny["probe"], "--arch", "sm_90", "--store", tiny["store"], "--no-sass"]) == 0
    assert counter.n == 0
    cap = capsys.readouterr()
    rows = [" ".join(w for w in ln.split() if w not in "│┃") for ln in cap.out.splitlines()]
    text = " ".join(cap.out.split())
    recs = {(r.case["TILE"], r.hints["occupancy"]): r for r in tiny["records"]}
    build = short_build(recs[(1024, 1)].tileiras)
    assert rows[0] == f"vec_add · sm_90 · {build}"
    assert "smem B" in rows      # the two-line header: smem B / (cubin): the cubin's size, as the reasons quote it
    assert "TILE occupancy threads regs (cubin) stack B CTAs/SM limiter verdict" in rows
    for (tile, occ), r in recs.items():
        v = r.verdicts["occupancy"]
        assert (f"{tile} {occ} {r.threads} {r.registers} {r.shared_bytes:,} {r.stack_bytes:,} {r.ctas_per_sm} "
                f"{LIMITER_SHORT[r.limiter]} {v.status}") in rows
        assert " ".join(f"TILE={tile} occupancy={occ}: occupancy {v.status}: {v.reason}".split()) in text
    assert re.fullmatch(r"4 variants, 0 failed to compile, \d+\.\d s", cap.err.strip().splitlines()[-1])
    assert main(["audit", tiny["probe"], "--arch", "sm_90", "--store", tiny["store"], "--no-sass",
                 "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    r = recs[(2048, 2)]
    assert md.startswith("## tileprobe audit\n- tileprobe: ") and f"\n### vec_add · sm_90 · {build}\n\n" in md
    assert (f"| 2048 | 2 | {r.threads} | {r.registers} | {r.shared_bytes:,} | {r.stack_bytes:,} | {r.ctas_per_sm} | "
            f"{LIMITER_SHORT[r.limiter]} | {r.verdicts['occupancy'].status} |") in md
