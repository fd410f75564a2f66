"""``tileprobe table merge A.json B.json … -o C.json``: tune tables from different GPUs or machines as one file.

The merge is :func:`tileprobe.tune.table_store.merge_tables`: rows kept per kernel, problem and provenance (GPU,
SM count, arch, tileiras, cuda-tile, timing, kernel source), exact duplicates kept once, and two rows of one
identity with different picks refused with both named: exit 1, nothing written.
"""
from __future__ import annotations

from tileprobe.errors import UsageError


def add_parser(subparsers, add_common=None) -> None:
    """Register ``tileprobe table`` and its ``merge`` subcommand."""
    p = subparsers.add_parser("table", help="tune tables: merge tables made on different GPUs or machines",
                              description="Work on tune tables (tileprobe tune --export).")
    sub = p.add_subparsers(dest="table_cmd", required=True)
    m = sub.add_parser(
        "merge", help="merge tune tables into one (rows kept per GPU and provenance; conflicts refused)",
        description="Merge tune tables made on different GPUs or machines into one: every row is kept per kernel, "
                    "problem and provenance (arch, GPU, SM count, tileiras build, cuda-tile, timing mode, kernel "
                    "source), so `tileprobe use` answers on each GPU from its own rows. Rows equal in all of that and "
                    "in their pick are kept once; equal in all of that but with another pick is a conflict: the "
                    "merge is refused with both rows named, exit 1, and nothing is written.",
        usage="tileprobe table merge TABLE TABLE ... -o OUT")
    m.add_argument("tables", nargs="+", metavar="TABLE", help="tune tables to merge, in order")
    m.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="the merged table (written atomically, under OUT.lock; may be one of the inputs)")
    m.set_defaults(func=cmd_merge)


def cmd_merge(args) -> int:
    """Merge the tables; 0 when written, 1 on a conflict (nothing written)."""
    import sys

    from tileprobe.cli._common import check_output_path
    from tileprobe.report.text import clean as plain
    from tileprobe.tune.export import merged_document, read_table
    from tileprobe.tune.table_store import merge_tables, update_table
    if len(args.tables) < 2:
        raise UsageError("table merge: give two tables or more (tileprobe table merge A.json B.json -o C.json)")
    _refuse_link(args.output)
    check_output_path(args.output, "-o")
    docs = [(t, read_table(t)) for t in args.tables]
    result = merge_tables(docs, merged_document)
    if result.conflicts:
        for c in result.conflicts:
            print(f"tileprobe table merge: conflict: {plain(c.reason())}", file=sys.stderr)
        print(f"tileprobe table merge: {len(result.conflicts)} conflicting row(s): nothing written to "
              f"{plain(args.output)}; keep one of each pair (tune again on that GPU, or drop a table)", file=sys.stderr)
        return 1
    update_table(args.output, lambda _current: result.doc, read_table)   # refuses to replace a file that is no table
    n = sum(len(rows) for rows in result.doc["kernels"].values())
    given = ", ".join(f"{plain(src)}: {k}" for src, k in result.rows_from.items())
    dup = f"; {result.duplicates} duplicate row(s) kept once" if result.duplicates else ""
    print(f"{plain(args.output)}: {n} row(s) from {given}{dup}")
    return 0


def _refuse_link(path: str) -> None:
    """Refuse an ``-o`` that is a symbolic link: the merge never writes through a link to its target (nor
    replaces the link by a file the user did not name), whatever the link points at (a file, nothing, a folder).

    Raises:
        UsageError: naming the link, its target and the fix (nothing read or written yet).
    """
    import os

    from tileprobe.errors import PATH_SHOWN_CHARS, shown
    if os.path.islink(path):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        raise UsageError(f"table merge: -o {shown(path, limit=PATH_SHOWN_CHARS)} is a symbolic link (to "
                         f"{shown(target, limit=PATH_SHOWN_CHARS)}); tileprobe does not "
                         "write through links: give the target's own path, or remove the link first")
