"""What a probe file imports, read without running it (:mod:`ast` and a regular expression over its first MiB):
the installed packages the zygote may import before forking its loader (:func:`installed_imports`), and whether it
looks like it needs torch (:func:`needs_torch`). Guesses that only move time (:mod:`tileprobe.probe.zygote`).
"""
from __future__ import annotations

import os
import re
import sys

#: A kernel named as ``"package.module:function"`` (a string constant of the probe file; comments are not read).
_KERNEL_NAME = re.compile(r"([A-Za-z_]\w*)(?:\.\w+)*:\w+")


def installed_imports(path: str) -> tuple[str, ...]:
    """Top-level names of the installed packages probe file ``path`` imports at module level (``import X``,
    ``from X.y import z``) or names a kernel in (``"X.ops.mod:kernel"``), read with :mod:`ast` (nothing of it runs):
    those found (:func:`importlib.util.find_spec` of a top-level name runs no package code) outside the probe's
    folder and the working directory (a site-packages folder inside them counts as installed: a venv in the
    repository), and outside the standard library, ``tileprobe`` and ``cuda``.

    Why: the zygote imports them once before it forks the probe's loader, and the compile workers
    forked after it have them. On the H200 host each compile worker of the TileGym matmul spent 3.4–4.8 s on its
    first job, 0.3–0.5 s of it in tileiras: it imported TileGym (torch, transformers) again
    (``benchmarks/tune/trace_tune.py``, 2026-12-02). The user's own modules (beside the probe, or in the working
    directory) are left to the loader, which runs them contained and reports their errors. ``()`` for a file that
    cannot be read or parsed (its loader reports that)."""
    import ast
    import importlib.util
    try:
        tree = ast.parse(_text(path))
        names = []
        for node in tree.body:
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
        names += [m.group(1) for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and (m := _KERNEL_NAME.fullmatch(node.value))]
    except Exception:
        return ()
    from tileprobe.probe.plancache import installed_roots
    user = tuple(os.path.join(os.path.realpath(d), "") for d in (os.path.dirname(os.path.abspath(path)), os.getcwd()))
    installed = tuple(r for r in installed_roots() if r not in user)
    out = []
    for top in dict.fromkeys(n.partition(".")[0] for n in names):
        if top in sys.stdlib_module_names or top in ("tileprobe", "cuda", "__future__"):
            continue
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        where = spec and (spec.origin if spec.origin not in (None, "namespace") else
                          next(iter(spec.submodule_search_locations or ()), None))
        real = where and os.path.realpath(where)
        if real and (real.startswith(installed) or not real.startswith(user)):
            out.append(top)
    return tuple(out)


#: Bytes of a probe file read here (in the tileprobe process) to guess what it imports.
HEAD_BYTES = 1 << 20


def _text(path: str) -> str:
    """The first :data:`HEAD_BYTES` of ``path`` as text; "" when it cannot be read or is not a regular file.

    This runs in the tileprobe process, before the probe's loader: the file is opened without blocking and read only
    when the opened descriptor is a regular file (a FIFO's ``open`` waits for a writer for ever, ``/dev/zero`` never
    ends: an audit of a FIFO hung here, 2026-12-04). The loader child then reads it under its deadline."""
    import stat
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def needs_torch(path: str) -> bool:
    """Whether probe file ``path`` looks like it imports torch (it imports ``torch`` or ``tilegym``, or names a kernel
    in them as ``"tilegym.…"``): its loader is
    then forked after :data:`HEAVY` (torch with it) is imported once, rather than importing torch itself. A guess
    that only moves time: a wrong one costs that loader its own torch import, or a wait for the zygote's."""
    text = _text(path)
    return _NEEDS_TORCH.search(text) is not None


#: ``import torch`` / ``from tilegym…`` (also after ``;`` or among other names: ``import os, torch``), and a string
#: naming them (``"tilegym.ops…:k"``, ``import_module("torch")``, ``__import__('torch')``).
_NEEDS_TORCH = re.compile(r"(?:^|;)\s*from\s+(?:torch|tilegym)\b|(?:^|;)\s*import\s+[\w., ]*?\b(?:torch|tilegym)\b"
                          r"|[\"'](?:torch|tilegym)[.:\"']", re.M)


