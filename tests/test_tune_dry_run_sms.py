"""``tune --dry-run`` without a GPU and without ``--num-sms`` looks for duplicate launches at the arch's reference
GPU's SM count, as ``audit`` does, and says which count; before, it deduplicated nothing ("no SM count") and every
identical build was "to time".

Real compiles: the test vector add (tests/data/probe_vadd.py), two tiles × occupancy 1/2 on sm_90 (occupancy 2
builds the same machine code as 1 for this kernel)."""
from __future__ import annotations

import shutil
from pathlib import Path

from tileprobe.cli import main

DATA = Path(__file__).resolve().parent / "data"


def test_dry_run_dedupes_at_the_reference_sm_count_and_says_so(tmp_path, capsys):
    for name in ("probe_vadd.py", "simple_kernels.py"):
        shutil.copy(DATA / name, tmp_path / name)
    code = main(["tune", str(tmp_path / "probe_vadd.py"), "--dry-run", "--arch", "sm_90", "--store",
                 str(tmp_path / "store.sqlite"), "--jobs", "2", "--json", str(tmp_path / "t.json")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert ("duplicate launches looked for at 132 SMs, the sm_90 reference GPU's (H200); --num-sms N for another "
            "GPU") in out
    assert out.count("1 duplicate launches → 1 to time") == 2, out
    assert "no SM count" not in out
    import json
    env = json.loads((tmp_path / "t.json").read_text())["environment"]
    assert (env["num_sms"], env["num_sms_reference"]) == (132, "H200")
