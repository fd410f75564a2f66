#!/usr/bin/env bash
# Issue 12 on the GPU host (after `. benchmarks/gpu_setup.sh`, tileiras on PATH): record a TileGym workload,
# audit the recorded probes, compare machine code with the JIT cubins.
#   bash benchmarks/gpu_issue12_record.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
timeout 420 python3 benchmarks/gpu_record_tilegym.py all --out "$out/rec-tilegym" --jobs 16 2>&1 | tee "$out/record.txt"
echo "record exit ${PIPESTATUS[0]}"
