#!/usr/bin/env bash
# Issue 22 on the GPU host, session 7 (2026-12-03): one step per argument (for benchmarks/gpu_call.sh):
#   env        what the host has for the SASS read (nvdisasm, the pip wheel) and its CPUs (lscpu)
#   trace      a cold rms16k tune under benchmarks/trace_tune.py (each compile's worker and tileiras time)
#   trace2m    the same for RMSNorm 2M × 512
#   rms, budget, gpu-tests: as in gpu_issue22_s4.sh;  seeds "S…": as in gpu_issue22_s5.sh
#   warm       imports torch, TileGym and cuTile once and lists the GPU (file cache warm for the steps after it)
#   pw         benchmarks/power_window.py on the matmul's and FMHA's fastest configurations (session 10)
#   final      bench_tune.py --kernels matmul,fmha --steps tileprobe,retune,dobench (cuda.tile.tune's walls from s10a,
#              carried in gpu_in/s10a), then a sharper judge: do_bench over the 6 best and the picks, 6 passes
#   bigall     bench_tune.py --kernels matmul,fmha with every step, both tools in one run (session 10)
#   rejudge    the six-pass judge again over s11b's labels (gpu_in/s11b/judge-*-labels.json), after its fix (session 11)
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
  warm) python3 -c "import torch, tilegym, cuda.tile, triton, tileprobe.cli; print(torch.cuda.get_device_name())" ;;
  bigall) python3 benchmarks/bench_tune.py --out "$out/bt3" --kernels matmul,fmha --steps cutile,tileprobe,retune,dobench \
         > "$out/bt3.stdout" 2>&1; echo "exit $?"
       python3 benchmarks/bench_tune.py --out "$out/bt3" --kernels matmul,fmha --report > "$out/bt-bigall-report.txt" 2>&1
       grep -E "^## |wall|warm re-tune|floor|pick" "$out/bt-bigall-report.txt" ;;
  pw) python3 benchmarks/power_window.py --probe examples/tilegym_matmul_tune.py --json "$out/pw-matmul.json" --labels \
         "TILE_M=128 TILE_N=128 TILE_K=64 occupancy=2 num_ctas=1" "TILE_M=256 TILE_N=128 TILE_K=64 occupancy=2 num_ctas=2" \
         "TILE_M=256 TILE_N=128 TILE_K=64 occupancy=1 num_ctas=2" "TILE_M=128 TILE_N=128 TILE_K=64 occupancy=1 num_ctas=1" \
         2>&1 | tee "$out/pw-matmul.txt" | grep -v Warning
      python3 benchmarks/power_window.py --probe benchmarks/probes/tilegym_fmha.py --json "$out/pw-fmha.json" --labels \
         "TILE_M=128 TILE_N=128 occupancy=2 num_ctas=2" "TILE_M=64 TILE_N=128 occupancy=2 num_ctas=1" \
         "TILE_M=128 TILE_N=64 occupancy=2 num_ctas=2" 2>&1 | tee "$out/pw-fmha.txt" | grep -v Warning ;;
  final) mkdir -p "$out/bt4" && cp gpu_in/s10a/*-cutile.* "$out/bt4/"
       python3 benchmarks/bench_tune.py --out "$out/bt4" --kernels matmul,fmha --steps tileprobe,retune,dobench \
         > "$out/bt4.stdout" 2>&1; echo "exit $?"
       python3 benchmarks/bench_tune.py --out "$out/bt4" --kernels matmul,fmha --report > "$out/bt-final-report.txt" 2>&1
       grep -E "^## |wall|warm re-tune|floor|pick" "$out/bt-final-report.txt"
       for k in matmul fmha; do
         probe=examples/tilegym_matmul_tune.py; [ $k = fmha ] && probe=benchmarks/probes/tilegym_fmha.py
         python3 - "$out/bt4" $k > "$out/judge-$k-labels.json" <<'PY'
import json, sys
d, k = sys.argv[1], sys.argv[2]
rows = [r for r in json.load(open(f"{d}/{k}-dobench.json"))["rows"] if r.get("status") == "ok"]
labels = [r["label"] for r in sorted(rows, key=lambda r: r["median_us"])[:6]]
for step in ("tileprobe", "retune", "cutile"):
    try:
        res = json.load(open(f"{d}/{k}-{step}.json"))
        pick = res["problems"][0]["pick"]["label"] if "problems" in res else res.get("best")
    except (OSError, KeyError, TypeError, IndexError):
        continue
    if pick and pick not in labels:
        labels.append(pick)
print(json.dumps(labels))
PY
         python3 benchmarks/bench_tune_tools.py dobench --probe $probe --labels "$out/judge-$k-labels.json" --passes 6 \
           --json "$out/judge-$k.json" 2>&1 | tail -1
       done ;;
  rejudge) for k in matmul fmha; do     # session 11: the fixed judge (heat-up, passes back to back) over s11b's labels
         probe=examples/tilegym_matmul_tune.py; [ $k = fmha ] && probe=benchmarks/probes/tilegym_fmha.py
         python3 benchmarks/bench_tune_tools.py dobench --probe $probe --labels gpu_in/s11b/judge-$k-labels.json \
           --passes 6 --json "$out/rejudge-$k.json" 2>&1 | tail -1
       done ;;
  seeds) bash benchmarks/gpu_issue22_s5.sh "$out" seeds "${3:?SEEDS}" ;;
  *) bash benchmarks/gpu_issue22_s4.sh "$out" "$step" ;;
esac
