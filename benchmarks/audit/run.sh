#!/usr/bin/env bash
# The audit suite: what an audit costs and whether its models hold on a GPU (README.md here).
#   bash benchmarks/audit/run.sh OUT_DIR [STEP …]     (from the repository root; no STEP: audit static executor)
# Steps on any machine with tileiras (the test extra installs it):
#   audit      bench_audit.py: rms_norm + w4a16_gemm for sm_90 and sm_120 (44 variants), --jobs 1 against all CPUs
#   static     bench_compile_stage.py: the static stage of one probe (start-up, imports, loader, compiles)
#   executor   bench_executor.py: 100 compiles with a tileiras that fails at once, local pool against Ray
#   loaders    bench_loaders.py: a loader child per job against one kept for the command
#   fuzz       bench_fuzz_cubin.py: the cubin reader on 10,000 mutated cubins (no tileiras needed)
#   regpool    bench_regpool.py on CUBIN (default the bundled vec_add sm_90 cubin): nvdisasm, traits, register pool
#   screenshots report_screenshots.py: the HTML report's screenshots for docs/report-*.png (needs Chromium)
#   hang-bundles  hang_bundles.py OUT/hang-bundles: bundles for `hangs` (tileiras 13.3.36 and 13.4.92 toolchains)
# Steps on the GPU host (after `. benchmarks/gpu_setup.sh`):
#   cluster    gpu_cluster_check.py: the cluster model against cuOccupancyMaxActiveClusters (BUNDLE=… made where
#              tileiras is, else compiled here)
#   hangs      every bundle of BUNDLES (default .gpu/hang-bundles: the hang-bundles step's output) run with
#              --run-hang-risk under the watchdog (HANG_S per variant, default 15 s), then hang_table.py:
#              prediction (register pool) against outcome per variant
# In one device-tool call: bash benchmarks/gpu_call.sh audit 590 'bash benchmarks/audit/run.sh $R cluster hangs'
set -uo pipefail
out=${1:?OUT_DIR}; shift
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(audit static executor)
here=benchmarks/audit
mkdir -p "$out"
probe_of() {   # bundle folder name (rms_norm_large-13.3.36) -> its probe file
  local name=${1%-*} d
  for d in examples benchmarks/probes; do [ -f "$d/$name.py" ] && { echo "$d/$name.py"; return; }; done
  return 1
}
hangs() {
  local bundles=${BUNDLES:-.gpu/hang-bundles} hang_s=${HANG_S:-15} budget=${BUDGET_S:-530} start order b name probe left t0
  start=$(date +%s)
  if [ -f "$bundles" ]; then   # hang-bundles' folder packed as .tar.xz (cubins compress ~5x): unpacked first
    mkdir -p /tmp/hang-bundles && tar -C /tmp/hang-bundles -xJf "$bundles" || return 2
    bundles=$(ls -d /tmp/hang-bundles/*/ | head -1); bundles=${bundles%/}
  fi
  order=""   # the seed kernels first (13.3.36, then 13.4.92), then every other bundle
  for b in rms_norm_large-13.3.36 rms_norm-13.3.36 rms_norm_large-13.4.92 rms_norm-13.4.92; do
    [ -d "$bundles/$b" ] && order="$order $bundles/$b"
  done
  order="$order $(ls -d "$bundles"/*/ | sed 's:/$::' | grep -v '/rms_norm\(_large\)\?-' | tr '\n' ' ')"
  mkdir -p "$out/hangs"
  for b in $order; do
    name=$(basename "$b"); probe=$(probe_of "$name") || { echo "$name: no probe file found"; continue; }
    left=$(( budget - ($(date +%s) - start) ))
    if [ "$left" -lt 45 ]; then echo "SKIPPED (no time left): $name" | tee -a "$out/hangs/steps.txt"; continue; fi
    t0=$(date +%s)
    timeout --kill-after=5 "$left" python3 -m tileprobe run --bundle "$b" "$probe" --run-hang-risk --timeout "$hang_s" \
      --reps 5 --no-store --json "$out/hangs/$name.json" --format none > "$out/hangs/$name.log" 2>&1
    echo "rc=$? $(( $(date +%s) - t0 ))s: $name ($probe)" | tee -a "$out/hangs/steps.txt"
    tail -2 "$out/hangs/$name.log"
  done
  python3 $here/hang_table.py "$out"/hangs/*.json | tee "$out/hangs/table.txt"
}
for step in "${steps[@]}"; do
  echo "== audit: $step"
  case $step in
    audit) python3 $here/bench_audit.py 2>&1 | tee "$out/bench_audit.txt" ;;
    static) python3 $here/bench_compile_stage.py 2>&1 | tee "$out/bench_compile_stage.txt" ;;
    executor) python3 $here/bench_executor.py 2>&1 | tee "$out/bench_executor.txt" ;;
    loaders) python3 $here/bench_loaders.py 2>&1 | tee "$out/bench_loaders.txt" ;;
    fuzz) python3 $here/bench_fuzz_cubin.py 2>&1 | tee "$out/bench_fuzz_cubin.txt" ;;
    regpool) python3 $here/bench_regpool.py "${CUBIN:-tests/data/cubins/vec_add_sm_90.cubin}" 2>&1 \
        | tee "$out/bench_regpool.txt" ;;
    screenshots) python3 $here/report_screenshots.py 2>&1 | tee "$out/report_screenshots.txt" ;;
    hang-bundles) python3 $here/hang_bundles.py "$out/hang-bundles" 2>&1 | tee "$out/hang_bundles.txt" ;;
    cluster) bundle=${BUNDLE:-$out/cluster_bundle}
      if [ ! -f "$bundle/audit.json" ]; then
        timeout 300 python3 -m tileprobe audit examples/tilegym_persistent_matmul.py examples/tilegym_matmul.py \
          --arch sm_90 --bundle "$bundle" --no-store --format none 2>&1 | tail -3
      fi
      timeout 300 python3 $here/gpu_cluster_check.py --bundle "$bundle" --out "$out" --random 48 2>&1 \
        | tee "$out/cluster_check.txt"; echo "cluster check exit ${PIPESTATUS[0]}" ;;
    hangs) hangs ;;
    *) echo "unknown step: $step (audit static executor loaders fuzz regpool screenshots hang-bundles cluster hangs)"
       exit 2 ;;
  esac
done
