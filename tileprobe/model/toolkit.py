"""What a CUDA toolkit folder and a tileiras say about themselves: the toolkit's version, its libnvvm, the CUDA root
tileiras takes, the targets tileiras lists, and whether that root is the CUDA_HOME trap.

How tileiras finds its helpers (strace of tileiras 13.3.36 and 13.4.92, 2026-11-29; ``tileprobe/toolchain.py``):
it takes a CUDA root — ``$CUDA_HOME`` if set, else ``$CUDA_PATH``, else the folder above its own ``bin/`` (by the
path it was started with: a hard link to tileiras in another folder takes that folder's parent) — dlopens
``<root>/nvvm/lib64/libnvvm.so`` or ``<root>/lib/libnvvm.so.4`` and runs ``<root>/bin/ptxas``. A root holding an
older toolkit (CUDA 13.0), no libnvvm, or an empty value makes tileiras 13.3 and 13.4 fail every compile with only
``error: failed to compile Tile IR program`` (exit code 5): the CUDA_HOME trap (FIELD_NOTES, reproduced here with
a fake CUDA 13.0 root, 2026-12-01). ``tileprobe doctor`` (:mod:`tileprobe.analyses.doctor`) and the audit's
failure classes (:mod:`tileprobe.compile.failure`) both use these readers.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

# Imports inside functions here are lazy on purpose: at the module head they would add 0.06 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

__all__ = ["TRAP", "compiler_files", "compiler_identity", "cuda_root", "environment_trap", "libnvvm", "parse_targets",
           "run_tool", "tool_timeout_s", "toolkit_version"]

#: The only line tileiras 13.3/13.4 prints when its CUDA root is broken (exit code 5).
TRAP = "error: failed to compile Tile IR program"


def _exe(name: str) -> str:
    return name + (".exe" if os.name == "nt" else "")


def _mm(version: str) -> tuple[int, int]:
    parts = version.split(".")
    return int(parts[0]), int(parts[1])


def toolkit_version(root: str | os.PathLike) -> tuple[str | None, str]:
    """A CUDA toolkit's version and where it was read: ``version.json`` (``cuda.version``), ``bin/nvcc --version``
    (``V13.0.88``), or ``CUDA_VERSION`` in ``include/cuda.h`` (13000 → ``"13.0"``). ``(None, "")`` if none."""
    root = Path(root)
    try:
        doc = json.loads((root / "version.json").read_text(encoding="utf-8"))
        return str(doc["cuda"]["version"]), "version.json"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    nvcc = root / "bin" / _exe("nvcc")
    if nvcc.is_file():
        try:
            out = run_tool([str(nvcc), "--version"]).stdout     # the one tool timeout, its group killed
            m = re.search(r"V(\d+\.\d+(?:\.\d+)?)", out) or re.search(r"release (\d+\.\d+)", out)
            if m:
                return m.group(1), "bin/nvcc --version"
        except (OSError, subprocess.SubprocessError):
            pass
    for header in [root / "include" / "cuda.h", *sorted(root.glob("targets/*/include/cuda.h"))]:
        try:
            m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", header.read_text(errors="replace"))
        except OSError:
            continue
        if m:
            n = int(m.group(1))
            return f"{n // 1000}.{n % 1000 // 10}", str(header.relative_to(root))
    return None, ""


def libnvvm(root: str | os.PathLike) -> Path | None:
    """The libnvvm tileiras would load from CUDA root ``root`` (``nvvm/lib64/libnvvm.so``, else
    ``lib/libnvvm.so.4``), or None."""
    for rel in ("nvvm/lib64/libnvvm.so", "lib/libnvvm.so.4"):
        if (Path(root) / rel).is_file():
            return Path(root) / rel
    return None


def parse_targets(help_text: str) -> list[str]:
    """The ``--gpu-name`` values of ``tileiras --help`` (``=sm_90  -   SM 90`` lines), in its order."""
    return re.findall(r"^\s+=(sm_\d+[a-z]?)\b", help_text or "", flags=re.M)


def cuda_root(tileiras: str, env: Mapping[str, str]) -> tuple[str, str]:
    """(the CUDA root tileiras takes in environment ``env``, where from: ``"$CUDA_HOME"``, ``"$CUDA_PATH"`` or
    ``"the folder above its bin/"``). An empty ``CUDA_HOME`` counts as set (tileiras then has no root)."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var) is not None:
            return env[var], f"${var}"
    return os.path.dirname(os.path.dirname(os.path.abspath(tileiras))), "the folder above its bin/"


def environment_trap(tileiras: str, env: Mapping[str, str], tileiras_version: str | None) -> str | None:
    """Why the CUDA root ``tileiras`` takes in ``env`` would make it fail with only :data:`TRAP`, or None when the
    root looks sound: an empty value, not a folder, no libnvvm, or a toolkit older than ``tileiras_version``
    (``"13.4.92"``; None: not compared)."""
    root, origin = cuda_root(tileiras, env)
    where = f"{origin}={root}" if origin.startswith("$") else f"{root} ({origin})"
    if not root:
        return f"{origin} is set but empty"
    if not os.path.isdir(root):
        return f"its CUDA root {where} is not a folder"
    version, how = toolkit_version(root)
    if tileiras_version and version and _mm(version) < _mm(tileiras_version):
        return f"its CUDA root {where} is CUDA {version} (from {how}), older than tileiras {tileiras_version}"
    if libnvvm(root) is None:
        return f"its CUDA root {where} has no nvvm/lib64/libnvvm.so or lib/libnvvm.so.4"
    return None


# --- a compiler is what its files are -------------------------------------------------------------------------------

#: Name of the cache of file hashes (under the user cache folder): path → (size, mtime_ns, SHA-256).
HASH_CACHE_NAME = "compiler-hashes.json"


def _file_sha256(path: str, cache: dict) -> str:
    """SHA-256 of the file ``path`` (its target when a link), taken from ``cache`` while its size and modification
    time (ns) are the same; ``"missing"`` for a path that is not a file."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    real = os.path.realpath(path)
    hit = cache.get(real)
    if isinstance(hit, list) and len(hit) == 3 and hit[:2] == [st.st_size, st.st_mtime_ns]:
        return str(hit[2])
    h = hashlib.sha256()
    try:
        with open(real, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return "unreadable"
    cache[real] = [st.st_size, st.st_mtime_ns, h.hexdigest()]
    return h.hexdigest()


def compiler_files(tileiras: str) -> dict[str, str]:
    """The files that make up compiler ``tileiras`` as tileprobe runs it (CUDA_HOME unset; module doc): itself, the
    ptxas and the libnvvm of the CUDA root above its ``bin/``; ``""`` for one that is not there."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(tileiras)))
    nvvm = libnvvm(root)
    ptxas = os.path.join(root, "bin", _exe("ptxas"))
    return {"tileiras": os.path.abspath(tileiras), "ptxas": ptxas if os.path.isfile(ptxas) else "",
            "libnvvm": str(nvvm) if nvvm else ""}


def compiler_identity(tileiras: str, cache_path: str | None = None) -> str:
    """What compiler ``tileiras`` is, by its files (:func:`compiler_files`): SHA-256 (hex) over the SHA-256 of
    tileiras, its ptxas and its libnvvm. Two installs of the same files are one compiler; a binary that prints
    another's ``--version`` is not. The file hashes are cached in ``cache_path`` (default: the user cache folder's
    :data:`HASH_CACHE_NAME`) by path, size and modification time, so an audit reads the ~100 MB once per install;
    an unreadable or damaged cache is rebuilt."""
    if cache_path is None:
        import platformdirs
        cache_path = os.path.join(platformdirs.user_cache_dir("tileprobe"), HASH_CACHE_NAME)
    from tileprobe.cachefile import read_cache_bytes
    raw = read_cache_bytes(cache_path)     # a FIFO, /dev/zero or a huge file is a miss, never a hang
    try:
        cache = json.loads(raw) if raw is not None else {}
        cache = cache if isinstance(cache, dict) else {}
    except (ValueError, RecursionError):
        cache = {}
    before = dict(cache)
    parts = [f"{name}:{_file_sha256(p, cache) if p else 'none'}" for name, p in compiler_files(tileiras).items()]
    if cache != before:
        from tileprobe.cachefile import write_cache_bytes
        write_cache_bytes(cache_path, json.dumps(cache).encode())   # whole, then renamed; else hashed next time
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def tool_timeout_s() -> float:
    """Seconds one run of a compiler tool that answers a question (``--version``, ``--help``, and cuTile's
    bytecode-version probe, which cuTile starts without a timeout) may take: the setting
    ``TILEPROBE_TOOL_TIMEOUT_S`` (default 60 s; tileiras 13.4.92 answers in well under one; the tests shorten it),
    read when used so that a bad value is an error with its name, not a traceback at import.

    Raises:
        UsageError: the setting is not a timeout (:func:`tileprobe.schema.timeout_seconds`).
    """
    from tileprobe.errors import UsageError
    from tileprobe.schema import timeout_seconds
    text = os.environ.get("TILEPROBE_TOOL_TIMEOUT_S", "60")
    try:
        return timeout_seconds(text)
    except ValueError as e:
        raise UsageError(f"TILEPROBE_TOOL_TIMEOUT_S={text!r}: {e}") from None


def run_tool(command: list[str], env: Mapping[str, str] | None = None,
             timeout_s: float | None = None) -> subprocess.CompletedProcess:
    """Run a compiler tool to ask it something (``tileiras --version``) in its own process group, dying with this
    process, for at most ``timeout_s`` (default :func:`tool_timeout_s`); the whole group is killed when it ends or
    times out (a child it left behind too): :func:`tileprobe.procs.run_in_group`. Text output.

    Raises:
        subprocess.TimeoutExpired: it did not answer in time (it and its group were killed).
        OSError: it cannot be started.
    """
    from tileprobe.procs import run_in_group
    limit = tool_timeout_s() if timeout_s is None else timeout_s
    rc, out, err = run_in_group(command, dict(env) if env is not None else None, limit, text=True)
    if rc is None:
        raise subprocess.TimeoutExpired(command, limit, out, err)
    return subprocess.CompletedProcess(command, rc, out, err)
