#!/usr/bin/env bash
# Issue 22's budget line on the GPU host (H200), in one device call: benchmarks/bench_budget.py on the 486-configuration
# TileGym matmul space (benchmarks/probes/tilegym_matmul_486.py): the full compile-and-race tune, the tune with
# --budget 30, both picks by do_bench; then, if time is left, the budgeted tune again with another seed.
#     bash benchmarks/gpu_call.sh budget 590 'bash benchmarks/gpu_issue22_budget.sh $R'
set -uo pipefail
out=${1:?OUT_DIR}
start=$(date +%s)
python3 benchmarks/bench_budget.py --out "$out/bb" --budget "${BUDGET_S:-30}" 2>&1 | tee "$out/bench_budget.stdout"
left=$(( ${ISSUE22_BUDGET_S:-560} - ($(date +%s) - start) ))
if [ "$left" -gt 150 ]; then
  mkdir -p "$out/bb2" && cp "$out/bb/full.json" "$out/bb/full.meta.json" "$out/bb2/"
  python3 benchmarks/bench_budget.py --out "$out/bb2" --budget "${BUDGET_S:-30}" --seed 1 --steps budget,dobench \
    2>&1 | tee "$out/bench_budget2.stdout"
else
  echo "second seed skipped: ${left} s left"
fi
