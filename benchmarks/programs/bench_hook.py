"""What the start-up hook of ``tileprobe use`` costs a Python process (tileprobe/record/capture/).

Cases, each a fresh ``python`` process timed by wall clock (median and minimum of ``--runs`` runs, interleaved so
that load from other processes falls on both alike):

* ``hello``: ``python -c "print('hello')"`` without the hook;
* ``hello + hook``: the same with the hook first on PYTHONPATH and ``TILEPROBE_USE_TABLE`` naming a table of
  ``--mb`` MB (default 150): a process that never searches — the goal is within 10 % or 20 ms of ``hello``;
* ``import cuda.tile`` with and without the hook: under ``use`` the capture is not loaded (it waits for the tuner);
* ``import cuda.tile.tune`` with and without the hook: a process that imports the tuner but does not search (the
  capture is loaded and wraps the tuner; the table is not read).

Then the table read a *searching* process pays once without the index (``Answerer.load``: read, parse, index), in
this process, with the RSS it adds; and with the index ``tune --export`` writes beside the table (``TABLE.index``:
one bucket of rows read, ``capture.index_rows``), in fresh processes, for a key in the table and one not in it.

No GPU needed. The first lines name the machine (host, CPU model and count, load average), the date and the command.

    python benchmarks/programs/bench_hook.py [--runs 15] [--mb 150]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine() -> str:
    """One line naming this machine: host, CPU model and logical CPUs, load average, Python."""
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"host {platform.node()}: {_cpu_model()} x {os.cpu_count()} logical CPUs, load {load}; "
            f"Python {platform.python_version()}")


def make_table(path: str, mb: int) -> int:
    """A legal tune table of about ``mb`` MB (rows of other kernels with search blocks); its size in bytes."""
    row = {"problem": {"search": "0" * 16}, "case": {"config": "C0"}, "hints": {"occupancy": 2}, "verdict": "winner",
           "median_us": 10.0, "ci_us": [9.9, 10.1], "samples": 100, "arch": "sm_90", "gpu": "NVIDIA H200",
           "num_sms": 132, "tileiras": "Cuda compilation tools, release 13.4, V13.4.92", "cuda_tile": "1.7.0",
           "search": {"key": "", "config_index": 0, "config": {"TILE": 256, "pad": "x" * 200}, "hints": {}}}
    n = mb * 1_000_000 // len(json.dumps(row))
    rows = []
    for i in range(n):
        r = dict(row, search=dict(row["search"], key=f"{i:016x}"), problem={"search": f"{i:016x}"})
        rows.append(r)
    doc = {"schema_version": 1, "kind": "tileprobe.tune", "kernels": {"other": rows}}
    with open(path, "w") as f:
        json.dump(doc, f)
    from tileprobe.tune.export import _write_index
    t0 = time.perf_counter()
    _write_index(path, doc)          # as `tune --export` writes it beside the table
    print(f"index written beside the table in {time.perf_counter() - t0:.2f} s (by the process that wrote it)")
    return os.path.getsize(path)


def run_once(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall ms, peak RSS MB) of one process (the RSS counts from the fork: its parent's size at the time)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode != 0 or err.strip():
        raise SystemExit(f"{argv}: exit {proc.returncode}: {err[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def _read_whole(cap, table: str, size: int) -> int:
    """The first search's read of the whole table (no index), in this process; prints it, returns the row count."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    answerer = cap.Answerer(table)
    t0 = time.perf_counter()
    answerer.load()
    took = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = sum(len(v) for v in answerer.rows.values())
    print(f"searching process without the index, first search: table read, parsed and indexed in {took:.2f} s "
          f"({rows:,} rows, {size / 1e6 / took:,.0f} MB/s), peak RSS +{rss1 - rss0:,.0f} MB; said once on stderr "
          f"above {cap.TABLE_WARN_BYTES / 1e6:,.0f} MB")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--mb", type=int, default=150)
    ap.add_argument("--make-table", metavar="PATH", help=argparse.SUPPRESS)
    ap.add_argument("--index-only", action="store_true", help="only the searching process's read with the index")
    a = ap.parse_args()
    if a.make_table:
        make_table(a.make_table, a.mb)
        return
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC · {machine()}")
    print(f"# command: python benchmarks/programs/bench_hook.py --runs {a.runs} --mb {a.mb}"
          + (" --index-only" if a.index_only else ""))
    from tileprobe.record import hook
    with tempfile.TemporaryDirectory(prefix="bench-hook-") as tmp:
        table = os.path.join(tmp, "table.json")
        # made in a child: a forked child's peak RSS starts from its parent's, which must stay small
        subprocess.run([sys.executable, os.path.abspath(__file__), "--make-table", table, "--mb", str(a.mb)],
                       check=True)
        size = os.path.getsize(table)
        hook_dir = hook.write_hook(os.path.join(tmp, "h"))
        base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TILEPROBE_USE_TABLE")}
        on = dict(base, PYTHONPATH=hook_dir, TILEPROBE_USE_TABLE=table)
        cases = [("hello", [sys.executable, "-c", "print('hello')"]),
                 ("import cuda.tile", [sys.executable, "-c", "import cuda.tile"]),
                 ("import cuda.tile.tune", [sys.executable, "-c", "import cuda.tile.tune"])]
        print(f"table: {size / 1e6:,.1f} MB; {a.runs} runs per case, interleaved")
        cached = "off (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
        print(f"bytecode caching: {cached}; the capture (1,400 lines) is compiled at each load when off")
        print(f"{'case':44} {'median ms':>10} {'min ms':>8}")
        for name, argv in cases if not a.index_only else ():
            runs = {"off": [], "on": []}
            for _ in range(a.runs):
                runs["off"].append(run_once(argv, base))
                runs["on"].append(run_once(argv, on))
            for which, label in (("off", name), ("on", f"{name} + hook, {size / 1e6:,.0f} MB table")):
                walls = [w for w, _ in runs[which]]
                print(f"{label:44} {statistics.median(walls):10.1f} {min(walls):8.1f}")
            d = statistics.median(w for w, _ in runs["on"]) - statistics.median(w for w, _ in runs["off"])
            print(f"{'  hook cost (median difference)':44} {d:+10.1f} ms "
                  f"({100 * d / statistics.median(w for w, _ in runs['off']):+.1f} %)")
        cap = hook.load_capture()
        if a.index_only:
            with open(table) as f:
                rows = sum(len(v) for v in json.load(f)["kernels"].values())
            print(f"({rows:,} rows; --index-only: the processes above and the read without the index left out)")
        else:
            rows = _read_whole(cap, table, size)
        probe = [sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]); from tileprobe.record "
                 "import hook; cap = hook.load_capture(); t0 = time.perf_counter(); "
                 "found = cap.index_rows(sys.argv[2], sys.argv[3]); "
                 "print(len(found), (time.perf_counter() - t0) * 1000)", ROOT, table]
        for what, key in (("a key in the table", f"{rows // 2:016x}"), ("a key not in it", "f" * 16)):
            got = [subprocess.run([*probe, key], capture_output=True, text=True, check=True).stdout.split()
                   for _ in range(a.runs)]
            ms = [float(ms) for _, ms in got]
            print(f"searching process with the index ({what}): {got[0][0]} row(s) from one bucket in median "
                  f"{statistics.median(ms):.1f} ms (min {min(ms):.1f}, {a.runs} processes)")


if __name__ == "__main__":
    main()
