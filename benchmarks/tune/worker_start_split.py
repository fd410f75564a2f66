"""Where the GPU worker's start goes, on a GPU host: the interpreter, ``import torch``, the CUDA context, the rest of
``init_cuda`` (cuda-core, the stream, the L2 flush buffer, nvidia-smi's provenance), and a whole
:class:`~tileprobe.run.watchdog.Watchdog` start; each in a fresh process, timed around it, ``--repeats`` times.

    python benchmarks/tune/worker_start_split.py [--repeats 2] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

STAGES = {
    "python": "pass",
    "import torch": "import torch",
    "torch + CUDA context": "import torch; torch.cuda.init(); torch.zeros(1, device='cuda'); torch.cuda.synchronize()",
    "init_cuda (the worker's init)": "from tileprobe.run.worker import init_cuda; init_cuda()",
    "Watchdog().start() (spawn, init, hello)": "import time; t=time.perf_counter(); from tileprobe.run.watchdog "
    "import Watchdog; w=Watchdog(); w.start(); print('in-process', round(time.perf_counter()-t, 3)); w.close()",
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    out: dict[str, list[float]] = {}
    for _ in range(a.repeats):
        for name, code in STAGES.items():
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                               env=dict(os.environ))
            wall = time.perf_counter() - t0
            out.setdefault(name, []).append(round(wall, 3))
            if p.returncode:
                print(f"{name}: exit {p.returncode}: {p.stderr[-500:]}")
    for name, walls in out.items():
        print(f"{name:45} " + "  ".join(f"{w:6.2f} s" for w in walls))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
