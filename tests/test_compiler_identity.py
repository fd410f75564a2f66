"""A compiler is what its files are, not what its ``--version`` says.

A ``--tileiras`` that prints the real 13.4.92's version but crashes stores its failures against its own files: a
later plain audit with the real 13.4.92 compiles those variants (and a second audit with the fake one reuses its own
failures). Failures the probe's own code causes (a signal it armed, the temp folder it removed) are probe errors,
never stored as the compiler's. A cubin over the size limit is refused."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

from tileprobe._cutile import which_tool
from tileprobe.model.toolkit import compiler_identity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "tests", "data", "kernels.py")
REAL = which_tool("tileiras")


def _probe(folder, head: str = "", name: str = "vec") -> str:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(f"""
        import os, signal, shutil, tempfile
        from tileprobe import Probe
        N = 1 << 16
        {head}
        probe = Probe(kernel={KERNELS + ':vec_add'!r}, name={name!r}, cases={{"TILE": [1024]}},
                      args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                                                 arrays.empty((N,), "float32"), case["TILE"]))
        """))
    return str(path)


def _fake(folder, body: str) -> str:
    """A tileiras that is the real one for --version, --help and cuTile's bytecode probe, and runs ``body`` (bash)
    for a kernel compile, logging each compile to folder/compiles.log."""
    folder.mkdir(exist_ok=True)
    script = folder / "tileiras"
    script.write_text(f"#!/bin/bash\ncase \"$*\" in\n  *--version*|*--help*|*/probe1[0-9]*) exec {REAL} \"$@\";;\n"
                      f"esac\necho \"$*\" >> {folder}/compiles.log\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def _audit(tmp_path, *args) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = tmp_path / "o.json"
    env = {**os.environ, "PYTHONPATH": ROOT, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "tileprobe", "audit", *args, "--arch", "sm_90", "--no-sass",
                           "--format", "none", "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=400)
    return proc, (json.loads(out.read_text())["variants"] if out.exists() else [])


def test_a_fake_compiler_with_the_real_build_string_does_not_poison_the_store(tmp_path):
    probe, store = _probe(tmp_path), str(tmp_path / "s.sqlite")
    fake = _fake(tmp_path / "fake", "kill -SEGV $$")
    proc, [rec] = _audit(tmp_path, probe, "--store", store, "--tileiras", fake)
    assert rec["status"] == "compiler_crash" and "SIGSEGV" in rec["message"], proc.stderr
    assert "V13.4.92" in rec["tileiras"]                       # it says it is 13.4.92
    proc, [rec] = _audit(tmp_path, probe, "--store", store, "--tileiras", fake)
    assert rec["status"] == "compiler_crash"
    assert len((tmp_path / "fake" / "compiles.log").read_text().splitlines()) == 1   # its own failure: reused
    proc, [rec] = _audit(tmp_path, probe, "--store", store, "--tileiras", REAL)
    assert rec["status"] == "ok" and rec["registers"] > 0, proc.stderr   # the real one compiles it
    import sqlite3
    with sqlite3.connect(store) as c:
        (sha,) = c.execute("SELECT tileiras_sha256 FROM compiles").fetchone()
    assert sha == compiler_identity(REAL, str(tmp_path / "cache" / "tileprobe" / "compiler-hashes.json"))


def test_identity_is_the_files_cached_by_size_and_time(tmp_path):
    a, b = tmp_path / "a" / "bin", tmp_path / "b" / "bin"
    for d in (a, b):
        d.mkdir(parents=True)
        (d / "tileiras").write_bytes(b"same bytes")
        (d / "ptxas").write_bytes(b"ptxas")
    cache = str(tmp_path / "hashes.json")
    assert compiler_identity(str(a / "tileiras"), cache) == compiler_identity(str(b / "tileiras"), cache)
    (b / "ptxas").write_bytes(b"another ptxas")                 # same tileiras, another ptxas: another compiler
    assert compiler_identity(str(a / "tileiras"), cache) != compiler_identity(str(b / "tileiras"), cache)
    cached = json.loads(open(cache).read())
    assert cached[str(a / "tileiras")][:2] == [10, os.stat(a / "tileiras").st_mtime_ns]
    open(cache, "w").write("[" * 100_000)                      # a damaged cache is rebuilt, not a traceback
    assert compiler_identity(str(a / "tileiras"), cache) == compiler_identity(str(a / "tileiras"), None)


def test_failures_the_probe_causes_are_probe_errors_not_the_compilers(tmp_path):
    """A SIGALRM the probe arms at import, a probe that removes the worker's temp folder at import: neither is
    stored as a compiler failure (probe_error is compiled again, so a fixed probe is not stuck with it)."""
    store = str(tmp_path / "s.sqlite")
    alarm = _probe(tmp_path, "signal.setitimer(signal.ITIMER_REAL, 0.3)", name="alarm")
    removes = _probe(tmp_path, "shutil.rmtree(tempfile.gettempdir(), ignore_errors=True)", name="removes")
    proc, recs = _audit(tmp_path, alarm, removes, "--store", store)
    by = {r["kernel"]: r for r in recs}
    assert by["alarm"]["status"] in ("ok", "probe_error"), proc.stderr      # ok: disarmed before the compile
    assert by["removes"]["status"] == "ok", proc.stderr                      # the folder made again
    import sqlite3
    with sqlite3.connect(store) as c:
        stored = dict(c.execute("SELECT kernel, status FROM compiles").fetchall())
    assert "compiler_crash" not in stored.values() and "compile_error" not in stored.values(), stored


def test_a_worker_killed_by_a_timer_signal_is_the_probes_error():
    from tileprobe.compile.failure import dead_worker
    from tileprobe.compile.job import Variant
    v = Variant("/x/p.py", 0, "k", (), (), "sm_90")
    f = dead_worker(v, None, None, "killed by SIGALRM (signal 14)")
    assert f.failure == "probe_error" and "SIGALRM is a signal only the probe's own code arms" in f.message
    assert dead_worker(v, None, None, "killed by SIGSEGV (signal 11)").failure != "probe_error"


def test_a_cubin_over_the_size_limit_is_refused(tmp_path):
    fake = _fake(tmp_path / "big", f'{REAL} "$@" || exit $?\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; '
                 'done\ntruncate -s 70M "$out"')
    proc, [rec] = _audit(tmp_path, _probe(tmp_path), "--no-store", "--tileiras", fake)
    assert rec["status"] == "compile_error", proc.stderr
    assert "a cubin of 73,400,320 bytes, more than the limit of 67,108,864 bytes" in rec["error"]
