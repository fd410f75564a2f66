"""A torchrun-style launcher for tests (tests/test_use_ranks.py): start N ranks of one command on this machine.

    python ranks_launcher.py N COMMAND ...

Each rank gets ``RANK`` = ``LOCAL_RANK`` = i and ``WORLD_SIZE`` = ``LOCAL_WORLD_SIZE`` = N, and the words of
``$RANK_ARGS_<i>`` appended to its command when set (so ranks can make different searches); every rank starts at
once; its stdout lines come back prefixed ``[rank i]``. Exit: the largest exit code of the ranks.
"""
import os
import subprocess
import sys

n, command = int(sys.argv[1]), sys.argv[2:]
procs = []
for i in range(n):
    env = dict(os.environ, RANK=str(i), LOCAL_RANK=str(i), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n))
    extra = os.environ.get(f"RANK_ARGS_{i}")
    procs.append(subprocess.Popen(command + (extra.split() if extra else []), env=env, stdout=subprocess.PIPE,
                                  text=True))
codes = []
for i, p in enumerate(procs):
    out, _ = p.communicate()
    for line in out.splitlines():
        print(f"[rank {i}] {line}")
    codes.append(p.returncode)
sys.exit(max(codes))
