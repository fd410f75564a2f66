#!/usr/bin/env bash
# Issue 22 on the GPU host (H200), one device call, in order of importance, each step only when time is left:
#   1. bench_budget.py: the 486-configuration TileGym matmul, full compile-and-race vs --budget 30, picks by do_bench;
#      then the GPU tests of run and tune (the typed run records, the loader sessions);
#   2. bench_tune.py, tileprobe's steps only (tileprobe, retune) for rms16k, matmul and fmha, the cuda.tile.tune
#      and do_bench figures read from docs/gpu/2026-12-02c/morning (the 07:17-07:29 run on this machine kind);
#      cuda.tile.tune again for rms16k (13 s) so that its ratio is of one run;
#   3. trace_static.py of rms16k and the matmul (where the static stage's time goes on this host);
#   4. the budgeted tune again with seed 1.
#     bash benchmarks/gpu_call.sh final 590 'bash benchmarks/gpu_issue22_final.sh $R'
set -uo pipefail
out=${1:?OUT_DIR}
start=$(date +%s)
left() { echo $(( ${ISSUE22_BUDGET_S:-570} - ($(date +%s) - start) )); }
python3 benchmarks/bench_budget.py --out "$out/bb" --budget 30 > "$out/bench_budget.stdout" 2>&1
echo "bench_budget exit $? at $(( $(date +%s) - start )) s"; cat "$out/bb/bench_budget.txt"
if [ "$(left)" -gt 300 ]; then   # the typed run records and the loader sessions on a real GPU
  timeout 240 python3 -m pytest -q -p no:cacheprovider --timeout 200 tests/test_run_gpu.py tests/test_tune_gpu.py \
    > "$out/pytest-gpu.txt" 2>&1; echo "pytest-gpu exit $? at $(( $(date +%s) - start )) s"; tail -5 "$out/pytest-gpu.txt"
fi
mkdir -p "$out/bt" && cp docs/gpu/2026-12-02c/morning/* "$out/bt/"
if [ "$(left)" -gt 200 ]; then
  python3 benchmarks/bench_tune.py --out "$out/bt" --kernels rms16k --steps cutile,tileprobe,retune > "$out/bt.stdout" 2>&1
  python3 benchmarks/bench_tune.py --out "$out/bt" --kernels matmul,fmha --steps tileprobe,retune >> "$out/bt.stdout" 2>&1
  python3 benchmarks/bench_tune.py --out "$out/bt" --kernels rms16k,matmul,fmha --report > "$out/bt-report.txt" 2>&1
  echo "bench_tune done at $(( $(date +%s) - start )) s"; grep -E "^## |wall|warm re-tune|floor" "$out/bt-report.txt"
fi
if [ "$(left)" -gt 60 ]; then
  TILEPROBE_PLAN_CACHE=0 timeout 40 python3 benchmarks/trace_static.py benchmarks/probes/rms_norm_16k.py > "$out/trace-rms16k.txt" 2>&1
  TILEPROBE_PLAN_CACHE=0 timeout 60 python3 benchmarks/trace_static.py examples/tilegym_matmul_tune.py > "$out/trace-matmul.txt" 2>&1
  grep -v -i warn "$out/trace-rms16k.txt" | head -40
fi
if [ "$(left)" -gt 100 ]; then
  mkdir -p "$out/bb2" && cp "$out/bb/full.json" "$out/bb/full.meta.json" "$out/bb2/"
  python3 benchmarks/bench_budget.py --out "$out/bb2" --budget 30 --seed 1 --steps budget,dobench > "$out/bench_budget2.stdout" 2>&1
  cat "$out/bb2/bench_budget.txt"
fi
echo "done at $(( $(date +%s) - start )) s"
