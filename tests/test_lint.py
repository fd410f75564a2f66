"""The linter, ruff, with the rule set of pyproject.toml's [tool.ruff] on tileprobe/ and tests/.

The code base had findings when the rule set was chosen (2026-12-05); they are counted by rule in
tests/data/ruff_baseline.json, and no rule may find more than its count there: a change that adds a finding fails
here with the finding's place and rule. Fixing findings lowers the counts; write them down with
``python tests/test_lint.py --write-baseline`` so that they cannot come back. ``ruff check --fix tileprobe tests``
fixes the findings ruff marks [*]; ``ruff check --statistics tileprobe tests`` lists what is left by rule.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "data" / "ruff_baseline.json"
LINTED = ("tileprobe", "tests")


def ruff_bin() -> str:
    """The ruff of the test extra (``pip install -e ".[test]"``); fails the test, naming the fix, when it is missing."""
    try:
        from ruff import find_ruff_bin
        return find_ruff_bin()
    except (ImportError, FileNotFoundError) as e:
        pytest.fail(f"ruff is not installed ({e}): pip install -e '.[test]' (the test extra pins it)")


def findings(*paths: str, config: Path | None = None, cwd: Path = ROOT) -> list[dict]:
    """ruff's findings on ``paths`` as its JSON records (``code``, ``filename``, ``location.row``, ``message``).
    Raises AssertionError when ruff itself fails (exit code 2: a bad configuration, a path that is not there)."""
    cmd = [ruff_bin(), "check", "--output-format", "json", "--no-cache", "--exit-zero"]
    if config is not None:
        cmd += ["--config", str(config)]
    proc = subprocess.run([*cmd, *paths], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ruff failed (exit {proc.returncode}): {proc.stderr}"
    return json.loads(proc.stdout)


def by_rule(found: list[dict]) -> dict[str, int]:
    """Findings counted by rule code (a syntax error has no code: counted as ``syntax-error``)."""
    return dict(sorted(Counter(f["code"] or "syntax-error" for f in found).items()))


def test_no_rule_finds_more_than_its_baseline():
    found = findings(*LINTED)
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    grown = {code: n for code, n in by_rule(found).items() if n > baseline.get(code, 0)}
    if grown:
        lines = [f"{Path(f['filename']).relative_to(ROOT)}:{f['location']['row']}: {f['code']} {f['message']}"
                 for f in found if (f["code"] or "syntax-error") in grown]
        pytest.fail(f"ruff finds more than tests/data/ruff_baseline.json allows for {grown} "
                    f"(baseline {({c: baseline.get(c, 0) for c in grown})}); the findings of those rules:\n"
                    + "\n".join(lines) + "\nfix them (`ruff check --fix tileprobe tests` fixes those marked "
                    "fixable), or add `# noqa: CODE` with a reason where the rule is wrong")


def test_the_rule_set_of_pyproject_is_the_one_applied(tmp_path):
    """An unused import (F401) and an undefined name (F821) are found; a 121-character line (E501, left out: the
    docstrings' tables are wrapped by hand) and a × in a string (RUF001, left out: the messages write × on purpose)
    are not."""
    src = tmp_path / "sample.py"
    long_line = "x = '" + "a" * 115 + "'"
    src.write_text("import os\n\n" + long_line + "\ny = '2 × 3'\nz = undefined_name\n", encoding="utf-8")
    assert len(long_line) == 121
    got = sorted((f["code"], f["location"]["row"]) for f in findings(str(src), config=ROOT / "pyproject.toml",
                                                                       cwd=tmp_path))
    assert got == [("F401", 1), ("F821", 5)]


def test_tileprobe_and_tests_have_no_finding():
    """The rule set holds with no finding at all (tests/data/ruff_baseline.json is empty): a new finding fails
    here, by :func:`test_no_rule_finds_more_than_its_baseline`, with its place."""
    assert json.loads(BASELINE.read_text(encoding="utf-8")) == {}


def test_the_baseline_counts_only_rules_of_the_rule_set():
    """A baseline entry for a rule the set does not select would allow findings that can never appear."""
    try:
        import tomllib
    except ImportError:           # Python 3.10: pytest brings tomli there
        import tomli as tomllib
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    stray = [c for c in baseline if not any(c.startswith(p) for p in lint["select"]) or c in lint["ignore"]]
    assert stray == [] and all(isinstance(n, int) and n > 0 for n in baseline.values()), baseline


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-baseline"]:
        sys.exit("usage: python tests/test_lint.py --write-baseline   (writes tests/data/ruff_baseline.json)")
    counts = by_rule(findings(*LINTED))
    BASELINE.write_text(json.dumps(counts, indent=1) + "\n", encoding="utf-8")
    print(f"{BASELINE}: {sum(counts.values())} findings of {len(counts)} rules")
