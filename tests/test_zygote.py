"""Warm starts: loaders and compile workers forked from one zygote give the same records as fresh
processes; a child's exit status reaches its starter; the compiler facts are asked once and invalidated."""
from __future__ import annotations

import os
import signal
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "tests", "data", "probe_vadd.py")   # 2 tiles × occupancy 1, 2: four variants


def _facts(records) -> list[tuple]:
    return sorted((r.kernel, str(r.case), str(r.hints), r.status, r.code_sha256, r.registers) for r in records)


def test_audit_forked_from_the_zygote_gives_the_records_of_fresh_processes(monkeypatch):
    from tileprobe.audit import audit
    from tileprobe.probe import zygote
    started = []
    real = zygote.Zygote.start

    def counting(self, entry, *a, **kw):
        started.append(entry)
        return real(self, entry, *a, **kw)
    monkeypatch.setattr(zygote.Zygote, "start", counting)
    warm = audit([PROBE], ["sm_90"], jobs=2)
    assert started.count("_loader_entry") == 1 and started.count("_worker_entry") == 2
    monkeypatch.setenv("TILEPROBE_ZYGOTE", "0")
    started.clear()
    cold = audit([PROBE], ["sm_90"], jobs=2)
    assert started == []
    assert len(warm.records) == 4 and all(r.ok for r in warm.records)
    assert _facts(warm.records) == _facts(cold.records)
    assert zygote._current is None      # ended with the audit


def test_a_forked_child_reports_its_exit_status_and_signal(tmp_path):
    from tileprobe.probe import zygote
    script = tmp_path / "crash.py"
    script.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    with zygote.warm_starts():
        z = zygote.current()
        assert z is not None
        r, w = os.pipe()
        job = {"path": str(script), "targets": ["sm_90"], "max_variants": 10,
               "cases": None, "hints": None, "sys_path": list(sys.path), "tmp": str(tmp_path)}
        p = z.start("_loader_entry", (job,), [w], stdout=True)
        os.close(w)
        assert p.wait(timeout=60) == -signal.SIGSEGV
        assert p.poll() == -signal.SIGSEGV and p.exitcode == -signal.SIGSEGV
        p.stdout.close()
        os.close(r)
        pid = z.pid
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}") and \
            open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}") or \
        open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"


def test_no_zygote_in_another_environment(monkeypatch):
    from tileprobe.probe import zygote
    with zygote.warm_starts():
        assert zygote.current() is not None
        monkeypatch.setenv("TILEPROBE_SOMETHING_NEW", "1")   # modules read settings at import: not the same process
        assert zygote.current() is None
        assert zygote.start_worker(type("C", (), {"fileno": lambda self: 0})(), ()) is None


def test_compiler_facts_are_asked_once_and_again_when_the_binary_changes(tmp_path, monkeypatch):
    from tileprobe.compile import toolcache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(toolcache, "_memory", {})
    binary = tmp_path / "tileiras"
    binary.write_text("v1")
    asked = []

    def ask(path):
        asked.append(path)
        return f"build of {open(path).read()}"
    assert toolcache.binary_fact("build", str(binary), ask) == "build of v1"
    assert toolcache.binary_fact("build", str(binary), ask) == "build of v1"
    monkeypatch.setattr(toolcache, "_memory", {})                    # another process: from the file
    assert toolcache.binary_fact("build", str(binary), ask) == "build of v1"
    assert len(asked) == 1
    binary.write_text("v2 longer")
    assert toolcache.binary_fact("build", str(binary), ask) == "build of v2 longer"
    assert len(asked) == 2


def test_the_default_compiler_is_looked_up_again_when_what_cutile_reads_changes(tmp_path, monkeypatch):
    from tileprobe.compile import toolcache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(toolcache, "_memory", {})
    binary = tmp_path / "tileiras"
    binary.write_text("x")
    assert toolcache.cached_default() is None
    toolcache.remember_default(str(binary))
    monkeypatch.setattr(toolcache, "_memory", {})
    assert toolcache.cached_default() == str(binary)
    monkeypatch.setattr(toolcache, "_memory", {})
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    assert toolcache.cached_default() is None                     # another PATH: cuTile may pick another one
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(toolcache, "_memory", {})
    binary.unlink()
    assert toolcache.cached_default() is None                     # gone


def test_zygote_off(monkeypatch):
    from tileprobe.probe import zygote
    monkeypatch.setenv("TILEPROBE_ZYGOTE", "0")
    with zygote.warm_starts():
        assert zygote.current() is None


def test_which_probe_files_get_a_loader_forked_after_torch(tmp_path):
    from tileprobe.probe.zygote import needs_torch
    cases = {"import torch\n": True, "from tilegym.ops import x\n": True, 'kernel="tilegym.ops.cutile.mm:k"\n': True,
             "import cuda.tile as ct\n# torch is not needed\n": False, "import torchvision_like\n": False}
    for i, (text, want) in enumerate(cases.items()):
        f = tmp_path / f"p{i}.py"
        f.write_text(text)
        assert needs_torch(str(f)) is want, text
    assert needs_torch(str(tmp_path / "missing.py")) is False


def _worker_torch_states(monkeypatch) -> list:
    """Whether each compile worker the zygote forked was asked for torch-free (the request's flag)."""
    from tileprobe.probe import zygote
    flags = []
    real = zygote.Zygote.start

    def spy(self, entry, *a, **kw):
        if entry == "_worker_entry":
            flags.append(self.torch_free)
        return real(self, entry, *a, **kw)
    monkeypatch.setattr(zygote.Zygote, "start", spy)
    return flags


def test_compile_workers_of_probes_without_torch_start_from_a_cuTile_imported_without_it(monkeypatch):
    """No loader saw torch imported: the zygote imports cuda.tile._compile with torch unimportable (1.9 of its
    2.2 s here), and the cubins are those of workers that imported torch (TILEPROBE_TORCH_FREE=0)."""
    from tileprobe.audit import audit
    flags = _worker_torch_states(monkeypatch)
    fast = audit([PROBE], ["sm_90"], jobs=2)
    assert flags == [True, True]
    monkeypatch.setenv("TILEPROBE_TORCH_FREE", "0")
    flags.clear()
    slow = audit([PROBE], ["sm_90"], jobs=2)
    assert flags == [False, False]
    assert len(fast.records) == 4 and all(r.ok for r in fast.records)
    assert sorted((str(r.case), str(r.hints), r.cubin_sha256) for r in fast.records) == \
        sorted((str(r.case), str(r.hints), r.cubin_sha256) for r in slow.records)


def test_a_probe_that_imports_torch_gets_workers_with_torch(tmp_path, monkeypatch):
    """Its loader saw torch imported: the workers' cuTile knows torch dtypes (they are not torch-free)."""
    from tileprobe.audit import audit
    (tmp_path / "p.py").write_text("import torch  # noqa: F401\n" + open(PROBE).read().replace(
        "__file__", repr(PROBE)))
    flags = _worker_torch_states(monkeypatch)
    res = audit([str(tmp_path / "p.py")], ["sm_90"], jobs=1)
    assert flags == [False] and all(r.ok for r in res.records), [r.error for r in res.records]


def test_probe_code_that_imports_torch_only_in_a_torch_free_worker_is_a_broken_environment(tmp_path):
    """The loader did not import torch, the compile worker did: its cuTile cannot know torch dtypes, so the variant
    fails naming the switch, instead of compiling with dtypes misread."""
    from tileprobe.audit import audit
    src = open(PROBE).read().replace("__file__", repr(PROBE))
    (tmp_path / "p.py").write_text(
        "import importlib\nfrom tileprobe.probe.zygote import torch_blocked\n"
        "if torch_blocked():\n    importlib.import_module('tor' + 'ch')   # not seen by needs_torch's look at the text\n" + src)
    res = audit([str(tmp_path / "p.py")], ["sm_90"], jobs=1)
    assert len(res.records) == 4
    assert {(r.status, r.failure) for r in res.records} == {("compile_error", "broken_environment")}
    assert "TILEPROBE_TORCH_FREE=0" in res.records[0].fix and "imported torch" in res.records[0].error


def _run_forked_loader(z, script, tmp_path) -> None:
    """Fork a loader of ``script`` from zygote ``z`` and wait for it (its output discarded)."""
    r, w = os.pipe()
    job = {"path": str(script), "targets": ["sm_90"], "max_variants": 10,
           "cases": None, "hints": None, "sys_path": list(sys.path), "tmp": str(tmp_path)}
    p = z.start("_loader_entry", (job,), [w], stdout=True)
    os.close(w)
    p.wait(timeout=60)
    p.stdout.close()
    os.close(r)


def test_prefetch_imports_the_compile_side_before_the_next_fork_without_torch(tmp_path):
    """tune asks for cuTile's compile side as soon as its plan is loaded: the zygote imports it then,
    without torch when no loader saw torch, so a child forked afterwards has it (and torch blocked) already."""
    from tileprobe.probe import zygote
    script = tmp_path / "look.py"
    out = tmp_path / "seen.txt"
    script.write_text("import sys\nfrom tileprobe.probe.zygote import torch_blocked\n"
                      f"open({str(out)!r}, 'w').write(repr(('cuda.tile._compile' in sys.modules, torch_blocked())))\n")
    with zygote.warm_starts():
        z = zygote.current()
        assert z is not None and z.wait_ready()
        assert zygote.prefetch_heavy(False) is True and z.torch_free
        _run_forked_loader(z, script, tmp_path)
    assert out.read_text() == "(True, True)"


def test_without_a_prefetch_a_plain_fork_has_no_compile_side(tmp_path):
    from tileprobe.probe import zygote
    script = tmp_path / "look.py"
    out = tmp_path / "seen.txt"
    script.write_text(f"import sys\nopen({str(out)!r}, 'w').write(repr('cuda.tile._compile' in sys.modules))\n")
    with zygote.warm_starts():
        z = zygote.current()
        assert z is not None and z.wait_ready()
        _run_forked_loader(z, script, tmp_path)
    assert out.read_text() == "False"


def _fake_installed(tmp_path, name: str, body: str = "") -> str:
    """A package ``name`` in a folder named site-packages (installed code to :func:`installed_imports`), on sys.path."""
    site = tmp_path / "venv" / "site-packages"
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(body)
    (site / name / "ops.py").write_text("def k():\n    pass\n")
    return str(site)


def test_installed_imports_names_installed_packages_not_the_users_modules(tmp_path, monkeypatch):
    """Module-level imports and "pkg.mod:kernel" names of installed packages; not the standard library, tileprobe,
    cuda, modules beside the probe or in the working directory, imports inside functions, or missing ones. A venv
    inside the working directory still counts as installed."""
    from tileprobe.probe.zygote import installed_imports
    monkeypatch.syspath_prepend(_fake_installed(tmp_path, "tp_fake_a"))
    monkeypatch.syspath_prepend(_fake_installed(tmp_path / "b", "tp_fake_b"))
    monkeypatch.chdir(tmp_path)
    here = tmp_path / "probes"
    here.mkdir()
    (here / "helper_mod.py").write_text("")
    monkeypatch.syspath_prepend(str(here))
    probe = here / "p.py"
    probe.write_text("import os, json\nimport cuda.tile as ct\nfrom tileprobe import Probe\nimport helper_mod\n"
                     "from tp_fake_a.ops import k\nimport no_such_module_tp\n"
                     "def f():\n    import tp_fake_never\n"
                     "KERNEL = 'tp_fake_b.ops:k'\n")
    assert installed_imports(str(probe)) == ("tp_fake_a", "tp_fake_b")
    (here / "bad.py").write_text("import (\n")
    assert installed_imports(str(here / "bad.py")) == ()
    assert installed_imports(str(here / "missing.py")) == ()


def test_a_probes_installed_imports_run_once_in_the_zygote_not_in_each_worker(tmp_path, monkeypatch):
    """A probe that needs torch: its installed packages are imported in the zygote before its loader is forked, so
    the loader and both compile workers inherit them (one import in all); TILEPROBE_PRELOAD=0 imports them in the
    loader and again in each worker. The records are the same."""
    from tileprobe.audit import audit
    marks = tmp_path / "marks"
    marks.mkdir()
    body = f"import os\nopen(os.path.join({str(marks)!r}, str(os.getpid())), 'w').close()\n"
    monkeypatch.syspath_prepend(_fake_installed(tmp_path, "tp_fake_counted", body))
    src = "import torch  # noqa: F401\nimport tp_fake_counted  # noqa: F401\n" + open(PROBE).read().replace(
        "__file__", repr(PROBE))
    runs = {}
    for preload in ("1", "0"):
        monkeypatch.setenv("TILEPROBE_PRELOAD", preload)
        (tmp_path / f"p{preload}.py").write_text(src)
        res = audit([str(tmp_path / f"p{preload}.py")], ["sm_90"], jobs=2)
        assert len(res.records) == 4 and all(r.ok for r in res.records), [r.error for r in res.records]
        runs[preload] = (len(os.listdir(marks)), _facts(res.records))
        for f in os.listdir(marks):
            os.unlink(marks / f)
    assert runs["1"][0] == 1 and runs["0"][0] == 3
    assert runs["1"][1] == runs["0"][1]


def test_installed_imports_reads_kernel_names_from_strings_not_comments_and_survives_a_deep_file(tmp_path,
                                                                                                 monkeypatch):
    from tileprobe.probe.zygote import installed_imports
    monkeypatch.syspath_prepend(_fake_installed(tmp_path, "tp_fake_named"))
    monkeypatch.syspath_prepend(_fake_installed(tmp_path / "c", "tp_fake_commented"))
    probe = tmp_path / "p.py"
    probe.write_text("import torch\nK = 'tp_fake_named.ops:k'   # not \"tp_fake_commented.ops:k\"\n")
    got = installed_imports(str(probe))
    assert "tp_fake_named" in got and "tp_fake_commented" not in got
    deep = tmp_path / "deep.py"
    deep.write_text("import torch\nX = (" + "1+" * 3000 + "1)\n")     # ast.parse: RecursionError
    assert installed_imports(str(deep)) == ()


def test_hostile_installed_packages_leave_the_zygote_and_the_other_probes_alone(tmp_path, monkeypatch):
    """Packages imported in the zygote before their probe's loader (a probe that needs torch): one that calls
    sys.exit at import, one that ignores SIGCHLD, one that registers a name and then fails. The innocent probe
    loads and compiles; the failing ones are probe errors with their own message (the half-done import is undone,
    so the loader's own import reports the real ImportError, not a 'registered twice'); nothing hangs."""
    from tileprobe.audit import audit
    site = tmp_path / "venv" / "site-packages"
    pkgs = {"tp_h_exit": "import sys\nsys.exit(2)\n",
            "tp_h_sigchld": "import signal\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\n",
            "tp_h_registry": "NAMES = set()\ndef register(n):\n    if n in NAMES:\n"
                             "        raise RuntimeError(f'{n} registered twice')\n    NAMES.add(n)\n",
            "tp_h_regraise": "import tp_h_registry\ntp_h_registry.register('op')\n"
                             "raise ImportError('the REAL problem')\n"}
    for name, body in pkgs.items():
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(body)
    monkeypatch.syspath_prepend(str(site))
    src = open(PROBE).read().replace("__file__", repr(PROBE))
    files = {}
    for tag, pkg in (("innocent", None), ("exit", "tp_h_exit"), ("sigchld", "tp_h_sigchld"),
                     ("regraise", "tp_h_regraise")):
        files[tag] = tmp_path / f"p_{tag}.py"
        files[tag].write_text("import torch  # noqa: F401\n" + (f"import {pkg}  # noqa: F401\n" if pkg else "")
                              + src.replace('name="vadd"', f'name="vadd_{tag}"'))
    t0 = time.monotonic()
    res = audit([str(f) for f in files.values()], ["sm_90"], jobs=2)
    assert time.monotonic() - t0 < 240
    ok = {r.kernel for r in res.records if r.ok}
    errors = "\n".join(res.probe_errors)
    assert len([r for r in res.records if r.ok]) == 8, errors        # innocent and sigchld: 4 variants each
    assert "p_exit.py" in errors and "sys.exit(2)" in errors
    assert "p_regraise.py" in errors and "the REAL problem" in errors and "registered twice" not in errors
    assert ok and not any("innocent" in e or "sigchld" in e for e in res.probe_errors)


def _look_script(tmp_path):
    """A script that writes (cuTile's compile side imported?, torch blocked?) where it is forked."""
    script, out = tmp_path / "look.py", tmp_path / "seen.txt"
    script.write_text("import sys\nfrom tileprobe.probe.zygote import torch_blocked\n"
                      f"open({str(out)!r}, 'w').write(repr(('cuda.tile._compile' in sys.modules, torch_blocked())))\n")
    return script, out


def test_a_tune_of_files_without_torch_imports_the_compile_side_right_after_forking_their_loaders(tmp_path):
    """speculate_torch_free: the guess is made for files that do not look like they need torch, and the
    zygote imports cuTile's compile side without torch once their loaders are started (loaders_started), not after
    they report; files that look like they need torch get no guess."""
    from tileprobe.probe import zygote
    (tmp_path / "t.py").write_text("import os, torch\n")
    script, out = _look_script(tmp_path)
    with zygote.warm_starts():
        z = zygote.current()
        assert z is not None and z.wait_ready()
        assert zygote.speculate_torch_free([str(tmp_path / "t.py")]) is False and not z.speculate
        assert zygote.loaders_started() is False and not z.speculated          # nothing armed: nothing asked
        assert zygote.speculate_torch_free([PROBE, PROBE]) is True and z.speculate
        _run_forked_loader(z, script, tmp_path)            # a loader: no import yet
        assert out.read_text() == "(False, False)" and not z.speculated
        assert zygote.loaders_started() is True            # the loaders are started: the import is asked for
        assert z.speculated and z.torch_free and not z.speculate
        _run_forked_loader(z, script, tmp_path)            # what is forked afterwards has it, without torch
        assert out.read_text() == "(True, True)"
        assert zygote.prefetch_heavy(False) is True and zygote.current() is z   # the guess held: nothing changes


def test_the_guess_fires_when_the_plans_loaders_start_whatever_the_files_and_the_cache(tmp_path):
    """The hostile test of session 9: counting forks against the number of files lost the guess when a file's plan
    came from the cache, a file was named twice or one was missing. The import now starts after the loaders' first
    start, however many there are."""
    from tileprobe.probe import zygote
    from tileprobe.tune.static import load_space
    with zygote.warm_starts():
        z = zygote.current()
        assert z.wait_ready() and zygote.speculate_torch_free([PROBE, PROBE, str(tmp_path / "missing.py")])
        load_space([PROBE, PROBE, str(tmp_path / "missing.py")])
        assert z.speculated and not z.speculate


def test_needs_torch_reads_imports_among_others_and_by_name():
    import tempfile

    from tileprobe.probe.zygote import needs_torch
    for text, want in {"import os, torch\n": True, "import numpy as np; import torch\n": True,
                       "x = __import__('torch')\n": True, "importlib.import_module(\"tilegym.ops\")\n": True,
                       "import torchvision_like, os\n": False, "# import torch\nimport os\n": False}.items():
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(text)
        try:
            assert needs_torch(f.name) is want, text
        finally:
            os.unlink(f.name)


def test_a_wrong_torch_free_guess_makes_a_new_zygote_current_whose_workers_have_torch(tmp_path):
    """The loader of a file that imports torch through another module reports torch: a new zygote becomes the
    current one (the old one stays until warm_starts ends: its loaders still run) and what it forks for the
    compile side has cuTile imported with torch."""
    from tileprobe.probe import zygote
    script, out = _look_script(tmp_path)
    with zygote.warm_starts():
        z = zygote.current()
        assert z.wait_ready() and zygote.speculate_torch_free([PROBE])
        _run_forked_loader(z, script, tmp_path)
        assert zygote.loaders_started() and z.speculated
        assert zygote.prefetch_heavy(True) is True            # the loader saw torch after all
        z2 = zygote.current()
        assert z2 is not None and z2 is not z and not z.dead and z in zygote._retired
        assert z2.wait_ready()
        r, w = os.pipe()
        job = {"path": str(script), "targets": ["sm_90"], "max_variants": 10, "cases": None, "hints": None,
               "sys_path": list(sys.path), "tmp": str(tmp_path)}
        p = z2.start("_loader_entry", (job,), [w], stdout=True, heavy=True)
        os.close(w)
        p.wait(timeout=120)
        p.stdout.close()
        os.close(r)
        assert out.read_text() == "(True, False)"
    assert z.dead and z2.dead and not zygote._retired


def test_a_tune_whose_probe_imports_torch_through_a_helper_still_compiles(tmp_path, monkeypatch):
    """End to end, the wrong guess: the probe file names neither torch nor TileGym, a module beside it imports
    torch; the dry run's compiles are ok (forked from the zygote that imported torch), as without the guess."""
    from tileprobe.tune import tune
    (tmp_path / "helper_torch.py").write_text("import torch  # noqa: F401\n")
    src = open(PROBE).read().replace("__file__", repr(PROBE))
    (tmp_path / "p.py").write_text("import helper_torch  # noqa: F401\n" + src)
    from tileprobe.probe import zygote
    replaced = []
    real = zygote._replace_current

    def spy():
        replaced.append(1)
        return real()
    monkeypatch.setattr(zygote, "_replace_current", spy)
    res = tune([str(tmp_path / "p.py")], arch="sm_90", dry_run=True, num_sms=132, jobs=2)
    rows = [c for p in res.problems for c in p.candidates if c.config]
    assert replaced and len(rows) == 4 and all(c.status in ("ok", "duplicate_launch") for c in rows), \
        [(c.label, c.status, c.reason) for c in rows]


def test_an_early_zygote_is_taken_by_warm_starts_or_closed(monkeypatch):
    """start_early (the console entry point, for tune and audit): the next warm_starts takes it while the
    environment is the one it started in; in another one it is closed and a fresh one starts."""
    from tileprobe.probe import zygote
    assert zygote.start_early() is True
    early = zygote._early
    with zygote.warm_starts():
        assert zygote.current() is early and zygote._early is None
    assert early.dead
    assert zygote.start_early() is True
    early = zygote._early
    monkeypatch.setenv("TILEPROBE_TEST_OTHER_ENV", "1")     # the command changed its environment since
    with zygote.warm_starts():
        z = zygote.current()
        assert z is not None and z is not early and early.dead
    assert z.dead


def test_an_early_zygote_no_command_took_leaves_nothing_at_exit(tmp_path):
    """A command that ends before any warm_starts (a usage error, --bundle) closes the early zygote at exit: no
    process of it and no temp folder of it are left."""
    import subprocess
    code = ("import os, sys\nfrom tileprobe.probe import zygote\nassert zygote.start_early()\n"
            "z = zygote._early\nassert z.wait_ready()\nprint(z.pid, z.tmp)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert out.returncode == 0, out.stderr
    pid, tmp = out.stdout.split()
    time.sleep(0.5)
    assert not os.path.exists(tmp)
    try:
        os.kill(int(pid), 0)
        alive = open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        alive = False
    assert not alive


def test_a_sigterm_before_the_command_takes_its_signals_leaves_no_early_zygote_folder(tmp_path):
    """Between start_early and the CLI's own handlers a SIGTERM ended the process with its default action: atexit
    did not run and the zygote's temp folder stayed (session 9's hostile test). The early handler closes it first,
    then the process ends by the signal as before."""
    import subprocess
    code = ("import os, signal, sys\nfrom tileprobe.probe import zygote\nassert zygote.start_early()\n"
            "assert zygote._early.wait_ready()\nprint(zygote._early.tmp, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\nimport time; time.sleep(30)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert out.returncode == -signal.SIGTERM, (out.returncode, out.stderr)
    assert not os.path.exists(out.stdout.strip()) and not [p for p in os.listdir(tmp_path) if "zygote" in p]


def test_a_wrong_guess_whose_new_zygote_cannot_start_leaves_workers_to_start_fresh(monkeypatch):
    """If no new zygote can take over after a wrong guess, the old one (its compile side imported without torch)
    must not fork compile workers for a probe that needs torch (they would fail as broken_environment): it refuses
    them, and the pool starts fresh processes."""
    from tileprobe.probe import zygote
    with zygote.warm_starts():
        z = zygote.current()
        assert z.wait_ready() and zygote.speculate_torch_free([PROBE]) and zygote.loaders_started()

        def cannot(*a, **k):
            raise OSError("no more processes")
        monkeypatch.setattr(zygote, "Zygote", cannot)
        assert zygote.prefetch_heavy(True) is False
        assert zygote.current() is z and not z.torch_free
        r, w = os.pipe()
        try:
            assert zygote.start_worker(_Conn(w), ((),)) is None    # refused: the pool spawns one instead
        finally:
            os.close(r)
            os.close(w)


class _Conn:
    """The bit of a connection ``start_worker`` reads: its file descriptor."""

    def __init__(self, fd):
        self.fd = fd

    def fileno(self):
        return self.fd
