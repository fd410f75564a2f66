"""benchmarks/ is a few named suites, each with one entry point (``run.sh OUT [STEP …]``) and a README that says what
it measures, the GPU-machine command and its latest figures. Checked here without running them (they need a GPU or
minutes): the layout, the shell syntax, that every step a README names is one its run.sh knows, and that every
repository path the READMEs and scripts name exists."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
SUITES = ("audit", "tune", "programs", "timing", "store", "scale")


def run_sh_steps(suite: str) -> set[str]:
    """The step names of a suite's run.sh: the patterns of its ``case $step in`` branches (``a|b)``)."""
    text = (BENCH / suite / "run.sh").read_text(encoding="utf-8")
    return {name for pat in re.findall(r"^\s{2,4}([\w|-]+)\)", text, flags=re.M) for name in pat.split("|")}


@pytest.mark.parametrize("suite", SUITES)
def test_each_suite_has_its_entry_point_and_readme(suite):
    readme = (BENCH / suite / "README.md").read_text(encoding="utf-8")
    assert f"bash benchmarks/{suite}/run.sh OUT" in readme
    assert "## Latest figures" in readme
    assert "gpu_call.sh" in readme or suite == "store"        # store needs no GPU: it says so instead
    proc = subprocess.run(["bash", "-n", str(BENCH / suite / "run.sh")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("suite", [s for s in SUITES if s != "store"])
def test_every_step_a_readme_names_is_a_step_of_its_run_sh(suite):
    """The READMEs' tables name steps as the first cell (`` `cluster` (GPU) ``); run.sh must know each."""
    readme = (BENCH / suite / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `([\w-]+)`", readme, flags=re.M))
    assert named, "the README's table names no step"
    assert named <= run_sh_steps(suite), named - run_sh_steps(suite)


def test_an_unknown_step_is_refused_with_the_known_ones(tmp_path):
    proc = subprocess.run(["bash", str(BENCH / "tune" / "run.sh"), str(tmp_path), "no-such-step"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown step: no-such-step (compare budget" in proc.stdout


def test_every_repository_path_the_suites_name_exists():
    """``benchmarks/…``, ``examples/…``, ``tests/…`` and ``docs/…`` paths in the suites' READMEs and scripts (the
    old script names of benchmarks/README.md's map are history and are left out)."""
    files = [p for p in BENCH.rglob("*") if p.suffix in (".md", ".sh", ".py") and p.is_file()]
    missing = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        if f == BENCH / "README.md":
            text = text.split("## Where the old scripts went")[0]
        for path in re.findall(r"(?<![\w/.$])((?:benchmarks|examples|tests|docs)/[\w./*{},-]*\w)", text):
            placeholder = "*" in path or "{" in path or re.search(r"/[A-Z_]+$", path)     # examples/FILE
            if not placeholder and not (ROOT / path).exists():
                missing.append(f"{f.relative_to(ROOT)}: {path}")
    assert missing == []


def test_no_script_is_named_after_a_work_item():
    assert [p.name for p in BENCH.rglob("*") if re.search(r"issue ?\d+", p.name, re.I)] == []
