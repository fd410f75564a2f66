"""``tileprobe record``: from a real program (or cuTile's compile cache) to probe files.

The argparse code of the command lives here; the work is :mod:`tileprobe.record` (no rich, no argparse), the
printed summary :mod:`tileprobe.report.record`.
"""
from __future__ import annotations

import os
import sys

from tileprobe.cli._common import command_after_dashes
from tileprobe.errors import TileprobeError

# Imports inside functions here are lazy on purpose: at the module head they would add 0.37 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

DEFAULT_OUT = "tileprobe-record"




def add_parser(subparsers, add_common=None) -> None:
    """Register ``tileprobe record`` (``add_common`` is unused: the command writes files, not result tables)."""
    p = subparsers.add_parser(
        "record", help="run a program and write probes for the kernels it launches (or read cuTile's compile cache)",
        description="Run COMMAND with every Python process it starts recording its cuda.tile launches, then write one "
                    "probe per kernel under DIR/probes (audit them with `tileprobe audit DIR/probes/*.py`). "
                    "The exit code is COMMAND's. See docs/RECORD.md.",
        usage="tileprobe record [-o DIR] [options] -- COMMAND ...\n"
              "       tileprobe record --from-log DIR [options]\n"
              "       tileprobe record --from-cache [PATH] [-o DIR] [--kernels MODULES]")
    p.add_argument("command", nargs="*", metavar="COMMAND", help="the program to run, after -- (python app.py, "
                   "python -m pkg, pytest ...)")
    p.add_argument("-o", "--out", default=None, metavar="DIR", help=f"output folder (default ./{DEFAULT_OUT}): "
                   "launches/ (one JSON-lines log per process), probes/, record.json")
    p.add_argument("--top", type=int, default=10, metavar="N", help="cases written per kernel: its N most frequent "
                   "JIT signatures (default 10); the rest are counted in the probe's header")
    p.add_argument("--by", choices=["signature", "launch"], default="signature",
                   help="one case per JIT signature (default; needs the kernel importable here) or per distinct "
                   "argument list")
    p.add_argument("--hints", choices=["around", "launched"], default="around",
                   help="hint grid: launched values and occupancy neighbours in 1,2,4,8,16 (default), or only the "
                   "launched values")
    p.add_argument("--force", action="store_true", help="replace an earlier recording in DIR")
    p.add_argument("--from-log", metavar="DIR", help="write probes from launches already recorded in DIR (e.g. by "
                   "pytest --tileprobe-record DIR); runs nothing")
    p.add_argument("--from-cache", nargs="?", const="", default=None, metavar="PATH",
                   help="write probe skeletons from cuTile's compile cache (folder or cache.db; default: the one cuTile "
                   "uses, $CUDA_TILE_CACHE_DIR or ~/.cache/cutile-python); runs nothing")
    p.add_argument("--kernels", metavar="MODULES", help="with --from-cache: comma-separated modules or .py files to "
                   "search for the cached kernels by name (the cache keeps only the function name)")
    p.set_defaults(func=cmd_record)


def cmd_record(args) -> int:
    """Run the command recorded (or read a log / the cache), write the probes, print what was written."""
    from tileprobe.record.session import probes_from_log, record
    command = command_after_dashes(args)
    sources = [bool(command), args.from_log is not None, args.from_cache is not None]
    if sum(sources) != 1:
        raise TileprobeError("give exactly one of: a COMMAND after --, --from-log DIR, or --from-cache [PATH]; "
                             "e.g. tileprobe record -o out -- python app.py")
    out = args.out or DEFAULT_OUT
    if os.path.exists(out) and not os.path.isdir(out):
        raise TileprobeError(f"-o {out}: a file, not a folder; give a folder for the recording (it is created)")
    if args.from_cache is not None:
        from tileprobe.record.cache import probes_from_cache
        kernels = [k.strip() for k in (args.kernels or "").split(",") if k.strip()]
        result = probes_from_cache(args.from_cache or None, args.out or DEFAULT_OUT, top=args.top, hints=args.hints,
                                   kernels=kernels, force=args.force)
    elif args.from_log is not None:
        if args.out and os.path.abspath(args.out) != os.path.abspath(args.from_log):
            raise TileprobeError("--from-log DIR writes its probes into DIR: leave out -o")
        result = probes_from_log(args.from_log, top=args.top, by=args.by, hints=args.hints)
    else:
        result = record(command, args.out or DEFAULT_OUT, top=args.top, by=args.by, hints=args.hints,
                        force=args.force)
    _print(result, args.out or args.from_log or DEFAULT_OUT)
    return result.exit_code or 0


def _print(result, out_dir: str) -> None:
    """What was recorded and written, printed on stderr:
    :func:`tileprobe.report.record.render_record`."""

    from rich.console import Console

    from tileprobe.report.record import render_record
    render_record(result, Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200), out_dir)
