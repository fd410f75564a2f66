"""``tileprobe run``: check and time audited variants on a GPU, with hangs and crashes contained.

torch, cuda-core and cuda-bindings are imported only here, and only when used (an audit needs no GPU).

* :func:`run_probes` / :func:`run_audit` / :func:`load_bundle` (:mod:`.session`): the API.
* :class:`Watchdog` (:mod:`.watchdog`) and :mod:`.worker`: the isolated worker process.
* :mod:`.launch` (calling convention, cuda-core launch, driver occupancy), :mod:`.timing`, :mod:`.check`,
  :class:`TorchArrays` (:mod:`.arrays`).
"""
from __future__ import annotations

__all__ = [
    "RunResult",
    "TaskOutcome",
    "TorchArrays",
    "Watchdog",
    "WorkerStartError",
    "best_hints",
    "load_bundle",
    "run_audit",
    "run_probes",
]

_WHERE = {"run_probes": "session", "run_audit": "session", "load_bundle": "session", "best_hints": "session",
          "RunResult": "session", "Watchdog": "watchdog", "TaskOutcome": "watchdog",
          "WorkerStartError": "watchdog", "TorchArrays": "arrays"}


def __getattr__(name):  # lazy: importing tileprobe.run must not import torch
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(name)
