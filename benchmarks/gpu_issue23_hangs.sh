#!/usr/bin/env bash
# Issue 23 on the GPU host (after `. benchmarks/gpu_setup.sh`): does the register-pool check predict the hangs?
# Bundles are made where tileiras is (13.3.36 and 13.4.92 managed toolchains), into an ignored folder the lead carries:
#     python benchmarks/issue23_bundles.py .gpu/issue23      # prints each variant's prediction and the total size
#   bash benchmarks/gpu_issue23_hangs.sh OUT_DIR [BUNDLES_DIR or .tar.xz]   (default .gpu/issue23; one call, ~9 min)
# Runs every bundle with --run-hang-risk (predicted hangs ARE launched) under the watchdog with a short per-variant
# limit (HANG_S, default 15 s: a healthy variant here takes 1-3 s), seed kernels first, then prints prediction vs
# outcome (benchmarks/issue23_table.py): hang / ok / crash / wrong / error per variant, and the two Done-when counts
# (every hang_risk hung? any pool_ok hung?). Writes OUT_DIR/<bundle>.json, <bundle>.log and table.txt.
set -uo pipefail
out=${1:?OUT_DIR}; bundles=${2:-.gpu/issue23}
hang_s=${HANG_S:-15}; budget=${BUDGET_S:-530}
mkdir -p "$out"; start=$(date +%s)
if [ -f "$bundles" ]; then   # the builder's OUT_DIR.tar.xz (cubins compress ~5x): unpack it first
  mkdir -p /tmp/issue23_bundles && tar -C /tmp/issue23_bundles -xJf "$bundles" || exit 2
  bundles=$(ls -d /tmp/issue23_bundles/*/ | head -1); bundles=${bundles%/}
fi
probe_of() {   # bundle folder name (rms_norm_large-13.3.36) -> its probe file
  local name=${1%-*}
  for d in examples benchmarks/probes; do [ -f "$d/$name.py" ] && { echo "$d/$name.py"; return; }; done
  return 1
}
order=""   # the seed kernels first (13.3.36, then 13.4.92), then every other bundle
for s in rms_norm_large-13.3.36 rms_norm-13.3.36 rms_norm_large-13.4.92 rms_norm-13.4.92; do
  [ -d "$bundles/$s" ] && order="$order $bundles/$s"
done
order="$order $(ls -d "$bundles"/*/ | sed 's:/$::' | grep -v '/rms_norm\(_large\)\?-' | tr '\n' ' ')"
for b in $order; do
  name=$(basename "$b"); probe=$(probe_of "$name") || { echo "$name: no probe file found"; continue; }
  left=$(( budget - ($(date +%s) - start) ))
  if [ "$left" -lt 45 ]; then echo "SKIPPED (no time left): $name" | tee -a "$out/steps.txt"; continue; fi
  t0=$(date +%s)
  timeout --kill-after=5 "$left" python3 -m tileprobe run --bundle "$b" "$probe" --run-hang-risk --timeout "$hang_s" \
    --reps 5 --no-store --json "$out/$name.json" --format none > "$out/$name.log" 2>&1
  echo "rc=$? $(( $(date +%s) - t0 ))s: $name ($probe)" | tee -a "$out/steps.txt"
  tail -2 "$out/$name.log"
done
python3 benchmarks/issue23_table.py "$out"/*.json | tee "$out/table.txt"
