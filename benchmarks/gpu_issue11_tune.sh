#!/usr/bin/env bash
# Issue 11 on the GPU host (after `. benchmarks/gpu_setup.sh`, tileiras on PATH): cuda.tile.tune vs tileprobe tune,
# both cold, and do_bench over every configuration.
#   bash benchmarks/gpu_issue11_tune.sh OUT_DIR KERNELS   (KERNELS: rms, matmul or rms,matmul)
set -uo pipefail
out=${1:?OUT_DIR}; kernels=${2:-rms}
mkdir -p "$out"
python3 benchmarks/bench_tune.py --out "$out" --kernels "$kernels" 2>&1 | tee -a "$out/bench_tune.stdout"
echo "bench_tune exit ${PIPESTATUS[0]}"
