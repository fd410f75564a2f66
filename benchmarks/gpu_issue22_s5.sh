#!/usr/bin/env bash
# Issue 22 on the GPU host, session 5: one step per argument (for benchmarks/gpu_call.sh); the steps of
# gpu_issue22_s4.sh (rms, budget, trace, big, gpu-tests) and:
#   rms-again   bench_tune.py rms16k,rms --steps cutile,tileprobe,retune,dobench again, in its own folder (a 2nd pair)
#   seeds "S…"  bench_budget.py --budget 30 --steps budget,dobench for each seed, against gpu_in/full.json (the full
#               tune of an earlier call, carried untracked)
#     bash benchmarks/gpu_call.sh s5b 585 'bash benchmarks/gpu_issue22_s5.sh $R rms-again' \
#       'bash benchmarks/gpu_issue22_s5.sh $R seeds "2 3"'
set -uo pipefail
out=${1:?OUT_DIR}; step=${2:?STEP}
case $step in
  rms-again) python3 benchmarks/bench_tune.py --out "$out/bt-again" --kernels rms16k,rms \
         --steps cutile,tileprobe,retune,dobench > "$out/bt-again.stdout" 2>&1; echo "exit $?"
       python3 benchmarks/bench_tune.py --out "$out/bt-again" --kernels rms16k,rms --report > "$out/bt-again-report.txt" 2>&1
       grep -E "^## |wall|warm re-tune|floor|pick" "$out/bt-again-report.txt" ;;
  seeds) for seed in ${3:?SEEDS}; do
         mkdir -p "$out/bs$seed" && cp gpu_in/full.json gpu_in/full.meta.json "$out/bs$seed/"
         python3 benchmarks/bench_budget.py --out "$out/bs$seed" --budget 30 --seed "$seed" --steps budget,dobench \
           > "$out/bs$seed.stdout" 2>&1; cat "$out/bs$seed/bench_budget.txt"; done ;;
  *) bash benchmarks/gpu_issue22_s4.sh "$out" "$step" ;;
esac
