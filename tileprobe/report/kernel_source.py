"""The source of an audited ``@ct.kernel`` function, found without running anything: what the Markdown report
prints so that a report on a kernel taken from a package (TileGym, FlashInfer …) carries the kernel itself.

The probe file and the files it names are read as text and parsed (:mod:`ast`), never imported: a probe and the
packages it imports are user code, which runs only in contained children. The files searched, in order: the probe;
the ``.py`` files its string literals name (``"simple_kernels.py:vadd"``), beside the probe, and the modules they
name as ``"package.module:function"`` (a ``Probe(kernel=…)`` spec); the modules its
top-level imports name, found on ``sys.path`` (the probe's folder first) as ``a/b.py`` or ``a/b/__init__.py``, and
one step further through a package's re-export (``from .swiglu import swiglu_kernel`` in an ``__init__.py``). The
kernel is the top-level function whose name is the cubin symbol (``VariantRecord.symbol``) or its prefix before
cuTile's mangling suffix (``vadd`` of ``vadd_Kt1_A1f32_…``), the longest such name when several match.
"""
from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

#: Longest kernel source printed (lines); a longer function is named by file and line only.
KERNEL_MAX_LINES = 200
_PY_NAME = re.compile(r"([\w./-]+\.py)(?::\w+)?$")
_MODULE_SPEC = re.compile(r"([A-Za-z_][\w.]*):[A-Za-z_]\w*$")    # Probe(kernel="tilegym.ops.cutile.rms_norm:name")


@dataclass(frozen=True)
class KernelSource:
    """One kernel function's text: ``path`` (the file), ``line`` (1-based, of its first decorator) and ``text``
    (decorators and body as the file has them)."""
    path: str
    line: int
    text: str


def find_kernel_source(probe: str, symbol: str, search_path: Sequence[str] | None = None) -> KernelSource | None:
    """The function the cubin symbol ``symbol`` was compiled from, searched from probe file ``probe`` (module doc);
    None when no file read has it (a kernel built at run time, a package not installed here, a file not readable).
    ``search_path``: the folders searched for imported modules after the probe's (None: ``sys.path``)."""
    if not symbol:
        return None
    folders = [os.path.dirname(os.path.abspath(probe)), *(sys.path if search_path is None else search_path)]
    seen: set[str] = set()
    queue = [os.path.abspath(probe)]
    best: KernelSource | None = None
    best_len = 0
    depth = {queue[0]: 0}
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        tree, text = _parse(path)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _names_symbol(node.name, symbol) \
                    and len(node.name) > best_len:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                best, best_len = KernelSource(path, first, _segment(text, first, node.end_lineno or node.lineno)), \
                    len(node.name)
        if depth[path] < 2:
            for found in _named_files(tree, path, folders):
                depth.setdefault(found, depth[path] + 1)
                queue.append(found)
    return best


def _names_symbol(name: str, symbol: str) -> bool:
    return symbol == name or symbol.startswith(name + "_K")


def _parse(path: str) -> tuple[ast.Module | None, str]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return ast.parse(text), text
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None, ""


def _segment(text: str, first: int, last: int) -> str:
    return "\n".join(text.splitlines()[first - 1:last])


def _named_files(tree: ast.Module, path: str, folders: Sequence[str]) -> list[str]:
    """The existing ``.py`` files the module ``tree`` (file ``path``) names: string literals ending in ``.py`` (or
    ``.py:name``) beside it, and its top-level imports (relative ones from its own folder)."""
    here = os.path.dirname(path)
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip()
            m = _PY_NAME.search(text)
            if m:
                name = m.group(1)
                out += [p for p in (name if os.path.isabs(name) else os.path.join(here, name),) if os.path.isfile(p)]
            elif (m := _MODULE_SPEC.fullmatch(text)) is not None:
                out += _module_files(m.group(1), folders)
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                out += _module_files(alias.name, folders)
        elif isinstance(node, ast.ImportFrom):
            base = [here] if node.level == 1 else folders if node.level == 0 else []
            module = node.module or ""
            out += _module_files(module, base) if module else []
            for alias in node.names:    # from pkg import submodule
                out += _module_files(f"{module}.{alias.name}" if module else alias.name, base)
    return out


def _module_files(module: str, folders: Sequence[str]) -> list[str]:
    """The file of ``module`` (dotted) in the first of ``folders`` that has it, as ``a/b.py`` or
    ``a/b/__init__.py``; [] when none does (the standard library and extension modules included)."""
    parts = module.split(".")
    for folder in folders:
        if not folder or not os.path.isdir(folder):
            continue
        base = os.path.join(folder, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return [os.path.abspath(candidate)]
    return []
