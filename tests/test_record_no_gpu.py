"""``record -- CMD`` and ``tune -- CMD`` on a program that dies for want of a GPU (a CPU-only torch's "Torch not
compiled with CUDA enabled", raised after cuda.tile is imported, before any launch or search): they quote its
error, say that it is a missing GPU, and count the process that ran (it was "0 launches in 0 process(es)" and
"is exhaustive_search called?"). The program's own traceback and exit code are kept.

No GPU: the program imports cuda.tile with the test double of its launch on PYTHONPATH (tests/test_record.py)."""
from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FAKE = os.path.join(HERE, "data", "record", "fake_launch")

PROGRAM = """\
import cuda.tile as ct
import cuda.tile.tune


def to_device():
    raise AssertionError("Torch not compiled with CUDA enabled")


to_device()
"""


def _run(tmp_path, *args):
    prog = tmp_path / "serve.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, ROOT]))
    return subprocess.run([sys.executable, "-m", "tileprobe.cli", *args, "--", sys.executable, str(prog)],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)


WANT = ('the program failed for want of a GPU (1 of the 1 recorded process(es) ended on an error): '
        '"AssertionError: Torch not compiled with CUDA enabled"')


def test_record_says_the_program_failed_for_want_of_a_gpu(tmp_path):
    proc = _run(tmp_path, "record", "-o", str(tmp_path / "rec"))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" in proc.stderr and "AssertionError: Torch not compiled" in proc.stderr   # the program's own
    assert "recorded 0 launches in 1 process(es); the command exited with 1" in proc.stderr
    assert WANT in proc.stderr


def test_tune_says_the_program_failed_for_want_of_a_gpu_not_that_no_search_is_called(tmp_path):
    proc = _run(tmp_path, "tune", "--export", str(tmp_path / "t.json"))
    assert proc.returncode == 1, proc.stderr
    assert f"no cuda.tile.tune search was seen: nothing to tune; {WANT}" in proc.stderr
    assert "is exhaustive_search called" not in proc.stderr
