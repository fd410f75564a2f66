"""Every public function, class and method of tileprobe (name without a leading underscore, any module) has a
docstring; and the public API of ``tileprobe/__init__.py`` resolves."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tileprobe"


def undocumented(source: str) -> list[str]:
    """``NAME:LINE`` of the public top-level functions and classes, and public methods of public classes, that
    have no docstring in ``source``."""
    out = []
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or node.name.startswith("_"):
            continue
        todo = [(node.name, node)]
        if isinstance(node, ast.ClassDef):
            todo += [(f"{node.name}.{m.name}", m) for m in node.body
                     if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and not m.name.startswith("_")]
        out += [f"{name}:{n.lineno}" for name, n in todo if not ast.get_docstring(n)]
    return out


def test_the_check_finds_a_missing_docstring():
    src = ('def documented():\n    """Yes."""\n\ndef bare():\n    pass\n\ndef _private():\n    pass\n\n'
           'class C:\n    """C."""\n    def method(self):\n        return 1\n    def _hidden(self):\n        pass\n')
    assert undocumented(src) == ["bare:4", "C.method:12"]


def test_every_public_definition_has_a_docstring():
    missing = [f"{path.relative_to(PACKAGE.parent)}:{item}" for path in sorted(PACKAGE.rglob("*.py"))
               for item in undocumented(path.read_text(encoding="utf-8"))]
    assert missing == [], "public definitions without a docstring:\n" + "\n".join(missing)


def test_public_api_resolves():
    import tileprobe
    assert len(tileprobe.__all__) == len(set(tileprobe.__all__))
    for name in tileprobe.__all__:
        assert getattr(tileprobe, name) is not None, name
    from tileprobe.audit import AuditResult, audit
    assert callable(audit) and tileprobe.AuditResult is AuditResult
