#!/usr/bin/env bash
# Issue 21 on the H200, one device-tool call (<= 10 min): TileGym's own autotune vs a tileprobe table.
# Carry: .gpu/tc/toolchain.tar.xz (tileiras 13.4.92 + ptxas + libnvvm) and .gpu/whl/*.whl (cuda-tile 1.7.0,
# tilegym 1.5.1, pyelftools, platformdirs); the host has torch, triton, rich, nvidia-ml-py.
#   bash benchmarks/gpu_issue21.sh            # results in $OUT/issue21.tgz (summary.txt, results.json, step logs)
# Steps and what they answer: benchmarks/issue21_bench.py (a)-(e).
cd "$(dirname "$0")/.." || exit 1
bash benchmarks/gpu_call.sh issue21 570 \
  'python3 benchmarks/issue21_bench.py --out "$R" --ops "${ISSUE21_OPS:-bmm,fmha,matmul,softmax,group_gemm}"' \
  'cat "$R/summary.txt"'
