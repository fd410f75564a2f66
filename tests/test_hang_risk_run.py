"""run and tune with predicted hangs: named before, not launched by default (run = skipped, with the
reason), launched with --run-hang-risk, and every run records the prediction beside what happened. No GPU: the
watchdog is a fake that says what each launch would have done."""
import hashlib
import io

from rich.console import Console

from tileprobe.records import CompileTimeout, RegisterPool, SassFacts
from tileprobe.run import session
from tileprobe.run.watchdog import TaskOutcome
from tileprobe.schema import VariantRecord, Verdict

CUBIN = b"cubin bytes"
SHA = hashlib.sha256(CUBIN).hexdigest()
REASON = "TRY_ALLOC to 32 with no DEALLOC: the CTA's pool of 6,144 registers is all held"


class FakeWatchdog:
    restarts = 0

    def __init__(self):
        self.tasks = []

    def start(self):
        return {"sm": "sm_90", "name": "Fake"}

    def submit(self, fn, kwargs, timeout_s=None):
        self.tasks.append(kwargs["record"]["hints"])
        if kwargs["record"]["hints"]["occupancy"] == 16:   # what the H200 did with the seed's cubin
            return TaskOutcome("hang", error="no result within 5 s", wall_s=5.0, worker_pid=2)
        return TaskOutcome("done", value={"status": "ok", "median_us": 3.0}, wall_s=0.5, worker_pid=1)


def _records(probe) -> list[VariantRecord]:
    out = []
    for occ, verdict in ((4, "pool_ok"), (16, "hang_risk"), (8, "none")):
        out.append(VariantRecord(kernel="rms", probe=str(probe), case={"ALLOW_TMA": False}, hints={"occupancy": occ},
                                 arch="sm_90", tileiras="V13.3.36", status="ok", cubin_sha256=SHA, symbol="k",
                                 threads=256, registers=24, ctas_per_sm=8,
                                 register_pool=RegisterPool(verdict=verdict, reason=REASON if occ == 16 else "fine")))
    return out


def test_run_does_not_launch_a_predicted_hang_and_says_why(tmp_path):
    probe = tmp_path / "p.py"
    probe.write_text("")
    recs, wd = _records(probe), FakeWatchdog()
    res = session.run_probes(recs, {SHA: CUBIN}, watchdog=wd)
    assert wd.tasks == [{"occupancy": 4}, {"occupancy": 8}]
    assert recs[1].run.status == "skipped" and recs[1].run.register_pool == "hang_risk"
    assert REASON in recs[1].run.error and "--run-hang-risk" in recs[1].run.error
    assert [r.run.register_pool for r in recs] == ["pool_ok", "hang_risk", "none"]
    assert any("occupancy=16: not launched" in s for s in res.skipped) and res.ran == 2


def test_run_hang_risk_launches_it_and_records_prediction_and_outcome(tmp_path):
    probe = tmp_path / "p.py"
    probe.write_text("")
    recs, wd = _records(probe), FakeWatchdog()
    session.run_probes(recs, {SHA: CUBIN}, watchdog=wd, run_hang_risk=True)
    assert len(wd.tasks) == 3
    assert (recs[1].run.status, recs[1].run.register_pool) == ("hang", "hang_risk")
    assert (recs[0].run.status, recs[0].run.register_pool) == ("ok", "pool_ok")


def test_hang_risk_lines_name_each_variant_before_the_sweep(tmp_path):
    from tileprobe.cli.run import hang_risk_lines
    buf = io.StringIO()
    risky = session.hang_risks(_records(tmp_path / "p.py"))
    hang_risk_lines(Console(file=buf, width=300), risky, False)
    text = buf.getvalue()
    assert "predicted hang (register pool) in 1 variant: not launched (--run-hang-risk launches them)" in text
    assert f"rms sm_90 ALLOW_TMA=False occupancy=16: {REASON}" in text


def test_tune_drops_a_predicted_hang_unless_asked(tmp_path):
    from tileprobe.tune.space import Config, Problem
    from tileprobe.tune.static import HANG_RISK, make_plans

    class _Probe:
        source, label, reference = str(tmp_path / "p.py"), "rms", None
    recs = _records(tmp_path / "p.py")
    problem = Problem(_Probe(), {"ALLOW_TMA": False},
                      [Config((), tuple(r.hints.items())) for r in recs])
    plan = make_plans([problem], recs, "sm_90")[0]
    assert [c.status for c in plan.candidates] == ["ok", HANG_RISK, "ok"] and plan.dropped == {HANG_RISK: 1}
    assert REASON in plan.candidates[1].reason and len(plan.raced()) == 2
    assert [c.status for c in make_plans([problem], recs, "sm_90", run_hang_risk=True)[0].candidates] == ["ok"] * 3


def test_racing_while_compiling_drops_a_predicted_hang_as_it_lands(tmp_path):
    """The tune's default GPU path lands records one by one (tune/static.py Landing): the hang rule holds
    there as in make_plans."""
    from tileprobe.tune.space import Config, Problem
    from tileprobe.tune.static import COMPILING, HANG_RISK, Landing, pending_plans

    class _Probe:
        source, label, reference = str(tmp_path / "p.py"), "rms", None
    recs = _records(tmp_path / "p.py")
    problem = Problem(_Probe(), {"ALLOW_TMA": False}, [Config((), tuple(r.hints.items())) for r in recs])
    for run_hang_risk, want in ((False, ["ok", HANG_RISK, "ok"]), (True, ["ok", "ok", "ok"])):
        (plan,) = plans = pending_plans([problem])
        landing = Landing(plans, "sm_90", run_hang_risk)
        assert [c.status for c in plan.candidates] == [COMPILING] * 3
        for r in recs:
            assert landing.land(r) is not None
        assert [c.status for c in plan.candidates] == want
        assert plan.dropped == ({} if run_hang_risk else {HANG_RISK: 1})
        if not run_hang_risk:
            assert REASON in plan.candidates[1].reason and "--run-hang-risk" in plan.candidates[1].reason


def test_compile_time_against_the_programs_compiler_timeout(tmp_path):
    """audit --compiler-timeout S: every compiled record gets its margin; those past it are flagged in words."""
    from tileprobe.audit.pipeline import check_compile_timeout
    from tileprobe.report.common import compile_timeout_line
    recs = _records(tmp_path / "p.py")
    recs[0].compile_s, recs[1].compile_s, recs[2].compile_s = 5.6, 0.4, 5.0
    failed = VariantRecord(kernel="rms", probe="p", case={}, hints={}, arch="sm_90", tileiras="t", status="timeout")
    check_compile_timeout(recs + [failed], 5.0)
    assert [r.exceeds_compile_timeout for r in recs] == [True, False, False] and failed.compile_timeout is None
    assert recs[0].compile_timeout == CompileTimeout(timeout_s=5.0, compile_s=5.6, margin_s=-0.6, exceeds=True,
                                                     source="--compiler-timeout")
    assert recs[0].to_dict()["compile_timeout"] == {"timeout_s": 5.0, "compile_s": 5.6, "margin_s": -0.6,
                                                    "exceeds": True, "source": "--compiler-timeout"}
    assert recs[1].compile_timeout.margin_s == 4.6 and recs[1].compile_timeout.exceeds is False
    assert compile_timeout_line(recs[0]).startswith("compile 5.60 s exceeds the program's compiler timeout of 5 s "
                                                    "(--compiler-timeout) by 0.60 s")
    assert compile_timeout_line(recs[1]) is None
    again = VariantRecord.from_dict(recs[0].to_dict())
    assert again.compile_timeout == recs[0].compile_timeout and again.exceeds_compile_timeout


def test_static_advice_never_picks_a_predicted_hang(tmp_path):
    from tileprobe.judge.advice import static_advice
    recs = _records(tmp_path / "p.py")
    for r, ctas in zip(recs, (4, 8, 2)):
        r.ctas_per_sm, r.stack_bytes, r.sass = ctas, 0, SassFacts(spill_loads=0, spill_stores=0)
        r.verdicts = {"occupancy": Verdict("honoured", "")}
    best, line = static_advice(recs)
    # occupancy 16 has more CTAs/SM than 4 and 8, and hangs: it is named as such, never weighed as a build
    assert best is not recs[1]
    assert "occupancy 16: predicted to hang (register pool)" in line
    assert "occupancy 16 " not in line.split("occupancy 16: predicted")[0]
    recs[0].hints["occupancy"], recs[2].hints["occupancy"] = 4, 4   # the two others one build: the pick is theirs
    best, line = static_advice([recs[0], recs[1]])
    assert best is recs[0] and "predicted to hang" in line


def test_gpu_table_counts_predictions_against_outcomes(tmp_path, capsys):
    """benchmarks/audit/hang_table.py (what `benchmarks/audit/run.sh OUT hangs` prints) on a run JSON made with the
    fake watchdog."""
    import os

    from tileprobe.schema import write_json
    probe = tmp_path / "p.py"
    probe.write_text("")
    recs = _records(probe)
    session.run_probes(recs, {SHA: CUBIN}, watchdog=FakeWatchdog(), run_hang_risk=True)
    write_json(recs, {}, str(tmp_path / "run.json"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "benchmarks", "audit", "hang_table.py")
    from support import load_script
    table = load_script(path)
    assert table.main([str(tmp_path / "run.json"), str(tmp_path / "absent.json")]) == 0
    out = capsys.readouterr().out
    assert "absent.json: no such run result" in out
    assert "hang_risk variants that hung: 1 of 1; pool_ok variants that hung: 0 of 1" in out
    assert "prediction → outcome: hang_risk → hang: 1, none → ok: 1, pool_ok → ok: 1" in out
