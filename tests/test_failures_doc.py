"""docs/FAILURES.md names, for each threat, the test that checks it: every test it cites exists. A citation is
``test_x.py::test_name`` (``tests/`` and ``.py`` may be left out before ``::``), ``::test_name`` (the file last named
above it), and a name cut with ``…`` (any test of that file whose name begins so). The containment suite's script
(tests/hostile/run_three_times.sh) names only files that exist."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: A file (``test_x.py``, or ``test_x`` right before ``::``) with an optional ``::name``, or ``::name`` alone.
_CITE = re.compile(r"(?:tests/)?(test_\w+\.py|test_\w+(?=::))(?:::(\w+)(…)?)?|(?<![\w.])::(\w+)(…)?")


@functools.cache
def _tests_of(path: Path) -> set[str] | None:
    """The test functions and classes defined in ``path`` (any depth: methods of a test class too); None when it is
    not there."""
    if not path.is_file():
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name.startswith(("test",
                                                                                                           "Test"))}


def citations(text: str) -> list[tuple[int, str, str | None, bool]]:
    """(line, file, test name or None, cut with …) for each citation of ``text``, in order; ``::name`` takes the file
    named last above it."""
    out: list[tuple[int, str, str | None, bool]] = []
    current = ""
    for m in _CITE.finditer(text):
        file, name, cut, bare, bare_cut = m.groups()
        line = text.count("\n", 0, m.start()) + 1
        if file:
            current = file if file.endswith(".py") else file + ".py"
            out.append((line, current, name, bool(cut)))
        elif current:
            out.append((line, current, bare, bool(bare_cut)))
    return out


def test_citations_are_read_as_written():
    text = ("a | test_a.py::test_one, ::test_two_… |\n"
            "b | tests/test_b.py (all of it); test_c::test_three[x] and ::test_four |")
    assert citations(text) == [(1, "test_a.py", "test_one", False), (1, "test_a.py", "test_two_", True),
                               (2, "test_b.py", None, False), (2, "test_c.py", "test_three", False),
                               (2, "test_c.py", "test_four", False)]


def test_every_test_that_failures_md_cites_exists():
    text = (ROOT / "docs" / "FAILURES.md").read_text(encoding="utf-8")
    found = citations(text)
    assert sum(1 for _, _, name, _ in found if name) > 200      # the parser reads the document's citations
    missing = []
    for line, file, name, cut in found:
        names = _tests_of(ROOT / "tests" / file)
        if names is None:
            missing.append(f"line {line}: tests/{file} does not exist")
        elif name and not (any(n.startswith(name) for n in names) if cut else name in names):
            missing.append(f"line {line}: {file}::{name}{'…' if cut else ''} is not a test of that file")
    assert missing == [], "\n".join(missing)


def test_the_containment_suite_names_only_files_that_exist():
    script = (ROOT / "tests" / "hostile" / "run_three_times.sh").read_text(encoding="utf-8")
    files = re.search(r'FILES="([^"]*)"', script)
    assert files is not None
    named = files.group(1).split()
    assert len(named) >= 15 and [f for f in named if not (ROOT / f).is_file()] == []
