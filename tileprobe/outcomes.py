"""What became of a variant, in tileprobe's words: the verdict statuses of a hint (goal and effect), the failure
classes of a compile (with the status older readers know and the generic fix), the words for a process's end
(signal and exit texts), the lines of a compiler's message worth showing, and the timeout rule every option shares.

Standard library only, below :mod:`tileprobe.schema` (which re-exports every name here: the result format names
them) in pyproject.toml's layers.
"""
from __future__ import annotations

import math
import re
import signal
from typing import Any

__all__ = [
    "BASELINE",
    "BROKEN_ENVIRONMENT",
    "CHANGED",
    "COMPILER_CRASH",
    "COMPILE_ERROR",
    "EFFECT_STATUSES",
    "FAILURE_CLASSES",
    "FAILURE_FIXES",
    "FAILURE_STATUS",
    "GOAL_STATUSES",
    "HONOURED",
    "IGNORED",
    "INFEASIBLE",
    "MAX_TIMEOUT_S",
    "MESSAGE_MAX_LINES",
    "MET",
    "NOTEWORTHY_STATUSES",
    "PARTIAL",
    "PROBE_ERROR",
    "TIMEOUT",
    "UNCHANGED",
    "UNSUPPORTED_FEATURE",
    "UNSUPPORTED_TARGET",
    "UNVERIFIED",
    "derive_failure",
    "exit_text",
    "meaningful_lines",
    "number_text",
    "p_text",
    "signal_text",
    "timeout_seconds",
]

# Verdict statuses (schema 2). Hints with a goal tileprobe can check (occupancy: CTAs/SM ≥ N; num_ctas: cluster of
# N CTAs; allow_tma: TMA instructions present/absent) get one of the first five; hints without one (opt_level,
# num_worker_warps, latency and other per-load knobs) get one of the last three. README "Verdicts" explains them.
HONOURED = "honoured"      # goal met, and the hint changed the machine code (vs the reference value)
MET = "met"                # goal met without the hint: same machine code and resources as the reference value
PARTIAL = "partial"        # moved toward the goal and fell short
IGNORED = "ignored"        # goal not met, no effect
INFEASIBLE = "infeasible"  # goal impossible on this arch for the CTA the compiler built
UNVERIFIED = "unverified"  # goal met or not depending on a rule no driver has checked (the 1 KB
                           # per-CTA reserve on sm_8x/10x/12x, a GPC layout not sourced for clusters)
CHANGED = "changed"        # no goal: the machine code or resources differ from the baseline value's
UNCHANGED = "unchanged"    # no goal: same machine code and resources as the baseline value
BASELINE = "baseline"      # no goal: the value the others are compared with (the lowest audited)
GOAL_STATUSES = (HONOURED, MET, UNVERIFIED, PARTIAL, IGNORED, INFEASIBLE)
EFFECT_STATUSES = (CHANGED, UNCHANGED, BASELINE)
#: Statuses whose reasons brief output (``--brief``, markdown, HTML notes) shows: the hint fell short or did nothing.
NOTEWORTHY_STATUSES = (UNVERIFIED, PARTIAL, IGNORED, INFEASIBLE, UNCHANGED)


# Failure classes (``VariantRecord.failure``): what went wrong, in classes a user can act on. Each is
# stored under a ``status`` older readers know (:data:`FAILURE_STATUS`); :data:`FAILURE_FIXES` is the generic fix
# (a record's ``fix`` may be more precise, e.g. naming the releases that list a target).
UNSUPPORTED_TARGET = "unsupported_target"   # the tileiras does not list the arch (tileiras --help): nothing compiled
UNSUPPORTED_FEATURE = "unsupported_feature"  # cuTile refused a dtype/feature on this arch before tileiras ran
COMPILE_ERROR = "compile_error"              # tileiras (or cuTile's front end) answered with an error
COMPILER_CRASH = "compiler_crash"            # tileiras killed by a signal (SIGSEGV …) or the compile worker died in it
TIMEOUT = "timeout"                          # tileiras did not finish within the compile timeout
BROKEN_ENVIRONMENT = "broken_environment"    # the compiler's environment is broken (the CUDA_HOME trap)
PROBE_ERROR = "probe_error"                  # the probe's own code failed (args, import, hint values)
FAILURE_CLASSES = (UNSUPPORTED_TARGET, UNSUPPORTED_FEATURE, COMPILE_ERROR, COMPILER_CRASH, TIMEOUT,
                   BROKEN_ENVIRONMENT, PROBE_ERROR)
#: The ``status`` a record of each failure class has (the status values are those of schema 1).
FAILURE_STATUS = {UNSUPPORTED_TARGET: "compile_error", UNSUPPORTED_FEATURE: "compile_error",
                  COMPILE_ERROR: "compile_error", COMPILER_CRASH: "compiler_crash", TIMEOUT: "timeout",
                  BROKEN_ENVIRONMENT: "compile_error", PROBE_ERROR: "probe_error"}
#: The generic fix of each failure class.
FAILURE_FIXES = {
    UNSUPPORTED_TARGET: "audit this arch with a tileiras release that lists it (`tileprobe doctor` shows each "
                        "release's targets; e.g. --tileiras 13.4), or leave the arch out",
    UNSUPPORTED_FEATURE: "audit this probe for an arch that has the feature, or limit the probe to those archs "
                         "(Probe(archs=[...]))",
    COMPILE_ERROR: "the compiler refused the kernel: read its message; run the repeat command to see it again, and "
                   "report it to NVIDIA if the kernel is valid",
    COMPILER_CRASH: "a compiler bug: report it to NVIDIA with the repeat command and the bytecode it names; "
                    "`tileprobe bisect … --property \"no crash\"` finds the release where it began or ended",
    TIMEOUT: "raise the limit (--timeout S, or Probe(timeout_s=S)) and audit with --retry-failed",
    BROKEN_ENVIRONMENT: "fix the compiler's environment (unset CUDA_HOME / CUDA_PATH, or point them at a toolkit "
                        "as new as tileiras with lib/libnvvm.so.4); `tileprobe doctor` checks it; then audit with "
                        "--retry-failed",
    PROBE_ERROR: "fix the probe file at the line named",
}
#: What a compile failure's message shows at most (lines); the record's ``error`` keeps the whole text.
MESSAGE_MAX_LINES = 12
_NOISE = re.compile(r"^(?:(?:\w+Error: )?Return code -?\d+|Unknown location|Traceback .*|\s*\^+\s*)$")
_TARGET_REFUSED = re.compile(r"Cannot find option named '(sm_\d+[a-z]?)'")


def signal_text(returncode: int) -> str:
    """``-11`` (a child's return code: killed by signal 11) → ``"SIGSEGV (signal 11)"``; other codes →
    ``"exit code N"``."""
    if returncode < 0:
        try:
            return f"{signal.Signals(-returncode).name} (signal {-returncode})"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


#: The longest timeout tileprobe takes, in seconds (10^7 s, about 116 days). Longer ones overflow the deadline
#: arithmetic of the OS waits (``--timeout 1e308`` crashed the compile pool's ``select``: a tester, 2026-12-01).
MAX_TIMEOUT_S = 1e7


def timeout_seconds(value: Any) -> float:
    """``value`` (a number or its text) as a timeout in seconds: a finite number > 0 and ≤ :data:`MAX_TIMEOUT_S`.
    One rule for ``--timeout``, ``--probe-timeout``, ``Probe(timeout_s=…)`` and ``TILEPROBE_TOOL_TIMEOUT_S``.

    Raises:
        ValueError: anything else (0, negative, nan, inf, past the maximum, not a number), with the rule in words.
    """
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT_S):
        raise ValueError(f"give a timeout in seconds, a finite number > 0 and ≤ {MAX_TIMEOUT_S:,.0f}")
    return seconds


def number_text(value: Any) -> str:
    """A resource figure as the tables print it: integers with thousands separators (``100484`` → ``"100,484"``),
    anything else (``None``, text) as ``str()``, so that a reason or a change names the same figure as its table."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def p_text(p: float) -> str:
    """A p-value as the reports print it: ``p < 0.001`` or ``p 0.034`` (three decimals: what a reader needs of a
    p-value; shared by the noise rule's own text, :mod:`tileprobe.analyses.noise`, and the renderers)."""
    return "p < 0.001" if p < 0.001 else f"p {p:.3f}"


def exit_text(returncode: int | None) -> str:
    """A child process's end in words, one wording for every process tileprobe starts (compilers, compile and
    probe-loading workers, GPU workers): ``-9`` → ``"killed by SIGKILL (signal 9)"``, ``5`` → ``"exit code 5"``,
    ``None`` (no return code yet) → ``"still running"``."""
    if returncode is None:
        return "still running"
    return f"killed by {signal_text(returncode)}" if returncode < 0 else f"exit code {returncode}"


def meaningful_lines(text: str, max_lines: int = MESSAGE_MAX_LINES) -> list[str]:
    """The lines of a compiler's output worth showing: blank lines, cuTile's ``Return code N`` and ``Unknown
    location`` dropped, repeats dropped (first seen kept), at most ``max_lines`` (then ``… N more lines``)."""
    out: list[str] = []
    for line in (text or "").splitlines():
        line = line.rstrip()
        if not line.strip() or _NOISE.match(line.strip()) or line in out:
            continue
        out.append(line)
    if len(out) > max_lines:
        out = out[:max_lines] + [f"… {len(out) - max_lines} more lines (the record's error holds them all)"]
    return out


def derive_failure(status: str, error: str) -> tuple[str | None, str]:
    """``(failure class, message)`` for a record written before ``failure`` existed (see the version history),
    from its ``status`` and ``error``."""
    if status == "ok":
        return None, ""
    error = error or ""
    lines = meaningful_lines(error)
    m = re.search(r"Return code (-\d+)", error)
    if status == "compiler_crash" and m:
        lines = [f"tileiras was killed by {signal_text(int(m.group(1)))}"] + lines
    if status == "compile_error" and _TARGET_REFUSED.search(error):
        return UNSUPPORTED_TARGET, "\n".join(lines)
    if status == "compile_error" and ("UnsupportedFeatureError" in error or re.search(r"not supported on sm_", error)):
        return UNSUPPORTED_FEATURE, "\n".join(lines)
    return (status if status in FAILURE_CLASSES else COMPILE_ERROR), "\n".join(lines)
