"""This process's GPU, compiler and cuda-tile as a tune table's rows record them, and why a row's provenance
does not match them. Standard library only (see :mod:`tileprobe.record.capture`).
"""
from __future__ import annotations

import os
import re
import sys


def compiler_timeout_s():
    """The compiler timeout cuTile compiles under now, in seconds, or None (no limit): cuda-tile 1.7's
    ``ct.compiler_timeout`` sets ``cuda.tile._cext.default_tile_context.config.compiler_timeout_sec``, which starts
    from ``CUDA_TILE_COMPILER_TIMEOUT_SEC`` (cuda/tile/_context.py)."""
    try:
        value = sys.modules["cuda.tile._cext"].default_tile_context.config.compiler_timeout_sec
    except Exception:
        value = os.environ.get("CUDA_TILE_COMPILER_TIMEOUT_SEC") or None
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _cutile_version():
    try:
        from importlib.metadata import version
        return version("cuda-tile")
    except Exception:
        return None


def device_facts() -> dict:
    """This process's GPU and compiler, as a tune table's rows record them: ``gpu`` (name), ``num_sms``, ``arch``,
    ``tileiras`` (the release line of the ``--version`` of the tileiras cuTile compiles with, e.g. ``Cuda
    compilation tools, release 13.4, V13.4.92``), ``cuda_tile``. Read
    through torch (when the program imported it) and cuTile; a fact it cannot read is left out."""
    out = {"cuda_tile": _cutile_version()}
    try:
        from cuda.tile._cext import get_compute_capability
        major, minor = get_compute_capability()
        out["arch"] = f"sm_{major}{minor}"
    except Exception:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            out["gpu"], out["num_sms"] = props.name, props.multi_processor_count
        except Exception:
            pass
    try:
        from cuda.tile._compile import _get_compiler_version_string
        text = _get_compiler_version_string() or ""
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        release = [ln for ln in lines if "release" in ln and build_of(ln) != ln]   # as _cutile.parse_build
        if lines:
            out["tileiras"] = (release or lines)[-1]
    except Exception:
        pass
    return out


def build_of(text) -> str | None:
    """``V13.4.92`` from a tileiras version line (the build, whatever else the line says); else the text."""
    if not text:
        return None
    m = re.search(r"V\d+(?:\.\d+)+", str(text))
    return m.group(0) if m else str(text).strip()


#: Row field → what it is, in the order a stale row's reasons are given.
PROVENANCE = (("gpu", "GPU"), ("num_sms", "SM count"), ("arch", "arch"), ("tileiras", "tileiras build"),
              ("cuda_tile", "cuda-tile"), ("source_sha256", "kernel source"))


def stale_reasons(row: dict, here: dict, fields=None) -> list[str]:
    """Why a table row does not hold here (empty: it does): each provenance field (of ``fields``, default all of
    :data:`PROVENANCE`) that differs, or that the row or this process cannot tell. ``here``: :func:`device_facts`
    plus ``source_sha256`` of the kernel's file."""
    out = []
    for field, what in PROVENANCE:
        if fields is not None and field not in fields:
            continue
        want, have = row.get(field), here.get(field)
        if field == "tileiras":
            want, have = build_of(want), build_of(have)
        if field == "source_sha256":
            want, have = (want or "")[:12] or None, (have or "")[:12] or None
        if want is None or have is None:
            out.append(f"{what} unknown ({'the table has none' if want is None else 'cannot read it here'})")
        elif want != have:
            out.append(f"{what} {have} here, {want} in the table")
    return out
