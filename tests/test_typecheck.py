"""The type checker, mypy, with pyproject.toml's [tool.mypy] (the rule set is stated there) on tileprobe/.

Two checks: mypy reports the deliberate error of tests/data/typecheck/deliberate_error.py on its line (proof that
a type error fails this test and so the test command and CI), and tileprobe/ holds no error at all: a change that
adds one fails here, naming each error's place. Fix it for real (a correct annotation, Optional handled, a typed
record), never with a blanket ``# type: ignore`` (``warn_unused_ignores`` is on).
"""
from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

#: mypy on all of tileprobe/ takes minutes cold (303 s on the 2-core machine at load 12, 2026-12-05): marked slow so
#: that tests/conftest.py starts this file first and it does not end the run alone.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"
FIXTURE = ROOT / "tests" / "data" / "typecheck" / "deliberate_error.py"
_LINE = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: (?P<message>.*?)(?:  \[(?P<code>[a-z-]+)\])?$")


@dataclass(frozen=True)
class MypyError:
    """One error mypy reported: the file (as mypy printed it), the 1-based line, the message, the error code."""
    path: str
    line: int
    message: str
    code: str | None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message} [{self.code}]"


def mypy(*paths: str, cache_dir: Path) -> tuple[int, list[MypyError], str]:
    """Run mypy with the project's configuration on ``paths`` (none: [tool.mypy]'s ``files``) from the repository
    root; returns (exit status, the errors, its whole output). Fails the test, naming the fix, when mypy is not
    installed; raises AssertionError when mypy itself fails (exit status 2: a bad configuration)."""
    try:
        import mypy  # noqa: F401  (only to say how to install it)
    except ImportError as e:
        pytest.fail(f"mypy is not installed ({e}): pip install -e '.[test]' (the test extra pins it)")
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(cache_dir),
           "--no-color-output", "--show-error-codes", *paths]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode in (0, 1), f"mypy failed (exit {proc.returncode}): {proc.stderr}{proc.stdout[-3000:]}"
    errors = [MypyError(m["path"], int(m["line"]), m["message"], m["code"])
              for m in map(_LINE.match, proc.stdout.splitlines()) if m]
    return proc.returncode, errors, proc.stdout


@pytest.fixture(scope="module")
def mypy_cache(request, tmp_path_factory) -> Path:
    """mypy's cache folder for this module's runs: pytest's cache folder (``.pytest_cache/d/mypy``), kept across test
    runs, so that mypy re-checks only the modules that changed and what depends on them (mypy's incremental mode,
    its default: the same errors as a cold run; a new mypy or a changed [tool.mypy] invalidates the cache). The cold
    run took 38 s on the idle 2-core machine (docs/LOG.md §52), a warm one a few seconds. A temporary folder of its
    own when pytest's cache is off (``-p no:cacheprovider``)."""
    cache = getattr(request.config, "cache", None)
    return cache.mkdir("mypy") if cache is not None else tmp_path_factory.mktemp("mypy_cache")


@pytest.fixture(scope="module")
def tileprobe_errors(mypy_cache) -> list[MypyError]:
    """mypy's errors on tileprobe/ (one run per test module)."""
    status, errors, out = mypy(cache_dir=mypy_cache)
    assert (status == 0) == (not errors), out[-3000:]
    return errors


def require_no_errors(errors: list[MypyError]) -> None:
    """Fails (AssertionError) when mypy reported any error, listing each as ``path:line: message [code]``."""
    assert not errors, (
        f"mypy reports {len(errors)} errors on tileprobe/ (there were 522 when [tool.mypy] was chosen, 0 since "
        "2026-12-05): a change added them; fix each (a correct annotation, Optional handled, a typed record), never "
        "with a blanket ignore:\n" + "\n".join(map(str, errors)))


def test_a_deliberate_type_error_is_reported_on_its_line_and_fails_the_check(mypy_cache):
    status, errors, out = mypy(str(FIXTURE.relative_to(ROOT)), cache_dir=mypy_cache)
    marked = next(i for i, text in enumerate(FIXTURE.read_text(encoding="utf-8").splitlines(), 1)
                  if "# deliberate" in text)
    assert status == 1, out
    assert [(Path(e.path).name, e.line, e.code) for e in errors] == [("deliberate_error.py", marked, "arg-type")], out
    # the check that tileprobe/ must pass fails on it, naming the place (so the test command, and CI, fail)
    with pytest.raises(AssertionError, match=rf"(?s)1 errors .*deliberate_error\.py:{marked}: .*\[arg-type\]"):
        require_no_errors(errors)


def test_tileprobe_has_no_type_errors(tileprobe_errors):
    require_no_errors(tileprobe_errors)
