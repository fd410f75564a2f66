"""``tileprobe frontend install|list``: cuda-tile releases in isolated environments, for ``audit --cuda-tile``.

Python calls: :func:`tileprobe.frontend.install`, :func:`tileprobe.frontend.installed`.
"""
from __future__ import annotations

import time

from tileprobe.cli._common import console
from tileprobe.report.text import say


def add_parser(sub) -> None:
    """Register ``tileprobe frontend install|list``."""
    p = sub.add_parser("frontend", help="install and list cuda-tile releases in environments of tileprobe's own "
                                        "(audit --cuda-tile VERSION compiles with them)")
    fsub = p.add_subparsers(dest="frontend_cmd", required=True)
    i = fsub.add_parser("install", help="make the environment of cuda-tile VERSION (e.g. 1.6.0)")
    i.add_argument("versions", nargs="+", metavar="VERSION", help="a cuda-tile release, MAJOR.MINOR.PATCH")
    i.add_argument("--force", action="store_true", help="make it again")
    i.set_defaults(func=cmd_install)
    ls = fsub.add_parser("list", help="the cuda-tile environments made here")
    ls.set_defaults(func=cmd_list)


def cmd_install(args) -> int:
    """Run ``tileprobe frontend install``: one line per release (folder, seconds)."""
    from tileprobe.frontend import install
    con = console()
    for v in args.versions:
        t0 = time.perf_counter()
        fe = install(v, force=args.force)
        say(con, f"cuda-tile {fe.version}: {fe.root} ({time.perf_counter() - t0:.1f} s); "
                 f"audit with it: tileprobe audit PROBE --cuda-tile {fe.version}")
    return 0


def cmd_list(args) -> int:
    """Run ``tileprobe frontend list``: one line per environment, or where none is."""
    from tileprobe.frontend import installed
    from tileprobe.toolchain_files import toolchains_dir
    con = console()
    found = installed()
    for fe in found:
        say(con, f"cuda-tile {fe.version}: {fe.python}")
    if not found:
        say(con, f"no cuda-tile environments in {toolchains_dir()}; `tileprobe frontend install 1.6.0` makes one")
    return 0
