"""The register-pool prediction against what the GPU did, from `tileprobe run --run-hang-risk --json` files.

    python benchmarks/audit/hang_table.py OUT/*.json

One row per run variant: probe, compiler, case and hints, registers × threads, prediction (the record's
``register_pool`` verdict), outcome (``run.status``: hang / ok / wrong / crash / error / skipped). Then the two
"Done when" counts: predicted ``hang_risk`` that hung, and predicted ``pool_ok`` that hung (should be 0).
"""
from __future__ import annotations

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def rows_of(paths):
    """(probe, compiler, variant, regs×threads, prediction, outcome) per run record of the files."""
    from tileprobe.schema import load
    out = []
    for path in paths:
        records, _ = load(path)
        for r in records:
            if not r.run:
                continue
            m = re.search(r"V(\d+\.\d+\.\d+)", r.tileiras or "")
            variant = " ".join(f"{k}={v}" for k, v in {**r.case, **r.hints}.items())
            out.append((r.kernel, m.group(1) if m else "?", variant, f"{r.registers}×{r.threads}",
                        r.pool_verdict or "-", r.run.status or "-"))
    return out


def main(paths) -> int:
    missing = [p for p in paths if not os.path.isfile(p)]
    for p in missing:
        print(f"{p}: no such run result (the run did not write it: see its .log)")
    rows = rows_of([p for p in paths if p not in missing])
    print(f"{'probe':<24} {'tileiras':<9} {'variant':<52} {'regs×thr':>9} {'prediction':<10} outcome")
    for row in rows:
        print(f"{row[0][:24]:<24} {row[1]:<9} {row[2][:52]:<52} {row[3]:>9} {row[4]:<10} {row[5]}")
    pairs: dict = {}
    for row in rows:
        pairs[(row[4], row[5])] = pairs.get((row[4], row[5]), 0) + 1
    print("prediction → outcome: " + ", ".join(f"{p} → {o}: {n}" for (p, o), n in sorted(pairs.items())))
    risk = [r for r in rows if r[4] == "hang_risk"]
    ok_hung = [r for r in rows if r[4] == "pool_ok" and r[5] == "hang"]
    other_hung = [r for r in rows if r[4] not in ("hang_risk", "pool_ok") and r[5] == "hang"]
    print(f"hang_risk variants that hung: {sum(1 for r in risk if r[5] == 'hang')} of {len(risk)}; "
          f"pool_ok variants that hung: {len(ok_hung)} of {sum(1 for r in rows if r[4] == 'pool_ok')}; "
          f"other predictions (unknown / none / -) that hung: {len(other_hung)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
