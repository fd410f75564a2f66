"""Test doubles shared by several test files: the standard ``vec_add`` probe file, tileiras wrappers that are the
real compiler for everything but a kernel compile, a search of /proc for the processes a test started, and a
repository script imported as a module.
(Imported as ``support``: pytest puts ``tests/`` on sys.path.)"""
from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

KERNELS = Path(__file__).parent / "data" / "kernels.py"


def load_script(path: str | os.PathLike, register: bool = False):
    """The repository script at ``path`` (a benchmark, a data generator) imported as a module named after its file,
    for tests of its functions; ``register``: put it in ``sys.modules`` first (a script whose dataclasses look
    their module up by name needs it)."""
    import importlib.util
    import sys
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: importlib cannot load it as a module (not a .py file?): name a script's .py file")
    mod = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def write_vec_probe(path: Path, tiles=(1024,), occupancy=(1, 2), name: str = "vec_add") -> str:
    """Write a probe file for ``tests/data/kernels.py:vec_add`` (65,536 float32 elements) with cases
    ``TILE`` ∈ ``tiles`` × hints ``occupancy`` ∈ ``occupancy``, and a grid for ``run``; returns its path."""
    path.write_text(textwrap.dedent(f"""
        from tileprobe import Probe
        N = 1 << 16
        probe = Probe(
            kernel={str(KERNELS) + ':vec_add'!r},
            args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                                       arrays.empty((N,), "float32"), case["TILE"]),
            cases={{"TILE": {list(tiles)!r}}}, hints={{"occupancy": {list(occupancy)!r}}}, name={name!r},
            grid=lambda case, hints, num_sms: (N // case["TILE"],))
        """))
    return str(path)


def fake_tileiras(folder: Path, body: str, *, logged: bool = False, real_after: bool = False) -> str:
    """Write ``folder/tileiras``: the real tileiras for ``--version``, ``--help`` and cuTile's bytecode probe; for a
    kernel compile it runs ``body`` (bash). ``logged``: first compile with the real one, append the arguments to
    ``folder/compiles.log``, and set ``$n`` to the number of compiles logged before this one, then ``body``. The
    count and the append are one step under ``flock`` (two compiles at once both read n=0 on a loaded machine: a
    flaky Ray test, 2026-12-01). ``real_after`` (with ``logged``): count, run ``body``, then the real compile: a
    compile that ``body`` hangs or fails costs no real compile first (a test that times out many hung compiles
    waits only for their timeouts). Returns the script's path."""
    from tileprobe._cutile import which_tool
    real = which_tool("tileiras")
    if logged:
        log = f"{folder}/compiles.log"
        count = (f'n=$(flock {log}.lock bash -c \'n=$(wc -l < "$0" 2>/dev/null || echo 0); echo "$1" >> "$0"; '
                 f'echo $n\' {log} "$*")\n')
        body = f'{count}{body}\nexec {real} "$@"' if real_after else f'{real} "$@" || exit $?\n{count}{body}'
    script = folder / "tileiras"
    script.write_text(f"""#!/bin/bash
case "$*" in
  *--version*|*--help*|*/probe1[0-9]*) exec {real} "$@";;
esac
{body}
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def live_processes_with(marker: str, where: str = "cmdline") -> list[int]:
    """Live (not zombie) processes whose ``/proc/PID/<where>`` (``cmdline`` or ``environ``) holds ``marker``."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/{where}", "rb") as f:
                if marker.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(int(pid))
        except OSError:
            continue
    return out
