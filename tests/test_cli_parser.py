"""The ``tileprobe`` parser is built for the command a command line names: that command's module alone is imported
(``tileprobe store ...`` does not pay for the audit pipeline's import), and every command is still listed and parsed
as before when no command, an option or an unknown word comes first."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tileprobe.cli import COMMAND_NAMES, build_parser, named_command


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def test_the_whole_parser_lists_every_command_in_help_order():
    assert _subcommands(build_parser()) == list(COMMAND_NAMES)
    assert len(COMMAND_NAMES) == 17 and COMMAND_NAMES[0] == "audit"


@pytest.mark.parametrize("argv, name", [(["store", "size"], "store"), (["audit", "p.py"], "audit"),
                                        (["--help"], None), (["--version"], None), ([], None), (["stor"], None),
                                        (["p.py", "audit"], None)])
def test_the_command_named_is_the_first_word_only_when_it_is_a_command(argv, name):
    assert named_command(argv) == name


def test_one_commands_parser_parses_its_command_line_as_the_whole_parser_does():
    for argv in (["store", "prune", "--keep-latest", "3", "--dry-run"], ["run", "a.py", "--timeout", "5"],
                 ["use", "t.json", "--coverage"], ["audit", "p.py", "--arch", "sm_90"]):
        only = build_parser(argv[0])
        assert _subcommands(only) == [argv[0]]
        assert vars(only.parse_args(argv)) == vars(build_parser().parse_args(argv))      # the same func too

def test_a_store_command_line_does_not_import_the_audit_pipeline():
    code = ("import sys\nfrom tileprobe.cli import build_parser, named_command\n"
            "build_parser(named_command(['store', 'size']))\n"
            "print('tileprobe.audit.pipeline' in sys.modules, 'tileprobe.cli.store' in sys.modules)\n"
            "build_parser()\nprint('tileprobe.audit.pipeline' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "True"]
