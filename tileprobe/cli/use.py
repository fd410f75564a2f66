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
        usage="tileprobe use TABLE [--off KERNEL] [--pin KERNEL=CONFIG] [--coverage] [--coverage-json PATH] "
              "[--min-coverage PCT] -- COMMAND ...\n       tileprobe use TABLE [--off …] [--pin …] --env")
    p.add_argument("table", metavar="TABLE", help="tune table (tileprobe tune --export)")
    p.add_argument("--env", action="store_true", help="print the two environment variables that make every Python "
                   "process answer from TABLE (the hook is written under TABLE.hook/), for a shell: eval \"$(tileprobe "
                   "use T --env)\"")
    p.add_argument("--off", action="append", default=[], metavar="KERNEL",
                   help="do not use the table for KERNEL: its own search runs (repeatable; for processes `use` does "
                        "not start: TILEPROBE_USE_OFF=k1,k2)")
    p.add_argument("--pin", action="append", default=[], metavar="KERNEL=CONFIG",
                   help="answer KERNEL's searches with CONFIG, the program's configuration as JSON "
                        "(--pin vadd='{\"TILE\": 1024}') or a row's search key (repeatable; for processes `use` does "
                        "not start: TILEPROBE_USE_PIN='{\"vadd\": {\"TILE\": 1024}}')")
    p.add_argument("--coverage", action="store_true", help="after the program: per kernel, the searches answered, "
                   "missed (with the nearest row) and stale, and the launches that ran a table configuration, on "
                   "stderr")
    p.add_argument("--coverage-json", metavar="PATH", help="write the coverage as JSON to PATH")
    p.add_argument("--min-coverage", type=float, metavar="PCT",
                   help="exit 1 when the program exited 0 but less than PCT %% of its searches, or of its searching "
                        "kernels' launches, were answered from the table (for CI; implies --coverage)")
    p.add_argument("command", nargs="*", metavar="COMMAND", help="the program to run, after --")
    p.set_defaults(func=cmd_use)


def cmd_use(args) -> int:
    """Run the command with the table in use; its exit code (or 1 below ``--min-coverage``)."""
    from tileprobe.record.use import check_table, control_env
    command = command_after_dashes(args)
    control = control_env(check_table(args.table), args.off, args.pin) if args.off or args.pin else {}
    if args.min_coverage is not None and not 0.0 <= args.min_coverage <= 100.0:
        from tileprobe.errors import UsageError
        raise UsageError(f"--min-coverage {args.min_coverage:g}: give a percentage from 0 to 100")
    if args.env:
        import os
        import shlex

        from tileprobe.record.use import use_env
        table = check_table(args.table)
        if os.pathsep in table + ".hook":
            raise TileprobeError(f"{table}: the path holds {os.pathsep!r}, which splits PYTHONPATH, so the hook under "
                                 f"{table}.hook cannot be put on it: move or link the table to a path without "
                                 f"{os.pathsep!r}, or run `tileprobe use TABLE -- COMMAND`")
        env = use_env(table, table + ".hook", env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
        print(f"export PYTHONPATH={shlex.quote(env['PYTHONPATH'])}")
        print(f"export TILEPROBE_USE_TABLE={shlex.quote(table)}")
        from tileprobe.record.hook import load_capture
        no_index = load_capture().ENV_NO_INDEX
        if no_index in env:          # its index is not this table's (said on stderr): read whole
            print(f"export {no_index}={shlex.quote(env[no_index])}")
        for name, value in sorted(control.items()):
            print(f"export {name}={shlex.quote(value)}")
        return 0
    if not command:
        from tileprobe.errors import UsageError
        raise UsageError("no command: tileprobe use TABLE -- python my_script.py (or tileprobe use TABLE --env)")
    from tileprobe.cli._common import check_output_path
    check_output_path(args.coverage_json, "--coverage-json")     # before the program runs, not after
    return _run(args, command, control)


def _run(args, command: list[str], control: dict) -> int:
    """The program's run, then its coverage when asked for: printed, written, held to ``--min-coverage``."""
    from tileprobe.record.use import run_with_coverage
    wanted = args.coverage or args.coverage_json or args.min_coverage is not None
    rc, cov = run_with_coverage(args.table, command, control, coverage=bool(wanted))
    if cov is None:
        return rc
    from tileprobe.cli._common import console
    from tileprobe.report.coverage import render_coverage
    from tileprobe.report.text import say
    err = console(stderr=True)
    if args.coverage or args.min_coverage is not None:
        render_coverage(cov, err)
    if args.coverage_json:
        from tileprobe.schema import json_text
        try:
            _write_regular(args.coverage_json, json_text(cov.to_json()).encode("utf-8"))
        except OSError as e:      # the program has run: say it, keep its exit code (or fail a CI that asked)
            say(err, f"tileprobe use: --coverage-json {args.coverage_json}: cannot write it ({e.strerror or e}); "
                     "give a writable path")
            return rc or 1
    below = cov.below(args.min_coverage) if args.min_coverage is not None else []
    if below:
        say(err, f"tileprobe use: coverage below --min-coverage {args.min_coverage:g} %: " + ", ".join(below)
                 + (f"; the program's own exit code {rc} is kept" if rc else "; exit 1"))
    return rc if rc else (1 if below else 0)


def _write_regular(path: str, data: bytes) -> None:
    """Write ``data`` as the whole of the regular file ``path``: opened non-blocking, so a FIFO put there after the
    check (nothing reading it) is refused at once rather than waited on; anything but a regular file is refused.

    Raises:
        OSError: it cannot be opened or written, or it is not a regular file.
    """
    import os
    import stat
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0), 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file (a FIFO, device or folder)")
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
