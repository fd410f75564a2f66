#!/usr/bin/env bash
# Issue 17 on the GPU host (after `. benchmarks/gpu_setup.sh`): the GPU side of a bisect by time. The bundle holds
# one variant (examples/rms_norm_large.py, ALLOW_TMA=False occupancy=1: its machine code changed most between
# 13.3.36 and 13.4.92 on sm_90, 1342 LDL / 1206 STL spills → none) compiled by every published tileiras release that
# lists sm_90 (13.3.36, 13.4.59, 13.4.92, 13.5.37; 13.1.x and 13.2.x do not). Made where tileiras is:
#     tileprobe bisect examples/rms_norm_large.py --arch sm_90 --where "ALLOW_TMA=False,occupancy=1" \
#         --property "time within 5%" --good 13.1.80 --bad 13.5.37 --bundle-out .gpu/issue17_bisect
#     tar czf .gpu/issue17_bisect.tgz -C .gpu issue17_bisect
#   bash benchmarks/gpu_issue17_bisect.sh OUT_DIR BUNDLE_DIR_OR_TGZ
# Every release is measured (3 interleaved rounds × 100 launches, samples pooled), and the first release whose
# median is more than 5 % away from 13.3.36's beyond noise is named (or "nothing moved beyond noise").
# Writes OUT/bisect.md (every release's time), OUT/bisect.json. Under a minute on an H200.
set -uo pipefail
out=${1:?OUT_DIR}; src=${2:?BUNDLE (folder or .tgz)}
. "$(dirname "$0")/issue17_bundle.sh"
bundle=$(issue17_setup "$out" "$src") || exit 2
t0=$(date +%s)
timeout 110 python3 -m tileprobe bisect --bundle "$bundle" examples/rms_norm_large.py --property "time within 5%" \
  --rounds 3 --format markdown --json "$out/bisect.json" 2>&1 | tee "$out/bisect.md"
rc=${PIPESTATUS[0]}
echo "bisect exit $rc, $(( $(date +%s) - t0 )) s"
exit $rc
