#!/usr/bin/env bash
# Issue 22 on the GPU host, session 7 (2026-12-03): one step per argument (for benchmarks/gpu_call.sh):
#   env        what the host has for the SASS read (nvdisasm, the pip wheel) and its CPUs (lscpu)
#   trace      a cold rms16k tune under benchmarks/trace_tune.py (each compile's worker and tileiras time)
#   trace2m    the same for RMSNorm 2M × 512
#   rms, budget, gpu-tests: as in gpu_issue22_s4.sh;  seeds "S…": as in gpu_issue22_s5.sh
#     bash benchmarks/gpu_call.sh s7a 560 'bash benchmarks/gpu_issue22_s7.sh $R env' \
#       'bash benchmarks/gpu_issue22_s7.sh $R trace' 'bash benchmarks/gpu_issue22_s7.sh $R rms'
set -uo pipefail
out=${1:?OUT_DIR}; step=${2:?STEP}
case $step in
  env) { command -v nvdisasm || echo "no nvdisasm on PATH"
         python3 -c "from tileprobe.model.sass import have_nvdisasm, find_nvdisasm as f; print('have_nvdisasm', have_nvdisasm()); print(f() if have_nvdisasm() else '')"
         lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|Model name|NUMA node\(s\))"; nproc; uptime; } > "$out/env.txt" 2>&1
       cat "$out/env.txt" ;;
  trace|trace2m) name=rms16k; probe=benchmarks/probes/rms_norm_16k.py
       [ "$step" = trace2m ] && name=rms2m && probe=benchmarks/probes/rms_norm_2m.py
       mkdir -p "$out/trace" && repo=$PWD && t0=$(date +%s%N)
       (cd "$out/trace" && timeout 200 python3 "$repo/benchmarks/trace_tune.py" tune "$repo/$probe" \
          --store "$out/trace/s-$name.sqlite" --json "$out/trace/$name.json" > "$out/trace/$name.stdout" 2> "$out/trace/$name.trace")
       echo "$name-cold: exit $? wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"
       grep -E "compiled|race ends|exit|GPU info|begins|took" "$out/trace/$name.trace" | grep -v "zygote fork" | head -40 ;;
  seeds) bash benchmarks/gpu_issue22_s5.sh "$out" seeds "${3:?SEEDS}" ;;
  *) bash benchmarks/gpu_issue22_s4.sh "$out" "$step" ;;
esac
