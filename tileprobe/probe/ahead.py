"""Probe loads started ahead: a tune's audit load of its probe files (:func:`tileprobe.probe.contained.check_file`)
runs in a second loader child beside the plan's, and the audit takes its report instead of loading the file after
the plan.

Why: a cold tune loaded each probe file twice, one after the other, in the same kept child: the plan (its problems
and constraints, ``tune.static.load_space``), then the audit's load (every variant's ``args``, signature and hashes),
and only then compiled. The compile workers need the plan and that load; the load does not need the plan. On the
2-core machine the load after the plan took 1.3 s of a cold tune's path for a 4-candidate probe that imports torch
(docs/LOG.md, tune's pace on the CPU). Started ahead, it runs in a child forked from the same warm zygote, beside
the plan's.

:func:`tileprobe.probe.contained.load_ahead` starts the loads (in a thread, inside the current :func:`~tileprobe.probe.contained.loader_sessions`:
the child stays for the command), each under the plan cache's key of its question (path, targets, variant limit,
overrides, SM count); :func:`take` gives a later :func:`~tileprobe.probe.contained.load_probe_files` asking the same
question of the same session that report (waiting for it). A question that differs (the audit asked for another SM
count) takes nothing: that load was spent for nothing, and the audit loads as before.

Only where a core is free for the second child: by default on a machine of at least :data:`MIN_CPUS` CPUs (this
process's affinity). On the 2-core machine under a load of 7–9 the two children shared the cores: the plan took
about 1 s longer and the wait after it about 0.5 s less, no gain (docs/LOG.md, tune's pace on the CPU).
``TILEPROBE_LOAD_AHEAD=1`` turns it on anywhere, ``0`` off.
"""
from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any

ENV = "TILEPROBE_LOAD_AHEAD"
#: CPUs a machine needs for loads to start ahead by default (module doc).
MIN_CPUS = 4


def enabled() -> bool:
    """``TILEPROBE_LOAD_AHEAD``: ``1`` on, ``0`` off; unset (or anything else): on where this process may run on
    at least :data:`MIN_CPUS` CPUs."""
    value = os.environ.get(ENV, "")
    if value in ("0", "1"):
        return value == "1"
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus >= MIN_CPUS


def register(session, key: str) -> Future | None:
    """A new future for a load started ahead under ``key`` in loader ``session``; None when one is there already."""
    with session.lock:
        if key in session.ahead:
            return None
        fut: Future = Future()
        session.ahead[key] = fut
        return fut


def take(key: str, timeout_s: float) -> Any:
    """The report of a load started ahead under ``key`` in the current session (waiting at most ``timeout_s``), or
    None: none was started, it failed, or it is late."""
    from tileprobe.probe.sessions import current_session
    session = current_session()
    if session is None:
        return None
    with session.lock:
        fut = session.ahead.pop(key, None)
    if fut is None:
        return None
    try:
        return fut.result(timeout=timeout_s)
    except Exception:          # late (TimeoutError) or failed: the caller loads it itself
        return None
