"""``REPORT.md``: the reduction as an upstream compiler bug report in the seed report's form — what holds under
which compiler (the hint values' table from the final audit), what the kernel needs and what it does not, the
environment, the repeat command, the reduced kernel's source. Every audited text in it is quoted as code: the
kernel and the compiler's words are text, never Markdown."""
from __future__ import annotations

import platform
from collections.abc import Sequence

from tileprobe.reduce.output import KERNEL_FILE, PROBE_FILE


def _code(text: str) -> str:
    text = _paths(str(text)).replace("`", "'")
    return f"`{text}`"


def _paths(text: str) -> str:
    """``text`` with the working folder's and the home folder's absolute paths shortened (``./x`` → ``x``,
    ``/home/u/x`` → ``~/x``): a report pasted upstream names no user's folders."""
    import os
    cwd, home = os.getcwd(), os.path.expanduser("~")
    if cwd not in ("", "/"):
        text = text.replace(cwd + os.sep, "")
    if home not in ("", "/"):
        text = text.replace(home + os.sep, "~" + os.sep)
    return text


def shown_path(path: str) -> str:
    """A probe's path as the report names it: relative to the working folder, or ``~/…``, else its file name alone
    (never a user's absolute folder)."""
    import os

    from tileprobe.report.markdown import display_path
    p = display_path(path)
    return os.path.basename(p) if os.path.isabs(p) else p


def _cost(red) -> str:
    """Candidates and seconds; a resumed run says what the runs before it did, and the sum."""
    now = f"{red.candidates} candidates compiled, {red.wall_s:.0f} s"
    if not red.resumed:
        return now + "."
    total = red.candidates + red.earlier_candidates
    return (f"{now} in this run, resumed from the journal after {red.earlier_candidates} candidates and "
            f"{red.earlier_wall_s:.0f} s in the runs before it ({total} candidates, "
            f"{red.wall_s + red.earlier_wall_s:.0f} s in all).")


def markdown(red, *, probe: str, arch: str, where: str, prop: str, versions: Sequence[str], regression: bool,
             kernel_source: str, records: Sequence = ()) -> str:
    """The report's Markdown. ``red``: a :class:`~tileprobe.reduce.engine.Reduction`; ``records``: the final
    audit's records of the written probe (the table), may be empty."""
    tcs = ",".join(versions)
    title = (f"{prop} under tileiras {versions[0]} and not under {versions[1]}" if regression and
             red.start.judgements[0][1] else f"{prop}" + (f" changes between tileiras {versions[0]} and "
                                                           f"{versions[1]}" if regression else
                                                           f" under tileiras {versions[0]}"))
    out = [f"# {arch}: {title} (reduced kernel)", ""]
    if red.stopped_by_budget:
        out += ["**The budget ran out: this is the smallest kernel found so far, not a finished reduction.**", ""]
    out += ["## What happens", ""]
    for v, holds, line in red.final.judgements:
        out.append(f"- tileiras {v}: {_code(prop)} {'holds' if holds else 'does not hold'} — {_code(line)}")
    out += ["", f"Reduced from {_code(shown_path(probe))} ({_code(where)}): {red.original_size} → "
                f"{red.final_size}; {_cost(red)}", ""]
    needed = [n for n in red.needs if n.verdict == "needed"]
    other = [n for n in red.needs if n.verdict == "not_needed"]
    rejected = [n for n in red.needs if n.verdict == "rejected"]
    out += ["## What matters", ""]
    if red.stopped_by_budget and not red.needs:
        out.append("not checked: the budget ran out before each remaining construct was tried on its own (run the "
                   "same command again, with a larger --budget or none: it resumes from its journal)")
    else:
        out.append("needs: " + ("; ".join(_code(n.construct) + f" ({n.change})" for n in needed) or "(none found)"))
        out.append("")
        nn = [_code(c) for c in red.removed] + [_code(n.construct) for n in other]
        out.append("not needed: " + ("; ".join(nn) or "(nothing was removed)"))
    if rejected:
        out += ["", "cannot tell (the kernel does not compile without it): "
                + "; ".join(_code(n.construct) for n in rejected)]
    if records:
        out += ["", "## Hints × compilers (the written probe)", "",
                "| tileiras | hints | threads | regs | smem B | stack B | LDL/STL | CTAs/SM | reg pool | verdicts / failure |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        from tileprobe.schema import short_build
        for r in records:
            hints = ", ".join(f"{k}={v}" for k, v in r.hints.items()) or "-"
            verdicts = ", ".join(f"{h} {x.status}" for h, x in r.verdicts.items()) if r.ok else (r.failure or r.status)
            sass = r.sass if r.ok else None
            spills = (f"{sass.spill_loads}/{sass.spill_stores}" if sass is not None and "spill_loads" in sass
                      else "-")
            pool = r.register_pool.verdict if r.ok and r.register_pool is not None else "-"
            out.append(f"| {short_build(r.tileiras).split()[-1]} | {hints} | {r.threads or '-'} | "
                       f"{r.registers or '-'} | {r.shared_bytes if r.shared_bytes is not None else '-'} | "
                       f"{r.stack_bytes if r.stack_bytes is not None else '-'} | {spills} | {r.ctas_per_sm or '-'} | "
                       f"{pool} | {_code(verdicts)} |")
    out += ["", "## Environment", "",
            f"- Python {platform.python_version()} on {platform.system()} {platform.machine()}",
            f"- arch {arch}; tileiras {', '.join(versions)}"]
    try:
        from importlib.metadata import version
        out.append(f"- cuda-tile {version('cuda-tile')}")
    except Exception:
        pass
    out += ["", "## Repeat", "", "```", f"tileprobe audit {PROBE_FILE} --arch {arch} --tileiras {tcs}", "```", "",
            f"## Reduced kernel ({KERNEL_FILE})", "", "```python", kernel_source.rstrip(), "```", ""]
    return "\n".join(out)
