"""tileprobe.procs, the one home of process handling: a tool run in a group of its own (what it leaves there dies
with it, on a timeout too), a process stopped politely then by force, a process group signalled (never our own).
Linux: the children are real processes, found afterwards by a marker in their command line."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from support import live_processes_with

from tileprobe.procs import kill_tree, run_in_group, signal_group, stop_process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and /proc: Linux")


def _marker(n: int) -> str:
    """A ``sleep`` duration no other process uses, so the processes holding it are this test's."""
    return f"29{n}.{os.getpid()}"


def _alive_with(marker: str) -> list[int]:
    return live_processes_with(marker, "cmdline")


def _gone(marker: str, within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while _alive_with(marker) and time.monotonic() < end:
        time.sleep(0.05)
    return not _alive_with(marker)


def test_a_tool_that_ends_takes_what_it_left_in_its_group_with_it(tmp_path):
    mark = _marker(1)
    # the child writes elsewhere: one that holds the tool's pipes open keeps it from ending until the timeout
    script = f"sleep {mark} >/dev/null 2>&1 & echo answer; echo note >&2; exit 3"
    rc, out, err = run_in_group(["bash", "-c", script], None, 30)
    assert (rc, out, err) == (3, b"answer\n", b"note\n")
    assert _gone(mark)


def test_a_tool_that_times_out_is_killed_with_its_group_and_gives_what_it_printed():
    mark = _marker(2)
    t0 = time.monotonic()
    rc, out, err = run_in_group(["bash", "-c", f"echo started; sleep {mark} & wait"], None, 0.5, text=True)
    assert rc is None and out == "started\n" and err == ""
    assert time.monotonic() - t0 < 10 and _gone(mark)


def test_a_tool_killed_by_a_signal_reports_it_and_a_missing_one_is_an_oserror(tmp_path):
    assert run_in_group(["bash", "-c", "kill -SEGV $$"], None, 30)[0] == -signal.SIGSEGV
    with pytest.raises(OSError):
        run_in_group([str(tmp_path / "no-such-tool")], None, 30)


def test_stop_process_sigkills_what_ignores_sigterm_and_sweeps_its_group():
    mark = _marker(3)
    code = f"import signal, subprocess, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
           f"subprocess.Popen(['sleep', '{mark}']); print('ready', flush=True); time.sleep(300)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout.readline() == b"ready\n"
    t0 = time.monotonic()
    stop_process(proc, grace_s=0.3, group=True)
    assert proc.returncode == -signal.SIGKILL and time.monotonic() - t0 < 10
    assert _gone(mark)
    proc.stdout.close()


def test_stop_process_lets_a_polite_process_end_on_sigterm_and_leaves_a_reaped_one_alone():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    stop_process(proc, grace_s=30)
    assert proc.returncode == -signal.SIGTERM
    stop_process(proc, grace_s=30)           # already reaped: nothing is sent (its pid may be another's now)
    assert proc.returncode == -signal.SIGTERM


def test_signal_group_never_signals_our_own_group_and_passes_over_a_gone_one():
    assert signal_group(os.getpgrp(), signal.SIGKILL) is False       # we are still here
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    assert signal_group(proc.pid) is False


def test_kill_tree_with_group_ends_an_orphan_left_in_the_group():
    """A loader that exited leaves what it started in its group, with no parent link to it any more."""
    mark = _marker(4)
    proc = subprocess.Popen(["bash", "-c", f"(sleep {mark} &) ; echo started; sleep 300"], stdout=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout.readline() == b"started\n"
    end = time.monotonic() + 5.0     # the forked sleep may not have exec'd (its cmdline still bash's) yet
    while not (orphans := _alive_with(mark)) and time.monotonic() < end:
        time.sleep(0.02)
    assert orphans and all(os.getpgid(p) == proc.pid for p in orphans)
    victims = kill_tree(proc.pid, group=True)
    assert proc.pid in victims and proc.wait(timeout=10) == -signal.SIGKILL
    assert _gone(mark)
    proc.stdout.close()


def test_a_tool_that_floods_its_output_is_kept_to_its_head_and_tail():
    """A compiler writing 12 MB to stderr (docs/FAILURES.md: 30-300 MB seen) is read to the end but only
    OUTPUT_KEEP_BYTES of the start and of the end are kept, with the count of what was left out."""
    from tileprobe.procs import OUTPUT_KEEP_BYTES
    script = ("import sys; e = sys.stderr.buffer; e.write(b'error: first line\\n'); "
              "[e.write(b'x' * 65535 + b'\\n') for _ in range(192)]; e.write(b'last line\\n'); "
              "sys.stdout.write('out ok'); sys.exit(3)")
    rc, out, err = run_in_group([sys.executable, "-c", script], None, 60, text=True)
    assert rc == 3 and out == "out ok"
    assert err.startswith("error: first line\n") and err.endswith("last line\n")
    total = len("error: first line\n") + 192 * 65536 + len("last line\n")
    dropped = total - 2 * OUTPUT_KEEP_BYTES
    assert f"[... {dropped:,} bytes left out by tileprobe ...]" in err
    assert len(err) < 2 * OUTPUT_KEEP_BYTES + 100


def test_a_timed_out_tool_keeps_what_it_wrote_and_a_short_output_is_whole():
    rc, out, err = run_in_group([sys.executable, "-c", "import sys, time; print('half', flush=True); "
                                 "sys.stderr.write('warn\\r\\n'); sys.stderr.flush(); time.sleep(60)"], None, 1.0,
                                text=True)
    assert rc is None and out == "half\n" and err == "warn\n"
    assert run_in_group(["printf", "a\\nb"], None, 10) == (0, b"a\nb", b"")


def test_a_tool_is_judged_by_its_exit_not_by_a_detached_child_that_holds_its_output(tmp_path):
    """A tool that starts ``setsid sleep &`` (its own session: not in the tool's group) and exits 0 at once: its
    output is read until it exits and a moment more, the sleeper holding the pipes is killed and named, the status
    is the tool's (a hostile tileiras held an audit 200 s this way, 2026-12-04)."""
    import subprocess
    import time

    from tileprobe.procs import run_in_group
    marker = f"sleep 37.{os.getpid()}"
    t0 = time.monotonic()
    rc, out, err = run_in_group(["sh", "-c", f"setsid {marker} & echo compiled; echo note >&2; exit 0"], None, 60)
    took = time.monotonic() - t0
    assert (rc, out) == (0, b"compiled\n") and took < 10, (rc, out, err, took)
    assert err.startswith(b"note\n") and b"left 1 process(es) holding its output, which were killed" in err, err
    time.sleep(0.2)
    alive = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert alive == [], alive


def test_a_hung_tools_setsid_grandchild_that_ignores_sigterm_does_not_outlive_the_timeout():
    """A tool that hangs after starting ``setsid bash -c 'trap "" TERM HUP; sleep …'`` (its own session: not in the
    tool's group, which the timeout SIGKILLs): the grandchild, which holds the tool's output, lived on after the
    timeout (a hostile tileiras, 2026-12-05). It is SIGKILLed with the tool and named; nothing is left 5 s after."""
    mark = _marker(5)
    script = f"setsid bash -c 'trap \"\" TERM HUP; sleep {mark}' & echo started; sleep 1000"
    t0 = time.monotonic()
    rc, out, err = run_in_group(["bash", "-c", script], None, 2.0, text=True)
    assert rc is None and out == "started\n" and time.monotonic() - t0 < 10, (rc, out, err)
    assert "[tileprobe: bash timed out after 2 s, and left " in err and "holding its output, which were killed" in err
    assert "(sleep)" in err and err.count("(sleep)") == 1, err     # the tool's own `sleep 1000` went with its group
    assert _gone(mark)


def test_a_tool_whose_children_end_with_it_gets_no_note():
    from tileprobe.procs import run_in_group
    rc, out, err = run_in_group(["sh", "-c", "sleep 0.2 & wait; echo done"], None, 60)
    assert (rc, out, err) == (0, b"done\n", b"")


def test_one_process_table_answers_as_the_walks_of_proc_do():
    # the end of a `-- COMMAND` program asks three questions of one table; the mark is read only of processes no
    # older than the asker, and that finds the same marked processes as reading every environment
    code = """
import os, subprocess, sys
from tileprobe import procs, program_procs
assert procs.arm_guard()
kid = subprocess.Popen(["sleep", "30"])
quiet = subprocess.Popen(["sleep", "31"], env={k: v for k, v in os.environ.items() if k != procs.GUARD_ENV})
table = procs.process_table()
marked = program_procs.marked_processes(table)
print(kid.pid in marked, quiet.pid in marked, sorted(marked) == sorted(program_procs.marked_processes()),
      program_procs.guard_pids(table) == program_procs.guard_pids(), {kid.pid, quiet.pid} <= set(procs.descendants(os.getpid(), table)),
      sorted(procs.descendants(os.getpid(), table)) == sorted(procs.descendants(os.getpid())),
      table.start[kid.pid] >= procs.start_ticks(os.getpid()))
kid.kill(); quiet.kill(); kid.wait(); quiet.wait()
"""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["True", "False", "True", "True", "True", "True", "True"], \
        out.stdout + out.stderr
