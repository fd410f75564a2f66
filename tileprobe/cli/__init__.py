"""``tileprobe`` command line: one module per command, each registering its subparser (``add_parser``), parsing,
calling the Python API, rendering through :mod:`tileprobe.report` and returning an exit code.

``main(argv) -> int``: the exit codes of :mod:`tileprobe.errors` (README, "Exit codes"): 0 on success (an audit
with failed variants still succeeded: failures are results, unless ``--strict``: 4), 1 when a
:class:`TileprobeError` stops the command (its message says what to do), 2 for bad usage, 3 for an audit that could
not load a probe or use a requested arch or compiler (the rest is audited and saved), 130 on Ctrl-C, 128 + N on
SIGTERM / SIGHUP.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from tileprobe.cli import _common
from tileprobe.errors import EXIT_INTERRUPTED, TileprobeError

#: The commands in the order ``tileprobe --help`` lists them; each is the module ``tileprobe.cli.<name>`` (its
#: ``add_parser``). A command's module is imported only when the parser needs it: ``tileprobe store ...`` builds the
#: ``store`` subparser alone, so it does not import the audit pipeline that ``tileprobe.cli.audit`` needs for its
#: defaults (0.4 s of a 0.5 s CLI start-up: ``python -X importtime -m tileprobe --help``, 2026-12-05).
COMMAND_NAMES = ("audit", "sass", "toolchain", "frontend", "doctor", "compare", "bisect", "reduce", "run", "tune",
                 "use", "table", "record", "report", "history", "store", "gate")


def command_module(name: str) -> ModuleType:
    """The module of command ``name`` (one of :data:`COMMAND_NAMES`), imported now. Raises KeyError for another
    name."""
    if name not in COMMAND_NAMES:
        raise KeyError(name)
    return importlib.import_module(f"tileprobe.cli.{name}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``tileprobe`` parser with every command's subparser, or with command ``only``'s alone (a name of
    :data:`COMMAND_NAMES`: what parsing a command line that starts with that name needs; its errors and usage are
    that subparser's, as with every command's)."""
    from tileprobe._version import __version__
    parser = argparse.ArgumentParser(prog="tileprobe", description="See what tileiras did with your cuTile hints.")
    parser.add_argument("--version", action="version", version=f"tileprobe {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in (only,) if only in COMMAND_NAMES else COMMAND_NAMES:
        command_module(name).add_parser(sub)
    return parser


def named_command(argv: Sequence[str]) -> str | None:
    """The command a command line names in its first word (``["store", "ls"]`` → ``"store"``), or None (no words,
    an option such as ``--help`` or ``--version`` first, or a word that is no command: the whole parser answers)."""
    return argv[0] if argv and argv[0] in COMMAND_NAMES else None


def chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost subparser that parsed ``args`` (``tileprobe toolchain install`` → its parser; ``parser`` itself
    when no command was chosen): the one whose usage an unrecognized argument is reported with."""
    while True:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, actions[0].dest, None) if actions else None
        if name not in (actions[0].choices if actions else {}):
            return parser
        parser = actions[0].choices[name]


def near_options(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """`` (did you mean --summary?)`` for the first unknown ``--option`` of ``extra`` close to one of ``parser``'s
    (:func:`difflib.get_close_matches`, cutoff 0.75, the name before any ``=``), else ``""``."""
    import difflib
    known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for word in extra:
        if word.startswith("--") and len(word) > 2:
            near = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.75)
            if near:
                return f" (did you mean {near[0]}?)"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tileprobe`` command. Returns the exit code. A stderr that cannot be written is dropped
    (:class:`~tileprobe.cli._common.QuietStream`): the work and stdout's results go on."""
    saved = sys.stderr
    sys.stderr = _common.QuietStream(saved)
    try:
        return _main(argv)
    except KeyboardInterrupt:     # Ctrl-C while the parser is built or the store's module imported: one line, 130
        _common.print_interrupted()
        return EXIT_INTERRUPTED
    finally:
        sys.stderr = saved


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser(named_command(list(sys.argv[1:] if argv is None else argv)))
    if not (sys.argv[1:] if argv is None else argv):     # bare `tileprobe`: the commands, not an argparse complaint
        parser.print_help(sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    raw = list(sys.argv[1:] if argv is None else argv)
    # `use T --coverage -- COMMAND`: argparse gave the positional COMMAND [] at T and leaves `-- COMMAND` over; the
    # command is taken from the raw argv (command_after_dashes), so that tail is not an unknown argument
    if extra and not (extra[0] == "--" and extra == raw[raw.index("--"):]):
        chosen = chosen_parser(parser, args)
        chosen.error(f"unrecognized arguments: {' '.join(extra)}{near_options(chosen, extra)}")   # its own usage
    args.raw_argv = raw                                    # where `--` was (tune -- COMMAND)
    _common.COMMAND_ARGV[:] = args.raw_argv                # what "Reproduce:" blocks repeat (command_line)
    from tileprobe.store import begin_command
    begin_command()                                        # "… kept in the results store" counts this command's
    try:
        from tileprobe.model.toolkit import tool_timeout_s
        tool_timeout_s()                                   # a bad TILEPROBE_TOOL_TIMEOUT_S: exit 2 before any work
        _common.check_outputs(args)
        with _common.signals_as_exceptions():
            return int(args.func(args) or 0)
    except TileprobeError as e:
        _common.print_error(e)
        return e.exit_code
    except KeyboardInterrupt:
        _common.print_interrupted()
        return EXIT_INTERRUPTED
    except _common.Terminated as e:
        _common.print_interrupted(f"terminated by {e.name}")
        return 128 + e.signum
    except OSError as e:
        import errno
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG):
            raise
        where = f" writing {e.filename}" if e.filename else ""    # --json, --bundle, -o, a cubin, the store
        _common.print_interrupted(f"tileprobe: {e.strerror}{where} (errno {errno.errorcode.get(e.errno, e.errno)}); "
                                  "free space or write elsewhere, then run it again")
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
