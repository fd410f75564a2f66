"""``tileprobe toolchain install|list|remove``: managed tileiras releases (with matching ptxas and libnvvm).

Python calls: :func:`tileprobe.toolchain.install`, :func:`~tileprobe.toolchain.local_toolchains` (and
:func:`~tileprobe.toolchain.published_versions` for ``--available``), :func:`~tileprobe.toolchain.remove`.
"""
from __future__ import annotations

import time

from tileprobe.cli._common import console
from tileprobe.report.text import say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.43 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


def add_parser(sub) -> None:
    """Register ``tileprobe toolchain install|list|remove``."""
    p = sub.add_parser("toolchain", help="install, list and remove tileiras releases (with ptxas and "
                                         "libnvvm) from the package registry")
    tsub = p.add_subparsers(dest="toolchain_cmd", required=True)
    i = tsub.add_parser("install", help="install VERSION (13.4 = newest 13.4.x, or 13.4.92)")
    i.add_argument("versions", nargs="+", metavar="VERSION", help="a tileiras release: MAJOR.MINOR.PATCH (13.4.92) "
                   "or MAJOR.MINOR (13.4: the newest 13.4.x published); `tileprobe toolchain list --available` "
                   "lists them")
    i.add_argument("--force", action="store_true", help="download and install again")
    i.set_defaults(func=cmd_install)
    ls = tsub.add_parser("list", help="installed toolchains and this environment's pip tileiras")
    ls.add_argument("--available", action="store_true", help="also list what the package registry publishes")
    ls.set_defaults(func=cmd_list)
    r = tsub.add_parser("remove", help="delete an installed toolchain")
    r.add_argument("version", metavar="VERSION", help="an installed release: 13.3.36, or 13.3 when one 13.3.x is "
                   "installed (`tileprobe toolchain list` lists them)")
    r.set_defaults(func=cmd_remove)


def cmd_install(args) -> int:
    """Run ``tileprobe toolchain install``: one line per release (folder, size, seconds, pins)."""
    from tileprobe.toolchain import folder_size_bytes, install
    con = console()
    for v in args.versions:
        t0 = time.perf_counter()
        tc = install(v, force=args.force)
        pins = ", ".join(f"{p} {x}" for p, x in tc.pins.items())
        say(con, f"tileiras {tc.version}: {tc.root} ({folder_size_bytes(tc.root) / 1e6:.0f} MB, "
                 f"{time.perf_counter() - t0:.1f} s)\n  {pins}")
    return 0


def cmd_list(args) -> int:
    """Run ``tileprobe toolchain list``: a table of local toolchains, and with ``--available`` the published ones."""
    from tileprobe.report.terminal import render_toolchains
    from tileprobe.toolchain import TILEIRAS_PKG, local_toolchains, published_versions, toolchains_dir
    rows = local_toolchains()
    con = console()
    render_toolchains(rows, con, f"no toolchains in {toolchains_dir()}; `tileprobe toolchain install 13.4` adds one")
    if args.available:
        have = {t.version for t in rows}
        marks = [f"{v}{' (installed)' if v in have else ''}" for v in published_versions(TILEIRAS_PKG)]
        say(con, f"published {TILEIRAS_PKG}: " + ", ".join(marks))
    return 0


def cmd_remove(args) -> int:
    """Run ``tileprobe toolchain remove VERSION``."""
    from tileprobe.toolchain import remove
    tc = remove(args.version)
    say(console(), f"removed tileiras {tc.version} ({tc.root})")
    return 0
