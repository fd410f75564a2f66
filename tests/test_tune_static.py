"""The tune's static stage (``tileprobe/tune/static.py``) on real audited records of the bundled persistent
RMSNorm (``examples/rms_norm.py``, sm_90, tileiras 13.4.92: occupancy 16 compiles to occupancy 8's machine code,
FIELD_NOTES), and on synthetic records for the argument rules."""
from __future__ import annotations

import dataclasses
import os

import pytest

from tileprobe.probe.define import load_probes
from tileprobe.schema import VariantRecord
from tileprobe.tune.space import problems
from tileprobe.tune.static import (
    DUPLICATE,
    Candidate,
    Landing,
    compile_records,
    constant_data_sha256,
    dedupe,
    failed_reason,
    launch_key,
    make_plans,
    pending_plans,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RMS = os.path.join(ROOT, "examples", "rms_norm.py")


@pytest.fixture(scope="module")
def rms():
    """RMSNorm, TMA on, occupancy 8 and 16, compiled for sm_90 (2 compiles)."""
    [probe] = load_probes(RMS)
    prob = problems(probe)[0]
    assert prob.values == {"ALLOW_TMA": True}
    prob.configs = [c for c in prob.configs if c.hints_dict["occupancy"] in (8, 16)]
    res = compile_records([RMS], [prob], "sm_90", jobs=2)
    assert len(res.records) == 2 and all(r.ok for r in res.records), [r.error for r in res.records]
    return probe, prob, res


def test_same_code_but_a_bigger_grid_is_kept(rms):
    probe, prob, res = rms
    r8, r16 = sorted(res.records, key=lambda r: r.hints["occupancy"])
    assert r8.code_sha256 == r16.code_sha256 and r8.cubin_sha256 != r16.cubin_sha256   # the infeasible hint
    assert constant_data_sha256(res.cubins[r8.cubin_sha256]) == constant_data_sha256(res.cubins[r16.cubin_sha256])
    (plan,) = make_plans([prob], res.records, "sm_90")
    dedupe(plan, 132, res.cubins.get)
    assert [c.grid for c in plan.candidates] == [(1056, 1, 1), (2112, 1, 1)]     # SMs × occupancy
    assert [c.id for c in plan.raced()] == ["occupancy=8", "occupancy=16"] and DUPLICATE not in plan.dropped


def test_truly_identical_launches_are_one_group(rms):
    probe, prob, res = rms
    fixed = dataclasses.replace(probe, grid=lambda case, hints, num_sms: (4096,))
    fixed.source, fixed.index = probe.source, probe.index
    same = dataclasses.replace(prob, probe=fixed)
    (plan,) = make_plans([same], res.records, "sm_90")
    dedupe(plan, 132, res.cubins.get)
    occ8, occ16 = plan.candidates
    assert occ16.same_as is occ8 and occ8.members == [occ8, occ16] and plan.raced() == [occ8]
    assert plan.dropped == {DUPLICATE: 1}


def test_missing_and_failed_records_are_counted_per_rule(rms):
    probe, prob, res = rms
    r8 = next(r for r in res.records if r.hints["occupancy"] == 8)
    failed = dataclasses.replace(r8, hints={"occupancy": 16}, status="compile_error", error="error: boom\n")
    (plan,) = make_plans([prob], [r8, failed], "sm_90")
    assert [c.status for c in plan.candidates] == ["ok", "compile_error"] and plan.dropped == {"compile_error": 1}
    assert plan.candidates[1].reason == "error: boom"
    (plan,) = make_plans([prob], [r8], "sm_90", missing_status="not_in_bundle")
    assert plan.dropped == {"not_in_bundle": 1} and plan.candidates[1].reason == "no sm_90 record for it"



def test_a_compile_timeout_names_tune_s_own_remedy(rms):
    """Session 11's new user: a timeout in tune printed cuTile's message alone; the README had pointed to
    --timeout, which in tune is the GPU task's limit."""
    probe, prob, res = rms
    r8 = next(r for r in res.records if r.hints["occupancy"] == 8)
    slow = dataclasses.replace(r8, hints={"occupancy": 16}, status="timeout",
                               error="CompilerTimeoutError: `tileiras` compiler exceeded timeout 0.3s.")
    (plan,) = make_plans([prob], [r8, slow], "sm_90")
    remedy = ("(tune: raise the limit with --compile-timeout S or Probe(timeout_s=S); a stored timeout is reused: add "
              "--no-store, or re-audit into the same store with `tileprobe audit PROBE --arch ARCH --timeout S "
              "--retry-failed`)")
    assert plan.candidates[1].reason == "CompilerTimeoutError: `tileiras` compiler exceeded timeout 0.3s. " + remedy
    two = dataclasses.replace(slow, error="CompilerTimeoutError: exceeded timeout 0.3s.\nUsing a smaller tile …")
    (plan,) = make_plans([prob], [r8, two], "sm_90")
    assert plan.candidates[1].reason.splitlines() == ["CompilerTimeoutError: exceeded timeout 0.3s. " + remedy,
                                                      "Using a smaller tile …"]
    crlf = dataclasses.replace(slow, error="CompilerTimeoutError: exceeded.\r\nUsing …")     # the remedy before \r
    (plan,) = make_plans([prob], [r8, crlf], "sm_90")
    assert plan.candidates[1].reason == "CompilerTimeoutError: exceeded. " + remedy + "\nUsing …"
    empty = dataclasses.replace(slow, error="")
    (plan,) = make_plans([prob], [r8, empty], "sm_90")
    assert plan.candidates[1].reason == remedy
    landing = Landing(pending_plans([prob]), "sm_90")
    landing.land(slow)
    assert landing.plans[0].candidates[1].reason == failed_reason(slow) and "--compile-timeout" in failed_reason(slow)


class _FakeProbe:
    """Just what launch_key reads: a source, a grid and args (with a runtime scalar and an array per case)."""
    source, label = "/x/p.py", "p"

    @staticmethod
    def grid(case, hints, num_sms):
        return (num_sms,)

    @staticmethod
    def launch_args(case, arrays=None, *, arch=None, hints=None, num_sms=None):   # Probe.launch_args's keywords
        from tileprobe.probe.define import SpecArrays
        a = SpecArrays()
        return (a.randn((case["ROWS"], 64), "float16"), a.empty((case["ROWS"], 64), "float16"), case["SCALE"],
                case["TILE"])


def _candidate(case):
    sig = [{"kind": "array"}, {"kind": "array"}, {"kind": "scalar", "dtype": "float32"},
           {"kind": "constant", "value": case["TILE"]}]
    rec = VariantRecord(kernel="p", probe="/x/p.py", case=case, hints={}, arch="sm_90", tileiras="t", status="ok",
                        threads=128, registers=32, driver_shared_bytes=0, stack_bytes=0, code_sha256="c" * 64,
                        cubin_sha256="d" * 64, signature=sig)
    prob = dataclasses.make_dataclass("P", [("probe", object), ("values", dict)])(_FakeProbe, {})
    cfg = dataclasses.make_dataclass("C", [("tunables", tuple), ("hints", tuple)],
                                     namespace={"case": lambda self, v: dict(self.tunables), "label": "x",
                                                "hints_dict": property(lambda self: {})})(tuple(case.items()), ())
    return Candidate(prob, cfg, rec)


def test_launch_key_covers_runtime_arguments_not_constants():
    base = launch_key(_candidate({"ROWS": 256, "SCALE": 1.0, "TILE": 64}), 132, None)[0]
    # a different compile-time constant with the same machine code: the same launch
    assert launch_key(_candidate({"ROWS": 256, "SCALE": 1.0, "TILE": 128}), 132, None)[0] == base
    assert launch_key(_candidate({"ROWS": 512, "SCALE": 1.0, "TILE": 64}), 132, None)[0] != base   # shapes
    assert launch_key(_candidate({"ROWS": 256, "SCALE": 2.0, "TILE": 64}), 132, None)[0] != base   # a scalar
    assert launch_key(_candidate({"ROWS": 256, "SCALE": 1.0, "TILE": 64}), 114, None)[0] != base   # the grid
