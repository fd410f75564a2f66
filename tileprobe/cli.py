"""``tileprobe`` command line. Each subcommand is also a Python call (``tileprobe.audit.audit`` …).

``main(argv) -> int``: 0 on success (an audit with failed variants still succeeded: failures are results),
1 when a :class:`TileprobeError` stops the command (its message says what to do), 2 for bad usage.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from .errors import TileprobeError

DEFAULT_ARCHS = "sm_90,sm_120"


def _console(stderr=False):
    """A rich console; when output is not a terminal (a file, a CI log) tables get 200 columns, not 80."""
    from rich.console import Console
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 200
    return Console(stderr=stderr, highlight=False, width=width)


def _progress_cb(console):
    """A rich progress bar fed by audit's ``progress(kind, n)`` callback, and the context that owns it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    prog = Progress(TextColumn("compiling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True)
    state = {"task": None}

    def cb(kind, n):
        if kind == "total":
            if not console.is_terminal:
                console.print(f"compiling {n} variants …", highlight=False)
            state["task"] = prog.add_task("compile", total=n)
        elif state["task"] is not None:
            prog.advance(state["task"], n)
    return prog, cb


def _split(s: str | None) -> list[str]:
    return [x.strip() for x in (s or "").split(",") if x.strip()]


def _toolchains(spec: str | None) -> list[dict] | None:
    if not spec:
        return None
    from .toolchain import resolve_toolchains
    return resolve_toolchains(_split(spec))


def _open_store(args):
    if getattr(args, "no_store", False):
        return None
    from .store import Store
    return Store.open(args.store)


def _have_nvdisasm() -> bool:
    from .errors import ToolchainError
    from .sass import find_nvdisasm
    try:
        find_nvdisasm()
        return True
    except ToolchainError:
        return False


def check_output_path(path: str | None, what: str) -> None:
    """Fail before any work when an output file cannot be written (its folder is missing or read-only)."""
    if not path or path == "-":
        return
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise TileprobeError(f"{what} {path}: folder {folder} does not exist; create it or give another path")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise TileprobeError(f"{what} {path}: not writable; give another path")


def cmd_audit(args) -> int:
    from .audit import audit
    err = _console(stderr=True)
    check_output_path(args.json, "--json")
    if not _split(args.arch):
        raise TileprobeError(f"--arch {args.arch!r} names no architecture; e.g. --arch sm_90,sm_120")
    store = _open_store(args)
    prog, cb = _progress_cb(err)
    with prog:
        result = audit(args.probes, _split(args.arch), toolchains=_toolchains(args.tileiras), jobs=args.jobs,
                       timeout_s=args.timeout, with_sass=args.sass and _have_nvdisasm(), store=store, progress=cb,
                       repeat=args.repeat)
    for e in result.probe_errors:
        err.print(f"[red]probe error[/]: {e}", markup=True, highlight=False)
    if store is not None:
        store.save_audit(result, " ".join(sys.argv[1:]) if args.command_line is None else args.command_line)
    if args.bundle:
        write_bundle(args.bundle, result)
    _emit(result.records, result.environment, args, result)
    failed = sum(1 for r in result.records if r.status in ("compile_error", "compiler_crash", "timeout"))
    broken = sum(1 for r in result.records if r.status == "probe_error")
    summary = f"{len(result.records)} variants, {failed} failed to compile"
    if broken or result.probe_errors:
        summary += f", {broken} not built because of probe errors ({len(result.probe_errors)} error(s), listed above)"
    err.print(f"{summary}, {result.wall_s:.1f} s", highlight=False)
    return 0


def write_bundle(folder: str, result) -> None:
    """Hand an audit to another machine (e.g. the GPU host): ``folder/audit.json`` + ``folder/cubins/<sha256>.cubin``.

    ``tileprobe run --bundle folder`` reads this layout; no tileiras is needed there.
    """
    from .schema import write_json
    os.makedirs(os.path.join(folder, "cubins"), exist_ok=True)
    for sha, data in result.cubins.items():
        with open(os.path.join(folder, "cubins", sha + ".cubin"), "wb") as f:
            f.write(data)
    write_json(result.records, result.environment, os.path.join(folder, "audit.json"))


def _emit(records, environment, args, result=None):
    from .schema import write_json
    if args.json:
        write_json(records, environment, args.json)
    fmt = getattr(args, "format", "table")
    if fmt == "markdown":
        from .report.markdown import audit_markdown
        sys.stdout.write(audit_markdown(records, environment, command=" ".join(["tileprobe", *sys.argv[1:]])))
    elif fmt == "table" and args.json != "-":
        from .report.terminal import render_audit
        render_audit(records, _console(), brief=getattr(args, "brief", False))


def _add_common(p):
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON (schema in tileprobe/schema.py); - for stdout")
    p.add_argument("--format", choices=["table", "markdown", "none"], default="table",
                   help="what to print: terminal tables (default), Markdown for a bug report, or nothing")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = argparse.ArgumentParser(prog="tileprobe", description="See what tileiras did with your cuTile hints.")
    parser.add_argument("--version", action="version", version=f"tileprobe {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)

    a = sub.add_parser("audit", help="compile probes ahead of time (no GPU) and judge each hint")
    a.add_argument("probes", nargs="+", metavar="PROBE", help="probe files (see README: Writing a probe)")
    a.add_argument("--arch", default=DEFAULT_ARCHS, help=f"comma-separated targets, sm_80 … sm_121 (default {DEFAULT_ARCHS})")
    a.add_argument("--tileiras", metavar="V1,V2", help="compiler versions to audit with (installed with "
                   "`tileprobe toolchain install`), e.g. 13.3.36,13.4.92; default: the one cuTile would use")
    a.add_argument("--jobs", "-j", type=int, default=None, help="parallel compiles (default: all CPUs)")
    a.add_argument("--timeout", type=float, default=300.0, help="per-variant compiler timeout in seconds (default 300)")
    a.add_argument("--no-sass", dest="sass", action="store_false", help="skip SASS traits (spills, TMA, matrix "
                   "instructions from nvdisasm); on by default when nvdisasm is installed")
    a.add_argument("--store", metavar="PATH", help="results store (default: the user data dir)")
    a.add_argument("--no-store", action="store_true", help="do not read or write the results store")
    a.add_argument("--bundle", metavar="DIR", help="also write DIR/audit.json and DIR/cubins/ for `tileprobe run "
                   "--bundle DIR` on a GPU machine without tileiras")
    a.add_argument("--repeat", type=int, default=1, metavar="N", help="compile each variant N times and report "
                   "variants whose machine code differs between compiles (tileiras is not always deterministic)")
    a.add_argument("--brief", action="store_true",
                   help="print reasons only for noteworthy verdicts (partial, ignored, infeasible, unchanged)")
    a.set_defaults(func=cmd_audit, command_line=None)
    _add_common(a)

    from . import bisect, compare, doctor, gate, store, toolchain
    from .report import html
    from .run import cli as run_cli
    for module in (toolchain, doctor, compare, bisect, run_cli, html, store, gate):
        module.add_parser(sub, _add_common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tileprobe`` command. Returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TileprobeError as e:
        _console(stderr=True).print(f"[bold red]tileprobe:[/] {e}", markup=True, highlight=False)
        return 1
    except KeyboardInterrupt:
        _console(stderr=True).print("interrupted; finished variants are kept in the store", highlight=False)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
