"""``tileprobe tune``: the fastest correct configuration of a kernel on this GPU, per problem case.

The layout is the method (``docs/TUNE.md``):

* :mod:`.space` — the search space: problems × (tunable case values × hints), the probe's constraints;
* :mod:`.static` — compile (``audit``, the store, or a bundle), drop failures, time identical launches once;
* :mod:`.race` — the adaptive race as a pure object (injected ``measure``/``check``), :mod:`.stats` its intervals;
* :mod:`.gpu` — ``measure``/``check`` through the watchdog'd run worker (tasks in :mod:`tileprobe.run.batch`);
* :mod:`.result` — the records: per-candidate fates, the pick, the comparison with the last compiler's tune
  (:mod:`.assemble` makes them); :mod:`.export` — the JSON table for host code;
* :mod:`.pipeline` — :func:`tune`, all of it in one call.

No rich, no argparse here: the command is ``tileprobe/cli/tune.py``, its tables ``tileprobe/report/tune.py``.
"""
from __future__ import annotations

__all__ = [
    "Batch",
    "CheckOutcome",
    "ProblemResult",
    "Race",
    "RaceSettings",
    "TimingSettings",
    "TuneResult",
    "tune",
    "write_export",
]

_WHERE = {"tune": "pipeline", "TuneResult": "result", "ProblemResult": "result", "Race": "race",
          "RaceSettings": "race", "Batch": "race", "CheckOutcome": "race", "TimingSettings": "gpu",
          "write_export": "export"}


def __getattr__(name):  # lazy: importing tileprobe.tune imports neither cuTile nor torch
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module 'tileprobe.tune' has no attribute {name!r}")
