#!/usr/bin/env bash
# Issue 16 on a 2-GPU host (nvidia-h200-x2, after `. benchmarks/gpu_setup.sh`): one sweep of at least 3 minutes on
# one GPU, then on both, in one session. Records wall times (worker start-up apart: environment.gpus[].worker_start_s),
# statuses, which GPU ran each variant, the clocks, and prints the speed-up (benchmarks/gpu_runs_compare.py). Bundle
# made on the CPU machine, e.g.
#     tileprobe audit examples/rms_norm_large.py examples/w4a16_gemm_sm90.py --arch sm_90 --bundle B --no-store \
#       --format none                                   (22 variants)
#   bash benchmarks/gpu_issue16_two_gpus.sh OUT_DIR BUNDLE [PROBE…]   (REPS=… sets the length; default 2000)
# The one-GPU sweep must take >= 180 s (issue 16): the script says so when it did not; raise REPS then.
set -uo pipefail
out=${1:?OUT_DIR}; bundle=${2:?BUNDLE}; shift 2
probes=("$@"); [ ${#probes[@]} -gt 0 ] || probes=(examples/rms_norm_large.py examples/w4a16_gemm_sm90.py)
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpus.csv"
for gpus in 0 0,1; do
  t0=$(date +%s.%N)
  timeout 580 python3 -m tileprobe run "${probes[@]}" --bundle "$bundle" --gpus "$gpus" --reps "${REPS:-2000}" \
    --format none --json "$out/run_${gpus/,/_}.json" 2> "$out/run_${gpus/,/_}.stderr"
  rc=$?
  echo "--gpus $gpus: exit $rc, process wall $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"
  tail -2 "$out/run_${gpus/,/_}.stderr"
done
python3 - "$out/run_0.json" <<'PY'
import json, sys
wall = (json.load(open(sys.argv[1])).get("environment", {}).get("run") or {}).get("sweep_wall_s") or 0
print(f"one-GPU sweep: {wall:.0f} s" + ("" if wall >= 180 else " -- UNDER 180 s: run again with a larger REPS"))
PY
python3 benchmarks/gpu_runs_compare.py "$out/run_0.json" "$out/run_0_1.json" --expect distinct --out "$out/compare.md"
echo "compare exit $? (speed-up above: aim >= 1.8x)"
