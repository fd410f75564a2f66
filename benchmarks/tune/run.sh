#!/usr/bin/env bash
# The tune suite: `tileprobe tune` against cuda.tile.tune's exhaustive_search and triton's do_bench (README.md here).
#   bash benchmarks/tune/run.sh OUT_DIR [STEP …]          (from the repository root; no STEP: compare budget)
# Steps (GPU host, after `. benchmarks/gpu_setup.sh`, tileiras on PATH, unless marked CPU):
#   compare    bench_tune.py, every step (cuda.tile.tune cold, tileprobe cold, warm re-tune, do_bench of every
#              configuration) for RMSNorm 2M × 512, 16384 × 512 and TileGym's matmul (KERNELS=… to choose:
#              rms, rms16k, matmul, fmha), then its report
#   budget     bench_budget.py on the 486-configuration matmul: the full compile-and-race tune against --budget 30,
#              both picks by do_bench; SEEDS="1 2" runs the budgeted tune again per seed against that full tune
#   trace      timelines (trace_tune.py) of a cold and a warm tune of rms16k and of the matmul
#   static     where the static stage's time goes: trace_static.py and bench_compile_stage.py (CPU too)
#   power      power_window.py: the race's batch against do_bench on the matmul's and FMHA's fastest configurations
#   persistent a persistent kernel whose args build its launch constant from each candidate's own hints and the SM
#              count (probes/persistent_scale.py): every candidate's grid is SMs // num_ctas × occupancy
#   gpu-tests  tests/test_run_gpu.py and tests/test_tune_gpu.py
#   dry-run    (CPU) bench_tune.py --dry-run: the spaces and the static stage, no GPU
# In one device-tool call: bash benchmarks/gpu_call.sh tune 590 'bash benchmarks/tune/run.sh $R compare budget'
set -uo pipefail
out=${1:?OUT_DIR}; shift
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(compare budget)
here=benchmarks/tune
mkdir -p "$out"
report() {   # DIR KERNELS: bench_tune.py's report from the JSON files in DIR, its headline lines printed
  python3 $here/bench_tune.py --out "$1" --kernels "$2" --report > "$1/report.txt" 2>&1
  grep -E "^## |wall|warm re-tune|floor|pick" "$1/report.txt"
}
trace() {    # NAME PROBE STORE: a tune under the timeline, its wall time around the process
  local name=$1 probe=$2 store=$3 repo=$PWD t0; t0=$(date +%s%N)
  (cd "$out/trace" && timeout 200 python3 "$repo/$here/trace_tune.py" tune "$repo/$probe" --store "$store" \
     --json "$out/trace/$name.json" > "$out/trace/$name.stdout" 2> "$out/trace/$name.trace")
  echo "$name: exit $? wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"; grep '^\[trace' "$out/trace/$name.trace" | tail -60
}
for step in "${steps[@]}"; do
  echo "== tune: $step"
  case $step in
    compare) kernels=${KERNELS:-rms,rms16k,matmul}
      python3 $here/bench_tune.py --out "$out/compare" --kernels "$kernels" --steps cutile,tileprobe,retune,dobench \
        > "$out/compare.stdout" 2>&1; echo "bench_tune exit $?"
      report "$out/compare" "$kernels" ;;
    budget) python3 $here/bench_budget.py --out "$out/budget" --budget "${BUDGET_S:-30}" > "$out/budget.stdout" 2>&1
      echo "bench_budget exit $?"; cat "$out/budget/bench_budget.txt"
      for seed in ${SEEDS:-}; do
        mkdir -p "$out/budget-$seed" && cp "$out/budget/full.json" "$out/budget/full.meta.json" "$out/budget-$seed/"
        python3 $here/bench_budget.py --out "$out/budget-$seed" --budget "${BUDGET_S:-30}" --seed "$seed" \
          --steps budget,dobench > "$out/budget-$seed.stdout" 2>&1; cat "$out/budget-$seed/bench_budget.txt"
      done ;;
    trace) mkdir -p "$out/trace"
      trace rms16k-cold benchmarks/probes/rms_norm_16k.py "$out/trace/s-rms16k.sqlite"
      trace rms16k-warm benchmarks/probes/rms_norm_16k.py "$out/trace/s-rms16k.sqlite"
      trace matmul-cold examples/tilegym_matmul_tune.py "$out/trace/s-matmul.sqlite"
      trace matmul-warm examples/tilegym_matmul_tune.py "$out/trace/s-matmul.sqlite" ;;
    static) TILEPROBE_PLAN_CACHE=0 timeout 60 python3 benchmarks/audit/trace_static.py benchmarks/probes/rms_norm_16k.py \
        > "$out/trace-static-rms16k.txt" 2>&1; grep -v -i warn "$out/trace-static-rms16k.txt" | head -40
      timeout 300 python3 benchmarks/audit/bench_compile_stage.py --probe examples/rms_norm_large.py --arch sm_90 \
        2>&1 | tee "$out/bench_compile_stage.txt" ;;
    power) python3 $here/power_window.py --probe examples/tilegym_matmul_tune.py --json "$out/pw-matmul.json" --labels \
        "TILE_M=128 TILE_N=128 TILE_K=64 occupancy=2 num_ctas=1" "TILE_M=256 TILE_N=128 TILE_K=64 occupancy=2 num_ctas=2" \
        "TILE_M=256 TILE_N=128 TILE_K=64 occupancy=1 num_ctas=2" "TILE_M=128 TILE_N=128 TILE_K=64 occupancy=1 num_ctas=1" \
        2>&1 | tee "$out/pw-matmul.txt" | grep -v Warning
      python3 $here/power_window.py --probe benchmarks/probes/tilegym_fmha.py --json "$out/pw-fmha.json" --labels \
        "TILE_M=128 TILE_N=128 occupancy=2 num_ctas=2" "TILE_M=64 TILE_N=128 occupancy=2 num_ctas=1" \
        "TILE_M=128 TILE_N=64 occupancy=2 num_ctas=2" 2>&1 | tee "$out/pw-fmha.txt" | grep -v Warning ;;
    persistent) mkdir -p "$out/persistent"
      XDG_CACHE_HOME=$out/persistent/xdg TILEPROBE_STORE=$out/persistent/results.sqlite python3 -m tileprobe tune \
        benchmarks/probes/persistent_scale.py --arch sm_90 --budget 90 --jobs 8 ${BUNDLE:+--bundle "$BUNDLE"} \
        --json "$out/persistent/tune.json" 2>&1 | tee "$out/persistent/tune.stdout"
      echo "tune exit ${PIPESTATUS[0]}"
      python3 $here/persistent_grids.py "$out/persistent/tune.json"; echo "check exit $?" ;;
    gpu-tests) timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_run_gpu.py tests/test_tune_gpu.py \
        > "$out/pytest-gpu.txt" 2>&1; echo "exit $?"; tail -5 "$out/pytest-gpu.txt" ;;
    dry-run) python3 $here/bench_tune.py --out "$out/dry-run" --kernels "${KERNELS:-rms,rms16k,matmul}" --dry-run \
        2>&1 | tee "$out/dry-run.stdout" | tail -20 ;;
    *) echo "unknown step: $step (compare budget trace static power persistent gpu-tests dry-run)"; exit 2 ;;
  esac
done
