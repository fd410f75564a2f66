"""Files the tileprobe process reads about a probe or a recording are opened without blocking and read only when
they are regular files (a FIFO's ``open`` waits for a writer for ever; ``/dev/zero`` never ends): the probe file
read to guess its imports (tileprobe/probe/probe_imports.py), a module file of a kept plan (probe/plancache.py), a
launch log swapped for a FIFO after its stat (record/log.py). The probe's own import of such a file happens in its
loader child, under its deadline, and costs only that probe.

Each read runs in a child Python with a time limit, so that a regression fails the test instead of hanging it."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "tests" / "data" / "probe_vadd.py"


def _run(code: str, tmp_path: Path, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              env=env, cwd=str(tmp_path), timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"hung for {timeout_s:.0f} s: {e.stderr!r}") from None


def test_the_import_guess_reads_no_fifo_or_device(tmp_path):
    fifo = tmp_path / "probe_fifo.py"
    os.mkfifo(fifo)
    out = _run(f"""
        from tileprobe.probe.zygote import installed_imports, needs_torch
        for path in ({str(fifo)!r}, "/dev/zero", {str(tmp_path)!r}):
            print(needs_torch(path), installed_imports(path))
        """, tmp_path, 20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["False ()"] * 3, out.stdout


def test_a_fifo_probe_file_costs_only_that_probe_with_a_zygote(tmp_path):
    """The audit's path with a zygote (start_loader asks needs_torch first, in the tileprobe process: it hung
    there): the FIFO is that probe's error, said by its loader child; the good probe beside it is planned."""
    fifo = tmp_path / "p_fifo.py"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    out = _run(f"""
        from tileprobe.probe.contained import load_probe_files
        from tileprobe.probe.zygote import warm_starts
        with warm_starts():
            reports = load_probe_files([{str(fifo)!r}, {str(PROBE)!r}], ["sm_90"], tmp_root={str(tmp_path)!r},
                                       jobs=2, timeout_s=5.0)
        print("ERR", reports[0].errors)
        print("GOOD", [p.label for p in reports[1].plans], reports[1].errors)
        """, tmp_path, 240)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    err_line = next(line for line in out.stdout.splitlines() if line.startswith("ERR"))
    assert "p_fifo.py is not a regular file (a FIFO, a device?): give a probe file" in err_line, out.stdout
    assert "GOOD ['vadd'] []" in out.stdout, out.stdout
    assert took < 200, took


def test_a_kept_plans_module_swapped_for_a_fifo_is_a_miss_not_a_hang(tmp_path):
    fifo = tmp_path / "helper.py"
    os.mkfifo(fifo)
    st = os.stat(fifo)
    out = _run(f"""
        from tileprobe.probe import plancache
        print(plancache._unchanged([[{str(fifo)!r}, {st.st_size}, {st.st_mtime_ns}, "0" * 64]]))
        print(plancache._sha256({str(fifo)!r}), plancache._sha256("/dev/zero"))
        """, tmp_path, 20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["False", "None None"], out.stdout


def test_a_launch_log_swapped_for_a_fifo_after_its_stat_is_skipped_and_named(tmp_path):
    fifo = tmp_path / "p1.jsonl"
    os.mkfifo(fifo)
    out = _run(f"""
        from tileprobe.record.log import Recording, _read_file
        rec = Recording()
        print(_read_file({str(fifo)!r}, rec), rec.unreadable)
        """, tmp_path, 20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("[] [") and "p1.jsonl (not a regular file" in out.stdout, out.stdout
