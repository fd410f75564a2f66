#!/usr/bin/env bash
# Issue 13 item 4 on the GPU host (after `. benchmarks/gpu_setup.sh`): four timers on the same cubins
# (benchmarks/bench_timing.py, docs/TIMING.md). Compiles the bundle here when tileiras is on PATH, else give the
# bundle made on the CPU machine as $2:
#     tileprobe audit benchmarks/probes/timing_set.py --arch sm_90 --bundle B --no-store --format none
#   bash benchmarks/gpu_issue13_timing.sh OUT_DIR [BUNDLE]
set -uo pipefail
out=${1:?OUT_DIR}; bundle=${2:-$out/timing_bundle}
mkdir -p "$out"
if [ ! -f "$bundle/audit.json" ]; then
  timeout 300 python3 -m tileprobe audit benchmarks/probes/timing_set.py --arch sm_90 --bundle "$bundle" \
    --no-store --format none 2>&1 | tail -3
fi
du -sh "$bundle"
timeout 355 python3 benchmarks/bench_timing.py --bundle "$bundle" --out "$out" 2>&1 | tee "$out/bench_timing.stdout"
echo "bench_timing exit ${PIPESTATUS[0]}"
