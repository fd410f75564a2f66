#!/usr/bin/env bash
# One device-tool call on the GPU host: set up (benchmarks/gpu_setup.sh), run the named steps in order, each with
# the time left, and always pack what they wrote into $OUT/NAME.tgz (the device tool returns at most 8 files).
#   bash benchmarks/gpu_call.sh NAME BUDGET_S 'STEP COMMAND' ['STEP COMMAND' …]
# Each STEP COMMAND is run with bash -c from the repository root, with $R set to the results folder.
name=${1:?NAME}; budget=${2:?BUDGET_S}; shift 2
start=$(date +%s)
. benchmarks/gpu_setup.sh > /tmp/gpu_setup.log 2>&1; cat /tmp/gpu_setup.log
export R=/tmp/results/$name; mkdir -p "$R"; cp /tmp/gpu_setup.log "$R/"
nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv > "$R/gpu.csv" 2>&1
for step in "$@"; do
  left=$(( budget - ($(date +%s) - start) - 15 ))
  if [ "$left" -le 20 ]; then echo "SKIPPED (no time left): $step" | tee -a "$R/steps.txt"; continue; fi
  t0=$(date +%s)
  timeout --kill-after=5 "$left" bash -c "$step"; rc=$?
  echo "rc=$rc $(( $(date +%s) - t0 ))s: $step" | tee -a "$R/steps.txt"
done
tar czf "$OUT/$name.tgz" -C /tmp/results --exclude='*.sqlite*' --exclude='cutile-cache*' --exclude='*.cubin' "$name"
ls -la "$OUT"
