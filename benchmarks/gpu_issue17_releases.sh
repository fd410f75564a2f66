#!/usr/bin/env bash
# Issue 17 on the GPU host (after `. benchmarks/gpu_setup.sh`): two tileiras releases from ONE bundle, run
# interleaved, compared by time (docs/DESIGN.md "Compiler releases by measured time"). The bundle is made where
# tileiras is (13.3.36 installed first: `tileprobe toolchain install 13.3.36`):
#     tileprobe audit examples/rms_norm_large.py examples/w4a16_gemm_sm90.py --arch sm_90 \
#         --tileiras 13.3.36,13.4.92 --bundle .gpu/issue17_releases
#     tar czf .gpu/issue17_releases.tgz -C .gpu issue17_releases
#   bash benchmarks/gpu_issue17_releases.sh OUT_DIR BUNDLE_DIR_OR_TGZ
# Runs RMSNorm 524288×512 (10 variants × 2 releases) and the sm_90 W4A16 GEMM with the gather inside the runtime
# loop (GATHER=True,LOOP=True: occupancy 1/2/4 × 2 releases), stores the runs in OUT/store.sqlite, and writes per probe:
# *_run.json (both releases' runs), *_compare.txt (terminal), *_compare.md (ready to paste), *_compare.json.
# About 1-2 minutes on an H200.
set -uo pipefail
out=${1:?OUT_DIR}; src=${2:?BUNDLE (folder or .tgz)}
. "$(dirname "$0")/issue17_bundle.sh"
bundle=$(issue17_setup "$out" "$src") || exit 2
rc=0
step() {   # step NAME PROBE [--where W]: run the bundle's variants of PROBE, then compare the two releases
  local name=$1 probe=$2; shift 2
  local t0=$(date +%s)
  timeout 150 python3 -m tileprobe run --bundle "$bundle" "$probe" "$@" --store "$out/store.sqlite" \
    --json "$out/${name}_run.json" --format none 2>&1 | tee "$out/${name}_run.log" | tail -4
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "$name: run failed (see $out/${name}_run.log)"; rc=1; return; }
  python3 -m tileprobe compare "$out/${name}_run.json" --json "$out/${name}_compare.json" 2>&1 \
    | tee "$out/${name}_compare.txt" | tail -40
  python3 -m tileprobe compare "$out/${name}_run.json" --format markdown > "$out/${name}_compare.md" || rc=1
  echo "$name: $(( $(date +%s) - t0 )) s"
}
step rms_norm_large examples/rms_norm_large.py
step w4a16_sm90 examples/w4a16_gemm_sm90.py --where "GATHER=True,LOOP=True"
ls -la "$out"
exit $rc
