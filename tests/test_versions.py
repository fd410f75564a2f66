"""Several compiler versions: isolation between versions, the occupancy report's regression, bisect; a
crash that became an error (cutile-python #94) compared and bisected, a release that does not list a target.

These install managed toolchains from the package registry (about 200 MB per release, a few seconds each here)
into a temporary TILEPROBE_TOOLCHAINS, then compile for real.
"""
import os

import pytest

from tileprobe.analyses.bisect import bisect_versions, candidates, make_evaluator
from tileprobe.analyses.compare import compare_records, match_key, split_by_compiler
from tileprobe.audit.pipeline import audit
from tileprobe.errors import TileprobeError
from tileprobe.store import Store
from tileprobe.toolchain import published_versions, resolve_toolchains

ROOT = os.path.dirname(os.path.dirname(__file__))
VADD = os.path.join(ROOT, "tests", "data", "probe_vadd.py")
W4A16 = os.path.join(ROOT, "examples", "w4a16_gemm.py")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def toolchains_dir(tmp_path_factory):
    old = os.environ.get("TILEPROBE_TOOLCHAINS")
    os.environ["TILEPROBE_TOOLCHAINS"] = os.environ.get("TILEPROBE_TEST_TOOLCHAINS") or str(
        tmp_path_factory.mktemp("toolchains"))
    yield
    if old is None:
        os.environ.pop("TILEPROBE_TOOLCHAINS", None)
    else:
        os.environ["TILEPROBE_TOOLCHAINS"] = old


def _resources(records):
    return {match_key(r): (r.status, r.threads, r.registers, r.shared_bytes, r.stack_bytes, r.code_sha256,
                           r.tileiras, r.verdicts) for r in records}


def test_two_versions_in_one_run_equal_two_separate_runs():
    tcs = resolve_toolchains(["13.3.36", "13.4.92"], auto_install=True)   # installing is asked for
    both = audit([VADD], ["sm_90"], toolchains=tcs, jobs=2).records
    a = audit([VADD], ["sm_90"], toolchains=tcs[:1], jobs=2).records
    b = audit([VADD], ["sm_90"], toolchains=tcs[1:], jobs=2).records
    ra, rb, build_a, build_b = split_by_compiler(both)
    assert "V13.3.36" in build_a and "V13.4.92" in build_b
    assert _resources(ra) == _resources(a)
    assert _resources(rb) == _resources(b)


def test_compare_names_the_report_regression(shared_store_path):
    tcs = resolve_toolchains(["13.3.36", "13.4.92"], auto_install=True)   # installing is asked for
    with Store.open(shared_store_path) as store:     # 13.4.92's half is tests/test_examples_audit.py's w4a16 too
        recs = audit([W4A16], ["sm_120"], toolchains=tcs, jobs=2, store=store).records
    a, b, build_a, build_b = split_by_compiler(recs)
    got_a = {(r.case["GATHER"], r.case["LOOP"], r.hints["occupancy"]): (r.threads, r.registers, r.shared_bytes)
             for r in a}
    # The report's "nvidia-cuda-tileiras 13.3.36" table.
    assert got_a == {
        (False, False, 1): (384, 168, 44124), (False, False, 2): (256, 128, 44100), (False, False, 4): (384, 168, 44124),
        (False, True, 1): (384, 168, 44108), (False, True, 2): (256, 128, 44068), (False, True, 4): (384, 168, 44108),
        (True, False, 1): (256, 255, 44100), (True, False, 2): (256, 128, 44100), (True, False, 4): (256, 255, 44100),
        (True, True, 1): (384, 168, 44092), (True, True, 2): (256, 128, 44068), (True, True, 4): (384, 168, 44092)}
    changes = compare_records(a, b)
    # regressions come first, ranked by what costs time. 13.4.92 also gives GATHER=True LOOP=False new
    # spills (0 → 408 B stack at occupancy 1 and 4), ranked first; the report's case is the one whose goal is lost
    # (occupancy 2: 2 → 1 CTAs/SM), with its reasons.
    regressions = [c for c in changes if c.kind == "regression"]
    assert changes[:len(regressions)] == regressions
    seed = next(c for c in regressions if (c.a.case, c.a.hints) == ({"GATHER": True, "LOOP": True},
                                                                    {"occupancy": 2}))
    assert seed.details[0] == "occupancy honoured → ignored"
    assert "fewer CTAs/SM: less latency hidden (lost residency)" in seed.why
    spills = [c for c in regressions if any("new spills" in w for w in c.why)]
    assert {(c.a.case["GATHER"], c.a.case["LOOP"], c.a.hints["occupancy"]) for c in spills} == {(True, False, 1),
                                                                                                 (True, False, 4)}
    verdict_regressions = [c for c in changes if any(d.startswith("occupancy ") for d in c.details)
                           and c.kind == "regression"]
    assert len(verdict_regressions) == 1


def test_bisect_names_first_release_that_ignores_the_hint(shared_store_path):
    versions = candidates(published_versions(), "13.3.36", "13.4.92")
    assert versions[0] == "13.3.36" and versions[-1] == "13.4.92"
    with Store.open(shared_store_path) as store:     # the ends' compiles are test_compare_names…'s
        evaluate = make_evaluator(W4A16, "sm_120", {"GATHER": True, "LOOP": True, "occupancy": 2},
                                  "occupancy honoured", jobs=2, store=store, install=True)   # a test may download
        res = bisect_versions(versions, evaluate)
    assert res.last_good == "13.3.36"
    assert res.first_bad == "13.4.59"
    assert [s.holds for s in res.steps][:2] == [True, False]


# --- the compiler's words across releases, and a failure change is a change ----------------------------------------

CUTILE_PYTHON_94 = os.path.join(ROOT, "tests", "data", "cutile_python_94.py")


def test_cutile_python_94_crash_became_an_error_compare_lists_it_and_bisect_names_13_4_59(shared_store_path):
    """cutile-python #94's kernel on sm_120: tileiras 13.3.36 is killed by SIGSEGV, 13.4.92 answers with an error.
    compare lists that as a change (an improvement); bisect on "no crash" names 13.4.59; "compiles" has nothing to
    bisect and says which property would."""
    tcs = resolve_toolchains(["13.3.36", "13.4.92"], auto_install=True)   # installing is asked for
    store = Store.open(shared_store_path)      # the bisects below read the two ends' compiles back from it
    recs = audit([CUTILE_PYTHON_94], ["sm_120"], toolchains=tcs, jobs=2, store=store).records
    a, b, _, _ = split_by_compiler(recs)
    assert [(r.status, r.failure) for r in a] == [("compiler_crash", "compiler_crash")]
    assert a[0].message == "tileiras was killed by SIGSEGV (signal 11)"
    assert [(r.status, r.failure, r.message) for r in b] == [("compile_error", "compile_error",
                                                              "error: failed to compile Tile IR program")]
    (change,) = compare_records(a, b)
    assert (change.kind, change.details) == ("improvement", ["status compiler_crash → compile_error"])
    versions = candidates(published_versions(), "13.3.36", "13.4.92")
    with store:
        res = bisect_versions(versions, make_evaluator(CUTILE_PYTHON_94, "sm_120", {}, "no crash", jobs=2, store=store,
                                                       install=True))
        assert (res.last_good, res.first_bad) == ("13.3.36", "13.4.59")
        assert [s.holds for s in res.steps] == [False, True, True]
        with pytest.raises(TileprobeError, match=r"nothing to bisect.*--property \"no crash\""):
            bisect_versions(versions, make_evaluator(CUTILE_PYTHON_94, "sm_120", {}, "compiles", jobs=2, store=store,
                                                     install=True))


def test_13_2_86_does_not_list_sm_90_in_its_own_words(capsys):
    """`--tileiras 13.2.86 --arch sm_90`: nothing compiled (its --help lists no sm_90); the terminal and Markdown
    say so with the compiler's target list, the class and the fix — not "Return code 1"."""
    from tileprobe.cli import main
    args = ["audit", VADD, "--arch", "sm_90", "--tileiras", "13.2.86", "--install", "--no-store", "-j", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    words = ("tileiras 13.2.86 does not list sm_90: its --help offers --gpu-name sm_80 sm_86 sm_87 sm_88 sm_89 "
             "sm_100 sm_103 sm_110 sm_120 sm_121 (compiling would end in \"tileiras: for the --gpu-name option: "
             "Cannot find option named 'sm_90'!\")")
    assert ": unsupported_target\n    " + words in out and "Return code" not in out
    assert "    fix: audit sm_90 with a tileiras release that lists it" in out
    assert main(args + ["--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert " · sm_90 · tileiras 13.2.86: unsupported_target** in 4 variant(s): TILE=256 occupancy=1; TILE=256 " \
           "occupancy=2; TILE=1024 occupancy=1; TILE=1024 occupancy=2\n  ```\n  " + words in md
    assert "| 256 | 1 | - | - | - | - | - | - | unsupported_target |" in md


def test_bundle_carries_both_releases_and_bisect_bundle_keeps_those_listing_the_target(tmp_path):
    """`audit --tileiras A,B --bundle DIR` holds both releases' records (keyed by build) and cubins, the
    bundle says which releases and how it was made, and the run order interleaves them; `bisect --bundle-out`
    skips a release whose tileiras does not list the target (13.2.86 and sm_90) and bundles the others."""
    from tileprobe.analyses.bisect_time import prepare_bundle
    from tileprobe.cli import main
    from tileprobe.run.session import interleave_releases, load_bundle
    bundle = str(tmp_path / "b")
    assert main(["audit", VADD, "--arch", "sm_90", "--tileiras", "13.3.36,13.4.92", "--install", "--no-store", "--bundle",
                 bundle, "--format", "none"]) == 0
    records, env, cubin = load_bundle(bundle)
    builds = sorted({r.tileiras for r in records})
    assert len(builds) == 2 and "V13.3.36" in builds[0] and "V13.4.92" in builds[1]
    assert env["tileiras"] == builds and env["audit_command"].startswith("tileprobe")
    assert all(cubin(r.cubin_sha256) for r in records if r.ok)
    order = interleave_releases(records)
    assert [r.tileiras for r in order[:4]] == [builds[0], builds[1], builds[1], builds[0]]
    with pytest.raises(TileprobeError, match=r"only \['13.3.36'\].*13.2.86 does not list sm_90"):
        prepare_bundle(VADD, str(tmp_path / "x"), arch="sm_90", where={}, good="13.2.86", bad="13.3.36", install=True)
    keep, skipped, size = prepare_bundle(VADD, str(tmp_path / "y"), arch="sm_90", where={}, good="13.4.59",
                                         bad="13.4.92", jobs=2, install=True)
    recs, env, _ = load_bundle(str(tmp_path / "y"))
    assert keep == ["13.4.59", "13.4.92"] and not skipped and env["bisect"]["releases"] == keep
    assert {r.tileiras[-7:] for r in recs} == {"13.4.59", "13.4.92"} and 0 < size < 1_000_000
