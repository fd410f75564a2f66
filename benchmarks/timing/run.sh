#!/usr/bin/env bash
# The timing suite: tileprobe's timers against triton's do_bench and cuda.tile.tune's, and compiler releases
# compared by measured time (README.md here).
#   bash benchmarks/timing/run.sh OUT_DIR [STEP …]    (from the repository root; no STEP: timers run)
# Steps on the GPU host (after `. benchmarks/gpu_setup.sh`); BUNDLE=… is a bundle made where tileiras is (else
# the timers step compiles one here when tileiras is on PATH):
#   timers     bench_timing.py: four timers on the same cubins (benchmarks/probes/timing_set.py, 14 variants of 5
#              kernels) with the GPU's clocks read over each
#   run        bench_run.py: `tileprobe run` medians against do_bench, repeat agreement, per-variant overhead
#   releases   two tileiras releases from one bundle (BUNDLE, a folder or .tgz, made with `tileprobe audit
#              examples/rms_norm_large.py examples/w4a16_gemm_sm90.py --arch sm_90 --tileiras 13.3.36,13.4.92
#              --bundle B`) run interleaved, then `tileprobe compare` per probe
#   bisect     the GPU side of `tileprobe bisect --property "time within 5%"` over a bundle of every release
#              (BUNDLE from `tileprobe bisect … --bundle-out B`)
# In one device-tool call: bash benchmarks/gpu_call.sh timing 590 'bash benchmarks/timing/run.sh $R timers run'
set -uo pipefail
out=${1:?OUT_DIR}; shift
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(timers run)
here=benchmarks/timing
unset CUDA_HOME CUDA_PATH            # a CUDA_HOME of an older toolkit makes tileiras fail with no reason
mkdir -p "$out"
bundle_dir() {   # BUNDLE (folder, or .tgz of one: cubins compress ~5x) -> the folder holding audit.json
  local b=${BUNDLE:?BUNDLE=folder or .tgz of a bundle}
  case "$b" in
    *.tgz|*.tar.gz) rm -rf "$out/bundle" && mkdir -p "$out/bundle" && tar -C "$out/bundle" -xzf "$b" || return 2
      b=$(dirname "$(find "$out/bundle" -name audit.json -print -quit)") ;;
  esac
  [ -f "$b/audit.json" ] || { echo "$b: not a tileprobe bundle (no audit.json)" >&2; return 2; }
  echo "$b"
}
compare() {   # NAME PROBE [--where W]: the bundle's variants of PROBE run, then the two releases compared
  local name=$1 probe=$2 b=$3; shift 3
  timeout 150 python3 -m tileprobe run --bundle "$b" "$probe" "$@" --store "$out/releases/store.sqlite" \
    --json "$out/releases/${name}_run.json" --format none 2>&1 | tee "$out/releases/${name}_run.log" | tail -4
  python3 -m tileprobe compare "$out/releases/${name}_run.json" --json "$out/releases/${name}_compare.json" 2>&1 \
    | tee "$out/releases/${name}_compare.txt" | tail -40
  python3 -m tileprobe compare "$out/releases/${name}_run.json" --format markdown > "$out/releases/${name}_compare.md"
}
for step in "${steps[@]}"; do
  echo "== timing: $step"
  case $step in
    timers) b=${BUNDLE:-$out/timing_bundle}
      if [ ! -f "$b/audit.json" ]; then
        timeout 300 python3 -m tileprobe audit benchmarks/probes/timing_set.py --arch sm_90 --bundle "$b" \
          --no-store --format none 2>&1 | tail -3
      fi
      timeout 355 python3 $here/bench_timing.py --bundle "$b" --out "$out" 2>&1 | tee "$out/bench_timing.stdout"
      echo "bench_timing exit ${PIPESTATUS[0]}" ;;
    run) python3 $here/bench_run.py 2>&1 | tee "$out/bench_run.txt" ;;
    releases) b=$(bundle_dir) || exit 2; mkdir -p "$out/releases"
      nvidia-smi --query-gpu=name,driver_version,pstate,clocks.sm,clocks.max.sm,clocks.mem --format=csv \
        > "$out/releases/gpu.csv" 2>&1
      compare rms_norm_large examples/rms_norm_large.py "$b"
      compare w4a16_sm90 examples/w4a16_gemm_sm90.py "$b" --where "GATHER=True,LOOP=True" ;;
    bisect) b=$(bundle_dir) || exit 2
      timeout 110 python3 -m tileprobe bisect --bundle "$b" examples/rms_norm_large.py --property "time within 5%" \
        --rounds 3 --format markdown --json "$out/bisect.json" 2>&1 | tee "$out/bisect.md" ;;
    *) echo "unknown step: $step (timers run releases bisect)"; exit 2 ;;
  esac
done
