"""What a CUDA toolkit folder and a tileiras say about themselves: the toolkit's version, its libnvvm, the CUDA root
tileiras takes, the targets tileiras lists, and whether that root is the CUDA_HOME trap.

How tileiras finds its helpers (strace of tileiras 13.3.36 and 13.4.92, 2026-11-29; ``tileprobe/toolchain.py``):
it takes a CUDA root — ``$CUDA_HOME`` if set, else ``$CUDA_PATH``, else the folder above its own ``bin/`` (by the
path it was started with: a hard link to tileiras in another folder takes that folder's parent) — dlopens
``<root>/nvvm/lib64/libnvvm.so`` or ``<root>/lib/libnvvm.so.4`` and runs ``<root>/bin/ptxas``. A root holding an
older toolkit (CUDA 13.0), no libnvvm, or an empty value makes tileiras 13.3 and 13.4 fail every compile with only
``error: failed to compile Tile IR program`` (exit code 5): the CUDA_HOME trap (FIELD_NOTES, reproduced here with
a fake CUDA 13.0 root, 2026-12-01). ``tileprobe doctor`` (:mod:`tileprobe.analyses.doctor`) and the audit's
failure classes (:mod:`tileprobe.audit.failure`) both use these readers.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Mapping

__all__ = ["TRAP", "cuda_root", "environment_trap", "libnvvm", "parse_targets", "toolkit_version"]

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
            out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30).stdout
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
