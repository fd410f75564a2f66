#!/usr/bin/env bash
# The scale suite: `tileprobe run --gpus` over the GPUs of one host (README.md here).
#   bash benchmarks/scale/run.sh OUT_DIR STEP [BUNDLE]   (from the repository root, after `. benchmarks/gpu_setup.sh`)
# BUNDLE: a bundle made where tileiras is (compiled here when tileiras is on PATH and BUNDLE is left out), e.g.
#     tileprobe audit examples/rms_norm_large.py examples/w4a16_gemm_sm90.py --arch sm_90 --bundle B --no-store --format none
# Steps:
#   shared     one GPU: --gpus 0 against --gpus 0,0 (two workers sharing it): same status per variant, every timing
#              of the second run flagged shared_gpu and unranked (PROBES=…; default examples/rms_norm_large.py)
#   two-gpus   a 2-GPU host (nvidia-h200-x2): one sweep of at least 3 minutes on GPU 0, then on 0,1; the speed-up
#              (aim ≥ 1.8×; REPS=… sets the length, default 2000)
# In one device-tool call: bash benchmarks/gpu_call.sh scale 590 'bash benchmarks/scale/run.sh $R two-gpus B'
set -uo pipefail
out=${1:?OUT_DIR}; step=${2:?STEP (shared or two-gpus)}; bundle=${3:-$out/bundle}
mkdir -p "$out"
case $step in
  shared) probes=(${PROBES:-examples/rms_norm_large.py}); gpus_list="0 0,0"; expect=shared ;;
  two-gpus) probes=(${PROBES:-examples/rms_norm_large.py examples/w4a16_gemm_sm90.py}); gpus_list="0 0,1"
    expect=distinct ;;
  *) echo "unknown step: $step (shared two-gpus)"; exit 2 ;;
esac
if [ ! -f "$bundle/audit.json" ]; then
  timeout 300 python3 -m tileprobe audit "${probes[@]}" --arch sm_90 --bundle "$bundle" --no-store --format none 2>&1 \
    | tail -3
fi
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpus.csv"
runs=()
for gpus in $gpus_list; do
  t0=$(date +%s.%N); json=$out/run_${gpus/,/_}.json; runs+=("$json")
  reps=(); [ "$step" = two-gpus ] && reps=(--reps "${REPS:-2000}")
  timeout 580 python3 -m tileprobe run "${probes[@]}" --bundle "$bundle" --gpus "$gpus" "${reps[@]}" --format none \
    --json "$json" 2> "${json%.json}.stderr"
  echo "--gpus $gpus: exit $?, process wall $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"
  tail -2 "${json%.json}.stderr"
done
if [ "$step" = two-gpus ]; then
  python3 -c "import json, sys; w = (json.load(open(sys.argv[1])).get('environment', {}).get('run') or {}).get('sweep_wall_s') or 0
print(f'one-GPU sweep: {w:.0f} s' + ('' if w >= 180 else ' -- UNDER 180 s: run again with a larger REPS'))" "${runs[0]}"
fi
python3 benchmarks/scale/gpu_runs_compare.py "${runs[0]}" "${runs[1]}" --expect $expect --out "$out/compare.md"
echo "compare exit $?"
