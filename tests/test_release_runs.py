"""Compiler releases by measured time, on recorded run data (no GPU): the noise rule, status changes between
releases, the timed compare Markdown (golden text), release interleaving, bisect by time over per-release runs, and
the gate's baseline run."""
import json
import random
import statistics
from pathlib import Path

import pytest

from tileprobe.analyses.bisect_time import (
    RunProperty,
    evaluate_releases,
    parse_run_property,
    pool_runs,
    releases_for_target,
)
from tileprobe.analyses.compare import compare_records, compare_results
from tileprobe.analyses.gate import check, parse_expectation
from tileprobe.analyses.noise import TimeStats, betainc, t_quantile, t_sf, time_change
from tileprobe.errors import TileprobeError
from tileprobe.report.markdown import compare_markdown
from tileprobe.run.session import interleave_releases
from tileprobe.run.timing import sample_fields
from tileprobe.schema import VariantRecord, VariantRun, Verdict, write_json

DATA = Path(__file__).parent / "data"
B = {v: f"Cuda compilation tools, release {v.rsplit('.', 1)[0]}, V{v}" for v in
     ("13.3.36", "13.4.59", "13.4.92", "13.5.37")}
GPU = {"name": "NVIDIA H200", "sm": "sm_90", "driver": "580.95.05", "clock_sm_mhz": 1980, "clock_max_sm_mhz": 1980,
       "clock_mem_mhz": 3201}


def run(median, sd=2.0, n=100, seed=0, status="ok", samples=True):
    """A run record as `tileprobe run` writes it: n samples around ``median`` (normal, σ ``sd``)."""
    if status != "ok":
        return VariantRun(status=status, median_us=None, reps=0, gpu="NVIDIA H200")
    rng = random.Random(seed)
    xs = [rng.gauss(median, sd) for _ in range(n)]
    s = sorted(xs)
    out = {"status": "ok", "median_us": statistics.median(xs), "p25_us": s[n // 4], "p75_us": s[3 * n // 4],
           "mean_us": statistics.fmean(xs), "reps": n, "gpu": "NVIDIA H200", **sample_fields(xs)}
    if not samples:
        out.pop("samples_us")
    return VariantRun(**out)


def rec(version, occ=2, *, threads=256, regs=128, smem=44_068, ctas=2, code="c", r=None, tma=True):
    return VariantRecord(kernel="rms_norm_large", probe="/x/rms_norm_large.py", case={"ALLOW_TMA": tma},
                         hints={"occupancy": occ}, arch="sm_90", tileiras=B[version], status="ok", threads=threads,
                         registers=regs, shared_bytes=smem, ctas_per_sm=ctas, code_sha256=code,
                         verdicts={"occupancy": Verdict("honoured", "")}, run=r)


# --- the noise rule ----------------------------------------------------------------------------------------------

def test_t_distribution_matches_published_values():
    # scipy.stats.t.sf(2.0, 10) = 0.036694017385370; t.ppf(0.975, 99) = 1.984216951586; I_0.5(2, 3) = 0.6875
    assert t_sf(2.0, 10) == pytest.approx(0.036694017385370, rel=1e-9)
    assert t_sf(5.0, 198) == pytest.approx(6.296698610609366e-07, rel=1e-6)
    assert t_quantile(0.975, 99) == pytest.approx(1.984216951586, abs=1e-8)
    assert t_quantile(0.975, 10) == pytest.approx(2.228138851986, abs=1e-8)
    assert betainc(2, 3, 0.5) == pytest.approx(0.6875, abs=1e-12)


def test_real_change_counts_and_says_its_ratio():
    tc = time_change(run(13_360.0, 40, seed=1), run(22_090.0, 40, seed=2))
    assert tc.changed and tc.direction == "slower" and tc.ratio == pytest.approx(1.653, abs=0.005)
    assert tc.ratio_text() == "1.65× slower" and tc.method == "Welch t-test on samples, n 100+100"
    assert tc.text() == ("time 13,360.4 → 22,079.9 µs (1.65× slower, p < 0.001, Welch t-test on samples, "
                         "n 100+100)")


def test_noise_only_difference_does_not_count():
    """Two runs of one distribution (σ 2 µs on 300 µs): whatever the medians say, the t-test does not reject."""
    tc = time_change(run(300.0, 2.0, seed=3), run(300.0, 2.0, seed=4))
    assert not tc.significant and not tc.changed and tc.p > 0.05
    assert "within noise, not significant" in tc.text()


def test_tiny_significant_change_under_the_minimum_effect():
    """0.5 % slower with σ 0.1 %: significant (p ≪ 0.05) yet under the 2 % minimum effect, so not a change."""
    tc = time_change(run(300.0, 0.3, seed=5), run(301.5, 0.3, seed=6))
    assert tc.significant and not tc.large and not tc.changed
    assert "under the 2% minimum effect" in tc.text()
    assert time_change(run(300.0, 0.3, seed=5), run(301.5, 0.3, seed=6), min_effect=0.004).changed


def test_summary_statistics_and_iqr_fallback():
    a, b = run(100.0, 1.0, seed=7, samples=False), run(110.0, 1.0, seed=8, samples=False)
    assert TimeStats.of(a).source == "summary" and time_change(a, b).method.startswith("Welch t-test on n, mean")
    old_a = VariantRun(status="ok", median_us=100.0, p25_us=99.0, p75_us=101.0, reps=100)
    old_b = VariantRun(status="ok", median_us=110.0, p25_us=109.0, p75_us=111.0, reps=100)
    st = TimeStats.of(old_a)
    assert st.source == "iqr" and st.stdev_us == pytest.approx(2 / 1.349)
    assert time_change(old_a, old_b).changed and "estimated from the IQR" in time_change(old_a, old_b).method
    assert TimeStats.of(VariantRun(status="hang")) is None and time_change(old_a, VariantRun(status="hang")) is None


def test_sample_fields_keep_samples_and_stdev():
    f = sample_fields([1.0, 2.0, 3.0, 4.0])
    assert f == {"stdev_us": round(statistics.stdev([1, 2, 3, 4]), 4), "samples_us": [1.0, 2.0, 3.0, 4.0]}
    big = sample_fields([float(i) for i in range(1200)])
    assert len(big["samples_us"]) == 400 and big["samples_us"][:2] == [0.0, 3.0]


# --- compare over runs: status changes and the report --------------------------------------------------------------

def test_status_changes_between_releases_ranked():
    a = [rec("13.3.36", 1, r=run(300, seed=1)), rec("13.3.36", 2, r=run(300, seed=2)),
         rec("13.3.36", 4, r=run(300, status="hang")), rec("13.3.36", 8, r=run(300, status="crash")),
         rec("13.3.36", 16, r=run(300, seed=3))]
    b = [rec("13.4.92", 1, r=run(300, status="hang")), rec("13.4.92", 2, r=run(300, status="wrong")),
         rec("13.4.92", 4, r=run(300, seed=4)), rec("13.4.92", 8, r=run(300, seed=5)),
         rec("13.4.92", 16, r=run(300, seed=6))]
    ch = {c.a.hints["occupancy"]: c for c in compare_records(a, b)}
    assert ch[1].kind == "regression" and ch[1].details == ["run ok → hang (new hang)"]
    assert ch[2].kind == "regression" and ch[2].details == ["run ok → wrong"]
    assert ch[4].kind == "improvement" and ch[4].details == ["run hang → ok"]
    assert ch[8].kind == "improvement" and ch[8].details == ["run crash → ok"]
    assert ch[16].kind == "same"
    assert [c.a.hints["occupancy"] for c in compare_records(a, b)][:2] == [1, 2]   # the new hang first


def _two_release_run(tmp_path):
    """One run JSON holding two releases, as `tileprobe run --bundle` writes it (the seed's shape: the gather
    kernel 1.65× slower under 13.4.92 at 1 CTA/SM, another variant within noise, one new hang)."""
    recs = [rec("13.3.36", 2, code="a2", r=run(13_360.0, 40, seed=1)),
            rec("13.3.36", 4, code="a4", ctas=4, r=run(9_000.0, 30, seed=2)),
            rec("13.3.36", 8, code="a8", ctas=8, r=run(8_000.0, 30, seed=3)),
            rec("13.4.92", 2, code="b2", threads=384, regs=168, smem=100_484, ctas=1, r=run(22_090.0, 40, seed=4)),
            rec("13.4.92", 4, code="a4", ctas=4, r=run(9_010.0, 30, seed=5)),
            rec("13.4.92", 8, code="a8", ctas=8, r=run(8_000.0, status="hang"))]
    path = tmp_path / "run.json"
    write_json(recs, {"cuda_tile": "1.7.0", "gpu": GPU, "tileiras": [B["13.3.36"], B["13.4.92"]]}, str(path))
    return path


def test_compare_one_run_file_with_two_releases_and_its_markdown(tmp_path):
    c = compare_results([str(_two_release_run(tmp_path))])
    assert (c.name_a, c.name_b) == ("tileiras 13.3.36", "tileiras 13.4.92")
    assert [(x.kind, x.a.hints["occupancy"]) for x in c.changes] == [("regression", 8), ("regression", 2),
                                                                     ("same", 4)]
    md = compare_markdown(c, "tileprobe compare run.json --format markdown")
    golden = (DATA / "release_runs_compare.md").read_text()
    assert md == golden


def test_compare_two_run_files(tmp_path):
    path = _two_release_run(tmp_path)
    doc = json.loads(path.read_text())
    for v in ("13.3.36", "13.4.92"):
        side = dict(doc, variants=[x for x in doc["variants"] if x["tileiras"] == B[v]])
        (tmp_path / f"{v}.json").write_text(json.dumps(side))
    c = compare_results([str(tmp_path / "13.3.36.json"), str(tmp_path / "13.4.92.json")])
    reg = [x for x in c.changes if x.kind == "regression" and x.a.hints["occupancy"] == 2][0]
    assert "CTAs/SM 2 → 1" in reg.details and any(d.startswith("time 13,3") and "1.65× slower" in d
                                                   for d in reg.details)


# --- run order --------------------------------------------------------------------------------------------------

def test_interleave_alternates_which_release_goes_first():
    recs = [rec(v, occ) for v in ("13.3.36", "13.4.92", "13.5.37") for occ in (1, 2, 4)]
    order = [(r.hints["occupancy"], r.tileiras[-7:]) for r in interleave_releases(recs)]
    assert order == [(1, "13.3.36"), (1, "13.4.92"), (1, "13.5.37"), (2, "13.4.92"), (2, "13.5.37"),
                     (2, "13.3.36"), (4, "13.5.37"), (4, "13.3.36"), (4, "13.4.92")]
    one = [rec("13.3.36", 1), rec("13.4.92", 1)]
    assert [r.tileiras[-7:] for r in interleave_releases(one, offset=1)] == ["13.4.92", "13.3.36"]
    same = [rec("13.3.36", o) for o in (4, 1, 2)]
    assert interleave_releases(same) == same


# --- bisect by time ----------------------------------------------------------------------------------------------

def _releases(medians, status=None):
    status = status or {}
    return [rec(v, 1, r=run(m, 3.0, seed=i, status=status.get(v, "ok"))) for i, (v, m) in enumerate(medians.items())]


def test_bisect_by_time_names_the_release_where_it_moved():
    recs = _releases({"13.3.36": 300.0, "13.4.59": 301.0, "13.4.92": 420.0, "13.5.37": 421.0})
    res = evaluate_releases(recs, parse_run_property("time within 5%"))
    assert [s.holds for s in res.steps] == [True, True, False, False]
    assert (res.first_bad, res.last_good) == ("13.4.92", "13.4.59")
    assert "1.40" in res.steps[2].summary and res.conclusion() == (
        "first release where `time within 5%` fails: tileiras 13.4.92 (last that held: 13.4.59)")


def test_bisect_by_time_flat_says_nothing_moved():
    recs = _releases({"13.3.36": 300.0, "13.4.59": 300.5, "13.4.92": 299.7, "13.5.37": 300.2})
    res = evaluate_releases(recs, parse_run_property("no slower than the good release"))
    assert res.first_bad is None and all(s.holds for s in res.steps)
    assert res.conclusion().endswith("nothing moved beyond noise")


def test_bisect_no_hang_and_faster_is_not_slower():
    recs = _releases({"13.3.36": 300.0, "13.4.59": 250.0, "13.4.92": 300.0, "13.5.37": 300.0},
                     status={"13.4.92": "hang"})
    assert evaluate_releases(recs, parse_run_property("no slower")).first_bad == "13.4.92"   # a hang has no time
    res = evaluate_releases(recs, parse_run_property("no hang"))
    assert (res.first_bad, res.steps[2].summary) == ("13.4.92", "hang")
    assert evaluate_releases(recs[:2], parse_run_property("no slower")).first_bad is None   # faster holds


def test_run_properties_parse_and_others_are_static():
    assert parse_run_property("time within 5%") == RunProperty("within", 5.0, "time within 5%")
    assert parse_run_property("median within 2.5 % of the good release").pct == 2.5
    assert parse_run_property("time no slower than good beyond noise").kind == "no_slower"
    assert parse_run_property("correct").kind == "correct"
    assert parse_run_property("occupancy honoured") is None and parse_run_property("registers<=128") is None
    with pytest.raises(TileprobeError, match="at least two releases"):
        evaluate_releases(_releases({"13.3.36": 300.0}), parse_run_property("no slower"))


def test_releases_for_target_skips_those_without_it():
    targets = {"13.2.86": ["sm_100", "sm_120"], "13.3.36": ["sm_80", "sm_90", "sm_120"], "13.4.92": []}
    keep, skipped = releases_for_target(["13.2.86", "13.3.36", "13.4.92"], "sm_90", targets.get)
    assert keep == ["13.3.36", "13.4.92"] and list(skipped) == ["13.2.86"]
    assert "does not list sm_90" in skipped["13.2.86"]


def test_pool_runs_pools_samples_and_keeps_the_worst_status():
    r1, r2 = run(300.0, 2.0, n=50, seed=1), run(310.0, 2.0, n=50, seed=2)
    p = pool_runs([r1, r2])
    assert p.reps == 100 and p.rounds == 2 and len(p.samples_us) == 100
    assert p.median_us == pytest.approx(statistics.median(r1.samples_us + r2.samples_us))
    assert pool_runs([r1, run(0, status="hang")]).status == "hang"
    assert r1.rounds is None and list(p.to_dict())[:len(r1.to_dict()) + 1] == [*r1.to_dict(), "rounds"]   # new: last


# --- the gate against a baseline run -----------------------------------------------------------------------------

def test_gate_time_no_worse_than_baseline_uses_the_noise_rule():
    e = parse_expectation("time no worse than baseline")
    assert (e.kind, e.op, e.uses_baseline) == ("time", "no_worse", True)
    base = [rec("13.3.36", 2, r=run(300.0, 3.0, seed=1))]
    assert check([rec("13.4.92", 2, r=run(301.0, 3.0, seed=2))], [e], base) == []          # within noise
    assert check([rec("13.4.92", 2, r=run(250.0, 3.0, seed=3))], [e], base) == []          # faster
    (f,) = check([rec("13.4.92", 2, r=run(330.0, 3.0, seed=4))], [e], base)
    assert f.got == f"{f.got.split()[0]} µs (1.10× slower, p < 0.001)" and f.expected.startswith(
        "no slower than baseline 300.")
    assert f.reason.startswith("baseline: tileiras 13.3.36") and not f.unchecked
    assert check([rec("13.4.92", 2, r=run(330.0, 3.0, seed=4))], ["time no worse than baseline + 15%"], base) == []


# --- stored runs of a bundle ---------------------------------------------------------------------------------------

def test_bundle_runs_are_stored_by_release_and_compared_from_the_store(tmp_path):
    """What `tileprobe run --bundle` does with a store (run.session.import_bundle): the bundle's compiles and audit
    are stored, each run is saved against its release's compile, and `compare AUDIT_ID` splits them by compiler."""
    from tileprobe.run.session import RunResult, import_bundle, save_runs
    from tileprobe.schema import load
    from tileprobe.store import Store
    recs, env = load(str(_two_release_run(tmp_path)))
    runs = [r.run for r in recs]
    for r in recs:
        r.run = None
    db = str(tmp_path / "store.db")
    with Store.open(db) as store:
        audit_id = import_bundle(store, recs, env, {}, "run --bundle B rms_norm_large.py")
        for r, x in zip(recs, runs):
            r.run = x
        assert save_runs(store, RunResult(recs, {"gpu": GPU})) is None
        assert store.import_records(recs, lambda sha: None, env.get("cuda_tile")) == 0   # idempotent
        stored = store.runs()
    assert len(stored) == 6 and {s["tileiras"] for s in stored} == {B["13.3.36"], B["13.4.92"]}
    c = compare_results([str(audit_id)], store=db)
    reg = {x.a.hints["occupancy"]: x for x in c.changes}
    assert reg[2].kind == "regression" and any("1.65× slower" in d for d in reg[2].details)
    assert reg[8].details == ["run ok → hang (new hang)"]


# --- the GPU side of a bisect by time, with the GPU replaced by recorded timings --------------------------------------

def _bisect_bundle_dir(tmp_path):
    """A bisect bundle as `bisect --bundle-out` writes it: one variant under four releases, a `bisect` block."""
    from tileprobe.audit.pipeline import AuditResult, write_bundle
    versions = ["13.3.36", "13.4.59", "13.4.92", "13.5.37"]
    recs = [rec(v, 1, tma=False) for v in versions]
    env = {"cuda_tile": "1.7.0", "bisect": {"good": versions[0], "bad": versions[-1], "arch": "sm_90",
                                            "releases": versions, "skipped": {"13.2.86": "no sm_90"}}}
    write_bundle(str(tmp_path / "b"), AuditResult(records=recs, environment=env, cubins={}))
    return str(tmp_path / "b")


def test_gpu_side_runs_every_release_interleaved_in_rounds_and_names_the_move(tmp_path, monkeypatch, capsys):
    import tileprobe.run.session as session
    import tileprobe.run.watchdog as watchdog
    medians = {"13.3.36": 1500.0, "13.4.59": 1100.0, "13.4.92": 1101.0, "13.5.37": 1099.0}
    firsts = []

    def fake_run_probes(records, cubins, **kw):
        assert kw["trust_recorded"] is False and kw["probe_paths"] == ["examples/rms_norm_large.py"]
        firsts.append(release_of_build(records[0].tileiras))
        for i, r in enumerate(records):
            r.run = run(medians[release_of_build(r.tileiras)], 5.0, n=50, seed=len(firsts) * 10 + i)
        return session.RunResult(records, {"gpu": GPU})

    class NoGPU:
        def __init__(self, **kw):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    monkeypatch.setattr(session, "run_probes", fake_run_probes)
    monkeypatch.setattr(watchdog, "Watchdog", NoGPU)
    from tileprobe.cli import main
    bundle = _bisect_bundle_dir(tmp_path)
    rc = main(["bisect", "--bundle", bundle, "examples/rms_norm_large.py", "--property", "time within 5%",
               "--rounds", "3", "--json", str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert rc == 0 and firsts == ["13.3.36", "13.4.59", "13.4.92"]          # the first release rotates per round
    assert "first release where `time within 5%` fails: tileiras 13.4.59 (last that held: 13.3.36)" in out
    assert "skipped 13.2.86: no sm_90" in out and "tileiras 13.5.37: FAILS" in out
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["first_bad"] == "13.4.59" and doc["rounds"] == 3 and len(doc["steps"]) == 4
    medians.update({"13.4.59": 1500.5, "13.4.92": 1499.0, "13.5.37": 1500.2})
    main(["bisect", "--bundle", bundle, "examples/rms_norm_large.py", "--property", "no slower"])
    assert "nothing moved beyond noise" in capsys.readouterr().out
    assert main(["bisect", "--bundle", bundle, "examples/rms_norm_large.py", "--property", "occupancy honoured"]) == 1
    assert "give a run property" in capsys.readouterr().err


def release_of_build(build):
    from tileprobe.analyses.bisect_time import release_of
    return release_of(build)


def test_one_command_does_both_sides_where_one_machine_has_both(tmp_path, monkeypatch, capsys):
    """A run property without --bundle/--bundle-out: the CPU side writes a temporary bundle, the GPU side runs it."""
    import tileprobe.analyses.bisect_time as bt
    seen = {}

    def prepare(probe, out_dir, **kw):
        seen["prepared"] = out_dir
        return ["13.3.36", "13.4.92"], {}, 1000

    def gpu_side(bundle, probes, prop, **kw):
        seen["ran"], seen["probes"] = bundle, probes
        return evaluate_releases(_releases({"13.3.36": 300.0, "13.4.92": 400.0}), parse_run_property(prop))

    monkeypatch.setattr(bt, "prepare_bundle", prepare)
    monkeypatch.setattr(bt, "bisect_bundle", gpu_side)
    from tileprobe.cli import main
    assert main(["bisect", "examples/rms_norm_large.py", "--arch", "sm_90", "--property", "no slower",
                 "--good", "13.3.36", "--bad", "13.4.92"]) == 0
    assert seen["prepared"] == seen["ran"] and seen["probes"] == ["examples/rms_norm_large.py"]
    assert "fails: tileiras 13.4.92" in capsys.readouterr().out
