"""The package refactor: "every CLI output, JSON file and store written before the change reads and prints the
same after it": the CLI commands of ``tests/data/golden/make_cli_goldens.py`` run on this tree and compared, byte
for byte after that file's :func:`normalize`, with the transcripts it wrote at commit 041030c (before the modules
moved into packages) into ``tests/data/golden/cli/``.

They cover the renderers (audit, compare, history and tune tables, Markdown, JSON and CSV exports, gate reports,
SASS listings and diffs) and the readers (stores written by older tileprobe, migrated on opening; result and run
JSON files; a store this module compiles once with tileiras 13.4.92, shared by every test). A mismatch is a change
of what tileprobe prints: the failure shows the unified diff. An intended change regenerates the goldens with
``--code`` at the new commit (the generator's docstring), never by editing them.
"""
from __future__ import annotations

import difflib
import importlib.metadata
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_cli_goldens",
                                               ROOT / "tests" / "data" / "golden" / "make_cli_goldens.py")
gold = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(gold)

pytestmark = pytest.mark.slow      # minutes: a tileprobe process per command of every case


def _missing(needs: str) -> str | None:
    """Why the compiler a case needs is not here, or None."""
    try:
        pip = {d: importlib.metadata.version(d) for d in ("nvidia-cuda-tileiras", "nvidia-cuda-nvdisasm")}
    except importlib.metadata.PackageNotFoundError as e:
        return f"the goldens were made with the pip tileiras and nvdisasm 13.4.92: {e.name} is not installed"
    if set(pip.values()) != {"13.4.92"}:
        return f"the goldens were made with the pip tileiras and nvdisasm 13.4.92, not {pip}"
    if needs == "13.3.36" and not (gold.TOOLCHAINS / "13.3.36").is_dir():
        return f"no managed tileiras 13.3.36 in {gold.TOOLCHAINS} (tileprobe toolchain install 13.3.36)"
    return None


def any_python(text: str) -> str:
    """``text`` with the Python version it names (``python: 3.11.7``, ``"python": "3.11.7"``, a venv's
    ``lib/python3.11/site-packages``) as ``<python>``: the goldens were written with Python 3.11, and the README's
    commands are also run with 3.12 (where the registry's torch is a CUDA build), whose output is the same but for
    this."""
    text = re.sub(r'(python"?: "?)\d+\.\d+\.\d+', r"\1<python>", text)
    return re.sub(r"\blib/python3\.\d+/site-packages", "lib/python<python>/site-packages", text)


def check(name: str, text: str) -> None:
    """``text`` is golden ``name``'s (both with :func:`any_python`), else the test fails with their unified diff."""
    path = gold.GOLDEN / f"{name}.txt"
    want, text = any_python(path.read_text(encoding="utf-8")), any_python(text)
    if text != want:
        diff = difflib.unified_diff(want.splitlines(keepends=True), text.splitlines(keepends=True),
                                    f"{path.relative_to(ROOT)} (commit {gold.GENERATED_AT})", "this tree")
        pytest.fail(f"`{name}` prints something else than at {gold.GENERATED_AT}:\n{''.join(diff)}", pytrace=False)


@pytest.fixture(scope="module")
def cold_audit():
    """The work folder with the fresh store compiled once (the cold audit's transcript), for every test here."""
    if reason := _missing("13.4.92"):
        pytest.skip(reason)
    with gold.work_folder(ROOT, gold.GOLDEN / "inputs") as transcript:
        yield transcript


def test_cold_audit(cold_audit):
    check("audit_cold", cold_audit)


@pytest.mark.parametrize("name", list(gold.CASES))
def test_golden(cold_audit, name):
    if reason := _missing(gold.CASES[name].needs):
        pytest.skip(reason)
    check(name, gold.run_case(ROOT, name))


def test_every_golden_is_a_case():
    """No transcript is left over from a case that was removed (it would never be checked)."""
    names = {p.stem for p in gold.GOLDEN.glob("*.txt")}
    assert names == {"audit_cold", *gold.CASES}


def test_the_normalizer_keeps_what_is_fixed():
    """Only what varies is replaced: numbers, verdicts and stored timestamps of fixed data are left as they are."""
    fixed = '│ 2026-12-01 03:38:53 │ vm │ 14.0 │\n"created": "2026-12-01T03:38:52.1Z", "compile_s": 0.29\n'
    assert gold.normalize(fixed, fresh=False) == fixed
    fresh = gold.normalize(f'{fixed}"created": "2026-12-01T03:38:52Z"\n4 variants, 5.2 s\n', fresh=True)
    assert fresh == ('│ YYYY-MM-DD hh:mm:ss │ vm │ 14.0 │\n"created": "<time>", "compile_s": "<v>"\n'
                     '"created": "<now>"\n4 variants, <t> s\n')


def test_the_normalizer_orders_remarks_only():
    """tileiras lists a variant's remarks in varying order: each list is sorted, other lists and all else kept."""
    def doc(lines):
        items = [{"line": n, "details": ["x"]} for n in lines]
        return json.dumps({"variants": [{"remarks": items, "other": [{"line": 9}, {"line": 8}]}]}, indent=1) + "\n"
    a, b = gold.normalize(doc([9, 8, 10]), fresh=True), gold.normalize(doc([8, 10, 9]), fresh=True)
    assert a == b
    v = json.loads(a)["variants"][0]
    assert [r["line"] for r in v["remarks"]] == [10, 8, 9] and v["other"] == [{"line": 9}, {"line": 8}]
    assert gold.normalize(doc([9, 8]), fresh=False) == doc([9, 8])


def test_the_python_version_is_not_compared():
    assert any_python('- python: 3.12.1\n  "python": "3.11.7",\nPATH=<PREFIX>/lib/python3.12/site-packages/nvidia') == (
        '- python: <python>\n  "python": "<python>",\nPATH=<PREFIX>/lib/python<python>/site-packages/nvidia')
