"""No orphans, no litter: ``tileprobe audit`` killed mid-sweep by SIGTERM, SIGHUP or SIGKILL.

A fake tileiras compiles for real, then — from the third compile on — leaves a ``$TMPDIR/tileir-*.o`` as the real
one does and waits in a child process (``sleep``, a ptxas stand-in), so two variants are stored and two are in
flight when the signal comes. Within 5 s of the kill no process the audit started may be alive (the pids are
collected from /proc before the kill); after SIGTERM and SIGHUP its temp folder is gone, tileiras' file with it;
after SIGKILL the next run removes it. The re-run loses nothing and compiles nothing twice."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from support import fake_tileiras

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "tests", "data", "probe_vadd.py")   # 2 tiles × occupancy 1, 2: four variants


def _alive(pids) -> list[str]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)
            if fields[1].split()[0] != "Z":          # a zombie is dead (a container's init may not reap it)
                out.append(f"{pid} {fields[0].split('(', 1)[1]}")
        except OSError:
            continue
    return out


def _stored(db) -> dict:
    try:
        with sqlite3.connect(db) as c:
            return dict(c.execute("SELECT key, created FROM compiles").fetchall())
    except sqlite3.Error:
        return {}


def _audit(tmp_path, fake):
    env = {**os.environ, "PYTHONPATH": ROOT, "TMPDIR": str(tmp_path / "tmp")}
    return subprocess.Popen([sys.executable, "-m", "tileprobe", "audit", PROBE, "--arch", "sm_90", "--tileiras", fake,
                             "--store", str(tmp_path / "s.sqlite"), "--no-sass", "-j", "2", "--format", "none"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=_default_sighup)


def _default_sighup() -> None:
    """The audit starts with SIGHUP's default action: under ``nohup`` (a test run started with it) the child would
    inherit SIGHUP ignored, which the CLI keeps ignored on purpose, and the SIGHUP case would wait 30 s
    and fail (session 8: two full runs under nohup, none without)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_killed_audit_leaves_no_process_and_no_temp_folder(tmp_path, sig):
    from tileprobe.procs import descendants
    (tmp_path / "tmp").mkdir()
    (tmp_path / "slow").touch()
    # a killed tileiras leaves its own $TMPDIR/tileir-*.o (the real one does): it must land in a folder tileprobe owns
    fake = fake_tileiras(tmp_path, f'if [ -e {tmp_path}/slow ] && [ "$n" -ge 2 ]; then '
                                   'mktemp "${TMPDIR:-/tmp}/tileir-XXXXXX.o" > /dev/null; sleep 297; fi', logged=True)
    log, db = tmp_path / "compiles.log", str(tmp_path / "s.sqlite")
    p = _audit(tmp_path, fake)
    deadline = time.time() + 240
    while time.time() < deadline and p.poll() is None and not (
            len(_stored(db)) >= 2 and log.exists() and len(log.read_text().splitlines()) >= 4):
        time.sleep(0.2)
    assert p.poll() is None, p.communicate()[0]
    time.sleep(0.5)                               # the last two compiles are now waiting in their `sleep`
    started = descendants(p.pid)
    assert len(started) >= 4, started              # two workers, their fake tileiras and its child (and more)
    stored = _stored(db)
    p.send_signal(sig)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == (-sig if sig == signal.SIGKILL else 128 + sig), out
    time.sleep(5)
    assert _alive(started) == [], out
    left = os.listdir(tmp_path / "tmp")
    if sig == signal.SIGKILL:
        assert [d for d in left if d.startswith("tileprobe-audit-")], left
        assert not [d for d in left if d.startswith("tileir-")], left     # inside the audit's folder, swept below
    else:
        assert left == [], left
        # the count it gives is what the store holds
        assert f"terminated by {sig.name}; {len(_stored(db))} compiles finished before it are kept in the results " \
               "store" in out
    if sig == signal.SIGHUP:
        return                                     # unwinds as SIGTERM does; its re-run is SIGTERM's
    # the re-run: the leftovers of a SIGKILL go, the stored variants stay as they were, only the others compile
    (tmp_path / "slow").unlink()
    before = len(log.read_text().splitlines())
    again = _audit(tmp_path, fake)
    out2, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out2
    after = _stored(db)
    assert len(after) == 4 and all(after[k] == created for k, created in stored.items()), (stored, after)
    assert len(log.read_text().splitlines()) - before == 4 - len(stored)
    assert os.listdir(tmp_path / "tmp") == []


def _marked(marker: str) -> list[str]:
    """Processes whose command line holds ``marker``."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        out.append(pid)
            except OSError:
                continue
    return _alive(out)


def test_a_process_the_probe_starts_at_import_neither_stalls_the_audit_nor_outlives_it(tmp_path):
    """A probe that starts `sleep` at import (in the loader and again in each compile worker): the loader's child
    held its output open, so the load waited out --probe-timeout, blamed args() and exited 3, and both sleeps
    outlived tileprobe (a tester, 2026-12-01)."""
    import shutil
    marker = f"9{os.getpid() % 1000:03d}.4159"     # this process's own: parallel test runs never share it
    shutil.copy(os.path.join(ROOT, "tests", "data", "simple_kernels.py"), tmp_path / "k.py")
    (tmp_path / "p.py").write_text(
        "import os, subprocess\nfrom tileprobe import Probe\n"
        f"subprocess.Popen(['sleep', '{marker}'])\n"
        "K = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'k.py') + ':vadd'\n"
        "probe = Probe(kernel=K, args=lambda c, a: (a.randn((1024,), 'float32'), a.randn((1024,), 'float32'), "
        "a.empty((1024,), 'float32'), 256), name='bg')\n")
    proc = subprocess.run([sys.executable, "-m", "tileprobe", "audit", str(tmp_path / "p.py"), "--arch", "sm_90",
                           "--no-store", "--no-sass", "--format", "none", "--probe-timeout", "120"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "1 variants, 0 failed to compile" in proc.stderr + proc.stdout
        assert _marked(marker) == []
    finally:
        subprocess.run(["pkill", "-f", f"^sleep {marker}$"])


# --- probe code that ignores SIGTERM, an inherited ignore of SIGHUP ----------------------------------------------------

def _hostile_probe(tmp_path, marker: str) -> str:
    """probe_vadd, but its import ignores SIGTERM and starts a `sleep` (in the loader and in each compile worker)."""
    src = open(PROBE).read().replace("import os\n", "import os, signal, subprocess\n"
                                     "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                     f"subprocess.Popen(['sleep', '{marker}'])\n", 1)
    src = src.replace("os.path.dirname(__file__)", repr(os.path.join(ROOT, "tests", "data")))
    path = tmp_path / "hostile.py"
    path.write_text(src)
    return str(path)


def test_a_probe_that_ignores_sigterm_does_not_outlive_a_sigkilled_audit(tmp_path):
    """The workers' parent-death signal is SIGKILL (it cannot be ignored) and the guard (tileprobe/procs.py)
    ends what probe code started in them: a tester found 7 processes left (2026-12-01)."""
    (tmp_path / "tmp").mkdir()
    marker, hang = f"7{os.getpid() % 1000:03d}.25", f"296.{os.getpid()}"    # this process's own (parallel runs)
    fake = fake_tileiras(tmp_path, f'if [ "$n" -ge 1 ]; then sleep {hang}; fi', logged=True)
    env = {**os.environ, "PYTHONPATH": ROOT, "TMPDIR": str(tmp_path / "tmp")}
    p = subprocess.Popen([sys.executable, "-m", "tileprobe", "audit", _hostile_probe(tmp_path, marker), "--arch",
                          "sm_90", "--tileiras", fake, "--no-store", "--no-sass", "-j", "2", "--format", "none",
                          "--probe-timeout", "120"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    log = tmp_path / "compiles.log"
    deadline = time.time() + 240
    try:
        while time.time() < deadline and p.poll() is None and not (log.exists()
                                                                   and len(log.read_text().splitlines()) >= 3):
            time.sleep(0.2)
        assert p.poll() is None, p.communicate()[0]
        time.sleep(0.5)
        from tileprobe.procs import descendants
        started = descendants(p.pid)
        assert _marked(marker), "the probe's sleep should be running in the workers"
        p.kill()
        p.communicate(timeout=30)
        time.sleep(5)
        assert _alive(started) == [] and _marked(marker) == []
    finally:
        if p.poll() is None:
            p.kill()
        subprocess.run(["pkill", "-f", f"^sleep {marker}$"])
        subprocess.run(["pkill", "-f", f"^sleep {hang}$"])


def test_an_inherited_ignore_of_sighup_stays_ignored(tmp_path):
    """`nohup tileprobe audit … &`: SIGHUP is ignored when tileprobe starts, and a SIGHUP must not end it."""
    (tmp_path / "tmp").mkdir()
    fake = fake_tileiras(tmp_path, 'if [ "$n" -eq 0 ]; then sleep 3; fi', logged=True)
    p = subprocess.Popen([sys.executable, "-m", "tileprobe", "audit", PROBE, "--arch", "sm_90", "--tileiras", fake,
                          "--no-store", "--no-sass", "-j", "1", "--format", "none"], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT, "TMPDIR": str(tmp_path / "tmp")},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    log = tmp_path / "compiles.log"
    deadline = time.time() + 240
    while time.time() < deadline and p.poll() is None and not log.exists():
        time.sleep(0.2)
    p.send_signal(signal.SIGHUP)
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0 and "4 variants, 0 failed to compile" in out, out


def test_every_question_to_a_tool_has_the_one_timeout_and_kills_its_group(tmp_path, monkeypatch):
    """`tileiras --version` / `--help` asked by the toolchain manager (Ray's release, `--tileiras PATH`) went
    through subprocess.run(timeout=60) whatever TILEPROBE_TOOL_TIMEOUT_S said, and left the tool's child."""
    from tileprobe.errors import ToolchainError
    from tileprobe.toolchain import tileiras_targets, tileiras_version
    marker = f"28{os.getpid() % 1000}.25"
    script = tmp_path / "tileiras"
    script.write_text(f"#!/bin/bash\nsleep {marker} &\nwait\n")
    script.chmod(0o755)
    monkeypatch.setenv("TILEPROBE_TOOL_TIMEOUT_S", "1")
    with pytest.raises(ToolchainError, match=r"--version did not answer within 1 s \(TILEPROBE_TOOL_TIMEOUT_S\)"):
        tileiras_version(str(script))
    assert tileiras_targets(str(script)) == []
    time.sleep(0.5)
    assert _marked(marker) == []


def test_a_hung_compilers_setsid_grandchild_ends_with_the_command_that_timed_it_out(tmp_path):
    """A fake tileiras that starts a ``setsid`` grandchild ignoring SIGTERM and SIGHUP, then hangs: ``tileprobe
    reduce`` said the timeout and exited 1, and the grandchild lived on (a hostile tester, 2026-12-05). Nothing of it
    is alive 5 s after the command ended."""
    marker = f"28{os.getpid() % 1000}.26"
    fake = tmp_path / "tileiras"
    fake.write_text(f"#!/bin/bash\nsetsid bash -c 'trap \"\" TERM HUP; sleep {marker}' &\nsleep 1000\n")
    fake.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": ROOT, "TILEPROBE_TOOL_TIMEOUT_S": "2", "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "tileprobe", "reduce", PROBE, "--arch", "sm_90", "--property",
                           "no spills", "--tileiras", str(fake), "-o", str(tmp_path / "out")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "did not answer within 2 s (TILEPROBE_TOOL_TIMEOUT_S)" in proc.stderr, \
        (proc.returncode, proc.stderr)
    end = time.monotonic() + 5.0
    while _marked(marker) and time.monotonic() < end:
        time.sleep(0.1)
    assert _marked(marker) == []


def test_a_temp_folder_whose_owner_is_an_unreaped_zombie_is_swept(tmp_path):
    """An orphan of a SIGKILLed command under a subreaper that never waits stays a zombie: its temp folder is still
    a leftover (it failed test_killed_audit_leaves_no_process_and_no_temp_folder[SIGKILL] in full runs)."""
    from tileprobe.procs import OWNER_MARKER, TEMP_PREFIX, start_ticks, sweep_leftovers
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while time.time() < deadline:     # wait until it has exited but is not reaped (state Z)
        with open(f"/proc/{child.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    try:
        folder = tmp_path / f"{TEMP_PREFIX}zygote-x"
        folder.mkdir()
        (folder / OWNER_MARKER).write_text(f"{child.pid} {start_ticks(child.pid)}\n")
        live = tmp_path / f"{TEMP_PREFIX}audit-y"
        live.mkdir()
        (live / OWNER_MARKER).write_text(f"{os.getpid()} {start_ticks(os.getpid())}\n")
        assert sweep_leftovers(str(tmp_path)) == [str(folder)]
        assert not folder.exists() and live.exists()
    finally:
        child.wait()


def test_a_zygote_killed_at_any_point_leaves_no_temp_folder(tmp_path, monkeypatch):
    """The zygote's temp folder belongs to the command that started it: SIGKILLed mid-way (inside an import, or
    inside its own removal of the folder, which could take the marker first and leave an unmarked folder nobody may
    sweep: a full CI run, 2026-12-02), close() still removes it."""
    import tempfile

    from tileprobe.probe import zygote
    from tileprobe.procs import OWNER_MARKER, start_ticks
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    z = zygote.Zygote()
    try:
        assert os.path.dirname(z.tmp) == str(tmp_path)
        with open(os.path.join(z.tmp, OWNER_MARKER)) as f:
            assert f.read().split() == [str(os.getpid()), str(start_ticks(os.getpid()))]
        assert z.wait_ready(), "the zygote did not start"
        os.kill(z.pid, signal.SIGKILL)
        z.proc.wait(timeout=10)
    finally:
        z.close()
    assert os.listdir(tmp_path) == []


def test_an_interrupted_removal_leaves_a_folder_that_still_names_its_owner(tmp_path, monkeypatch):
    """remove_owned_tempdir takes the owner marker last, so a removal cut short leaves a folder the next sweep may
    judge (and remove once its owner is gone)."""
    import tempfile

    from tileprobe import procs
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = procs.make_owned_tempdir("audit")
    for name in ("a", "b", "c"):
        (tmp_path / os.path.basename(path) / name).write_text("x")
    real_unlink, calls = os.unlink, []

    def unlink(p, *a, **k):
        calls.append(os.path.basename(p))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_unlink(p, *a, **k)
    monkeypatch.setattr(os, "unlink", unlink)
    with pytest.raises(KeyboardInterrupt):
        procs.remove_owned_tempdir(path)
    monkeypatch.setattr(os, "unlink", real_unlink)
    assert procs.OWNER_MARKER not in calls and os.path.isfile(os.path.join(path, procs.OWNER_MARKER))
    assert procs.sweep_leftovers(str(tmp_path)) == []          # its owner (this process) lives
    procs.remove_owned_tempdir(path)
    assert os.listdir(tmp_path) == []


def test_a_setsid_grandchild_of_probe_code_does_not_outlive_a_sigkilled_audit(tmp_path):
    """Probe code that starts a process in a session of its own (``start_new_session=True``: not in the worker's
    group, reparented to init when its parent dies) is still ended: it carries the guard's mark in its environment
    (procs.GUARD_ENV), and the guard ends every marked process (2026-12-02)."""
    (tmp_path / "tmp").mkdir()
    marker, hang = f"8{os.getpid() % 1000:03d}.75", f"295.{os.getpid()}"    # this process's own (parallel runs)
    src = open(PROBE).read().replace("from tileprobe import Probe\n", "from tileprobe import Probe\nimport subprocess\n"
                                     f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n", 1)
    src = src.replace("os.path.dirname(__file__)", repr(os.path.join(ROOT, "tests", "data")))
    (tmp_path / "p.py").write_text(src)
    fake = fake_tileiras(tmp_path, f'if [ "$n" -ge 1 ]; then sleep {hang}; fi', logged=True)
    env = {**os.environ, "PYTHONPATH": ROOT, "TMPDIR": str(tmp_path / "tmp")}
    p = subprocess.Popen([sys.executable, "-m", "tileprobe", "audit", str(tmp_path / "p.py"), "--arch", "sm_90",
                          "--tileiras", fake, "--no-store", "--no-sass", "-j", "2", "--format", "none"], cwd=ROOT,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = tmp_path / "compiles.log"
    try:
        deadline = time.time() + 240
        while time.time() < deadline and p.poll() is None and not (log.exists()
                                                                   and len(log.read_text().splitlines()) >= 2):
            time.sleep(0.2)
        assert p.poll() is None, p.communicate()[0]
        time.sleep(0.5)
        assert _marked(marker), "the probe's sleep should be running"
        p.kill()
        p.communicate(timeout=30)
        for _ in range(50):
            if not _marked(marker) and not _marked(f"sleep {hang}"):
                break
            time.sleep(0.2)
        assert _marked(marker) == [] and _marked(f"sleep {hang}") == []
    finally:
        if p.poll() is None:
            p.kill()
        subprocess.run(["pkill", "-f", f"^sleep {marker}$"])
        subprocess.run(["pkill", "-f", f"^sleep {hang}$"])


def test_a_probe_child_that_leaves_its_session_and_clears_its_environment_dies_with_a_sigkilled_audit(tmp_path):
    """A hostile tester (2026-12-04): a probe that ignores SIGTERM and replaces os.kill/os.killpg, whose import starts
    a child in a session of its own with an empty environment (neither the group nor the guard's mark finds it),
    left that child alive 5 s after the audit was SIGKILLed. The guard notes every descendant while it runs."""
    (tmp_path / "tmp").mkdir()
    marker = f"27{os.getpid() % 1000}.42"
    src = open(PROBE).read().replace("import os\n", "import os, signal, subprocess\n"
                                     "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                     f"subprocess.Popen(['/bin/sleep', '{marker}'], env={{}}, start_new_session=True)\n"
                                     "os.kill = os.killpg = lambda *a: None\n", 1)
    src = src.replace("os.path.dirname(__file__)", repr(os.path.join(ROOT, "tests", "data")))
    (tmp_path / "hostile.py").write_text(src)
    fake = fake_tileiras(tmp_path, 'if [ "$n" -ge 1 ]; then sleep 295; fi', logged=True)
    env = {**os.environ, "PYTHONPATH": ROOT, "TMPDIR": str(tmp_path / "tmp")}
    p = subprocess.Popen([sys.executable, "-m", "tileprobe", "audit", str(tmp_path / "hostile.py"), "--arch",
                          "sm_90", "--tileiras", fake, "--no-store", "--no-sass", "-j", "2", "--format", "none",
                          "--probe-timeout", "120"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    log = tmp_path / "compiles.log"
    deadline = time.time() + 240
    try:
        while time.time() < deadline and p.poll() is None and not (log.exists()
                                                                   and len(log.read_text().splitlines()) >= 3):
            time.sleep(0.2)
        assert p.poll() is None, p.communicate()[0]
        time.sleep(1.5)          # the guard's notes are 0.5 s apart
        assert _marked(marker), "the probe's sleep should be running"
        p.kill()
        p.communicate(timeout=30)
        time.sleep(5)
        assert _marked(marker) == []
    finally:
        if p.poll() is None:
            p.kill()
        subprocess.run(["pkill", "-f", f"sleep {marker}"])
        subprocess.run(["pkill", "-f", "sleep 295"])


def test_a_probe_child_that_leaves_its_session_ends_with_a_finished_audit(tmp_path):
    """The same child (own session, empty environment) from a probe's import in the loader and the workers: the
    loader ends before the audit does, so the child was an orphan of init and outlived the audit (exit 0)."""
    (tmp_path / "tmp").mkdir()
    marker = f"26{os.getpid() % 1000}.42"
    src = open(PROBE).read().replace("import os\n", "import os, subprocess\n"
                                     f"subprocess.Popen(['/bin/sleep', '{marker}'], env={{}}, start_new_session=True,"
                                     " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n", 1)
    src = src.replace("os.path.dirname(__file__)", repr(os.path.join(ROOT, "tests", "data")))
    (tmp_path / "hostile.py").write_text(src)
    try:
        proc = subprocess.run([sys.executable, "-m", "tileprobe", "audit", str(tmp_path / "hostile.py"), "--arch",
                               "sm_90", "--no-store", "--no-sass", "--format", "none", "-j", "2"], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": ROOT, "TMPDIR": str(tmp_path / "tmp")},
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        time.sleep(1)
        assert _marked(marker) == []
    finally:
        subprocess.run(["pkill", "-f", f"sleep {marker}"])
