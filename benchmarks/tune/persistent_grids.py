"""Checks a ``tileprobe tune --json`` result of ``benchmarks/probes/persistent_scale.py``: every candidate's grid is
``SMs // num_ctas × occupancy`` of its own hints and it passed the reference check (a launch constant built from
other hints leaves tiles unwritten: "wrong"). Prints one line per candidate; exit 1 when any is not.

    python benchmarks/tune/persistent_grids.py OUT/tune.json        (benchmarks/tune/run.sh OUT persistent)
"""
from __future__ import annotations

import json
import sys

BAD = ("probe_error", "wrong", "error", "crash")


def check(doc: dict) -> int:
    """Prints each candidate's status, grid and the grid its own hints give; returns how many are off."""
    sms = doc["environment"]["num_sms"]
    bad = 0
    for p in doc["problems"]:
        for c in p["candidates"]:
            h = c.get("config", {}).get("hints") or {}
            want = sms // (h.get("num_ctas") or 1) * (h.get("occupancy") or 1)
            ok = c.get("grid", [None])[0] == want and c.get("status") not in BAD
            bad += not ok
            check_ = c.get("check")
            check_ = check_.get("status") if isinstance(check_, dict) else check_
            print(f"{c['label']:32} status {c.get('status')!s:16} grid {c.get('grid')} want {want} "
                  f"check {check_}{'' if ok else '  <-- WRONG'}")
        pick = p.get("pick")
        print("pick:", pick.get("label") if isinstance(pick, dict) else pick)
    print(f"SMs {sms}; {bad} candidate(s) with a grid or args not from their own hints")
    return bad


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.exit(1 if check(json.load(f)) else 0)
