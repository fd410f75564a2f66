"""The kept-warm GPU worker's server on the CPU: start, reuse, a fresh worker per command, idle exit, a stale socket,
a stale server (changed code), refused foreign or open sockets and folders, the nanny, data-only messages.

Real server and worker processes with a fake init and task (tests/fake_gpu_tasks.py: no GPU). Each test has its own
runtime folder under tmp_path; every server a test starts is ended at its end."""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import time

import pytest

from tileprobe.probe import wire
from tileprobe.run import keepwarm
from tileprobe.run.keepwarm import KeptWarmWatchdog, runtime_dir, stop_server
from tileprobe.run.warmserver import HEADER, recv_msg, send_msg, unix_address

INIT = "tests.fake_gpu_tasks:fake_init"
TASK = "tests.fake_gpu_tasks:fake_init"     # as a task it answers the worker's pid


@pytest.fixture
def env(tmp_path):
    rt = tmp_path / "rt"
    e = dict(os.environ, TILEPROBE_RUNTIME_DIR=str(rt))
    e.pop("TILEPROBE_GUARD", None)
    pids: list[int] = []
    before = len(keepwarm._SERVERS)
    yield e, pids
    for pid in pids + [p.pid for p in keepwarm._SERVERS[before:]]:
        with_signal(pid, signal.SIGKILL)
        wait_gone(pid, 10)


def with_signal(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


def wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for p in keepwarm._SERVERS:
            if p.pid == pid:
                p.poll()
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if _zombie(pid):
            return True
        time.sleep(0.05)
    return False


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def kept(env, **kw) -> KeptWarmWatchdog:
    e, pids = env
    wd = KeptWarmWatchdog(init=INIT, environ=e, timeout_s=kw.pop("timeout_s", 30.0), **kw)
    wd.start()
    if wd.server_pid:
        pids.append(wd.server_pid)
    return wd


def test_first_command_starts_a_server_the_next_reuses_it_with_a_fresh_worker(env):
    with kept(env) as a:
        assert "started" in a.note and a.server_pid
        out = a.submit(TASK)
        assert out.status == "done" and out.value["name"] == "Fake GPU"
        first_worker = out.value["pid"]
        assert first_worker != a.server_pid and first_worker != os.getpid()
    sock = runtime_dir(env[0]) / next(p.name for p in runtime_dir(env[0]).iterdir() if p.suffix == ".sock")
    assert oct(sock.stat().st_mode & 0o777) == oct(0o600)
    assert oct(runtime_dir(env[0]).stat().st_mode & 0o777) == oct(0o700)
    with kept(env) as b:
        assert "reused" in b.note and b.server_pid == a.server_pid
        second_worker = b.submit(TASK).value["pid"]
    assert second_worker != first_worker     # a fresh worker per command: nothing of the last one's state
    assert wait_gone(first_worker, 10)


def test_server_exits_after_its_idle_time_and_removes_its_socket(env):
    with kept(env, idle_s=1.0) as wd:
        worker = wd.submit(TASK).value["pid"]
        pid = wd.server_pid
    assert wait_gone(pid, 20)
    assert wait_gone(worker, 10)
    assert not [p for p in runtime_dir(env[0]).iterdir() if p.suffix == ".sock"]


def test_a_stale_socket_nobody_listens_on_is_replaced(env):
    folder = runtime_dir(env[0])
    prov = keepwarm.provenance(INIT, env[0])
    path = folder / f"w-{keepwarm._key(prov)}.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        with unix_address(str(path)) as address:
            s.bind(address)
    finally:
        os.umask(old)     # restored even when bind fails: a 0o177 umask left behind breaks the worker's later tests
    s.close()                     # the file stays, nobody listens: what a SIGKILLed server leaves
    with kept(env) as wd:
        assert "started" in wd.note
        assert wd.submit(TASK).status == "done"


def test_a_server_of_other_code_is_stale_it_exits_and_a_new_one_starts(env, monkeypatch):
    with kept(env) as a:
        old = a.server_pid
    monkeypatch.setattr(keepwarm, "_code_fingerprint", lambda: "0" * 16)   # tileprobe changed since it started
    with kept(env) as b:
        assert "started" in b.note and b.server_pid != old
        assert b.submit(TASK).status == "done"
    assert wait_gone(old, 10)


def test_an_open_socket_is_refused_and_the_command_uses_its_own_worker(env):
    with kept(env) as a:
        pid = a.server_pid
    sock = next(p for p in runtime_dir(env[0]).iterdir() if p.suffix == ".sock")
    os.chmod(sock, 0o666)
    with kept(env) as b:
        assert b.note.startswith("a worker of its own") and "not a socket of this user's with mode 0600" in b.note
        assert str(sock) in b.note and b.server_pid is None
        out = b.submit(TASK)
        assert out.status == "done" and out.value["pid"] != pid
    os.chmod(sock, 0o600)


def test_a_runtime_folder_others_may_enter_is_refused(env):
    folder = runtime_dir(env[0])
    os.chmod(folder, 0o755)
    with kept(env) as wd:
        assert "not a folder of this user's with mode 0700" in wd.note and "TILEPROBE_RUNTIME_DIR" in wd.note
        assert wd.submit(TASK).status == "done"
    assert not [p for p in folder.iterdir() if p.suffix == ".sock"]


def test_a_symlinked_runtime_folder_is_refused_and_named_a_link(env, tmp_path):
    """Hostile test (session 16): a runtime folder that is a symbolic link (to a 0700 folder of this user's) was
    refused with 'not a folder … mode 0700', which does not say why; the note now says 'a symbolic link'."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with kept((dict(env[0], TILEPROBE_RUNTIME_DIR=str(link)), env[1])) as wd:
        assert wd.note.startswith("a worker of its own") and "a symbolic link" in wd.note and str(link) in wd.note
        assert wd.submit(TASK).status == "done"
    assert not list(real.iterdir())


def test_the_server_refuses_to_bind_in_a_folder_that_is_no_longer_private(tmp_path):
    """The server checks its folder again just before its bind (it may have been swapped or opened since the
    client's check): exit 1, nothing bound, the reason on stderr."""
    import subprocess
    import sys
    folder = tmp_path / "rt"
    folder.mkdir(mode=0o755)
    sock = folder / "w-x.sock"
    p = subprocess.run([sys.executable, "-m", "tileprobe.run.warmserver", str(sock), INIT, "5", json.dumps({})],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "refused to bind" in p.stderr and "mode 0700" in p.stderr, p.stderr
    assert not sock.exists()


def test_the_nanny_ends_a_server_that_stops_answering(env, monkeypatch):
    monkeypatch.setattr(keepwarm, "NANNY_MARGIN_S", 0.5)
    wd = kept(env)
    pid = wd.server_pid
    wd.startup_timeout_s, wd.grace_s, wd.timeout_s = 0.5, 0.1, 0.5   # a short nanny: 0.5 + 0.5 + 0.1 + 0.5 s
    try:
        os.kill(pid, signal.SIGSTOP)    # the server itself is stuck (its worker is fine)
        t0 = time.monotonic()
        out = wd.submit(TASK)
        assert out.status == "hang" and f"pid {pid}" in out.error and "was ended" in out.error
        assert time.monotonic() - t0 < 10
        assert wait_gone(pid, 10)
        assert "gave no answer" in wd.note
        wd.startup_timeout_s = 60.0
        wd._local.startup_timeout_s = 60.0
        wd._local.timeout_s = wd.timeout_s = 30.0
        assert wd.submit(TASK).status == "done"      # the rest runs on a worker of its own
    finally:
        wd.close()


def test_stop_server_ends_it(env):
    with kept(env) as wd:
        pid = wd.server_pid
    assert stop_server(INIT, env[0]) is True
    assert wait_gone(pid, 20)
    assert stop_server(INIT, env[0]) is False


def test_messages_are_data_and_an_oversized_length_is_refused_unread():
    a, b = socket.socketpair()
    with a, b:
        send_msg(a, {"op": "task", "kwargs": {"cubin": b"\x7fELF", "tile": (128, 64)}})
        got = recv_msg(b)
        assert got == {"op": "task", "kwargs": {"cubin": b"\x7fELF", "tile": (128, 64)}}
        a.sendall(HEADER.pack(wire.MAX_MESSAGE_BYTES + 1))
        with pytest.raises(wire.WireError, match="more than the limit"):
            recv_msg(b)
        pickle_text = b"cos\nsystem\n(S'true'\ntR."
        a.sendall(struct.pack(">I", len(pickle_text)) + pickle_text)   # a pickle, never unpickled
        with pytest.raises(wire.WireError):
            recv_msg(b)


def test_keep_warm_is_asked_for_by_option_or_environment():
    from tileprobe.run.early import keep_warm_seconds
    assert keep_warm_seconds(["tune", "p.py"], {}) is None
    assert keep_warm_seconds(["tune", "p.py", "--keep-warm"], {}) == keepwarm.DEFAULT_IDLE_S
    assert keep_warm_seconds(["tune", "--keep-warm", "120", "p.py"], {}) == 120.0
    assert keep_warm_seconds(["tune", "--keep-warm=30", "p.py"], {}) == 30.0
    assert keep_warm_seconds(["tune", "p.py"], {"TILEPROBE_KEEP_WARM": "600"}) == 600.0
    assert keep_warm_seconds(["tune", "p.py", "--keep-warm", "0"], {"TILEPROBE_KEEP_WARM": "600"}) is None
    assert keep_warm_seconds(["tune", "--", "--keep-warm", "5"], {}) is None     # the program's own argument
    assert keep_warm_seconds(["tune", "--keep-warm=soon"], {}) is None           # the CLI refuses it


@pytest.mark.parametrize("value", ["inf", "nan", "-5", "1e308", "soon"])
def test_a_keep_warm_environment_value_that_is_no_idle_time_is_refused_by_name(value, tmp_path):
    """Hostile test (session 16): TILEPROBE_KEEP_WARM=inf started a server that died at its start
    (``settimeout(inf)``). Now no server is asked for, and the tune exits 2 naming the variable and the fix."""
    import subprocess
    import sys

    from tileprobe.run.early import keep_warm_env_error, keep_warm_seconds
    env = {"TILEPROBE_KEEP_WARM": value}
    assert keep_warm_seconds(["tune", "p.py"], env) is None
    why = keep_warm_env_error(env)
    assert why is not None and "TILEPROBE_KEEP_WARM" in why and "fix:" in why
    assert keep_warm_env_error({"TILEPROBE_KEEP_WARM": "0"}) is None and keep_warm_env_error({}) is None
    p = subprocess.run([sys.executable, "-m", "tileprobe", "tune", "--dry-run", "--no-store", "nothing.py"],
                       env={**os.environ, **env}, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 2 and f"TILEPROBE_KEEP_WARM={value!r}" in p.stderr, p.stderr


def _children(pid: int) -> set[int]:
    """The GPU workers among ``pid``'s children (not its guard)."""
    kids = []
    for task in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else ():
        try:      # a child started by another thread is listed under that thread
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(x) for x in f.read().split()]
        except OSError:
            pass
    out = set()
    for k in kids:
        try:
            with open(f"/proc/{k}/cmdline", "rb") as f:
                if b"tileprobe.run.worker" in f.read():
                    out.add(k)
        except OSError:
            pass
    return out


def test_the_next_commands_worker_starts_while_this_one_runs(env):
    """While a command uses its worker the server starts the next one's (a spare), so a command that follows at
    once does not wait for a whole worker start: the second command's worker is a process that already ran during
    the first."""
    from tileprobe.run.warmserver import SPARES
    with kept(env) as a:
        first = a.submit(TASK).value["pid"]
        deadline = time.monotonic() + 30
        while len(_children(a.server_pid)) < 1 + SPARES and time.monotonic() < deadline:
            time.sleep(0.1)
        during = _children(a.server_pid)
        assert first in during and len(during) == 1 + SPARES
    with kept(env) as b:
        second = b.submit(TASK).value["pid"]
    assert second in during - {first}
    with kept(env) as c:
        third = c.submit(TASK).value["pid"]
    assert third in during - {first, second}     # started during the first command: two commands ahead


def test_a_malformed_task_is_answered_with_an_error_and_the_server_serves_on():
    import threading

    from tileprobe.run import warmserver
    from tileprobe.run.watchdog import TaskOutcome

    class FakeWd:
        info: dict = {}
        restarts = 0
        pids = [1]
        calls: list = []

        def submit(self, fn, kwargs, timeout_s):
            self.calls.append((fn, kwargs, timeout_s))
            return TaskOutcome("done", 7)

    wd = FakeWd()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    result: list = []
    t = threading.Thread(target=lambda: result.append(warmserver._handle(theirs, wd, "", {}, 60.0)), daemon=True)
    t.start()
    try:
        ours.settimeout(10)
        send_msg(ours, {"op": "hello", "provenance": {}})
        assert recv_msg(ours)["ok"]
        for bad in ({"op": "task", "timeout_s": 5}, {"op": "task", "fn": "m:f", "timeout_s": "x"},
                    {"op": "task", "fn": "m:f", "timeout_s": float("nan")}, {"op": "task", "fn": ["m:f"]},
                    {"op": "task", "fn": "m:f", "timeout_s": 5, "kwargs": [1]}):
            send_msg(ours, bad)
            out = recv_msg(ours)
            assert out["op"] == "outcome" and out["status"] == "raised" and out["error"].startswith("bad task"), out
        send_msg(ours, {"op": "task", "fn": "m:f", "timeout_s": 5})
        out = recv_msg(ours)
        assert out["status"] == "done" and out["value"] == 7 and wd.calls == [("m:f", {}, 5.0)]
        send_msg(ours, {"op": "stop"})
        t.join(10)
        assert result == ["stop"]
    finally:
        ours.close()
        theirs.close()


def test_a_forged_result_for_another_task_is_a_crash_and_the_server_serves_on(env):
    with kept(env) as a:
        out = a.submit("tests.fake_gpu_tasks:forged_result")
        assert out.status == "crash" and "task 424242, not for this task" in out.error, out
        nxt = a.submit(TASK)                          # the same command: a fresh worker, the same server
        assert nxt.status == "done" and nxt.value["name"] == "Fake GPU"
        pid = a.server_pid
    with kept(env) as b:                              # the server survived: the next command reuses it
        assert "reused" in b.note and b.server_pid == pid
        assert b.submit(TASK).status == "done"


def test_a_runtime_folder_too_long_for_af_unix_still_gets_a_server_the_next_command_reuses(env, tmp_path):
    e, pids = env
    deep = tmp_path / ("d" * 60) / ("e" * 60)       # the socket's path is then well over sun_path's 107 bytes
    e["TILEPROBE_RUNTIME_DIR"] = str(deep)
    with kept(env) as a:
        assert "started" in a.note and a.server_pid
        assert a.submit(TASK).status == "done"
    socks = [p for p in deep.iterdir() if p.suffix == ".sock"]
    assert len(socks) == 1 and len(os.fsencode(str(socks[0]))) > 107
    with kept(env) as b:
        assert "reused" in b.note and b.server_pid == a.server_pid
    assert stop_server(INIT, e) is True


def test_unix_address_is_the_path_when_it_fits_and_a_proc_fd_path_to_the_same_file_when_not(tmp_path):
    short = "/tmp/x.sock"
    with unix_address(short) as address:
        assert address == short
    long_dir = tmp_path / ("f" * 100)
    long_dir.mkdir()
    path = long_dir / "w-0123456789abcdef.sock"
    with unix_address(str(path)) as address:
        assert address.startswith("/proc/self/fd/") and address.endswith("/w-0123456789abcdef.sock")
        assert len(address) <= 107
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(address)
    assert path.is_socket()
    s.close()


def test_a_listener_whose_queue_is_full_is_refused_within_the_busy_wait_not_waited_for(env, monkeypatch):
    e, _ = env
    monkeypatch.setattr(keepwarm, "BUSY_WAIT_S", 1.0)
    folder = runtime_dir(e)
    path = folder / f"w-{keepwarm._key(keepwarm.provenance(INIT, e))}.sock"
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        with unix_address(str(path)) as address:      # pytest's temp folder may make the path too long for AF_UNIX
            stuck.bind(address)
            stuck.listen(0)       # a server that never accepts: the one queued connection fills its queue
            filler.connect(address)
    finally:
        os.umask(old)
    t0 = time.monotonic()
    with kept(env) as wd:
        assert "a worker of its own" in wd.note and "did not take the connection within 1 s" in wd.note
        assert wd.submit(TASK).status == "done"
    assert time.monotonic() - t0 < 30
    filler.close()
    stuck.close()


@pytest.mark.parametrize("suffix", [".lock", ".log"])
def test_a_fifo_in_place_of_the_lock_or_log_is_refused_not_waited_on(env, suffix):
    """Hostile test (session 17): a FIFO at the server's .lock or .log made ``open`` wait for a reader without end.
    Now it is refused, named, and the command runs on a worker of its own."""
    folder = runtime_dir(env[0])
    key = keepwarm._key(keepwarm.provenance(INIT, env[0]))
    fifo = folder / f"w-{key}{suffix}"
    os.mkfifo(fifo, 0o600)
    t0 = time.monotonic()
    with kept(env) as wd:
        assert wd.note.startswith("a worker of its own") and "a FIFO or socket nobody reads" in wd.note and str(fifo) in wd.note
        assert "Fix: remove it" in wd.note and wd.submit(TASK).status == "done"
    assert time.monotonic() - t0 < 60


def test_a_symlinked_lock_is_refused_by_name(env, tmp_path):
    folder = runtime_dir(env[0])
    key = keepwarm._key(keepwarm.provenance(INIT, env[0]))
    target = tmp_path / "elsewhere"
    (folder / f"w-{key}.lock").symlink_to(target)
    with kept(env) as wd:
        assert "a symbolic link, not a file of this user's" in wd.note and wd.submit(TASK).status == "done"
    assert not target.exists()


def test_stop_server_raises_only_keepwarmrefused(tmp_path):
    """Hostile test (session 17): a runtime folder under a regular file raised NotADirectoryError from stop_server."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(keepwarm.KeepWarmRefused, match="cannot be reached to stop it"):
        stop_server(INIT, dict(os.environ, TILEPROBE_RUNTIME_DIR=str(afile / "sub")))


def test_an_idle_time_that_is_no_timeout_is_refused_by_the_api_and_the_server(tmp_path):
    import subprocess
    import sys
    for bad in (float("inf"), float("nan"), 0.0, -5.0):
        with pytest.raises(ValueError):
            KeptWarmWatchdog(init=INIT, idle_s=bad)
    folder = tmp_path / "rt"
    folder.mkdir(mode=0o700)
    p = subprocess.run([sys.executable, "-m", "tileprobe.run.warmserver", str(folder / "w.sock"), INIT, "inf",
                        json.dumps({})], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "idle time 'inf'" in p.stderr and not (folder / "w.sock").exists()


def test_keep_warm_reads_its_value_as_argparse_does_and_any_zero_is_off():
    from tileprobe.run.early import keep_warm_env_error, keep_warm_seconds
    assert keep_warm_seconds(["tune", "--keep-warm", ".5", "p.py"], {}) == 0.5       # was the 900-s default
    assert keep_warm_seconds(["tune", "--keep-warm", "--json", "x.json", "p.py"], {}) == keepwarm.DEFAULT_IDLE_S
    for zero in ("-0", "0.0", "00", " 0 "):
        assert keep_warm_env_error({"TILEPROBE_KEEP_WARM": zero}) is None
        assert keep_warm_seconds(["tune", "p.py"], {"TILEPROBE_KEEP_WARM": zero}) is None
