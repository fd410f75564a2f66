"""Loader children kept for a command (tileprobe/probe/contained.py ``loader_sessions``): inside the
context a probe file is imported once, later jobs on it (the tune's plan, the audit's load, the launch facts) run in
the same child; a child stopped by a timeout is replaced by a fresh one; no process and no temp folder is left when
the context exits, also after an exception; outside it every job gets a child of its own, as before.

The probe's kernel module and its constraint and ``args`` write ``<what> <pid>`` lines to a log: which process ran
each job, and how many times the kernel module was imported."""
from __future__ import annotations

import os
import tempfile
import textwrap
import threading
import time

import pytest
from support import live_processes_with

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPACE = "tileprobe.tune.static:space_task"


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """A probe file, its kernel module beside it, their log; a temp folder and an environment mark of this test."""
    log = tmp_path / "log"
    note = f"def note(what):\n    with open({str(log)!r}, 'a') as f:\n        f.write(f'{{what}} {{os.getpid()}}\\n')\n"
    (tmp_path / "kern.py").write_text("import os\nimport cuda.tile as ct\n" + note + textwrap.dedent("""
        note("kernel")

        @ct.kernel
        def vadd(X, Y, Z, TILE: ct.Constant[int]):
            b = ct.bid(0)
            ct.store(Z, index=(b,), tile=ct.load(X, index=(b,), shape=(TILE,)) + ct.load(Y, index=(b,), shape=(TILE,)))
        """))
    hold = tmp_path / "hold"
    (tmp_path / "p.py").write_text("import os, time\nfrom tileprobe import Probe\n" + note + textwrap.dedent(f"""
        N = 1 << 12

        def fits(case, hints):
            note("constraint")
            return True

        def args(case, arrays):
            note("args")
            end = time.monotonic() + 60
            while os.path.exists({str(hold)!r}) and time.monotonic() < end:
                time.sleep(0.05)
            return (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"), arrays.empty((N,), "float32"),
                    case["TILE"])

        probe = Probe(kernel={str(tmp_path / "kern.py") + ":vadd"!r}, args=args, cases={{"TILE": [256]}},
                      tunable=("TILE",), constraints=[fits], grid=lambda case, hints, num_sms: (N // case["TILE"],),
                      name="vadd")
        """))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    marker = f"tp22-sessions-{os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv("TILEPROBE_TEST_MARK", marker)
    monkeypatch.setenv("TILEPROBE_PLAN_CACHE", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return str(tmp_path / "p.py"), log, hold, marker


def _left_running(marker: str, seconds: float = 5.0) -> list[int]:
    """Live processes carrying this test's mark, but for this process's guard (tileprobe/procs.py: it lives as long
    as this process), once they have had ``seconds`` to end: a child SIGKILLed as its session closed ends when the
    kernel has delivered the signal, which a loaded machine may take a moment to do (a full run at load 4 found one
    still listed, 2026-12-06)."""
    from tileprobe.procs import _GUARD
    end = time.monotonic() + seconds
    while True:
        left = [p for p in live_processes_with(marker, "environ") if not _GUARD or p != _GUARD[0].pid]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.05)


def _lines(log) -> list[tuple[str, int]]:
    return [(w, int(p)) for w, p in (ln.split() for ln in log.read_text().splitlines())] if log.exists() else []


def _space(path: str, **kw):
    from tileprobe.probe.contained import run_probe_tasks
    (rep,) = run_probe_tasks([path], SPACE, [{"cases": None, "hints": None}], **kw)
    return rep


def _check(path: str, timeout_s: float = 60.0, paths=None, jobs=None):
    from tileprobe.probe.contained import load_probe_files
    from tileprobe.procs import owned_tempdir
    with owned_tempdir("load") as tmp:
        return load_probe_files(paths or [path], ["sm_90"], tmp_root=tmp, timeout_s=timeout_s, jobs=jobs)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone_within(pid: int, seconds: float = 5.0) -> bool:
    """Whether ``pid`` has ended (or is a zombie) within ``seconds``: a SIGKILLed child ends when the kernel has
    delivered the signal, which a loaded machine may take a moment to do after the kill returns."""
    end = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def _left(tmp_root) -> list[str]:
    return sorted(os.listdir(tmp_root))


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "zygote"])
def test_jobs_on_one_file_run_in_one_child_that_imported_it_once(probe, warm):
    from tileprobe.probe.contained import loader_sessions
    from tileprobe.probe.zygote import warm_starts
    path, log, _, marker = probe
    with warm_starts() if warm else _nothing(), loader_sessions() as session:
        space = _space(path)
        (check,) = _check(path)
        (again,) = _check(path)
        pids = {p for _, p in _lines(log)}
        assert len(pids) == 1 and all(_alive(p) for p in pids)
    assert space.errors == [] and [d["values"] for d in space.data] == [{}]
    assert check.errors == again.errors == [] and [p.label for p in check.plans] == ["vadd"] == \
        [p.label for p in again.plans]
    assert [w for w, _ in _lines(log)] == ["constraint", "kernel", "args", "args"]   # the kernel imported once
    assert (session.started, session.reused) == (1, 2)
    time.sleep(0.2)
    assert all(_gone_within(p) for p in pids) and _left_running(marker) == []
    assert _left(os.path.dirname(log) + "/tmp") == []


def _nothing():
    import contextlib
    return contextlib.nullcontext()


def test_outside_a_session_each_job_gets_its_own_child(probe):
    path, log, _, marker = probe
    _space(path)
    _check(path)
    lines = _lines(log)
    assert [w for w, _ in lines] == ["constraint", "kernel", "kernel", "args"]
    assert lines[0][1] == lines[1][1] != lines[2][1] == lines[3][1]
    assert _left_running(marker) == []


def test_a_child_stopped_by_a_timeout_is_replaced_by_a_fresh_one(probe):
    from tileprobe.probe.contained import loader_sessions
    path, log, hold, marker = probe
    with loader_sessions() as session:
        (first,) = _check(path)
        (a,) = {p for _, p in _lines(log)}
        hold.touch()
        (stuck,) = _check(path, timeout_s=2)
        assert _gone_within(a)
        hold.unlink()
        (after,) = _check(path)
        b = _lines(log)[-1][1]
        assert b != a and _alive(b)
    assert first.errors == after.errors == [] and len(after.plans) == 1
    assert len(stuck.errors) == 1 and "did not return within 2 s and was stopped" in stuck.errors[0]
    assert [w for w, _ in _lines(log)] == ["kernel", "args", "args", "kernel", "args"]
    assert (session.started, session.reused) == (2, 1)
    assert _left_running(marker) == []


def test_a_busy_child_gets_no_second_job_and_an_idle_one_killed_is_replaced(probe):
    """The race thread's launch facts while the main thread loads the same file: a second child, kept too."""
    from tileprobe.probe.contained import loader_sessions
    path, log, hold, marker = probe
    got = {}
    with loader_sessions() as session:
        hold.touch()
        t = threading.Thread(target=lambda: got.setdefault("held", _check(path)))
        t.start()
        end = time.monotonic() + 60
        while not any(w == "args" for w, _ in _lines(log)) and time.monotonic() < end:
            time.sleep(0.05)
        busy = _lines(log)[-1][1]
        mine = _space(path)    # while the other job's args() waits
        assert t.is_alive()
        hold.unlink()
        t.join(60)
        (other,) = {p for w, p in _lines(log) if w == "constraint"}
        assert busy != other and session.started == 2
        os.kill(busy, 9)       # an idle child that died (its parent thread ended, say)
        time.sleep(0.2)
        (one,), (two,) = _check(path), _check(path)
        assert [p for w, p in _lines(log)[-2:]] == [other, other] and session.started == 2
    assert mine.errors == one.errors == two.errors == got["held"][0].errors == []
    assert _left_running(marker) == []


def test_nothing_is_left_after_an_exception(probe):
    from tileprobe.probe.contained import loader_sessions
    path, log, _, marker = probe
    with pytest.raises(RuntimeError, match="the caller failed"):
        with loader_sessions():
            _check(path)
            (pid,) = {p for _, p in _lines(log)}
            assert _alive(pid) and [d for d in _left(os.path.dirname(log) + "/tmp") if "loaders" in d]
            raise RuntimeError("the caller failed")
    time.sleep(0.2)
    assert _gone_within(pid) and _left_running(marker) == []
    assert _left(os.path.dirname(log) + "/tmp") == []


def test_a_reused_childs_report_names_the_modules_it_had_imported(probe, monkeypatch):
    """The plan cache (tileprobe/probe/plancache.py) keeps the second job's report with the kernel module, which the
    first job imported, and a change to that module makes it stale."""
    from tileprobe.probe import plancache
    from tileprobe.probe.contained import _plan_key, loader_sessions
    path, log, _, _ = probe
    monkeypatch.setenv("TILEPROBE_PLAN_CACHE", "1")
    with loader_sessions():
        _space(path)
        _check(path)
    assert len({p for _, p in _lines(log)}) == 1
    k = _plan_key(path, ["sm_90"], 10**9, None, None, None, None)
    assert plancache.lookup(k) is not None
    folder = os.path.join(str(os.path.dirname(log)), "cache", "tileprobe", "plans")
    from tileprobe.probe import wire
    with open(os.path.join(folder, k + ".json"), "rb") as f:
        files = {e[0] for e in wire.loads(f.read())["code_files"]}
    assert os.path.join(os.path.dirname(path), "kern.py") in files and path in files
    kern = os.path.join(os.path.dirname(path), "kern.py")
    with open(kern, "a") as f:
        f.write("\n# changed\n")
    assert plancache.lookup(k) is None


def test_a_compiler_lookup_started_ahead_is_the_one_the_load_takes(tmp_path, monkeypatch):
    """tune starts the default compiler's lookup beside its plan; the audit's load in the same session
    takes that one rather than starting a second."""
    from tileprobe import _cutile
    from tileprobe.probe import contained
    made = []
    real = _cutile.DefaultCompilerLookup.__init__

    def counting(self, timeout_s):
        made.append(timeout_s)
        real(self, timeout_s)
    monkeypatch.setattr(_cutile.DefaultCompilerLookup, "__init__", counting)
    probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "probe_vadd.py")
    with contained.loader_sessions():
        assert contained.prefetch_compiler_lookup(30.0) is True
        assert contained.prefetch_compiler_lookup(30.0) is False          # one per session
        (rep,) = contained.load_probe_files([probe], ["sm_90"], tmp_root=str(tmp_path), jobs=1, find_compiler=True)
    assert made == [30.0]
    assert rep.default_tileiras or rep.default_tileiras_error
    assert contained.prefetch_compiler_lookup(30.0) is False              # no session: nothing started
