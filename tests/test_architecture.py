"""The import rules of docs/DESIGN.md ("Layers"): import-linter's contracts in pyproject.toml hold, the forbidden
contract covers every module outside cli/ and report/, and the import graph has no cycle (grimp parses imports
inside functions and ``TYPE_CHECKING`` blocks too, so lazy imports count)."""
from __future__ import annotations

import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "tileprobe"


@pytest.fixture(scope="module")
def graph():
    import tileprobe
    assert Path(tileprobe.__file__).resolve().parent == ROOT / PACKAGE, "tests must import this checkout's tileprobe"
    return grimp.build_graph(PACKAGE, cache_dir=None)


def test_import_linter_contracts_are_kept(graph, capsys):
    from importlinter.cli import EXIT_STATUS_SUCCESS, lint_imports
    status = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    out = capsys.readouterr().out
    assert status == EXIT_STATUS_SUCCESS, out
    assert "Contracts: 4 kept, 0 broken." in out


def test_contracts_list_no_exceptions():
    import tomllib
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert all("ignore_imports" not in c for c in config["contracts"])
    assert all("unmatched_ignore_imports_alerting" not in c for c in config["contracts"])


def test_forbidden_contract_covers_every_module_outside_cli_and_report(graph):
    import tomllib
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (forbidden,) = [c for c in contracts if c["id"] == "no-ui-below-cli"]
    children = {m for m in graph.find_children(PACKAGE)}
    assert set(forbidden["source_modules"]) == children - {f"{PACKAGE}.cli", f"{PACKAGE}.report",
                                                            f"{PACKAGE}.__main__", f"{PACKAGE}._entry"}
    assert set(forbidden["forbidden_modules"]) == {"rich", "argparse"}


def test_report_contract_forbids_every_computing_module(graph):
    """report/ renders what it is given: it may import the result records of analyses/ and tune/
    (``analyses.results``, ``tune.result``), never any other module of theirs nor the judge, the run, the audit,
    the store or the rest of the pipeline; a module added to analyses/ or tune/ must be listed."""
    import tomllib
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["id"] == "report-renders-only"]
    assert contract["type"] == "forbidden" and contract["source_modules"] == [f"{PACKAGE}.report"]
    records = {f"{PACKAGE}.analyses.results", f"{PACKAGE}.tune.result"}
    computing = {m for pkg in ("analyses", "tune") for m in graph.find_children(f"{PACKAGE}.{pkg}")} - records
    computing |= {f"{PACKAGE}.{pkg}" for pkg in ("judge", "run", "audit", "store", "record", "exec", "compile",
                                                 "probe")}
    assert set(contract["forbidden_modules"]) == computing
    imported = {m for r in graph.find_children(f"{PACKAGE}.report") for m in graph.find_modules_directly_imported_by(r)}
    assert imported & records == records          # the records do reach report/ (the contract is not vacuous)


def strongly_connected(nodes: set[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted; components are listed in no set order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                out.append(sorted(component))
    return out


def import_cycles(graph) -> list[list[str]]:
    """Groups of tileprobe modules that import each other (directly or through others), and self-imports."""
    modules = {m for m in graph.modules if m == PACKAGE or m.startswith(PACKAGE + ".")}
    edges = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    return [c for c in strongly_connected(modules, edges) if len(c) > 1 or c[0] in edges[c[0]]]


def test_strongly_connected_finds_cycles():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    comps = sorted(strongly_connected(set(edges), edges))
    assert comps == [["a", "b", "c"], ["d"], ["e"], ["f"]]


def test_no_import_cycles(graph):
    cycles = import_cycles(graph)
    assert cycles == [], "import cycles (function-level imports included):\n" + "\n".join(
        " ↔ ".join(c) for c in cycles)


def test_a_planted_cycle_is_found(tmp_path):
    """The check above can fail: a function-level import that closes a loop inside one layer is found."""
    pkg = tmp_path / "cyclepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def later():\n    from . import a\n")
    (pkg / "c.py").write_text("from . import a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        g = grimp.build_graph("cyclepkg", cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    modules = set(g.modules)
    edges = {m: g.find_modules_directly_imported_by(m) & modules for m in modules}
    cycles = [c for c in strongly_connected(modules, edges) if len(c) > 1]
    assert cycles == [["cyclepkg.a", "cyclepkg.b"]]


def test_every_relative_import_resolves():
    """Function-level imports run only when called: one that names a moved or missing module (``from .schema``
    inside ``analyses/``) would fail at run time only. Resolve every relative import of the package statically."""
    import ast
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    broken = []
    for path in sorted((root / "tileprobe").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        package = parts[:-1]   # a module's package; __init__'s is its own folder, the same parts
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = list(package[:len(package) - (node.level - 1)])
                target = ".".join(base + ([node.module] if node.module else []))
                if importlib.util.find_spec(target) is None:
                    broken.append(f"{path.relative_to(root)}:{node.lineno}: {target}")
    assert broken == [], "relative imports of modules that do not exist:\n" + "\n".join(broken)
