#!/usr/bin/env bash
# The programs suite: `tileprobe record`, `tune -- CMD` and `use` on real programs (README.md here).
#   bash benchmarks/programs/run.sh OUT_DIR [STEP …]     (from the repository root; no STEP: record-cost)
# Steps on any machine:
#   coverage-cost  bench_coverage.py: what `tileprobe use --coverage` adds per launch (no GPU)
#   record-cost  bench_record.py: the recorder's own cost per launch (steady, varied, new shapes, a real launch
#                when a GPU and tileiras are there)
#   use-dry      bench_use.py --dry-run: the use steps' commands, the program parsed (no GPU)
#   warm-dry     bench_warm_start.py --dry-run: the warm-start steps' commands, what a warm start races first (no GPU)
# Steps on the GPU host (after `. benchmarks/gpu_setup.sh`, tileiras on PATH, CUDA_HOME unset):
#   record     gpu_record_tilegym.py all: record a TileGym workload, audit the recorded probes, compare their
#              machine code with the JIT cubins; then gpu_record_tilegym.py tune: tune the recorded softmax probe,
#              export, read the export back from host code without tileprobe
#   use        bench_use.py: TileGym's own autotune against `tileprobe use` of a tileprobe table, a forged table
#              refused, picks by do_bench (OPS=bmm,fmha,matmul,softmax,group_gemm to choose)
#   warm       bench_warm_start.py: a new matmul shape tuned (--refresh of a use miss, --budget 20) from a warm start
#              (the known shape's row raced first) against a cold one, alternating, fresh stores: wall time and pick
# In one device-tool call: bash benchmarks/gpu_call.sh programs 590 'bash benchmarks/programs/run.sh $R use'
set -uo pipefail
out=${1:?OUT_DIR}; shift
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(record-cost)
here=benchmarks/programs
mkdir -p "$out"
for step in "${steps[@]}"; do
  echo "== programs: $step"
  case $step in
    record-cost) timeout 300 python3 $here/bench_record.py 2>&1 | tee "$out/bench_record.txt" ;;
    coverage-cost) timeout 300 python3 $here/bench_coverage.py 2>&1 | tee "$out/bench_coverage.txt" ;;
    use-dry) python3 $here/bench_use.py --out "$out/use" --dry-run 2>&1 | tee "$out/use-dry.txt" ;;
    warm-dry) python3 $here/bench_warm_start.py --out "$out/warm" --dry-run 2>&1 | tee "$out/warm-dry.txt" ;;
    warm) timeout 560 python3 $here/bench_warm_start.py --out "$out/warm" 2>&1 | tee "$out/warm.txt" ;;
    record) timeout 420 python3 $here/gpu_record_tilegym.py all --out "$out/rec-tilegym" --jobs 16 2>&1 \
        | tee "$out/record.txt"; echo "record exit ${PIPESTATUS[0]}"
      timeout 240 python3 $here/gpu_record_tilegym.py tune --out "$out/rec-tilegym" --jobs 16 2>&1 \
        | tee "$out/tune.txt"; echo "tune exit ${PIPESTATUS[0]}" ;;
    use) python3 $here/bench_use.py --out "$out/use" --ops "${OPS:-bmm,fmha,matmul,softmax,group_gemm}"
      cat "$out/use/summary.txt" ;;
    *) echo "unknown step: $step (record-cost coverage-cost use-dry warm-dry record use warm)"; exit 2 ;;
  esac
done
