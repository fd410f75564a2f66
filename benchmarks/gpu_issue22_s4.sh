#!/usr/bin/env bash
# Issue 22 on the GPU host, session 4: one step per argument, in order of importance (for benchmarks/gpu_call.sh):
#   trace     timelines of cold and warm tunes (benchmarks/gpu_issue22_trace.sh)
#   rms       bench_tune.py for RMSNorm 16384 x 512 and 2M x 512: cuda.tile.tune, tileprobe cold, re-tune, do_bench
#   budget    bench_budget.py on the 486-configuration matmul: full, --budget 30 seeds 0 and 1, do_bench of the picks
#   big       bench_tune.py tileprobe and retune steps for the matmul 48 and FMHA 36 (cutile/do_bench figures from
#             docs/gpu/2026-12-02c/morning, the same machine kind)
#   gpu-tests tests/test_run_gpu.py tests/test_tune_gpu.py
#     bash benchmarks/gpu_call.sh s4 590 'bash benchmarks/gpu_issue22_s4.sh $R trace' 'bash benchmarks/gpu_issue22_s4.sh $R rms'
set -uo pipefail
out=${1:?OUT_DIR}; step=${2:?STEP}
case $step in
  trace) bash benchmarks/gpu_issue22_trace.sh "$out/trace" ;;
  rms) python3 benchmarks/bench_tune.py --out "$out/bt" --kernels rms16k,rms --steps cutile,tileprobe,retune,dobench \
         > "$out/bt-rms.stdout" 2>&1; echo "exit $?"
       python3 benchmarks/bench_tune.py --out "$out/bt" --kernels rms16k,rms --report > "$out/bt-rms-report.txt" 2>&1
       grep -E "^## |wall|warm re-tune|floor|pick" "$out/bt-rms-report.txt" ;;
  budget) python3 benchmarks/bench_budget.py --out "$out/bb" --budget 30 > "$out/bb.stdout" 2>&1; cat "$out/bb/bench_budget.txt"
       mkdir -p "$out/bb1" && cp "$out/bb/full.json" "$out/bb/full.meta.json" "$out/bb1/" 2>/dev/null
       python3 benchmarks/bench_budget.py --out "$out/bb1" --budget 30 --seed 1 --steps budget,dobench > "$out/bb1.stdout" 2>&1
       cat "$out/bb1/bench_budget.txt" ;;
  big) mkdir -p "$out/bt2" && cp docs/gpu/2026-12-02c/morning/matmul-* docs/gpu/2026-12-02c/morning/fmha-* "$out/bt2/"
       python3 benchmarks/bench_tune.py --out "$out/bt2" --kernels matmul,fmha --steps tileprobe,retune > "$out/bt2.stdout" 2>&1
       python3 benchmarks/bench_tune.py --out "$out/bt2" --kernels matmul,fmha --report > "$out/bt-big-report.txt" 2>&1
       grep -E "^## |wall|warm re-tune|floor|pick" "$out/bt-big-report.txt" ;;
  budget2) for seed in 0 1; do   # the budgeted tune only, against the full tune of an earlier call (gpu_in/full.json)
         mkdir -p "$out/bb$seed" && cp gpu_in/full.json gpu_in/full.meta.json "$out/bb$seed/"
         python3 benchmarks/bench_budget.py --out "$out/bb$seed" --budget 30 --seed $seed --steps budget,dobench \
           > "$out/bb$seed.stdout" 2>&1; cat "$out/bb$seed/bench_budget.txt"; done ;;
  rms2) mkdir -p "$out/bt" && cp gpu_in/bt/* "$out/bt/"   # tileprobe's steps; cuda.tile.tune's of an earlier call
       python3 benchmarks/bench_tune.py --out "$out/bt" --kernels rms16k,rms --steps tileprobe,retune > "$out/bt-rms.stdout" 2>&1
       python3 benchmarks/bench_tune.py --out "$out/bt" --kernels rms16k,rms --report > "$out/bt-rms-report.txt" 2>&1
       grep -E "^## |wall|warm re-tune|floor|pick" "$out/bt-rms-report.txt" ;;
  gpu-tests) timeout 240 python3 -m pytest -q -p no:cacheprovider --timeout 200 tests/test_run_gpu.py tests/test_tune_gpu.py \
       > "$out/pytest-gpu.txt" 2>&1; echo "exit $?"; tail -5 "$out/pytest-gpu.txt" ;;
esac
