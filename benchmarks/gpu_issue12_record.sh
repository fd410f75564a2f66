#!/usr/bin/env bash
# Issue 12 on the GPU host (after `. benchmarks/gpu_setup.sh`, tileiras on PATH, CUDA_HOME unset):
#   1. record a TileGym workload, audit the recorded probes, compare machine code with the JIT cubins (~1 min);
#   2. tune the recorded softmax probe, export, read the export back from host code without tileprobe (≤ 3 min);
#   3. the recorder's cost per launch on this host (~1 min; no tileiras needed, the real-launch case uses it).
#   bash benchmarks/gpu_issue12_record.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
timeout 420 python3 benchmarks/gpu_record_tilegym.py all --out "$out/rec-tilegym" --jobs 16 2>&1 | tee "$out/record.txt"
echo "record exit ${PIPESTATUS[0]}"
timeout 240 python3 benchmarks/gpu_record_tilegym.py tune --out "$out/rec-tilegym" --jobs 16 2>&1 | tee "$out/tune.txt"
echo "tune exit ${PIPESTATUS[0]}"
timeout 300 python3 benchmarks/bench_record.py 2>&1 | tee "$out/bench_record.txt"
echo "bench_record exit ${PIPESTATUS[0]}"
