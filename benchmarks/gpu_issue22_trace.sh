#!/usr/bin/env bash
# Issue 22 on the GPU host: timelines of cold and warm tunes (benchmarks/trace_tune.py), to see where the wall time
# after the last compile goes.   bash benchmarks/gpu_call.sh trace 400 'bash benchmarks/gpu_issue22_trace.sh $R'
set -uo pipefail
out=${1:?OUT_DIR}; mkdir -p "$out"
one() {   # NAME PROBE STORE: a tune under the timeline, its wall time around the process
  local name=$1 probe=$2 store=$3 repo=$PWD t0; t0=$(date +%s%N)
  (cd "$out" && timeout 200 python3 "$repo/benchmarks/trace_tune.py" tune "$repo/$probe" --store "$store" \
     --json "$out/$name.json" > "$out/$name.stdout" 2> "$out/$name.trace")
  echo "$name: exit $? wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"; grep '^\[trace' "$out/$name.trace" | tail -60
}
one rms16k-cold benchmarks/probes/rms_norm_16k.py "$out/s-rms16k.sqlite"
one rms16k-warm benchmarks/probes/rms_norm_16k.py "$out/s-rms16k.sqlite"
one matmul-cold examples/tilegym_matmul_tune.py "$out/s-matmul.sqlite"
one matmul-warm examples/tilegym_matmul_tune.py "$out/s-matmul.sqlite"
