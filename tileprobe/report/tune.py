"""``tileprobe tune``'s output: per problem its title, what the static stage dropped, the race, the candidates'
table (the finalists only past :data:`ROWS_SHOWN` rows, unless ``--all``) and the verdict lines; then the time
split, from the :class:`~tileprobe.tune.result.TuneResult` the tune made (``tileprobe/cli/tune.py`` prints it)."""
from __future__ import annotations

from tileprobe.report.fit import Column
from tileprobe.report.terminal import print_fitted_table
from tileprobe.report.text import say
from tileprobe.report.tune_facts import CheckFacts, FinalFacts, PreviousTune, TuneTimes
from tileprobe.schema import short_build
from tileprobe.tune.result import CUT_REASON, NO_SM_COUNT, NOT_SAMPLED_REASON, CandidateRow, ProblemResult, TuneResult

#: Table order of the candidates' fates.
_FATES = ("winner", "tie", "ok", "eliminated", "wrong", "hang", "crash", "error", "skipped")
#: Rows a problem's table shows in full; past it, the finalists only, with counts (``--all``: every row).
ROWS_SHOWN = 20


#: Statuses of the candidates a race took (the others never reached it: failed compiles, duplicates, rules).
_RACED = ("skipped", "winner", "tie", "eliminated", "hang", "crash", "error", "wrong")

def _us(v) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _ci(r: CandidateRow) -> str:
    if r.ci_lo_us is None:
        return "-"
    return f"[{r.ci_lo_us:,.1f}, {r.ci_hi_us:,.1f}]"


def render(result: TuneResult, console, all_rows: bool = False) -> None:
    """Print every problem of a :class:`~tileprobe.tune.result.TuneResult`, then the time split. A problem of more
    than :data:`ROWS_SHOWN` candidates shows its finalists' rows, the count per fate and one line per duplicate group,
    unless ``all_rows``."""
    env = result.environment
    say(console, f"timing: {env.get('timing')} · strategy: {env.get('strategy')} · arch {env.get('arch')}"
                 f"{' · dry run (static stage only)' if result.dry_run else ''}")
    if result.dry_run and env.get("num_sms_reference"):
        say(console, f"duplicate launches looked for at {env.get('num_sms')} SMs, the {env.get('arch')} reference "
                     f"GPU's ({env.get('num_sms_reference')}); --num-sms N for another GPU")
    for p in result.problems:
        _render_problem(p, console, all_rows)
    say(console, time_line(result.times, result.compiled))


def _counts(d: dict) -> str:
    return f" ({', '.join(f'{k}: {n}' for k, n in d.items())})" if d else ""


def summary_line(p: ProblemResult) -> str:
    """``12 configurations: 7 rejected by constraints (fits: 4, …), 1 failed (compile_error: 1), 1 duplicate
    launches → 3 to time``; a budgeted search's unreached configurations are ``N not searched (the budget)``, a
    budgeted dry run's ``N not searched (not in the dry run's sample)``."""
    rejected = {k[len("constraint:"):]: n for k, n in p.dropped.items() if k.startswith("constraint:")}
    own = rejected.pop("programs_own", None) is not None     # a recorded search: only the program's are its space
    failed = {k: n for k, n in p.dropped.items() if not k.startswith("constraint:")
              and k not in ("duplicate_launch", "hang_risk", "not_searched")}
    hangs, unsearched = p.dropped.get("hang_risk", 0), p.dropped.get("not_searched", 0)
    rows = [r for r in p.candidates if r.config is not None]
    timed = sum(1 for r in rows if r.same_launch_as is None and r.status not in failed
                and r.status not in ("hang_risk", "not_searched"))
    dupes = ("duplicate launches not looked for (no SM count)" if NO_SM_COUNT in (p.notes or [])
             else f"{p.dropped.get('duplicate_launch', 0)} duplicate launches")
    return (f"{len(rows) + sum(rejected.values())} configurations{' (the program' + chr(39) + 's)' if own else ''}: "
            f"{sum(rejected.values())} rejected by constraints{_counts(rejected)}, {sum(failed.values())} failed{_counts(failed)}, "
            + (f"{hangs} predicted to hang (not launched), " if hangs else "")
            + (f"{unsearched} not searched ({_why_unsearched(rows)}), " if unsearched else "")
            + f"{dupes} → {timed} to time")


def _why_unsearched(rows: list[CandidateRow]) -> str:
    """Why rows are ``not_searched``: a dry run's sample left them out (their reason says so), or the budget."""
    dry = any(r.status == "not_searched" and r.reason == NOT_SAMPLED_REASON for r in rows)
    return "not in the dry run's sample" if dry else "the budget"


def fate_counts(rows: list[CandidateRow]) -> dict[str, int]:
    """Candidates per fate (``winner``, ``tie``, ``eliminated`` …, and ``duplicate_launch`` for the members timed
    through another), in table order."""
    out: dict[str, int] = {}
    for r in rows:
        fate = "duplicate_launch" if r.same_launch_as else r.status or "-"
        out[fate] = out.get(fate, 0) + 1
    order = {s: i for i, s in enumerate(_FATES + ("duplicate_launch",))}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


#: Members a duplicate-group line names before "and N more" (``--all`` and the JSON name them all): a group of the
#: 486-configuration matmul ran to 520 characters (a new user, 2026-12-02).
GROUP_MEMBERS_SHOWN = 3


def duplicate_lines(rows: list[CandidateRow]) -> list[str]:
    """One line per group of identical launches: ``A = B, C (timed once, as A)``; past
    :data:`GROUP_MEMBERS_SHOWN` members, ``A = B, C, D and 4 more (timed once, as A)``."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        if r.same_launch_as:
            groups.setdefault(r.same_launch_as, []).append(r.label)
    out = []
    for rep, members in groups.items():
        names = ", ".join(members[:GROUP_MEMBERS_SHOWN])
        more = len(members) - GROUP_MEMBERS_SHOWN
        out.append(f"{rep} = {names}{f' and {more} more' if more > 0 else ''} (timed once, as {rep})")
    return out


def _shown(rows: list[CandidateRow], all_rows: bool) -> list[CandidateRow]:
    """The rows the table prints: all, or past :data:`ROWS_SHOWN` the finalists (the best timed ones in a dry run
    or when none is a finalist)."""
    if all_rows or len(rows) <= ROWS_SHOWN:
        return rows
    final = [r for r in rows if r.status in ("winner", "tie")]
    if final:
        return final
    timed = sorted((r for r in rows if not r.same_launch_as and r.median_us is not None),
                   key=lambda r: r.median_us or 0.0)
    return timed[:5] or [r for r in rows if not r.same_launch_as and r.status == "ok"][:ROWS_SHOWN]


def _not_timed_why(p: ProblemResult) -> str:
    """Why the others were not timed, from the problem's drop counts: "the others: duplicates, the budget", or
    "not raced" (a dry run)."""
    if not p.rounds and p.verdict == "not_run":
        return "not raced"
    names = {"duplicate_launch": "duplicates", "not_searched": "the budget"}
    why = list(dict.fromkeys("rejections" if k.startswith("constraint:") else names.get(k, "failures")
                             for k, n in p.dropped.items() if n))
    return "the others: " + ", ".join(why) if why else "every candidate"


def _render_problem(p: ProblemResult, console, all_rows: bool = False) -> None:
    """One problem: its title, the summary and race lines, the candidates' table (fitted to the terminal: the
    columns it drops are named under it) and the verdict lines."""
    say(console, f"\n{p.kernel} · {p.arch} · {p.label} · {short_build(p.tileiras) if p.tileiras else ''}",
        style="bold")
    say(console, "  " + summary_line(p))
    if p.rounds:
        n = sum(r.n or 0 for r in p.candidates if r.same_launch_as is None)
        say(console, f"  race: {len(p.rounds)} rounds, {n:,} samples, stopped: {p.stop}; {p.race_s:.1f} s")
    if p.final:
        say(console, "  " + final_line(p.final))
    cov = getattr(p, "coverage", None) or {}
    if cov:
        # a recorded search's space is the program's configurations: programs_own's rejections are not among them,
        # as the summary line counts them
        space = cov['configurations'] - p.dropped.get("constraint:programs_own", 0)
        say(console, f"  searched: {cov['compiled']:,} of {space:,} configurations compiled, "
                     f"{cov['timed']:,} timed ({_not_timed_why(p)})")
    rows = [r for r in p.candidates if r.config is not None]
    by_label = {r.label: (i, r) for i, r in enumerate(rows)}
    shown = _shown(rows, all_rows)
    ordered = sorted(shown, key=lambda r: _rank(*by_label[r.same_launch_as or r.label], r))
    cells = [(r.label, r.status, str(r.n or "-"), _us(r.median_us), _ci(r), _ratio(p.vs_pick(r)),
              _grid(r), str(r.registers or "-"), str(r.ctas_per_sm or "-"), _spill(r), _mhz(r), _note(r))
             for r in ordered]
    columns = [Column(h, [row[i] for row in cells], "left" if h in ("configuration", "status", "note") else "right",
                      keep=h in ("configuration", "status")) for i, h in enumerate(_COLUMNS)]
    drop = _TUNE_DROP_ORDER if any(r.n for r in shown) else _UNTIMED_DROP_ORDER
    fitted = print_fitted_table(console, "  candidates:", columns, more="--json keeps every column",
                                rank=lambda c: drop.index(c.header) if c.header in drop else -1)
    if "stack B / STL" not in fitted.dropped and any(r.stack_bytes is not None and not (r.spills or {}) for r in shown):
        say(console, "  stack B / STL: no STL count where the SASS was not read (the tune reads it only for kernels "
                     "whose setmaxnreg may ask for more registers than the launch allocation, for the hang check); "
                     "`tileprobe audit` of the probe reads it")
    if p.final and FinalFacts.of(p.final).vs_pick and "vs pick" not in fitted.dropped:
        say(console, "  vs pick: the steady-state final's ratio (over the passes both ran) for the rows it timed "
                     "(note: final …), the race medians' for the others")
    if len(shown) < len(rows):
        say(console, f"  {len(shown)} of {len(rows)} rows shown (--all: every row; --json keeps them all); per fate: "
                     + ", ".join(f"{k} {n}" for k, n in fate_counts(rows).items()))
        for line in duplicate_lines(rows):
            say(console, "  duplicate launches: " + line)
    for line in verdict_lines(p, compact=len(shown) < len(rows)):
        say(console, "  " + line)


#: The candidates table's columns, and those dropped first when it is wider than the terminal (the configuration
#: and its status always stay: :func:`tileprobe.report.terminal.print_fitted_table`, as the audit's tables).
_COLUMNS = ("configuration", "status", "n", "median µs", "95% CI µs", "vs pick", "grid", "regs", "CTAs/SM",
            "stack B / STL", "SM MHz", "note")
_TUNE_DROP_ORDER = ("SM MHz", "grid", "stack B / STL", "CTAs/SM", "regs", "n", "95% CI µs", "note", "vs pick",
                    "median µs")
#: Nothing timed (a dry run): the race's columns, all "-", go first, the compile's facts stay.
_UNTIMED_DROP_ORDER = ("SM MHz", "n", "95% CI µs", "vs pick", "median µs", "grid", "stack B / STL", "CTAs/SM",
                       "regs", "note")


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}×"


def _rank(position: int, timed: CandidateRow, r: CandidateRow) -> tuple:
    """Fate, median, declaration order; a duplicate right under the candidate timed for it."""
    order = {s: i for i, s in enumerate(_FATES)}
    return (order.get(timed.status, len(order)), timed.median_us or float("inf"), position, r is not timed)


def _grid(r: CandidateRow) -> str:
    g = r.grid
    return "-" if not g else "×".join(str(x) for x in (g[:1] if g[1:] == [1, 1] else g))


def _spill(r: CandidateRow) -> str:
    stack = "-" if r.stack_bytes is None else str(r.stack_bytes)
    stl = (r.spills or {}).get("spill_stores")
    return stack if stl is None else f"{stack}/{stl}"


def _mhz(r: CandidateRow) -> str:
    sm = (r.clocks or {}).get("sm_mhz")
    if not sm:
        return "-"
    text = f"{sm[0]:.0f}" if sm[0] == sm[1] else f"{sm[0]:.0f}–{sm[1]:.0f}"
    return text + (" moved" if r.clocks_moved else "")


#: The table's note cell at most (characters): a longer first line of a reason ends in "…" (the failure reasons are
#: printed whole under the table, and ``--json`` keeps them): a 100-character note pushed grid, CTAs/SM and stack out
#: of a 120-column table (session 9's new user).
NOTE_CELL = 56


def _note(r: CandidateRow) -> str:
    if r.same_launch_as:
        return f"= {r.same_launch_as}"
    if r.status in ("winner", "tie", "eliminated"):
        return "" if r.final_us is None else f"final {r.final_us:,.1f} µs"
    if r.status == "not_searched":      # the same words on every such row: the short form (the summary counts them)
        short: dict[str | None, str] = {NOT_SAMPLED_REASON: "not in the dry run's sample",
                                        CUT_REASON: "cut at the budget's end"}
        return short.get(r.reason, "not reached (--budget)")
    text = r.reason.strip().splitlines()[0] if r.reason else ""
    return text if len(text) <= NOTE_CELL else text[:NOTE_CELL - 1] + "…"


#: Contenders a final line names (the JSON has them all; ``final_max`` is 5 by default).
FINAL_NAMED = 5


def final_line(final: dict) -> str:
    """The steady-state final (``tileprobe.tune.race``, module doc 7) in one line: why it ran, each contender's
    figure (µs; and × the pick's over the passes both ran), and whether it changed the race's pick; or why it was
    skipped."""
    f = FinalFacts.of(final)
    reasons = f.reasons
    why = ", ".join(str(r) for r in reasons) if isinstance(reasons, (list, tuple)) and reasons else "a power limit"
    cut = ", cut short by --budget" if f.cut else ""
    stopped = f"; {f.stopped}" if isinstance(f.stopped, str) and f.stopped else ""
    head = f"steady-state final (the clocks were set by {why}; {f.passes} pass(es){cut}{stopped})"
    if f.skipped:
        return f"{head}: skipped: {f.skipped}; the race's own ranking of the rest decides"
    figures = {k: v for k, v in (f.figures_us or {}).items() if isinstance(v, (int, float))}
    ratios = {k: v for k, v in (f.vs_pick or {}).items() if isinstance(v, (int, float))}
    order = sorted(figures, key=lambda k: (k != f.pick, ratios.get(k, 0.0), figures[k]))
    if not order:
        return head
    named = " · ".join(f"{label} {figures[label]:,.1f} µs"
                       + (f" ({ratios[label]:.3f}×)" if label != f.pick and label in ratios else "")
                       for label in order[:FINAL_NAMED])
    more = f" · and {len(order) - FINAL_NAMED} more" if len(order) > FINAL_NAMED else ""
    if not f.changed:
        change = "; the race's leader kept its place"
    elif f.leader_before in (f.tie or []):
        change = f"; it ties with the race's leader, {f.leader_before}"
    else:
        change = f"; the race had led with {f.leader_before}"
    return f"{head}: {named}{more}{change}"


def verdict_lines(p: ProblemResult, compact: bool = False) -> list[str]:
    """The winner or the tie with intervals, the check, failed and skipped candidates, the compiler comparison.
    ``compact``: failed candidates as one line per fate and first line of reason, with a count."""
    out = []
    pick = p.pick
    if p.verdict == "winner" and pick is not None:
        out.append(f"winner: {pick.label}: {_us(pick.median_us)} µs {_ci(pick)} ({pick.n} samples)"
                   f"{_final_text(pick)}{_check_text(pick)}")
    elif p.verdict == "tie":
        by = "lowest race median of those the final tied" if p.final and FinalFacts.of(p.final).figures_us else "lowest median"
        out.append(f"tie (within noise, {len(p.tie)} candidates; pick = {by}): " +
                   "; ".join(f"{t.label} {_us(t.median_us)} µs {_ci(t)}{_final_text(t)}" for t in p.tie)
                   + _check_text(pick))
    elif p.verdict == "none":
        raced = [r for r in p.candidates if r.config is not None and r.status in _RACED]
        out.append("no winner: the budget ran out before any candidate was timed (give a larger --budget)"
                   if raced and all(r.status == "skipped" for r in raced) else "no winner: no candidate ran correctly")
    failed: dict[tuple, list[str]] = {}
    for r in p.candidates:
        if r.config is not None and r.status not in ("ok", "winner", "tie", "eliminated", "duplicate_launch"):
            reason = (r.reason or "").strip().splitlines()
            failed.setdefault((r.status, reason[0][:200] if reason else ""), []).append(r.label)
        check = CheckFacts.of(r.check) if r.check else None
        if check is not None and check.status == "unchecked":
            out.append(f"unchecked: {r.label}: {check.message}")
    for (status, reason), labels in failed.items():
        if compact and len(labels) > 1:
            out.append(f"{status}: {len(labels)} candidates ({labels[0]}, …): {reason}")
        else:
            out.extend(f"{status}: {label}: {reason}" for label in labels)
    out.extend(p.notes)
    if p.previous:
        out.append(previous_line(p.previous))
    return out


def _final_text(r: CandidateRow) -> str:
    return f", steady-state final {r.final_us:,.1f} µs" if r.final_us is not None else ""


def _check_text(r: CandidateRow | None) -> str:
    if r is None or not r.check:
        return ""
    c = CheckFacts.of(r.check)
    if c.status == "ok" and c.rel_err is not None:
        return f"; checked against the {c.against}: rel. error {c.rel_err:.2g} ≤ {c.tolerance:.2g}"
    return f"; check: {c.status}"


def previous_line(previous: dict) -> str:
    """What changed since the tune with the previous compiler (``previous``: the problem's ``previous`` JSON,
    :class:`~tileprobe.report.tune_facts.PreviousTune`)."""
    prev = PreviousTune.of(previous)
    before = short_build(prev.tileiras_before or "")
    if not prev.changed:
        return f"since the tune with {before}: same winner"
    now = prev.old_pick_now
    old = prev.pick_before
    label = " ".join(f"{k}={v}" for k, v in {**((old.case if old else None) or {}),
                                             **((old.hints if old else None) or {})}.items())
    text = f"since the tune with {before}: the winner changed (was {label or 'declared hints'}"
    if now is not None and now.median_us is not None:
        text += f", now {now.median_us:,.1f} µs ({now.status})"
        if prev.loss_pct is not None:
            text += f": keeping it would lose {prev.loss_pct:.1f} % against the new winner"
        if prev.old_pick_change_pct is not None:
            text += f"; it took {prev.median_us_before:,.1f} µs with {before} ({prev.old_pick_change_pct:+.1f} %)"
    else:
        text += ", not timed in this tune"
    return text + ")"


def _efficiency(times: TuneTimes) -> str:
    """``; kernel time 0.4 s = 9.8 % of the race`` (the race's efficiency: timed kernel time ÷ race wall), or ``""``
    when either is missing or the race took no time."""
    kernel, race = times.race_kernel_s, times.race_s
    if kernel is None or not race:
        return ""
    return f"; kernel time {kernel:.2f} s = {100 * kernel / race:.1f} % of the race"


def time_line(times: dict, compiled: int | None = None) -> str:
    """``time: start-up 1.9 s · plan 0.2 s · compile 12.1 s · GPU worker start 7.9 s (waited 0.0 s) · …``; when
    ``compiled`` is 0 (every candidate came from the store) the ``compile_s`` part is named for what it was:
    ``reading the store 4.8 s (nothing compiled)``."""
    t = TuneTimes.of(times)

    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f} s"
    stage = f"reading the store {s(t.compile_s)} (nothing compiled)" if compiled == 0 else f"compile {s(t.compile_s)}"
    parts = [f"start-up {s(t.startup_s)}", f"plan {s(t.plan_s)}", stage]
    if t.worker_start_s is not None:
        parts.append(f"GPU worker start {s(t.worker_start_s)} (waited {s(t.worker_wait_s)} after compiling)")
    if t.race_s is not None:
        parts.append(f"race {s(t.race_s)} (checks {s(t.check_s)}{_efficiency(t)})")
    parts += [f"store {s(t.store_s)}", f"total {s(t.total_s)}"]
    return "time: " + " · ".join(parts)
