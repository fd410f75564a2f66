"""The hint-less reference on real cubins (tileiras 13.4.92, compiled here: ``tests/data/probe_hintless.py``,
10 variants):

- a TornadoVM-like probe on sm_89 with ``occupancy=[None, 2, 4, 8]``: the hint-less build is the reference, and the
  reason for occupancy 2 names it and what differs (it said "the lowest occupancy value audited: nothing shows the
  hint changed the code" while the hint-less build had twice the shared memory and half the CTAs/SM);
- no static advice names a pick that only a measurement could justify;
- the FlashInfer-like num_ctas=2 + occupancy=2 variant on sm_100 is ``unverified``, not ``honoured``;
- two probes of one name with disjoint archs (in that one file, and in two files) audit together; a clash on a
  shared arch is an error naming both files and lines.
"""
from __future__ import annotations

import os
import textwrap

import pytest

from tileprobe.audit import audit
from tileprobe.judge.advice import advice
from tileprobe.schema import Verdict

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
PROBE = os.path.join(DATA, "probe_hintless.py")


@pytest.fixture(scope="module")
def records():
    result = audit([PROBE], ["sm_89", "sm_100"], jobs=2, with_sass=True)
    assert not result.probe_errors and all(r.ok for r in result.records), result.probe_errors
    return result.records


def _one(records, arch, tile, **hints):
    return next(r for r in records if r.arch == arch and tuple(r.case["TILE"]) == tile
                and all(r.hints.get(k) == v for k, v in hints.items()))


def test_the_hint_less_build_is_the_reference_of_occupancy(records):
    free = _one(records, "sm_89", (128, 128, 64), occupancy=None)
    two = _one(records, "sm_89", (128, 128, 64), occupancy=2)
    # the facts the verdict rests on, as the cubins have them
    assert (free.registers, free.shared_bytes, free.ctas_per_sm) == (255, 98_304, 1)
    assert (two.registers, two.shared_bytes, two.ctas_per_sm) == (255, 49_152, 2)
    assert "occupancy" not in free.verdicts                       # the kernel declares no occupancy
    v = two.verdicts["occupancy"]
    assert v.status == "honoured"
    assert v.reason == ("2 CTAs/SM ≥ 2 (128 threads × 255 registers, 49,152 B shared; limiter: registers); "
                           "vs the hint-less build: shared B 98,304→49,152, CTAs/SM 1→2")
    for occ in (4, 8):                                            # the hint-less machine code again
        other = _one(records, "sm_89", (128, 128, 64), occupancy=occ)
        assert other.verdicts["occupancy"].status == "ignored"
        assert other.verdicts["occupancy"].reason.startswith("same machine code and resources as the hint-less "
                                                                "build: 1 CTA/SM < ")
    for r in records:
        assert "nothing shows the hint changed the code" not in (r.verdicts.get("occupancy") or Verdict(None)).reason


def test_new_spills_against_the_hint_less_build_are_named(records):
    four = _one(records, "sm_89", (128, 128, 32), occupancy=4)
    assert four.sass.spill_loads > 0 and four.stack_bytes > 0
    assert four.verdicts["occupancy"].reason.endswith(
        f"vs the hint-less build: registers 239→128, shared B 81,920→16,400, stack B 0→{four.stack_bytes}, "
        "CTAs/SM 1→4, new spills")


def test_static_advice_names_no_pick_only_a_measurement_could_justify(records):
    paste = [line for line in advice(records) if "(paste into a configuration list)" in line]
    lines = [line for line in advice(records) if line not in paste]
    assert len(lines) == 3 and not any("pick" in line for line in lines)
    sm89_paste = next(line for line in paste if "sm_89" in line)       # the hint-less build stands for 4 and 8
    assert "{'TILE': (128, 128, 64)}, {'TILE': (128, 128, 64), 'occupancy': 2}" in sm89_paste
    sm89 = next(line for line in lines if "sm_89" in line and "TILE=128×128×64" in line)
    assert sm89 == ("matmul_hintless sm_89 tileiras 13.4.92 TILE=128×128×64: hint-less = occupancy 4 = 8 (identical "
                    "machine code): 1 CTA/SM, 255 registers, 98,304 B shared, no spills; occupancy 2: 2 CTAs/SM, 255 "
                    "registers, 49,152 B shared, no spills — 2 different builds: which is fastest must be measured, "
                    f"static facts do not rank them: `tileprobe run {PROBE} --arch sm_89 --where 'TILE=128×128×64'`")
    for line in lines:
        assert "which is fastest must be measured" in line and "`tileprobe run " in line


def test_the_flashinfer_like_cluster_variant_on_sm_100_counts_clusters_on_real_gpc_sizes(records):
    """Clusters of 2 fill every GPC a real B200 can have (8 or 10 GPCs, SMs in TPCs of 2): 148 resident at
    2 CTAs/SM on every layout, so the goal is decided (it was `unverified` on a 0–148 range)."""
    r = _one(records, "sm_100", (128, 128, 64), num_ctas=2, occupancy=2)
    assert r.cluster_dims == [2, 1, 1] and r.ctas_per_sm == 2
    v = r.verdicts["occupancy"]
    assert v.status in ("honoured", "met") and "per-CTA residency counted" not in v.reason
    assert "clusters of 2: 148 active on B200" in v.reason
    assert r.verdicts["num_ctas"].status == "met"              # the cluster shape itself is in the cubin
    line = next(line for line in advice(records) if "sm_100" in line)
    assert "148 clusters of 2 resident on B200 (occupancy 2 needs 148)" in line


def test_one_name_with_disjoint_archs_in_one_file(records):
    """probe_hintless.py defines matmul_hintless twice, for sm_89 and for sm_100: both audited, each on its arch."""
    assert {(r.kernel, r.arch) for r in records} == {("matmul_hintless", "sm_89"), ("matmul_hintless", "sm_100")}
    assert sum(r.arch == "sm_89" for r in records) == 8 and sum(r.arch == "sm_100" for r in records) == 2


def _vadd_file(path, archs):
    path.write_text(textwrap.dedent(f"""
        import os
        from tileprobe import Probe
        N = 1 << 16
        probe = Probe(
            kernel={os.path.join(DATA, "kernels.py") + ":vec_add"!r},
            args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                                       arrays.empty((N,), "float32"), case["TILE"]),
            cases={{"TILE": [1024]}}, hints={{"occupancy": [1, 2]}}, name="vadd", archs={archs!r})
        """))
    return str(path)


def test_two_files_of_one_kernel_with_disjoint_archs_audit_together_and_a_shared_arch_is_an_error(tmp_path):
    a = _vadd_file(tmp_path / "vadd_sm90.py", ["sm_90"])
    b = _vadd_file(tmp_path / "vadd_sm120.py", ["sm_120"])
    c = _vadd_file(tmp_path / "vadd_again.py", ["sm_90", "sm_89"])
    result = audit([a, b, c], ["sm_90", "sm_120"], jobs=2)
    assert sorted((r.probe, r.arch) for r in result.records) == sorted(
        [(b, "sm_120")] * 2 + [(a, "sm_90")] * 2)
    assert all(r.ok and r.kernel == "vadd" for r in result.records)
    assert result.probe_errors == [f"{c}:5: probe 'vadd' is also defined at {a}:5, both for sm_90: give one a "
                                   "distinct name= or make their archs= disjoint (this one is not audited)"]
    # asked only for sm_120, the third file shares no arch with the others' and nothing clashes
    result = audit([a, b, c], ["sm_120"], jobs=2)
    assert not result.probe_errors and {r.probe for r in result.records} == {b}
