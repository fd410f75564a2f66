"""The reduction's files: a standalone kernel (``cuda.tile`` only), a probe beside it that reproduces the property
with a plain ``tileprobe audit``, and a Markdown report in the form of an upstream compiler bug report.

    OUT/reduced_kernel.py   the kernel and the module constants it reads; imports ``cuda.tile`` and nothing else
    OUT/reduced_probe.py    Probe(kernel="reduced_kernel.py:NAME", args=…, hints=…, grid=…)
    OUT/REPORT.md           what holds under which compiler, what the kernel needs, the environment, the repeat
                            command, the reduced source
"""
from __future__ import annotations

import ast
import contextlib
import os
from dataclasses import dataclass

from tileprobe.reduce.source import names_used, parts

KERNEL_FILE, PROBE_FILE, REPORT_FILE = "reduced_kernel.py", "reduced_probe.py", "REPORT.md"


@dataclass
class Written:
    """Paths of the files :func:`write_standalone` wrote, and the kernel's name."""
    kernel: str
    probe: str
    kernel_name: str


def _needed(tree: ast.Module, roots: list[ast.AST]) -> list[ast.stmt]:
    """Module-level assignments the ``roots`` read, transitively, in module order."""
    defs: dict[str, ast.Assign] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defs[n.id] = node
    want: set[int] = set()
    todo = set().union(*(names_used(r) for r in roots)) if roots else set()
    while todo:
        name = todo.pop()
        found = defs.get(name)
        if found is not None and id(found) not in want:
            want.add(id(found))
            todo |= names_used(found.value)
    return [n for n in tree.body if id(n) in want]


def kernel_module(source: str) -> tuple[str, str]:
    """The standalone kernel file's text for reduced probe ``source`` and the kernel's name: ``import cuda.tile
    as ct``, the constants the kernel reads (annotation aliases included), the kernel."""
    tree = ast.parse(source)
    k = parts(tree).kernel
    body = [ast.Import([ast.alias("cuda.tile", "ct")]), *_needed(tree, [k]), k]
    doc = '"""Reduced by `tileprobe reduce`: needs only cuda.tile (REPORT.md beside it says what it shows)."""\n'
    return doc + ast.unparse(ast.fix_missing_locations(ast.Module(body, []))) + "\n", k.name


def probe_module(source: str, kernel_name: str) -> str:
    """The probe file's text: the constants ``args`` and ``grid`` read, ``args``, and the Probe naming the kernel
    file beside it by path."""
    tree = ast.parse(source)
    p = parts(tree)
    call = p.probe_call
    for kw in call.keywords:
        if kw.arg == "kernel":
            kw.value = ast.parse(f'f"{{_HERE}}/{KERNEL_FILE}:{kernel_name}"', mode="eval").body
    roots: list[ast.AST] = [call] + ([p.args_fn] if p.args_fn else [])
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
               and not any((a.asname or a.name) == "ct" for a in n.names)]
    used = set().union(*(names_used(r) for r in roots))
    imports = [n for n in imports if {(a.asname or a.name).split(".")[0] for a in n.names} & (used | {"Probe"})]
    head = ast.parse("import os\n_HERE = os.path.dirname(os.path.abspath(__file__))").body
    body = [*head, *imports, *_needed(tree, roots), *([p.args_fn] if p.args_fn else []),
            next(n for n in tree.body if isinstance(n, ast.Assign) and n.value is call)]
    doc = ('"""Reproduces the reduced kernel\'s property: `tileprobe audit reduced_probe.py --arch ARCH '
           '--tileiras V` (REPORT.md has the exact command)."""\n')
    return doc + ast.unparse(ast.fix_missing_locations(ast.Module(body, []))) + "\n"


def write_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and ``os.replace``: whatever was at
    ``path`` — a file of the user's, a symbolic link (its target is never written through), a FIFO (whose open
    would block) — is replaced as a folder entry, and a failed write leaves no half file.

    Raises:
        OSError: the folder cannot be written (read-only, full).
    """
    import tempfile
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)      # as open() would make it (mkstemp's 0600 would keep REPORT.md private)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_standalone(source: str, out_dir: str) -> Written:
    """Write the kernel and probe files into ``out_dir`` (made if missing); returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    ktext, name = kernel_module(source)
    kpath, ppath = os.path.join(out_dir, KERNEL_FILE), os.path.join(out_dir, PROBE_FILE)
    write_file(kpath, ktext)
    write_file(ppath, probe_module(source, name))
    return Written(kpath, ppath, name)
