"""The capture package (tileprobe/record/capture/) is loaded by path into users' programs: it must import only the
standard library and its own modules, and load as a package from its ``__init__.py`` alone, without tileprobe on
``sys.path``."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

from tileprobe.record import hook

CAPTURE_DIR = os.path.dirname(hook.capture_path())


def _imports(path: str) -> list[tuple[int, str]]:
    """(level, top-level module name) of every import run when the module loads (not those inside functions, which
    read the program's own cuda.tile when called): level > 0 for relative imports."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            out += [(0, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.level, (node.module or "").split(".")[0]))
    return out


def test_capture_modules_import_only_the_standard_library_and_each_other():
    files = sorted(f for f in os.listdir(CAPTURE_DIR) if f.endswith(".py"))
    assert "__init__.py" in files and len(files) >= 5
    for name in files:
        for level, module in _imports(os.path.join(CAPTURE_DIR, name)):
            if level == 0:
                assert module in sys.stdlib_module_names or module == "__future__", (name, module)
            else:
                assert level == 1, (name, level, module)   # a sibling, never the tileprobe package above


def test_capture_loads_by_path_as_a_package_without_tileprobe(tmp_path):
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('_tileprobe_record_capture', {hook.capture_path()!r})\n"
        "m = importlib.util.module_from_spec(spec)\n"
        "sys.modules[spec.name] = m\n"
        "spec.loader.exec_module(m)\n"
        "print(sorted(k for k in sys.modules if k.startswith('tileprobe')))\n"
        "print(m.to_json(m.describe(3)), callable(m.start), m.answer.Answerer is m.Answerer)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "[]"
    assert lines[1].endswith("True True") and "3" in lines[1]
