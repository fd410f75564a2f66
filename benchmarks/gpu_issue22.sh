#!/usr/bin/env bash
# Issue 22 on the GPU host (H200), in one device call of at most 10 minutes. Carry .gpu/tc/toolchain.tar.xz
# (tileiras 13.4.92 + ptxas + libnvvm) and .gpu/whl (cuda-tile, tilegym, ...); from the repository root:
#     bash benchmarks/gpu_call.sh issue22 590 'bash benchmarks/gpu_issue22.sh $R'
# For RMSNorm 2M × 512 and 16384 × 512 (10 configurations each) and the TileGym matmul (48), in this order and
# each in its own fresh process (benchmarks/bench_tune.py):
#   cutile     cuda.tile.tune's exhaustive_search, cold;
#   tileprobe  tileprobe tune, cold (empty store, empty cuTile cache): wall, split, floor, part above the floor;
#   retune     tileprobe tune again on that store (every variant stored): static stage and total;
#   dobench    every configuration by triton's do_bench: each tool's pick against the best.
# Then, if time is left, where the static stage's time goes on this host (bench_compile_stage.py).
# Writes $OUT_DIR/bench_tune.txt (the report) and .json; the figures answer issue 22's "Done when" lines:
#   "wall ... = N× cuda.tile.tune's"  (RMSNorm ≤ 0.7×, matmul ≤ 0.4×), "floor: ... above the floor: S",
#   "warm re-tune ...: static stage S (≤ 2 s), total S (≤ 6 s plus the race)", "pick ...: ... × best (≤ 1.02)".
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
start=$(date +%s)
kernels=${ISSUE22_KERNELS:-rms,rms16k,matmul}
python3 benchmarks/bench_tune.py --out "$out" --kernels "$kernels" --steps cutile,tileprobe,retune,dobench \
  ${ISSUE22_DRY_RUN:+--dry-run} ${ISSUE22_QUICK:+--quick} 2>&1 | tee "$out/bench_tune.stdout"
rc=${PIPESTATUS[0]}
echo "bench_tune exit $rc after $(( $(date +%s) - start )) s"
left=$(( ${ISSUE22_BUDGET_S:-560} - ($(date +%s) - start) ))
if [ "$left" -gt 90 ] && [ -z "${ISSUE22_DRY_RUN:-}" ]; then
  timeout $(( left - 10 )) python3 benchmarks/bench_compile_stage.py --probe examples/rms_norm_large.py --arch sm_90 \
    2>&1 | tee "$out/bench_compile_stage.txt"
else
  echo "bench_compile_stage skipped: ${left} s left" | tee "$out/bench_compile_stage.txt"
fi
exit "$rc"
