#!/usr/bin/env bash
# On the GPU machine: a shipped table's life on one program (benchmarks/programs/warm_start_program.py, a cuTile
# matmul that searches 81 configurations with cuda.tile.tune.exhaustive_search at the shape it is given):
#   base      tune --export T -- PROGRAM 4096              the table is made on 4096
#   cov-known use T --min-coverage 100 -- PROGRAM 4096     every search and launch answered (exit 0)
#   cov-new   use T --min-coverage 100 -- PROGRAM 3072     a new shape: a miss with its nearest row (exit 1)
#   ranks-tune tune --export R -- ranks_launcher 2 PROGRAM 2048   two ranks, one search each: tuned once
#   ranks-use use R --coverage -- ranks_launcher 4 PROGRAM 2048   four ranks answered, the same pick each
#   warm      bench_warm_start.py: a new shape's --refresh from the nearest row's pick vs cold (--repeats 1)
#     bash benchmarks/programs/gpu_tables.sh OUT_DIR
out=${1:?OUT_DIR}; mkdir -p "$out"
P=benchmarks/programs/warm_start_program.py; L=tests/data/record/ranks_launcher.py
export TILEPROBE_STORE="$out/store.sqlite"
tp=(python3 -m tileprobe.cli)
step() {
  local name=$1; shift; local t0; t0=$(date +%s.%N)
  "$@" > "$out/$name.txt" 2>&1; local rc=$?
  echo "$name rc=$rc $(python3 -c "import time; print(f'{time.time() - $t0:.1f}')") s: $*" | tee -a "$out/steps.txt"
}
step base "${tp[@]}" tune --export "$out/t.json" -- python3 $P 4096
step cov-known "${tp[@]}" use --coverage-json "$out/cov-known.json" --min-coverage 100 "$out/t.json" -- python3 $P 4096
step cov-new "${tp[@]}" use --coverage-json "$out/cov-new.json" --min-coverage 100 "$out/t.json" -- python3 $P 3072
step ranks-tune "${tp[@]}" tune --export "$out/r.json" -- python3 $L 2 python3 $P 2048
step ranks-use "${tp[@]}" use --coverage-json "$out/cov-ranks.json" --min-coverage 100 "$out/r.json" -- \
  python3 $L 4 python3 $P 2048
step warm timeout 400 python3 benchmarks/programs/bench_warm_start.py --out "$out/warm" --repeats 1
tail -n 30 "$out"/cov-known.txt "$out"/cov-new.txt "$out"/ranks-use.txt "$out/warm/summary.txt" 2>/dev/null
