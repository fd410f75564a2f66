"""The plain GPU worker (``python -m tileprobe.run.worker``, what ``tune`` and ``run`` start without
``--keep-warm``) ends when tileprobe is SIGKILLed, and so does what its task started: within 5 s, a child in the
worker's session and one that left it (``setsid``) included. On CPU: the worker's init is ``init_plain`` and the
task below stands in for a GPU task that started processes (a profiler, ``nvidia-smi``)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from support import live_processes_with

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))


def task_start_children_and_wait(ready: str):
    """Start ``sleep`` in the worker's session and ``setsid sleep`` out of it, say so in file ``ready``, then
    wait (a task that runs while tileprobe is killed)."""
    subprocess.Popen(["sleep", "297"])
    subprocess.Popen(["setsid", "sleep", "297"])
    with open(ready, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
    return {"status": "ok"}


def test_a_sigkilled_tileprobe_leaves_no_worker_and_no_child_of_its_task(tmp_path):
    mark = f"TP_WORKER_MARK={tmp_path}"
    ready = tmp_path / "ready"
    driver = textwrap.dedent(f"""
        from tileprobe.run.watchdog import Watchdog
        wd = Watchdog(timeout_s=900, init="tileprobe.run.worker:init_plain", env={{"TP_WORKER_MARK": {str(tmp_path)!r}}})
        wd.submit({HERE + ':task_start_children_and_wait'!r}, {{"ready": {str(ready)!r}}})
        """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "tests")])}
    p = subprocess.Popen([sys.executable, "-c", driver], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    try:
        deadline = time.monotonic() + 240
        while not ready.exists():
            assert p.poll() is None and time.monotonic() < deadline, p.communicate(timeout=5)[0]
            time.sleep(0.2)
        time.sleep(0.5)                          # the file is written: both children were started before it
        worker = int(ready.read_text())
        started = live_processes_with(mark, "environ")
        assert worker in started and len(started) == 3, started     # the worker and its two sleeps
        p.kill()
        p.wait()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5 and live_processes_with(mark, "environ"):
            time.sleep(0.2)
        left = live_processes_with(mark, "environ")
        assert left == [], [(pid, open(f"/proc/{pid}/cmdline", "rb").read()) for pid in left]
    finally:
        if p.poll() is None:
            p.kill()
        for pid in live_processes_with(mark, "environ"):
            os.kill(pid, signal.SIGKILL)
