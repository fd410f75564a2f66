"""``tileprobe store size`` / ``tileprobe store prune --older-than 30d --keep-latest 1``: what the results store
takes, and making it smaller without losing the newest result of any variant (unless asked).

Python calls: :meth:`tileprobe.store.Store.size`, :meth:`tileprobe.store.Store.prune`.
"""
from __future__ import annotations

import datetime
import re

from tileprobe.cli._common import console
from tileprobe.errors import TileprobeError

# Imports inside functions here are lazy on purpose: at the module head they would add 0.35 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def add_parser(sub) -> None:
    """Register ``tileprobe store`` (``size``, ``prune``)."""
    p = sub.add_parser("store", help="the results store: its size, and pruning old compiles",
                       description="What the results store takes, and pruning it (the newest compile of every "
                                   "variant is kept unless --keep-latest 0).")
    p.add_argument("--store", metavar="PATH", help="results store (default: $TILEPROBE_STORE or the user data dir)")
    actions = p.add_subparsers(dest="action", required=True)
    actions.add_parser("size", help="file size, cubin bytes, rows per table, variants, oldest and newest compile")
    pr = actions.add_parser("prune", help="delete old compiles (their runs and unused cubins), then VACUUM")
    pr.add_argument("--older-than", metavar="AGE", help="only compiles older than AGE: 30d, 12h, 2w, or a date "
                    "2026-11-01 (UTC); default: any age")
    pr.add_argument("--keep-latest", type=int, default=1, metavar="N", help="keep the N newest compiles of each "
                    "variant (kernel, probe, case, hints, arch, compiler) whatever their age (default 1; 0: none)")
    pr.add_argument("--dry-run", action="store_true", help="say what would go, delete nothing")
    p.set_defaults(func=cmd_store)


def cutoff(age: str | None, now: datetime.datetime | None = None) -> str | None:
    """``--older-than`` as the ISO time (UTC) before which compiles may go: ``30d`` → now − 30 days; a date or
    ISO time is taken as it is.

    Raises:
        TileprobeError: neither NUMBER+UNIT (s, m, h, d, w) nor an ISO date.
    """
    if not age:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", age)
    if m:
        now = now or datetime.datetime.now(datetime.timezone.utc)
        try:
            then = now - datetime.timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])
        except (OverflowError, ValueError):   # an age past year 1 (10^20d): no compile is that old
            then = datetime.datetime.min
        return _iso(then)
    try:
        return _iso(datetime.datetime.fromisoformat(age.strip().replace("Z", "")))
    except ValueError:
        raise TileprobeError(f"--older-than {age!r}: give an age such as 30d, 12h, 2w (s m h d w) or a date "
                             "such as 2026-11-01") from None


def _iso(when: datetime.datetime) -> str:
    """``2026-11-01T00:00:00.000000Z``: the store's time format, the year always 4 digits (strftime writes year 1 as
    ``1``, which sorts after ``2026`` as text)."""
    if when.tzinfo is not None:
        when = when.astimezone(datetime.timezone.utc)
    return when.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def cmd_store(args) -> int:
    """Run ``tileprobe store size|prune`` for parsed arguments; returns the exit code."""
    from tileprobe.store import Store
    con = console()
    with Store.open(args.store, must_exist=bool(args.store), check=True) as store:
        if args.action == "size":
            s = store.size()
            con.print(f"store: {s['path']}\n{_mb(s['file_bytes'])} on disk, {_mb(s['cubin_bytes'])} of it cubins; "
                      f"{s['compiles']} compiles of {s['variants']} variants, {s['cubins']} cubins, {s['audits']} "
                      f"audits, {s['runs']} runs, {s['tunes']} tunes; compiles from {s['oldest'] or '-'} to "
                      f"{s['newest'] or '-'}", markup=False, highlight=False)
            return 0
        when = cutoff(args.older_than)
        r = store.prune(older_than=when, keep_latest=args.keep_latest, dry_run=args.dry_run)
        verb = "would delete" if args.dry_run else "deleted"
        con.print(f"{verb} {r['compiles']} compiles, {r['runs']} runs, {r['cubins']} cubins, {r['audits']} audits "
                  f"(kept the {args.keep_latest} newest of each variant"
                  + (f", and everything since {when[:19]} UTC" if when else "") + ")"
                  + ("" if args.dry_run else f"; {_mb(r['bytes_before'])} → {_mb(r['bytes_after'])}"),
                  markup=False, highlight=False)
    return 0
