"""``tileprobe use / record / tune -- COMMAND`` own the program they start (tileprobe/record/program.py): signals
are passed on, a program that ignores them is killed with its whole tree after the stated grace period (and that is
said), a SIGKILL of tileprobe ends the program and its children within 5 s, daemons a program leaves are named and
ended, a SIGINT the shell passed ignored is said, and the hook's temp folder is removed (or swept after a SIGKILL).

Each program here ignores SIGTERM and starts a child in a session of its own that ignores SIGTERM too: what the
old code left running."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = {"kind": "tileprobe.tune", "schema_version": 1, "kernels": {}}

STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "time.sleep(300)"], start_new_session=True)
open(sys.argv[1] + ".tmp", "w").write(f"{os.getpid()} {child.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)
"""

DAEMON = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import os, time; time.sleep(300)"], start_new_session=True)
open(sys.argv[1] + ".tmp", "w").write(str(child.pid))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
"""

#: A daemon as a shell script makes one: ``env -i`` (no guard mark), ``setsid`` (out of the program's group and
#: session), ``&`` then the shell exits (a double fork: the sleeper's parent is gone at once). The program then runs on.
DOUBLE_FORK = """
import os, subprocess, sys, time
daemon = sys.argv[1] + ".daemon"
subprocess.run(["env", "-i", "setsid", "sh", "-c", f"sleep 600 & echo $! > {daemon}"], check=True)
while not open(daemon).read().strip():
    time.sleep(0.05)
open(sys.argv[1] + ".tmp", "w").write(f"{os.getpid()} {open(daemon).read().strip()}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(300)
"""


def _env(tmp_path):
    return dict(os.environ, PYTHONPATH=str(ROOT), TILEPROBE_STORE=str(tmp_path / "store.db"), TMPDIR=str(tmp_path),
                XDG_CACHE_HOME=str(tmp_path / "xdg"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _wait_for(pred, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def _command(kind: str, tmp_path: Path, program: str, flag: Path) -> list[str]:
    script = tmp_path / "prog.py"
    script.write_text(program)
    run = [sys.executable, str(script), str(flag)]
    if kind == "use":
        table = tmp_path / "t.json"
        table.write_text(json.dumps(TABLE))
        return ["use", str(table), "--", *run]
    if kind == "record":
        return ["record", "-o", str(tmp_path / "rec"), "--", *run]
    return ["tune", "--export", str(tmp_path / "t2.json"), "--", *run]


def _start(kind: str, tmp_path: Path, program: str = STUBBORN, preexec=None):
    flag = tmp_path / "pids"
    flag.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "tileprobe.cli", *_command(kind, tmp_path, program, flag)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env=_env(tmp_path), cwd=str(tmp_path), preexec_fn=preexec)
    if not _wait_for(flag.exists, 120):
        proc.kill()
        raise AssertionError(proc.communicate(timeout=30))
    return proc, [int(x) for x in flag.read_text().split()]


def test_sigkill_of_tileprobe_ends_the_program_and_its_children_within_5_s(tmp_path):
    for kind in ("use", "record", "tune"):
        proc, pids = _start(kind, tmp_path)
        assert all(_alive(p) for p in pids)
        proc.kill()
        proc.communicate(timeout=30)
        gone = _wait_for(lambda: not any(_alive(p) for p in pids), 5.0)
        for p in pids:      # clean up what a failing run left
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        assert gone, f"{kind}: {pids} alive 5 s after tileprobe was SIGKILLed"


def test_sigkill_of_tileprobe_ends_a_double_forked_daemon_that_left_the_session_and_cleared_its_environment(
        tmp_path):
    for kind in ("use", "record", "tune"):
        proc, pids = _start(kind, tmp_path, DOUBLE_FORK)
        daemon = pids[1]
        assert _alive(daemon) and "sleep" in Path(f"/proc/{daemon}/cmdline").read_text()
        assert os.getsid(daemon) != os.getsid(pids[0])      # it left the program's session
        time.sleep(1.5)                                      # the guard's walk (each 0.5 s) has seen it
        proc.kill()
        proc.wait(timeout=30)          # (not communicate: a surviving daemon holds tileprobe's output pipes)
        gone = _wait_for(lambda: not any(_alive(p) for p in pids), 5.0)
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        proc.communicate(timeout=30)
        assert gone, f"{kind}: {[p for p in pids if _alive(p)]} of {pids} alive 5 s after tileprobe was SIGKILLed"


def test_sigterm_is_passed_on_and_a_program_that_ignores_it_is_killed_after_the_grace_period(tmp_path):
    # both commands at once, each in a folder of its own: their 10 s grace periods pass side by side
    started = []
    for kind, sig in (("record", signal.SIGTERM), ("tune", signal.SIGHUP)):
        (tmp_path / kind).mkdir()
        proc, pids = _start(kind, tmp_path / kind)
        started.append((kind, sig, proc, pids))
    signalled = []
    for kind, sig, proc, pids in started:
        signalled.append((kind, sig, proc, pids, time.monotonic()))
        proc.send_signal(sig)
    for kind, sig, proc, pids, t0 in signalled:
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
        assert f"{sig.name} passed on to the command" in err and "killed if it has not ended in 10 s" in err, err
        assert "did not end after" in err and "killed it and its process tree" in err, err
        assert 9.0 < took < 40.0, took
        assert proc.returncode != 0 and "Traceback" not in err, (proc.returncode, err)
        assert _wait_for(lambda: not any(_alive(p) for p in pids), 5.0), pids
        if kind == "tune":
            assert "nothing tuned" in err and "no cuda.tile.tune search was seen" not in err, err


def test_a_second_signal_kills_the_tree_at_once(tmp_path):
    proc, pids = _start("use", tmp_path)
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 5.0 and proc.returncode == 128 + signal.SIGKILL, (proc.returncode, err)
    assert _wait_for(lambda: not any(_alive(p) for p in pids), 5.0), pids
    # said once; the tree's own processes, still dying when the program was reaped, are not "left running"
    assert err.count("killed it and its process tree (2 process(es), SIGKILL)") == 1, err
    assert "the command left" not in err, err


def test_a_daemon_the_program_leaves_is_named_and_ended(tmp_path):
    double_fork_then_exit = DOUBLE_FORK.replace('f"{os.getpid()} {open(daemon).read().strip()}"',
                                                "open(daemon).read().strip()").replace("time.sleep(300)", "")
    for kind, program, command in (("use", DAEMON, "time.sleep(300)"), ("record", DAEMON, "time.sleep(300)"),
                                   ("use", double_fork_then_exit, "sleep 600")):
        flag = tmp_path / "pids"
        flag.unlink(missing_ok=True)
        out = subprocess.run([sys.executable, "-m", "tileprobe.cli", *_command(kind, tmp_path, program, flag)],
                             capture_output=True, text=True, env=_env(tmp_path), cwd=str(tmp_path), timeout=120,
                             stdin=subprocess.DEVNULL)
        (pid,) = [int(x) for x in flag.read_text().split()]
        gone = _wait_for(lambda: not _alive(pid), 5.0)
        if not gone:
            os.kill(pid, signal.SIGKILL)
        assert out.returncode == 0 and gone, (kind, out.stderr)
        assert "left 1 process(es) running" in out.stderr and f"pid {pid} (" in out.stderr and command in \
            out.stderr, out.stderr


def test_a_sigint_the_shell_passed_ignored_is_said_not_silent(tmp_path):
    def ignore_sigint():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    proc, pids = _start("use", tmp_path, preexec=ignore_sigint)
    proc.send_signal(signal.SIGINT)
    time.sleep(2.0)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert "SIGINT received, but the shell started tileprobe with SIGINT ignored" in err, err
    assert _wait_for(lambda: not any(_alive(p) for p in pids), 5.0), pids


def test_the_hook_folder_of_use_is_removed_and_swept_after_a_sigkill(tmp_path):
    proc, pids = _start("use", tmp_path)
    folders = list(tmp_path.glob("tileprobe-use-*"))
    assert len(folders) == 1 and (folders[0] / ".hook" / "sitecustomize.py").exists(), folders
    proc.kill()
    proc.communicate(timeout=30)
    assert _wait_for(lambda: not any(_alive(p) for p in pids), 5.0)
    assert folders[0].exists()      # a SIGKILL gives no last word …
    table = tmp_path / "t.json"
    out = subprocess.run([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--", sys.executable, "-c",
                          "print('ran')"], capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ran", out.stderr
    assert not list(tmp_path.glob("tileprobe-use-*")), list(tmp_path.glob("tileprobe-use-*"))   # … the next run sweeps


#: The ``tileprobe`` console command as installed (tileprobe/_entry.py): for ``tune`` it starts tileprobe's zygote before
#: the CLI, so before the program (``python -m tileprobe.cli`` does not).
ENTRY = [sys.executable, "-c", "import sys; from tileprobe._entry import main; sys.exit(main())"]

CLEAN = """
import sys, time
open(sys.argv[1], "w").write("")
time.sleep(2)
"""


def test_tune_of_a_clean_program_names_no_leftover_and_spares_its_own_zygote(tmp_path):
    out = subprocess.run([*ENTRY, *_command("tune", tmp_path, CLEAN, tmp_path / "f")], capture_output=True, text=True, env=_env(tmp_path),
                         cwd=str(tmp_path), timeout=120, stdin=subprocess.DEVNULL)
    assert "no cuda.tile.tune search was seen" in out.stderr + out.stdout, out.stderr
    assert "the command left" not in out.stderr and "zygote" not in out.stderr, out.stderr


def test_tune_names_and_ends_the_daemon_a_program_leaves_and_not_its_own_zygote(tmp_path):
    flag = tmp_path / "pids"
    out = subprocess.run([*ENTRY, *_command("tune", tmp_path, DAEMON, flag)], capture_output=True, text=True, env=_env(tmp_path),
                         cwd=str(tmp_path), timeout=120, stdin=subprocess.DEVNULL)
    (pid,) = [int(x) for x in flag.read_text().split()]
    gone = _wait_for(lambda: not _alive(pid), 5.0)
    if not gone:
        os.kill(pid, signal.SIGKILL)
    assert gone, out.stderr
    assert "left 1 process(es) running" in out.stderr and f"pid {pid} (" in out.stderr, out.stderr
    assert "zygote" not in out.stderr, out.stderr
