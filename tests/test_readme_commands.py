"""Every ``tileprobe …`` command README.md and docs/RECIPES.md (the README's examples, more of them) show exists as
written.

* Each command in a fenced code block is parsed by the real parser (``build_parser``), every ``--flag`` in it must
  be an option of its subcommand exactly (argparse would accept an abbreviation), its subcommand's ``--help``
  runs, and the ones that need neither a GPU, the network nor minutes of compiling run for real on an empty store.
* Each command in the Commands table (inline code, with placeholders) names a subcommand and only flags it has.

The README's first command, ``tileprobe audit examples/*.py --arch sm_90,sm_120 --summary``, compiles 274
variants (minutes): here it is parsed and its ``--help`` runs; docs/LOG.md records a full run.
"""
from __future__ import annotations

import argparse
import glob
import re
import shlex
from pathlib import Path

import pytest

from tileprobe.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
RECIPES = (ROOT / "docs" / "RECIPES.md").read_text(encoding="utf-8")
#: Subcommands run for real: quick, no GPU, no network, no compile.
RUN_FOR_REAL = {"doctor", "history", "store"}


def fenced_commands(text: str) -> list[str]:
    """``tileprobe …`` commands in fenced code blocks: continuation lines joined, comments dropped, ``a && b``
    split; a ``$ `` prompt and leading environment settings (``COLUMNS=100``) are removed. Python blocks are
    skipped."""
    out = []
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        if lang == "python":
            continue
        for line in re.sub(r"\\\n\s*", " ", body).splitlines():
            line = re.sub(r"\s+#\s.*$", "", line.strip()).removeprefix("$ ")
            for part in line.split("&&"):
                part = re.sub(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+", "", " ".join(part.split()))   # COLUMNS=100 …
                if part.startswith("tileprobe "):
                    out.append(part)
    return out


def table_spans(text: str) -> list[tuple[str, str]]:
    """(subcommand, first cell) of each row of the Commands table whose first cell starts with `tileprobe X`."""
    rows = re.findall(r"^\| `tileprobe ([a-z]+)((?:[^|\\]|\\.)*)\|", text, flags=re.M)
    return [(cmd, rest) for cmd, rest in rows]


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def all_options(parser: argparse.ArgumentParser) -> set[str]:
    """Option strings of ``parser`` and of its nested subcommands (``store prune --older-than``)."""
    opts = {o for a in parser._actions for o in a.option_strings}
    for sub in subparsers(parser).values():
        opts |= all_options(sub)
    return opts


COMMANDS = subparsers(build_parser())
FENCED = fenced_commands(README) + fenced_commands(RECIPES)


def test_the_readme_shows_commands():
    shown = fenced_commands(README)
    assert len(shown) >= 20 and any(c.startswith("tileprobe sass ") for c in shown)
    assert len(fenced_commands(RECIPES)) >= 20
    assert {cmd for cmd, _ in table_spans(README)} >= {"audit", "sass", "run", "tune", "compare", "store", "report"}


@pytest.mark.parametrize("command", FENCED)
def test_fenced_command_parses_with_the_flags_it_shows(command):
    words = shlex.split(command)[1:]
    expanded = []
    for w in words:
        hits = sorted(glob.glob(str(ROOT / w))) if "*" in w else []
        expanded += [str(Path(h).relative_to(ROOT)) for h in hits] or [w]
    sub = COMMANDS.get(words[0])
    assert sub is not None, f"README: `tileprobe {words[0]}` is not a command"
    flags = {w.split("=", 1)[0] for w in words if w.startswith("-") and w != "--"}
    if "--" in words:      # tileprobe record -- COMMAND: what follows is the recorded program's
        flags = {w.split("=", 1)[0] for w in words[:words.index("--")] if w.startswith("-")}
    missing = sorted(flags - all_options(sub))
    assert not missing, f"README: `{command}` uses {missing}, which `tileprobe {words[0]}` does not have"
    try:
        args = build_parser().parse_args(expanded)
    except SystemExit as e:
        pytest.fail(f"README: `{command}` does not parse (exit {e.code})")
    assert callable(args.func)


@pytest.mark.parametrize("name", sorted({shlex.split(c)[1] for c in FENCED}))
def test_each_readme_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as e:
        main([name, "--help"])
    assert e.value.code == 0 and f"usage: tileprobe {name}" in capsys.readouterr().out


@pytest.mark.parametrize("command", [c for c in FENCED if shlex.split(c)[1] in RUN_FOR_REAL])
def test_quick_readme_commands_run(command, tmp_path, monkeypatch):
    """On a store holding the bundled probes' records (as after the README's first command; no compile here)."""
    from tileprobe.schema import load
    from tileprobe.store import Store
    monkeypatch.setenv("TILEPROBE_STORE", str(tmp_path / "results.sqlite"))
    monkeypatch.chdir(ROOT)
    records, _ = load(str(ROOT / "tests" / "data" / "examples_records_2026-12-01.json"))
    with Store.open(str(tmp_path / "results.sqlite")) as store:
        store.import_records(records, lambda sha: None, None)
    assert main(shlex.split(command)[1:]) == 0


@pytest.mark.parametrize("cmd,cell", table_spans(README))
def test_commands_table_flags_exist(cmd, cell):
    assert cmd in COMMANDS, f"README table: `tileprobe {cmd}` is not a command"
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", re.sub(r" -- \S+", " ", cell)))
    missing = sorted(flags - all_options(COMMANDS[cmd]))
    assert not missing, f"README table: `tileprobe {cmd}` shows {missing}, which it does not have"


def test_the_check_catches_a_flag_that_does_not_exist():
    """An earlier README showed `audit --sass`: this test would have failed on it."""
    row = "| `tileprobe audit PROBE… --arch sm_90 [--format markdown] [--sass]` | compile | no |"
    ((cmd, cell),) = table_spans(row)
    assert cmd == "audit" and "--sass" not in all_options(COMMANDS[cmd]) and "--sass" in cell
    assert fenced_commands("```bash\ntileprobe audit x.py --arch sm_90 \\\n    --sass   # comment\n```\n") == [
        "tileprobe audit x.py --arch sm_90 --sass"]


def _help_texts(parser: argparse.ArgumentParser, name: str = "tileprobe"):
    """(command, what, text) of every description, argument help and subcommand help, nested commands included."""
    yield name, "description", parser.description or ""
    for a in parser._actions:
        yield name, "/".join(a.option_strings) or a.metavar or a.dest, a.help or ""
        if isinstance(a, argparse._SubParsersAction):
            yield from ((name, f"{c.dest} (in the list)", c.help or "") for c in a._choices_actions)
            for sub_name, sub in a.choices.items():
                yield from _help_texts(sub, f"{name} {sub_name}")


def test_help_texts_are_plain_text_not_rest_markup():
    marked = [f"{cmd} {what}: {text[:80]}" for cmd, what, text in _help_texts(build_parser())
              if re.search(r"``|:(func|class|meth|mod|data|attr):", text)]
    assert marked == []


def test_help_texts_say_what_brief_prints_and_what_a_version_is():
    from tileprobe.schema import NOTEWORTHY_STATUSES
    helps = {(cmd, what): " ".join(text.split()) for cmd, what, text in _help_texts(build_parser())}
    assert set(NOTEWORTHY_STATUSES) == {"unverified", "partial", "ignored", "infeasible", "unchanged"}
    assert helps[("tileprobe audit", "--brief")].startswith(
        "print reasons only for noteworthy verdicts (unverified, partial, ignored, infeasible, unchanged)")
    assert helps[("tileprobe toolchain install", "VERSION")].startswith(
        "a tileiras release: MAJOR.MINOR.PATCH (13.4.92) or MAJOR.MINOR (13.4: the newest 13.4.x published)")
    assert helps[("tileprobe toolchain remove", "VERSION")].startswith("an installed release: 13.3.36, or 13.3")
    assert "(variants that are wrong, hang or crash are results)" in helps[("tileprobe run", "description")]
