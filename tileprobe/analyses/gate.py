"""``tileprobe gate``: a CI check. Audit the selected variants (reusing the results store) and test expectations.

    tileprobe gate examples/w4a16_gemm.py --arch sm_120 --tileiras 13.4.92 \\
        --where "GATHER=True,LOOP=True,occupancy=2" --expect "occupancy honoured" --expect "no spills"

Exit 0 when every expectation holds for every selected variant, 1 otherwise, with one readable reason per failure
(which variant, expected vs got, the verdict's reason). Expectations (:data:`FORMS`) are parsed strictly: anything
else is an error that lists the accepted forms. ``--where`` picks variants by case constants and hint values; the
audit still compiles every hint value of the selected cases, because a verdict compares a variant with the other
values of its hint (``ignored`` needs the baseline value's code).

Time expectations need GPU run records (``record.run.median_us``, from the store or a result JSON). Without them
the expectation *cannot be checked*: that is reported, and fails the gate unless ``--allow-unchecked``. "Noise" of a
run is the first of its ``noise_us``, ``stdev_us``, ``mad_us`` (µs) it records, else 0.

Python API: :func:`parse_expectation`, :func:`check` (records × expectations → failures), :func:`run_gate` (what
``tileprobe gate`` runs: a :class:`GateResult`; :func:`tileprobe.report.terminal.gate_text` prints it).
The pytest fixture ``tileprobe_audit`` (``tileprobe/pytest_plugin.py``) wraps the same calls.
"""
from __future__ import annotations

import operator
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tileprobe.analyses.results import Expectation, Failure, GateResult
from tileprobe.errors import TileprobeError, UsageError, shown
from tileprobe.model.hints import KERNEL_HINTS
from tileprobe.records import SassFacts
from tileprobe.schema import VariantRecord, VariantRun, p_text, short_build, value_key

# Imports inside functions here are lazy on purpose: at the module head they would add 0.47 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

if TYPE_CHECKING:
    from tileprobe.toolchain import Toolchain

FORMS = """\
  HINT honoured               the HINT goal is met: verdict honoured or met (HINT: {hints});
                              for opt_level / num_worker_warps (no goal): verdict changed
  HINT met                    the same as HINT honoured
                              (an `unverified` verdict, which a rule no driver has checked decides, cannot be
                              checked: it fails unless --allow-unchecked)
  HINT took effect            the hint met a goal its reference fell short of: verdict honoured, not met
                              (met: the hint-less build had it already; no goal: changed)
  HINT not ignored            the HINT verdict is anything but ignored / unchanged
  compiles                    the variant compiled (status ok)
  no crash                    tileiras did not crash on it (any other compile result holds) and, when it ran on a
                              GPU, the kernel did not crash
  no hang                     the compile did not time out and the GPU run (stored, needs run records) did not hang
  correct                     the GPU run (stored, needs run records) checked correct: run status ok, not wrong
  no spills                   0 B stack frame per thread (and no LDL/STL when SASS traits were collected)
  no hang risk                the register-pool check of setmaxnreg (SASS) predicts no hang: verdict pool_ok or
                              none; unknown (or no SASS read) cannot be checked
  FIELD OP NUMBER             e.g. ctas_per_sm>=2, registers<=128; FIELD: {fields}; OP: <= < >= > == !=
  FIELD OP baseline           compared with the --baseline record of the same kernel, case, hints and arch
  time OP NUMBER[us]          median GPU time in µs (needs run records)
  time <= baseline [+ N%]     median time no worse than the baseline's beyond the runs' noise (and N %)
  time no worse than baseline [+ N%]
                              not slower than the baseline's run beyond noise by compare's rule (Welch t-test
                              p < 0.05 and ≥ 2 %, or ≥ N %; tileprobe/analyses/noise.py)"""
FIELDS = ("ctas_per_sm", "registers", "shared_bytes", "driver_shared_bytes", "stack_bytes", "threads",
          "warps_per_sm", "occupancy_pct", "max_regs", "compile_s")
_ALIASES = {"regs": "registers", "ctas/sm": "ctas_per_sm", "ctas": "ctas_per_sm", "smem_bytes": "shared_bytes",
            "shared": "shared_bytes", "stack": "stack_bytes", "median_us": "time"}
_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt, "==": operator.eq, "!=": operator.ne}
_COMPARE = re.compile(r"^\s*([a-z_/][a-z0-9_/]*)\s*(<=|>=|==|!=|<|>)\s*(.+?)\s*$", re.I)
_BASELINE = re.compile(r"^baseline(?:\s*\+\s*(\d+(?:\.\d+)?)\s*%)?$", re.I)
_NO_WORSE = re.compile(r"^time\s+no\s+worse\s+than\s+(?:the\s+)?baseline(?:'s)?(?:\s+beyond\s+(?:its\s+)?noise)?"
                       r"(?:\s*\+\s*(\d+(?:\.\d+)?)\s*%)?$", re.I)
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(us|µs)?$", re.I)


class GateError(TileprobeError):
    """A malformed expectation or selection, or a baseline that does not fit."""


class GateUsageError(GateError, UsageError):
    """A :class:`GateError` in the command line itself (an expectation or ``--where`` that cannot be read or names
    nothing, several archs, no ``--expect``): the CLI exits 2 (:data:`tileprobe.errors.EXIT_USAGE`)."""


def forms() -> str:
    """The accepted expectation forms (:data:`FORMS` with the hint and field names filled in), one per line."""
    return FORMS.format(hints=", ".join(KERNEL_HINTS), fields=", ".join(FIELDS))


def parse_expectation(text: str) -> Expectation:
    """Parse one ``--expect`` string (see :data:`FORMS`).

    Raises:
        GateError: an unknown form, field, hint or number; the message lists the accepted forms.
    """
    t = " ".join(str(text).split())
    low = t.lower().replace("honored", "honoured")
    words = low.split()
    if low == "compiles":
        return Expectation(t, "compiles")
    if low in _STATUS_FORMS:
        return Expectation(t, _STATUS_FORMS[low])
    if low in ("no spills", "no spill"):
        return Expectation(t, "no_spills")
    if low in ("no hang risk", "no hang risks"):
        return Expectation(t, "no_hang_risk")
    nw = _NO_WORSE.match(low)
    if nw:
        return Expectation(t, "time", field="time", op="no_worse", baseline_pct=float(nw.group(1) or 0))
    kind = _VERDICT_FORMS.get(tuple(words[1:])) if words else None
    if kind:
        if words[0] not in KERNEL_HINTS:
            raise _bad(t, f"{words[0]!r} is not a kernel hint")
        return Expectation(t, kind, field=words[0])
    m = _COMPARE.match(t)
    if not m:
        raise _bad(t, "not an expectation tileprobe knows")
    name, op, rhs = m.group(1).lower(), m.group(2), m.group(3)
    name = _ALIASES.get(name, name)
    if name != "time" and name not in FIELDS:
        raise _bad(t, f"unknown field {m.group(1)!r}")
    b = _BASELINE.match(rhs)
    if b:
        if b.group(1) and name != "time":
            raise _bad(t, "'+ N%' is accepted for time only")
        if name == "time" and op not in ("<=", "<"):
            raise _bad(t, "time compares with the baseline as 'time <= baseline' or 'time < baseline' only")
        return Expectation(t, "time" if name == "time" else "compare", field=name, op=op,
                           baseline_pct=float(b.group(1) or 0))
    n = _NUMBER.match(rhs)
    if not n or (n.group(2) and name != "time"):
        raise _bad(t, f"{rhs!r} is not a number (or 'baseline')")
    return Expectation(t, "time" if name == "time" else "compare", field=name, op=op, value=float(n.group(1)))


#: Expectations on a variant's compile and run status (a failure change is a change) → kind.
_STATUS_FORMS = {"no crash": "no_crash", "no crashes": "no_crash", "no hang": "no_hang", "no hangs": "no_hang",
                 "correct": "correct"}

#: Verdict expectation words after the hint → kind. Gates written for schema 1 say "honoured"; it keeps passing
#: when the goal is met without the hint (``met``), so upgrading tileprobe does not fail a gate whose kernel is fine.
_VERDICT_FORMS = {("honoured",): "verdict", ("met",): "verdict", ("took", "effect"): "took_effect",
                  ("not", "ignored"): "not_ignored"}


def verdict_holds(kind: str, status: str) -> tuple[bool, str]:
    """(whether a verdict ``status`` meets a verdict expectation of ``kind``, what the expectation wants)."""
    from tileprobe.schema import CHANGED, EFFECT_STATUSES, HONOURED, IGNORED, MET, UNCHANGED
    if kind == "not_ignored":
        return status not in (IGNORED, UNCHANGED), "not ignored"
    if status in EFFECT_STATUSES:
        return status == CHANGED, "changed (no goal to meet: the code changed)"
    if kind == "took_effect":
        return status == HONOURED, "honoured (the hint met a goal its reference fell short of)"
    return status in (HONOURED, MET), "honoured or met"


def _bad(text: str, why: str) -> GateError:
    return GateUsageError(f"cannot parse expectation {shown(text, quote=True)}: {why}. Accepted forms:\n{forms()}")


def variant_label(r: VariantRecord) -> str:
    """``w4a16_gemm sm_120 tileiras 13.4.92 GATHER=True LOOP=True occupancy=2``."""
    from tileprobe.select import format_value  # tuples as the tables print them, 128×128×128
    kv = " ".join(f"{k}={format_value(v)}" for k, v in [*r.case.items(), *r.hints.items()])
    return " ".join(x for x in (r.kernel, r.arch, short_build(r.tileiras), kv) if x)


def _variant_key(r: VariantRecord) -> tuple:
    return (r.kernel, r.arch, value_key(r.case), value_key(r.hints))


def _noise_us(run: VariantRun | None) -> float:
    """A run's noise (µs): the first number of its ``noise_us``, ``stdev_us``, ``mad_us`` (the first and last are
    no tileprobe field: a hand-written baseline's, kept in ``extra``), else 0."""
    run = run or VariantRun()
    for v in (run.extra.get("noise_us"), run.stdev_us, run.extra.get("mad_us")):
        if isinstance(v, (int, float)):
            return float(v)
    return 0.0


def _median(r: VariantRecord) -> float | None:
    run = r.run or VariantRun()
    v = run.median_us
    return float(v) if isinstance(v, (int, float)) and run.status in (None, "ok") else None


def check(records: Sequence[VariantRecord], expectations: Iterable[str | Expectation],
          baseline: Sequence[VariantRecord] | None = None) -> list[Failure]:
    """Every (variant, expectation) that fails, in expectation order; ``[]`` when all hold.

    An empty ``records`` fails every expectation (a gate that checks nothing must not pass).

    Raises:
        GateError: a malformed expectation; a baseline holding one variant under several compilers.
    """
    exps = [e if isinstance(e, Expectation) else parse_expectation(e) for e in expectations]
    base = _index_baseline(baseline or ())
    out: list[Failure] = []
    for e in exps:
        if not records:
            out.append(Failure(e.text, "(no variant)", "at least one selected variant", "none",
                               "the selection matched no audited variant"))
        for r in records:
            f = _check_one(e, r, base)
            if f is not None:
                out.append(f)
    return out


def _index_baseline(records: Iterable[VariantRecord]) -> dict[tuple, VariantRecord]:
    out: dict[tuple, VariantRecord] = {}
    for r in records:
        k = _variant_key(r)
        if k in out and out[k].tileiras != r.tileiras:
            raise GateError(f"the baseline holds {variant_label(r)} under several compilers ({out[k].tileiras}; "
                            f"{r.tileiras}): pass --baseline-tileiras TEXT to pick one")
        out[k] = r
    return out


def _check_status(e: Expectation, r: VariantRecord, label: str) -> Failure | None:
    """``no crash`` / ``no hang`` / ``correct`` for one record (compile state, then the stored GPU run)."""
    state = "ok" if r.ok else (r.failure or r.status)
    run = (r.run or VariantRun()).status
    first = next((ln for ln in (r.message or r.error or "").splitlines() if ln.strip()), "")
    if e.kind == "no_crash":
        if state == "compiler_crash":
            return Failure(e.text, label, "no compiler crash", "compiler_crash", first)
        if run == "crash":
            return Failure(e.text, label, "no crash on the GPU", "run crash", _run_error(r))
        return None
    if e.kind == "no_hang" and state == "timeout":
        return Failure(e.text, label, "no hang", "compile timeout", first)
    if not r.ok:
        return Failure(e.text, label, "a compiled variant", state, first)
    if run is None:
        return Failure(e.text, label, e.text, "no run", "no GPU run record for this variant (run it with "
                       "`tileprobe run` into the store first)", unchecked=True)
    if e.kind == "no_hang":
        return None if run != "hang" else Failure(e.text, label, "no hang", "run hang", _run_error(r))
    return None if run == "ok" else Failure(e.text, label, "run status ok", f"run {run}", _run_error(r))


def _run_error(r: VariantRecord) -> str:
    return next((ln for ln in str((r.run or VariantRun()).error or "").splitlines() if ln.strip()), "")


def _check_one(e: Expectation, r: VariantRecord, base: dict) -> Failure | None:
    label = variant_label(r)
    if e.kind in ("no_crash", "no_hang", "correct"):
        return _check_status(e, r, label)
    if not r.ok:
        msg = (r.message or r.error or "").strip().splitlines()
        return Failure(e.text, label, "a compiled variant", r.failure or r.status, msg[0] if msg else "")
    if e.kind == "compiles":
        return None
    if e.kind in ("verdict", "took_effect", "not_ignored"):
        v = r.verdicts.get(e.field)
        if v is None:
            return Failure(e.text, label, f"a {e.field} verdict", "none",
                           f"this variant does not set {e.field} and the kernel declares none")
        status = v.status or "none"      # None only in a damaged file (schema.Verdict)
        ok, want = verdict_holds(e.kind, status)
        if status == "unverified":     # a rule no driver has checked decides the goal
            return Failure(e.text, label, want, status, f"unverified: {v.reason}", unchecked=True)
        return None if ok else Failure(e.text, label, want, status, v.reason)
    if e.kind == "no_spills":
        return _check_spills(e, r, label)
    if e.kind == "no_hang_risk":
        return _check_pool(e, r, label)
    if e.kind == "compare":
        return _check_compare(e, r, label, base)
    return _check_time(e, r, label, base)


def _check_pool(e: Expectation, r: VariantRecord, label: str) -> Failure | None:
    """``no hang risk``: the register-pool verdict is pool_ok or none."""
    verdict = r.pool_verdict
    if verdict in ("pool_ok", "none"):
        return None
    if verdict is None:
        why = r.sass.error if isinstance(r.sass, SassFacts) else None
        return Failure(e.text, label, "no hang risk", "unknown", "the SASS was not read" + (
                       f": {why}" if why else " (nvdisasm missing, or --no-sass)"), unchecked=True)
    return Failure(e.text, label, "no hang risk", verdict, r.pool_reason, unchecked=verdict != "hang_risk")


def _check_spills(e: Expectation, r: VariantRecord, label: str) -> Failure | None:
    if r.stack_bytes is None:
        return Failure(e.text, label, "0 B stack", "unknown", "the record has no stack size", unchecked=True)
    sass = r.sass if isinstance(r.sass, SassFacts) else SassFacts()
    kernels = ([SassFacts.from_dict(k) for k in sass.kernels if isinstance(k, dict)]
               if isinstance(sass.kernels, list) else [sass])
    ldl = sum(int(k.spill_loads or 0) for k in kernels)
    stl = sum(int(k.spill_stores or 0) for k in kernels)
    if r.stack_bytes == 0 and ldl == stl == 0:
        return None
    got = f"{r.stack_bytes} B stack frame per thread" + (f", {ldl} LDL / {stl} STL in SASS" if ldl or stl else "")
    return Failure(e.text, label, "no spills (0 B stack)", got,
                   f"{r.registers} registers per thread (cap {r.max_regs if r.max_regs else 'none'}); "
                   "a stack frame usually means spills")


def _check_compare(e: Expectation, r: VariantRecord, label: str, base: dict) -> Failure | None:
    got = getattr(r, e.field, None)
    want, ref = e.value, "NUMBER"
    if e.value is None:
        b = base.get(_variant_key(r))
        if b is None or not b.ok or getattr(b, e.field, None) is None:
            return Failure(e.text, label, f"{e.field} {e.op} baseline", "no baseline value",
                           "the baseline has no compiled record of this variant", unchecked=True)
        want, ref = getattr(b, e.field), f"baseline ({_short(b)})"
    if want is None:    # no number given and none in the baseline (returned above): nothing to compare with
        return Failure(e.text, label, f"{e.field} {e.op} baseline", "no baseline value", "", unchecked=True)
    if got is None:
        return Failure(e.text, label, f"{e.field} {e.op} {want:g}", "unknown", "", unchecked=True)
    if _OPS[e.op](got, want):
        return None
    reason = f"limiter: {r.limiter}; {r.threads} threads × {r.registers} registers, {r.shared_bytes:,} B shared"
    if ref != "NUMBER":
        reason = f"vs {ref}; " + reason
    return Failure(e.text, label, f"{e.field} {e.op} {want:g}", f"{e.field} = {got:g}", reason)


def _short(r: VariantRecord) -> str:
    return short_build(r.tileiras)


def _check_time(e: Expectation, r: VariantRecord, label: str, base: dict) -> Failure | None:
    t = _median(r)
    if t is None:
        return Failure(e.text, label, e.text, "no run", "no GPU run record for this variant (run it with "
                       "`tileprobe run` into the store first)", unchecked=True)
    if e.value is not None:
        return None if _OPS[e.op](t, e.value) else Failure(e.text, label, f"time {e.op} {e.value:g} µs",
                                                           f"{t:,.2f} µs")
    b = base.get(_variant_key(r))
    bt = _median(b) if b is not None else None
    if b is None or bt is None:
        return Failure(e.text, label, e.text, "no baseline run", "the baseline has no GPU run of this variant",
                       unchecked=True)
    if e.op == "no_worse":
        return _check_no_worse(e, r, b, label)
    noise = max(_noise_us(r.run), _noise_us(b.run))
    limit = bt * (1 + e.baseline_pct / 100) + noise
    if _OPS[e.op](t, limit):
        return None
    return Failure(e.text, label, f"time {e.op} {limit:,.2f} µs (baseline {bt:,.2f} µs + noise {noise:,.2f} µs"
                   + (f" + {e.baseline_pct:g} %" if e.baseline_pct else "") + ")", f"{t:,.2f} µs",
                   f"baseline: {_short(b)} on {_gpu_of(b)}")


def _gpu_of(r: VariantRecord) -> str:
    """The GPU name of a record's run (a dict in run JSON, a name in stored runs), ``GPU ?`` when unknown."""
    return (r.run or VariantRun()).gpu_name or "GPU ?"


def _check_no_worse(e: Expectation, r: VariantRecord, b: VariantRecord, label: str) -> Failure | None:
    """``time no worse than baseline``: fails when the run is slower than the baseline's by compare's rule
    (:func:`tileprobe.analyses.noise.time_change`, the minimum effect raised to ``+ N%`` when given)."""
    from tileprobe.analyses.noise import MIN_EFFECT, time_change
    tc = time_change(b.run, r.run, min_effect=max(MIN_EFFECT, e.baseline_pct / 100))
    if tc is None:
        return Failure(e.text, label, e.text, "no sample statistics", "a run without reps/stdev or quartiles "
                       "cannot be tested against noise", unchecked=True)
    if not (tc.changed and tc.direction == "slower"):
        return None
    return Failure(e.text, label, f"no slower than baseline {tc.a.median_us:,.2f} µs beyond noise",
                   f"{tc.b.median_us:,.2f} µs ({tc.ratio_text()}, {p_text(tc.p)})",
                   f"baseline: {_short(b)} on {_gpu_of(b)}; {tc.method}")


# --- selecting and auditing ------------------------------------------------------------------------------------

def parse_where(text: str | None) -> dict[str, Any]:
    """``"GATHER=True,LOOP=1,TILE=128×128,occupancy=2"`` → ``{"GATHER": True, "LOOP": 1, "TILE": [128, 128],
    "occupancy": 2}`` (:func:`tileprobe.select.parse_where`: values as the tables print them or as Python).

    Raises:
        GateError: an item that is not NAME=VALUE.
    """
    from tileprobe.select import WhereError
    from tileprobe.select import parse_where as parse
    try:
        return parse(text)
    except WhereError as e:
        raise GateUsageError(str(e)) from e


def _same(actual, wanted) -> bool:
    from tileprobe.select import same_value
    return same_value(actual, wanted)


def select(records: Iterable[VariantRecord], where: Mapping[str, Any]) -> list[VariantRecord]:
    """Records whose case constants and hint values match every ``where`` item."""
    from tileprobe.select import select as pick
    return pick(records, where)


def _check_where_names(where: Mapping[str, Any], probes) -> None:
    from tileprobe.audit.selected import check_where_names
    from tileprobe.select import WhereError
    try:
        check_where_names(where, probes)
    except WhereError as e:
        raise GateUsageError(str(e)) from e


def audit_selected(probe_path: str, arch: str, **kwargs: Any):
    """:func:`tileprobe.audit.selected.audit_selected` (same arguments and result), a ``where`` naming nothing
    raised as :class:`GateUsageError` (the gate's command-line error)."""
    from tileprobe.audit.selected import audit_selected as audit_them
    from tileprobe.select import WhereError
    try:
        return audit_them(probe_path, arch, **kwargs)
    except WhereError as e:
        raise GateUsageError(str(e)) from e


def check_baseline(path: str, option: str = "--baseline") -> None:
    """Refuse a ``--baseline`` (or ``--runs``: ``option``) that is missing or not a regular file (a FIFO would
    block the read), before anything is compiled.

    Raises:
        GateError: naming the option, the path and what to give instead.
    """
    if not os.path.exists(path):
        raise GateError(f"{option} {path}: no such file; give a results store or a result JSON file")
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise GateError(f"{option} {path}: not a regular file (a folder, a FIFO or a device); give a results "
                        "store or a result JSON file")


def load_baseline(path: str, *, kernel: str | None = None, arch: str | None = None,
                  tileiras: str | None = None, option: str = "--baseline") -> list[VariantRecord]:
    """Baseline records from a result JSON file or a results store (newest compile per variant); ``option``: the
    command-line option that gave ``path``, for the messages.

    Raises:
        GateError: :func:`check_baseline`. TileprobeError: not a result file nor a store (their readers' messages).
    """
    from tileprobe.judge.verdict import judge_records
    from tileprobe.schema import load
    check_baseline(path, option)
    with open(path, "rb") as f:
        head = f.read(16)
    if head.lstrip().startswith(b"{"):
        records, _ = load(path, judge=judge_records)
    else:
        from tileprobe.store import Store
        with Store.open(path, must_exist=True) as s:
            records = s.records(kernel=kernel, arch=arch, judge=judge_records)
    return [r for r in records if (not kernel or r.kernel == kernel) and (not arch or r.arch == arch)
            and (not tileiras or tileiras in r.tileiras)]


def _run_records(runs: str, probe_path: str, arch: str, tileiras: str | None) -> list[VariantRecord]:
    """The records of ``runs`` (run JSON or store) for ``probe_path``'s file on ``arch``.

    Raises:
        GateError: none there, or several compiler builds without ``tileiras`` to pick one."""
    recs = [r for r in load_baseline(runs, arch=arch, tileiras=tileiras, option="--runs")
            if os.path.basename(r.probe) == os.path.basename(probe_path)]
    builds = sorted({r.tileiras for r in recs})
    if not recs:
        raise GateError(f"--runs {runs}: no records of {os.path.basename(probe_path)} on {arch}")
    if len(builds) > 1:
        raise GateError(f"--runs {runs} holds several compiler builds ({'; '.join(builds)}): pass --runs-tileiras "
                        "TEXT to pick the new release's")
    return recs


def run_gate(probe_path: str, arch: str, expectations: Sequence[str], *, where: Mapping[str, Any] | None = None,
             toolchains: Sequence[Toolchain] | None = None, store=None, baseline: str | None = None,
             baseline_tileiras: str | None = None, allow_unchecked: bool = False, jobs: int | None = None,
             timeout_s: float | None = None, command_line: str = "", runs: str | None = None,
             runs_tileiras: str | None = None) -> GateResult:
    """``tileprobe gate``: parse ``expectations``, audit the selected variants (see :func:`audit_selected`) and
    check them.

    Args:
        probe_path: the probe file. arch: one target, e.g. ``"sm_120"``.
        expectations: ``--expect`` strings (:data:`FORMS`). where: case constants and hint values to select
            (:func:`parse_where` of ``"GATHER=True,occupancy=2"``).
        toolchains: compilers (:func:`tileprobe.toolchain.resolve_toolchains`); None: cuTile's own.
        store: a :class:`~tileprobe.store.Store` to reuse and fill (None: compile everything, store nothing).
        baseline: a results store or result JSON to compare ``FIELD OP baseline`` with; ``baseline_tileiras``
            picks its records of one compiler build.
        allow_unchecked: let expectations that cannot be checked (no run records, no baseline) pass.
        jobs: parallel compiles; timeout_s: per-variant compiler timeout (s); command_line: stored with the audit.
        runs: a run JSON (or store) whose records of this probe's kernels are checked instead of an audit here (the
            run of a new release made on the GPU machine from a bundle); ``runs_tileiras`` picks one
            compiler build of it.

    Returns a :class:`GateResult` (``passed``, ``failures``).

    Raises:
        GateError: several archs, no or a malformed expectation, a ``where`` that matches nothing, or a baseline
            expectation without ``baseline``.
    """
    from tileprobe.model.arch import get_arch
    if "," in arch:
        raise GateUsageError(f"--arch {arch!r}: a gate checks one architecture; run one gate per arch")
    exps = [parse_expectation(e) for e in expectations]
    if not exps:
        raise GateUsageError(f"give at least one --expect. Accepted forms:\n{forms()}")
    arch = get_arch(arch).name
    if any(e.uses_baseline for e in exps) and not baseline:
        raise GateUsageError("an expectation compares with 'baseline' but no --baseline STORE_OR_JSON was given")
    if baseline:
        check_baseline(baseline)
    if runs:
        check_baseline(runs, "--runs")
    if runs:
        records = select(_run_records(runs, probe_path, arch, runs_tileiras), where or {})
        result = None
    else:
        from tileprobe.model.sass import have_nvdisasm
        sass = any(e.kind == "no_hang_risk" for e in exps) and have_nvdisasm()
        result = audit_selected(probe_path, arch, where=where, toolchains=toolchains, store=store, jobs=jobs,
                                timeout_s=timeout_s, command_line=command_line, with_sass=sass)
        records = select(result.records, where or {})
    if not records and where:
        from tileprobe.select import no_match_message
        raise GateUsageError(no_match_message(where, result.records if result else records))
    base = None
    if baseline:
        base = load_baseline(baseline, arch=arch, tileiras=baseline_tileiras)
        base = [b for b in base if b.kernel in {r.kernel for r in records}]
    return GateResult(records, exps, check(records, exps, base), allow_unchecked)
