"""Only data crosses from the zygote, and a probe cannot end it (a hostile tester, 2026-12-04): a package imported
in the zygote wrote a pickle on its socket and ran a command inside ``tileprobe audit``; the zygote's argv carried
tileprobe's pid; ``os.kill(os.getppid(), SIGTERM)`` at a probe's import ended the zygote and every other probe."""
from __future__ import annotations

import os
import pickle
import signal
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "tests", "data", "probe_vadd.py")   # 2 tiles × occupancy 1, 2: four variants


def test_the_zygote_is_not_told_our_pid_and_outlives_signals_from_anyone(tmp_path):
    from tileprobe.probe import zygote
    z = zygote.Zygote()
    try:
        assert z.wait_ready(), "the zygote did not start"
        argv = open(f"/proc/{z.pid}/cmdline", "rb").read().split(b"\0")
        assert str(os.getpid()).encode() not in argv, argv
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGINT, signal.SIGALRM):
            os.kill(z.pid, sig)
        time.sleep(0.5)
        z.pump(0.0)
        assert not z.dead and z.proc.poll() is None and zygote._running_child_of(z.pid, os.getpid())
    finally:
        t0 = time.monotonic()
        z.close()
    assert z.proc.poll() is not None and time.monotonic() - t0 < 5    # closed by its socket, SIGKILL at worst


class _Runs:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_message_that_is_not_the_zygotes_is_never_unpickled_and_distrusts_it(tmp_path):
    """Forged messages: a pickle that would create a file, a wrong kind, a 'started' of a process that is no child
    of the zygote (our own pid: tileprobe would kill it later), an 'exit' of a child that still runs. None runs
    anything; each makes the zygote distrusted, and no process is started from it any more (a new zygote is)."""
    from tileprobe.probe import wire, zygote
    marker = tmp_path / "ran"
    forged = [pickle.dumps(("exit", _Runs(str(marker)), 0)), wire.dumps(("run", "rm -rf ~")),
              wire.dumps(("started", os.getpid())), b"\x80\x04K\x01.", wire.dumps(("exit", 1, 0, 2))]
    with zygote.warm_starts():
        z = zygote.current()
        assert z is not None and z.wait_ready()
        r, w = os.pipe()
        job = {"path": str(tmp_path / "absent.py"), "targets": ["sm_90"], "max_variants": 10, "cases": None,
               "hints": None, "sys_path": [], "tmp": str(tmp_path)}
        child = z.start("_loader_entry", (job,), [w], stdout=True)
        os.close(w)
        for data in forged:
            z.distrusted = None
            z._take(data)
            assert z.distrusted, data
        z.distrusted = None
        z._take(wire.dumps(("exit", child.pid, 0)))        # the running child: forged
        assert z.distrusted and "still runs" in z.distrusted
        assert not marker.exists()
        assert zygote.current() is not z                   # distrusted: nothing is started from it any more
        assert child.wait(timeout=60) is not None          # its own exit still arrives
        child.stdout.close()
        os.close(r)


def test_a_package_that_writes_a_pickle_on_the_zygotes_socket_runs_nothing_here(tmp_path, monkeypatch):
    """Two probes that import torch, so their installed packages are imported in the zygote first: one package
    writes a pickle that would create a file in tileprobe's process on every socket it can find (the zygote's, and
    in the loader its message socket), one probe sends its parent SIGTERM, SIGHUP and SIGUSR1 at import. Nothing
    runs here, the innocent probe gets its four variants, the zygote is not ended by the signals."""
    from tileprobe.audit import audit
    marker = tmp_path / "ran-in-tileprobe"
    site = tmp_path / "venv" / "site-packages"
    (site / "tp_h_pickler").mkdir(parents=True)
    (site / "tp_h_pickler" / "__init__.py").write_text(
        "import os, pickle, socket, sys\n"
        "class Run:\n"
        "    def __reduce__(self):\n"
        f"        return (open, ({str(marker)!r}, 'w'))\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        s = socket.socket(fileno=os.dup(fd))\n"
        "    except OSError:\n"
        "        continue\n"
        "    try:\n"
        "        s.send(pickle.dumps(('exit', Run(), 0)))\n"
        "    except OSError:\n"
        "        pass\n")
    monkeypatch.syspath_prepend(str(site))
    src = open(PROBE).read().replace("__file__", repr(PROBE))
    files = {"innocent": "", "pickler": "import torch  # noqa: F401\nimport tp_h_pickler  # noqa: F401\n",
             "signals": "import os, signal\nfor s in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):\n"
                        "    os.kill(os.getppid(), s)\n"}
    paths = {}
    for tag, head in files.items():
        path = tmp_path / f"p_{tag}.py"
        path.write_text(head + src.replace('name="vadd"', f'name="vadd_{tag}"'))
        paths[tag] = str(path)
    # signals first: from a zygote that is trusted (a distrusted one starts fresh loaders, whose parent is us)
    res = audit([paths["innocent"], paths["signals"]], ["sm_90"], jobs=2)
    ok = sorted(r.kernel for r in res.records if r.ok)
    assert ok == ["vadd_innocent"] * 4 + ["vadd_signals"] * 4, (ok, res.probe_errors)   # the zygote ignored them
    res = audit([paths["innocent"], paths["pickler"]], ["sm_90"], jobs=2)
    assert not marker.exists()
    ok = sorted(r.kernel for r in res.records if r.ok)
    assert ok.count("vadd_innocent") == 4, (ok, res.probe_errors)


def test_a_probe_that_sigkills_its_parent_loses_only_its_own_results(tmp_path):
    """``os.kill(os.getppid(), SIGKILL)`` at import: its parent is a process of its own (the zygote's child that
    forked it), so only that probe is lost; the one beside it is audited, the zygote lives on."""
    from tileprobe.audit import audit
    src = open(PROBE).read().replace("__file__", repr(PROBE))
    killer, innocent = tmp_path / "p_killer.py", tmp_path / "p_innocent.py"
    killer.write_text("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
                      + src.replace('name="vadd"', 'name="vadd_killer"'))
    innocent.write_text(src.replace('name="vadd"', 'name="vadd_innocent"'))
    res = audit([str(killer), str(innocent)], ["sm_90"], jobs=2)
    ok = sorted(r.kernel for r in res.records if r.ok)
    assert ok == ["vadd_innocent"] * 4, (ok, res.probe_errors)
    assert any("p_killer.py" in e and "SIGKILL" in e for e in res.probe_errors), res.probe_errors


def test_a_package_that_kills_the_zygote_costs_the_others_nothing(tmp_path, monkeypatch):
    """A package imported in the zygote (its probe imports torch) SIGKILLs the process it is imported in: the
    zygote dies, and the loaders it had forked with it; they are started again from a new zygote (at most
    MAX_REPLACEMENTS), so the innocent probe is audited."""
    from tileprobe.audit import audit
    site = tmp_path / "venv" / "site-packages"
    (site / "tp_h_zkill").mkdir(parents=True)
    (site / "tp_h_zkill" / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    monkeypatch.syspath_prepend(str(site))
    src = open(PROBE).read().replace("__file__", repr(PROBE))
    innocent, damager = tmp_path / "p_innocent.py", tmp_path / "p_damager.py"
    innocent.write_text(src.replace('name="vadd"', 'name="vadd_innocent"'))
    damager.write_text("import torch  # noqa: F401\nimport tp_h_zkill  # noqa: F401\n"
                       + src.replace('name="vadd"', 'name="vadd_damager"'))
    res = audit([str(innocent), str(damager)], ["sm_90"], jobs=2)
    ok = sorted(r.kernel for r in res.records if r.ok)
    assert ok == ["vadd_innocent"] * 4, (ok, res.probe_errors)
    assert any("p_damager.py" in e for e in res.probe_errors), res.probe_errors


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_without_a_zygote_a_probe_that_signals_its_parent_does_not_reach_tileprobe(tmp_path, sig):
    """``TILEPROBE_ZYGOTE=0``: loaders and workers are tileprobe's children, and a probe's ``os.kill(os.getppid(),
    SIGKILL)`` ended the audit. Each runs under a nanny of its own: only that probe can be lost."""
    import subprocess
    import sys
    src = open(PROBE).read().replace("__file__", repr(PROBE))
    killer, innocent = tmp_path / "p_killer.py", tmp_path / "p_innocent.py"
    killer.write_text(f"import os, signal\nos.kill(os.getppid(), signal.{sig})\n"
                      + src.replace('name="vadd"', 'name="vadd_killer"'))
    innocent.write_text(src.replace('name="vadd"', 'name="vadd_innocent"'))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "tileprobe", "audit", str(killer), str(innocent), "--arch", "sm_90",
                           "--no-store", "--no-sass", "-j", "2", "--json", str(out)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT, "TILEPROBE_ZYGOTE": "0"},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    import json
    ok = sorted(v["kernel"] for v in json.loads(out.read_text())["variants"] if v["status"] == "ok")
    assert ok.count("vadd_innocent") == 4, (ok, proc.stderr)
    assert ok.count("vadd_killer") == (4 if sig == "SIGTERM" else 0), (ok, proc.stderr)
