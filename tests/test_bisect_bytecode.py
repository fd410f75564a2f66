"""``bisect --fixed-bytecode``: every step compiles one bytecode (the version the oldest candidate reads), each step
names its bytecode, and the end says whether the bytes were the same at every step (the change is tileiras') or not.
The registry's list and the per-release audit are faked here (no network, no compiler); the fixed bytecode itself is
compiled for real in tests/test_fixed_bytecode.py."""
from __future__ import annotations

import os

from tileprobe import _cutile
from tileprobe.analyses.bisect import bytecode_of, bytecode_verdict
from tileprobe.analyses.results import BisectResult, Step
from tileprobe.schema import VariantRecord


def _step(v, holds, bytecode):
    return Step(v, holds, f"at {v}", parts={"tileiras": v, "bytecode": bytecode})


def test_the_bytecode_of_the_selected_records():
    recs = [VariantRecord(kernel="k", probe="p", case={}, hints={"occupancy": o}, arch="sm_90", tileiras="t",
                          status="ok", bytecode="13.3", bytecode_sha256=sha) for o, sha in ((1, "a" * 64), (2, "b" * 64))]
    assert bytecode_of(recs) == f"13.3 {'a' * 12}; 13.3 {'b' * 12}"
    assert bytecode_of([VariantRecord(kernel="k", probe="p", case={}, hints={}, arch="sm_90", tileiras="t",
                                      status="compile_error")]) == ""


def test_what_the_steps_bytecode_says():
    same = [_step("13.3.36", True, "13.3 87a54901a5c5"), _step("13.4.92", False, "13.3 87a54901a5c5")]
    assert bytecode_verdict(same, True) == ("same bytecode at every step (13.3 87a54901a5c5), fixed: what changed is "
                                            "tileiras', not the bytecode cuTile wrote")
    moved = [_step("13.3.36", True, "13.3 87a54901a5c5"), _step("13.4.92", False, "13.4 3de5d4bee883")]
    assert bytecode_verdict(moved, False) == (
        "the bytecode differed between steps (13.3 87a54901a5c5, 13.4 3de5d4bee883): each release was given the "
        "newest bytecode it reads, so a change may be in the bytecode, not tileiras; bisect with --fixed-bytecode to "
        "hold it fixed")
    assert bytecode_verdict([_step("13.3.36", True, "")], False) == ""
    res = BisectResult(same, "13.3.36", "13.4.92", "compiles")
    assert res.warnings() == []      # the bytecode is not a toolkit part that "ran with" another release


def test_bisect_fixes_the_bytecode_for_every_step(monkeypatch, capsys):
    import tileprobe.analyses.bisect as bisect_mod
    import tileprobe.toolchain as tcm
    from tileprobe.cli import main
    monkeypatch.setattr(tcm, "_PUBLISHED", {tcm.TILEIRAS_PKG: ["13.3.36", "13.4.59", "13.4.92"]})
    monkeypatch.delenv(_cutile.BYTECODE_ENV, raising=False)
    env_seen = []

    def evaluator(probe, arch, where, prop, jobs=None, store=None, install=False):
        def evaluate(v):
            env_seen.append(os.environ.get(_cutile.BYTECODE_ENV))
            return _step(v, v == "13.3.36", "13.3 87a54901a5c5")
        return evaluate
    monkeypatch.setattr(bisect_mod, "make_evaluator", evaluator)
    assert main(["bisect", "p.py", "--arch", "sm_90", "--property", "compiles", "--good", "13.3.36", "--bad",
                 "13.4.92", "--install", "--fixed-bytecode", "--no-store"]) == 0
    assert env_seen == ["13.3", "13.3", "13.3"] and _cutile.BYTECODE_ENV not in os.environ
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  tileiras 13.3.36: holds [with bytecode 13.3 87a54901a5c5] — at 13.3.36"
    assert out[-1] == ("same bytecode at every step (13.3 87a54901a5c5), fixed: what changed is tileiras', not the "
                       "bytecode cuTile wrote")
