"""``tune`` calls a probe's ``args`` and ``grid`` as ``run`` does (arch, hints and the SM count), caches the
arguments by everything they depend on, and the store key holds what a compile depends on (the kernel's file and
the launch signature), not the whole probe file: editing a probe without changing a compiled variant compiles
nothing again.

Real compiles (a small persistent kernel, sm_90, 4 variants); the GPU-side argument cache runs on CPU tensors.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import tileprobe.audit.pipeline as audit_mod
from tileprobe.store import Store

KERNEL = """
import cuda.tile as ct


@ct.kernel
def persistent_scale(X, Y, TILE: ct.Constant[int], PROGRAMS: ct.Constant[int]):
    for t in range(ct.bid(0), ct.num_tiles(X, axis=0, shape=(TILE,)), PROGRAMS):
        ct.store(Y, index=(t,), tile=ct.load(X, index=(t,), shape=(TILE,)) * 2)
"""

PROBE = """
from tileprobe import Probe
N = 1 << 16


def programs(hints, num_sms):
    # TileGym's persistent grid: SMs // num_ctas * occupancy, also a compile-time constant of the kernel
    return num_sms // hints["num_ctas"] * hints["occupancy"]


def args(case, arrays, *, arch, hints, num_sms):
    assert arch == "sm_90", arch
    return (arrays.randn((N,), "float32"), arrays.empty((N,), "float32"), case["TILE"], programs(hints, num_sms))


probe = Probe(kernel="persistent_kernel.py:persistent_scale", args=args, cases={"TILE": [1024]},
              hints={"occupancy": [1, 2], "num_ctas": [1, 2]},
              grid=lambda case, hints, num_sms, *, arch: (programs(hints, num_sms),), name="persistent_scale"%s)
"""


def _write(folder: Path, extra: str = "", comment: str = "") -> str:
    (folder / "persistent_kernel.py").write_text(KERNEL)
    path = folder / "persistent_probe.py"
    path.write_text(comment + textwrap.dedent(PROBE % extra))
    return str(path)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """The probe audited once for sm_90 into a store (4 variants; the tests below reuse the compiles)."""
    d = tmp_path_factory.mktemp("persistent")
    probe = _write(d)
    store = str(d / "results.sqlite")
    with Store.open(store) as s:
        result = audit_mod.audit([probe], ["sm_90"], jobs=2, store=s)
    return {"dir": d, "probe": probe, "store": store, "result": result}


def _programs(rec) -> int:
    return rec.signature[3]["value"]


def test_audit_gives_args_the_reference_sm_count(compiled):
    recs = {(r.hints["occupancy"], r.hints["num_ctas"]): r for r in compiled["result"].records}
    assert all(r.ok for r in recs.values()), [r.error for r in recs.values()]
    # the H200's 132 SMs (REFERENCE_GPUS["sm_90"]), divided by num_ctas, times occupancy
    assert {k: _programs(r) for k, r in recs.items()} == {(1, 1): 132, (1, 2): 66, (2, 1): 264, (2, 2): 132}


def test_tune_dry_run_builds_each_candidates_arguments_from_its_hints(compiled, capsys):
    from tileprobe.cli import main
    code = main(["tune", compiled["probe"], "--dry-run", "--arch", "sm_90", "--num-sms", "132", "--store",
                 compiled["store"], "--json", str(compiled["dir"] / "tune.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    import json
    (problem,) = json.loads((compiled["dir"] / "tune.json").read_text())["problems"]
    rows = {r["label"]: r for r in problem["candidates"] if r.get("config")}
    assert {k: (r["status"], r["grid"]) for k, r in rows.items()} == {
        "occupancy=1 num_ctas=1": ("ok", [132, 1, 1]), "occupancy=1 num_ctas=2": ("ok", [66, 1, 1]),
        "occupancy=2 num_ctas=1": ("ok", [264, 1, 1]), "occupancy=2 num_ctas=2": ("ok", [132, 1, 1])}
    assert "probe_error" not in out and "0 failed" in out


def test_tune_with_another_sm_count_compiles_for_it(compiled):
    from tileprobe.tune import tune
    with Store.open(compiled["store"]) as s:
        res = tune([compiled["probe"]], arch="sm_90", num_sms=114, dry_run=True, store=s, jobs=2)
        recs = s.records(kernel="persistent_scale", arch="sm_90")
    (p,) = res.problems
    grids = {r.label: r.grid for r in p.candidates if r.config}
    assert grids == {"occupancy=1 num_ctas=1": [114, 1, 1], "occupancy=1 num_ctas=2": [57, 1, 1],
                     "occupancy=2 num_ctas=1": [228, 1, 1], "occupancy=2 num_ctas=2": [114, 1, 1]}
    assert sorted({_programs(r) for r in recs}) == [57, 114, 228]   # the newest record of each variant: for 114


def test_argument_cache_is_keyed_by_hints_and_sm_count(compiled, monkeypatch):
    from tileprobe.probe.define import load_probes
    from tileprobe.run import batch, worker
    probe = load_probes(compiled["probe"])[0]
    monkeypatch.setattr(worker._STATE, "device", "cpu")
    monkeypatch.setattr(worker._STATE, "memory_bytes", 1 << 30)
    monkeypatch.setattr(worker._STATE, "num_sms", 132)
    batch._ARGS.clear()
    rec = {"case": {"TILE": 1024}, "hints": {"occupancy": 2, "num_ctas": 1}, "effective_hints": {}, "arch": "sm_90"}
    a = batch._cached_args(probe, compiled["probe"], rec, seed=0)
    b = batch._cached_args(probe, compiled["probe"], dict(rec, hints={"occupancy": 1, "num_ctas": 2}), seed=0)
    again = batch._cached_args(probe, compiled["probe"], rec, seed=0)
    assert (a[3], b[3]) == (264, 66) and again is a and len(batch._ARGS) == 2
    monkeypatch.setattr(worker._STATE, "num_sms", 114)
    assert batch._cached_args(probe, compiled["probe"], rec, seed=0)[3] == 228 and len(batch._ARGS) == 3


def _count_compiles(monkeypatch) -> list:
    """The variants handed to the compiler from now on (``audit.compile_variants`` wrapped)."""
    compiles, real = [], audit_mod.compile_variants

    def counting(variants, **kw):
        variants = list(variants)
        compiles.extend(variants)
        return real(variants, **kw)
    monkeypatch.setattr(audit_mod, "compile_variants", counting)
    return compiles


@pytest.mark.parametrize("edit", ["tunable", "comment"])
def test_editing_the_probe_without_changing_a_variant_compiles_nothing(compiled, tmp_path, monkeypatch, edit):
    import shutil
    store = str(tmp_path / "results.sqlite")
    shutil.copy(compiled["store"], store)
    probe = (_write(compiled["dir"], extra=', tunable=("TILE",)') if edit == "tunable" else
             _write(compiled["dir"], comment="# a comment that moves every line of the probe down\n\n"))
    compiles = _count_compiles(monkeypatch)
    try:
        with Store.open(store) as s:
            again = audit_mod.audit([probe], ["sm_90"], jobs=2, store=s)
    finally:
        _write(compiled["dir"])
    assert compiles == [] and len(again.records) == 4 and all(r.ok for r in again.records)
    assert sorted(_programs(r) for r in again.records) == [66, 132, 132, 264]


def test_changing_what_args_gives_compiles_again(compiled, tmp_path, monkeypatch):
    import shutil
    store = str(tmp_path / "results.sqlite")
    shutil.copy(compiled["store"], store)
    d = tmp_path / "p"
    d.mkdir()
    probe = _write(d)
    Path(probe).write_text(Path(probe).read_text().replace('case["TILE"], programs', 'case["TILE"], 1 + 0 * programs'))
    compiles = _count_compiles(monkeypatch)
    with Store.open(store) as s:
        again = audit_mod.audit([probe], ["sm_90"], jobs=2, store=s)
    # same kernel file, case and hints; PROGRAMS is now 1 for every variant: a new signature, so compiled again
    assert len(compiles) == 4 and {_programs(r) for r in again.records} == {1}
