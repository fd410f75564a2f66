#!/usr/bin/env bash
# Issue 15 item 7 on the one-GPU H200 (after `. benchmarks/gpu_setup.sh`): the multi-GPU path with two workers
# sharing the one GPU. Runs one bundle with --gpus 0 and with --gpus 0,0 and compares them
# (benchmarks/gpu_runs_compare.py): same status per variant, every timing of the second run flagged shared_gpu and
# unranked (no best-hint line), wall times. Under 2 minutes for rms_norm_large (10 variants). Bundle made where
# tileiras is (or here, when it is on PATH):
#     tileprobe audit examples/rms_norm_large.py --arch sm_90 --bundle B --no-store --format none
#   bash benchmarks/gpu_issue15_shared.sh OUT_DIR [BUNDLE]
set -uo pipefail
out=${1:?OUT_DIR}; bundle=${2:-$out/bundle}; probe=${PROBE:-examples/rms_norm_large.py}
mkdir -p "$out"
if [ ! -f "$bundle/audit.json" ]; then
  timeout 300 python3 -m tileprobe audit "$probe" --arch sm_90 --bundle "$bundle" --no-store --format none 2>&1 | tail -3
fi
for gpus in 0 0,0; do
  t0=$(date +%s.%N)
  timeout 300 python3 -m tileprobe run "$probe" --bundle "$bundle" --gpus "$gpus" --format none \
    --json "$out/run_${gpus/,/_}.json" 2> "$out/run_${gpus/,/_}.stderr"
  rc=$?
  echo "--gpus $gpus: exit $rc, wall $(python3 -c "import time; print(round(time.time() - $t0, 1))") s (process, worker start-up included)"
  tail -2 "$out/run_${gpus/,/_}.stderr"
done
python3 benchmarks/gpu_runs_compare.py "$out/run_0.json" "$out/run_0_0.json" --expect shared --out "$out/compare.md"
echo "compare exit $?"
