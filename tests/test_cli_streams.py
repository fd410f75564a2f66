"""A stderr that cannot be written does not stop the work (a sixth hostile test, 2026-12-02): progress and summary
lines are information; the results on stdout and the exit code are the same. An output path that cannot be opened
is refused before any work, with its reason."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "tests", "data", "probe_vadd.py")


def _audit(tmp_path, **popen):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "tileprobe.cli", "audit", PROBE, "--arch", "sm_90", "--no-store", "--summary"]
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, timeout=600, **popen)


def _summary_lines(out: bytes) -> list[str]:
    return [line for line in out.decode().splitlines() if line.strip()]


def test_a_full_or_closed_stderr_leaves_the_results_on_stdout(tmp_path):
    good = _audit(tmp_path, stderr=subprocess.DEVNULL)
    assert good.returncode == 0 and len(_summary_lines(good.stdout)) == 1
    with open("/dev/full", "w") as full:
        res = _audit(tmp_path, stderr=full)
    assert res.returncode == 0 and _summary_lines(res.stdout) == _summary_lines(good.stdout)
    closed = _audit(tmp_path, stderr=None, preexec_fn=lambda: os.close(2))
    assert closed.returncode == 0 and _summary_lines(closed.stdout) == _summary_lines(good.stdout)


def test_the_quiet_stream_drops_writes_after_a_failure():
    from tileprobe.cli._common import QuietStream

    class Failing:
        calls = 0

        def write(self, text):
            Failing.calls += 1
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

        def isatty(self):
            return True
    q = QuietStream(Failing())
    assert q.write("a") == 1 and q.write("bc") == 2 and Failing.calls == 1
    q.flush()
    assert q.broken and q.isatty() is False
    assert QuietStream(None).write("x") == 1 and QuietStream(None).isatty() is False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_an_output_that_cannot_be_opened_is_refused_before_any_work(tmp_path, capsys):
    from tileprobe.cli import main
    code = main(["history", "--store", str(tmp_path / "s.sqlite"), "--csv", "/proc/tileprobe-test.csv"])
    err = capsys.readouterr().err      # /proc exists and os.access may pass (root); opening a file there fails
    assert code == 1 and "--csv /proc/tileprobe-test.csv: " in err and "give another path" in err
    assert "cannot be written (" in err or "not writable" in err
    target = tmp_path / "kept.csv"
    target.write_text("earlier\n")
    from tileprobe.cli._common import check_output_path
    check_output_path(str(target), "--csv")          # writable: nothing truncated, nothing made
    assert target.read_text() == "earlier\n"
    check_output_path(str(tmp_path / "new.csv"), "--csv")
    assert not (tmp_path / "new.csv").exists()
