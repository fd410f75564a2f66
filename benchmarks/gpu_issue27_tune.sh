#!/usr/bin/env bash
# Issue 27 on the GPU host (after `. benchmarks/gpu_setup.sh`, tileiras on PATH): `tileprobe tune` of a persistent
# kernel whose args(case, arrays, *, arch, hints, num_sms) build its launch constant from each candidate's own hints
# and the GPU's SM count; then a check that every candidate's grid is SMs // num_ctas × occupancy and was checked
# against the reference (a constant built from other hints leaves tiles unwritten: "wrong").
#   bash benchmarks/gpu_issue27_tune.sh OUT_DIR      (ISSUE27_BUNDLE=DIR: from `tileprobe audit … --bundle DIR`, no tileiras)
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
export XDG_CACHE_HOME=$out/xdg TILEPROBE_STORE=$out/results.sqlite
python3 -m tileprobe tune benchmarks/probes/persistent_scale.py --arch sm_90 --budget 90 --jobs 8 ${ISSUE27_BUNDLE:+--bundle "$ISSUE27_BUNDLE"} \
  --json "$out/tune.json" 2>&1 | tee "$out/tune.stdout"
echo "tune exit ${PIPESTATUS[0]}"
python3 - "$out/tune.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
sms = doc["environment"]["num_sms"]
bad = 0
for p in doc["problems"]:
    for c in p["candidates"]:
        h = c.get("config", {}).get("hints") or {}
        want = sms // (h.get("num_ctas") or 1) * (h.get("occupancy") or 1)
        ok = c.get("grid", [None])[0] == want and c.get("status") not in ("probe_error", "wrong", "error", "crash")
        bad += not ok
        print(f"{c['label']:32} status {c.get('status')!s:16} grid {c.get('grid')} want {want} "
              f"check {c.get('check', {}).get('status') if isinstance(c.get('check'), dict) else c.get('check')}"
              f"{'' if ok else '  <-- WRONG'}")
    print("pick:", p.get("pick", {}).get("label") if isinstance(p.get("pick"), dict) else p.get("pick"))
print(f"SMs {sms}; {bad} candidate(s) with a grid or args not from their own hints")
sys.exit(1 if bad else 0)
PY
echo "check exit $?"
