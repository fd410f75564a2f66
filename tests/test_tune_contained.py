"""``tileprobe tune`` loads probe files, runs their constraints, ``grid()`` and ``args()`` in
contained children, as ``tileprobe audit`` does (tileprobe/probe/contained.py: ``run_probe_tasks``): an
``os._exit(5)`` or an endless loop at import, an endless loop in ``grid()``, is that probe's error with a message,
the tune exits 3 (the other probes are still tuned), and no process is left."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from support import live_processes_with

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "tests", "data", "kernels.py")


def _probe(folder, name: str, head: str = "", grid: str = "(N // case['TILE'],)") -> str:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(f"""
        import os, sys
        from tileprobe import Probe
        N = 1 << 16
        {head}
        def grid(case, hints, num_sms):
            return {grid}
        probe = Probe(kernel={KERNELS + ':vec_add'!r}, name={name!r}, grid=grid, tunable=("TILE",),
                      args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                                                 arrays.empty((N,), "float32"), case["TILE"]),
                      cases={{"TILE": [1024]}})
        """))
    return str(path)


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (the tune's, inherited by every process it starts)."""
    return live_processes_with(marker, "environ")


def test_the_leftover_check_sees_a_live_process():
    marker = f"tp25-{os.getpid()}-{time.monotonic_ns()}"
    p = subprocess.Popen(["sleep", "30"], env=dict(os.environ, TILEPROBE_TEST_MARK=marker))
    try:
        assert _processes_with(marker) == [p.pid]
    finally:
        p.kill()
        p.wait()


def _tune(tmp_path, *paths, marker: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT, XDG_CACHE_HOME=str(tmp_path / "cache"), TILEPROBE_TEST_MARK=marker)
    return subprocess.run([sys.executable, "-m", "tileprobe", "tune", *paths, "--dry-run", "--arch", "sm_90",
                           "--num-sms", "132", "--no-store", "--probe-timeout", "5", "--format", "none"],
                          capture_output=True, text=True, timeout=500, env=env, cwd=ROOT)


@pytest.mark.parametrize("head, says", [
    ("os._exit(5)", "importing the probe file called os._exit(5)"),
    ("while True: pass", "importing the probe file did not return within 5 s and was stopped"),
])
def test_probe_code_at_import_is_contained_in_tune(tmp_path, head, says):
    marker = f"tp25-{os.getpid()}-{time.monotonic_ns()}"
    bad = _probe(tmp_path, "bad", head=head)
    proc = _tune(tmp_path, bad, marker=marker)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "nothing to tune: no probe could be loaded" in out and says in out and bad in out, out
    time.sleep(1)
    assert _processes_with(marker) == []


def test_an_endless_grid_is_that_probes_error_and_the_other_probe_is_tuned(tmp_path):
    marker = f"tp25-{os.getpid()}-{time.monotonic_ns()}"
    loops = _probe(tmp_path, "loops", grid="[0 for _ in iter(int, 1)]")     # never returns
    good = _probe(tmp_path, "good")
    proc = _tune(tmp_path, loops, good, marker=marker)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert f"probe error: {loops}: grid() and args() of TILE=1024" in out
    assert "did not return within 5 s and was stopped" in out
    assert "probe error" not in "".join(ln for ln in out.splitlines() if good in ln), out
    time.sleep(1)
    assert _processes_with(marker) == []


def test_the_tune_json_has_the_other_probes_candidate(tmp_path):
    """The good probe beside an os._exit at import is still planned, compiled and deduplicated."""
    import json
    bad = _probe(tmp_path, "bad", head="os._exit(5)")
    good = _probe(tmp_path, "good")
    env = dict(os.environ, PYTHONPATH=ROOT, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "tileprobe", "tune", bad, good, "--dry-run", "--arch", "sm_90",
                           "--num-sms", "132", "--no-store", "--probe-timeout", "5", "--format", "none", "--json",
                           str(tmp_path / "t.json")], capture_output=True, text=True, timeout=500, env=env, cwd=ROOT)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    (p,) = doc["problems"]
    rows = [r for r in p["candidates"] if r.get("config")]
    assert p["kernel"] == "good" and [r["grid"] for r in rows] == [[64, 1, 1]]
