"""``tileprobe use TABLE -- COMMAND …``: run a program with its ``cuda.tile.tune`` searches answered from a tune table.

The work is :mod:`tileprobe.record.use`; this module parses and returns the command's exit code.
"""
from __future__ import annotations

# Imports inside functions here are lazy on purpose: at the module head they would add 0.42 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.
from tileprobe.cli._common import command_after_dashes
from tileprobe.errors import TileprobeError


def add_parser(subparsers, add_common=None) -> None:
    """Register ``tileprobe use`` (``add_common`` is unused: the command prints nothing of its own)."""
    p = subparsers.add_parser(
        "use", help="run a program with its cuda.tile.tune searches answered from a tune table (no code change)",
        description="Run COMMAND with every cuda.tile.tune.exhaustive_search whose problem and provenance (GPU, SM "
                    "count, arch, tileiras build, cuda-tile, kernel source) match a row of TABLE answered from it at "
                    "once; any other search runs as the program wrote it, is said once on stderr with the reason and "
                    "noted in TABLE.misses.jsonl (`tileprobe tune --refresh TABLE` fills it). The exit code is "
                    "COMMAND's. Make TABLE with `tileprobe tune --export TABLE -- COMMAND`.",
        usage="tileprobe use TABLE -- COMMAND ...\n       tileprobe use TABLE --env")
    p.add_argument("table", metavar="TABLE", help="tune table (tileprobe tune --export)")
    p.add_argument("--env", action="store_true", help="print the two environment variables that make every Python "
                   "process answer from TABLE (the hook is written under TABLE.hook/), for a shell: eval \"$(tileprobe "
                   "use T --env)\"")
    p.add_argument("command", nargs="*", metavar="COMMAND", help="the program to run, after --")
    p.set_defaults(func=cmd_use)


def cmd_use(args) -> int:
    """Run the command with the table in use; its exit code."""
    from tileprobe.record.use import run_with_table
    command = command_after_dashes(args)
    if args.env:
        import os
        import shlex

        from tileprobe.record.use import check_table, use_env
        table = check_table(args.table)
        if os.pathsep in table + ".hook":
            raise TileprobeError(f"{table}: the path holds {os.pathsep!r}, which splits PYTHONPATH, so the hook under "
                                 f"{table}.hook cannot be put on it: move or link the table to a path without "
                                 f"{os.pathsep!r}, or run `tileprobe use TABLE -- COMMAND`")
        env = use_env(table, table + ".hook", env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
        print(f"export PYTHONPATH={shlex.quote(env['PYTHONPATH'])}")
        print(f"export TILEPROBE_USE_TABLE={shlex.quote(table)}")
        return 0
    if not command:
        from tileprobe.errors import UsageError
        raise UsageError("no command: tileprobe use TABLE -- python my_script.py (or tileprobe use TABLE --env)")
    return run_with_table(args.table, command)
