#!/usr/bin/env bash
# Issue 13 on the GPU host (after `. benchmarks/gpu_setup.sh`): the cluster model against cuOccupancyMaxActiveClusters.
# Compiles the cluster variants here when tileiras is on PATH (else give a bundle made elsewhere as $2).
#   bash benchmarks/gpu_issue13_cluster.sh OUT_DIR [BUNDLE]
set -uo pipefail
out=${1:?OUT_DIR}; bundle=${2:-$out/cluster_bundle}
mkdir -p "$out"
if [ ! -f "$bundle/audit.json" ]; then
  timeout 300 python3 -m tileprobe audit examples/tilegym_persistent_matmul.py examples/tilegym_matmul.py \
    --arch sm_90 --bundle "$bundle" --no-store --format none 2>&1 | tail -3
fi
timeout 300 python3 benchmarks/gpu_cluster_check.py --bundle "$bundle" --out "$out" --random 48 2>&1 | tee "$out/cluster_check.txt"
echo "cluster check exit ${PIPESTATUS[0]}"
