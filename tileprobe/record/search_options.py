"""The keyword arguments a program passed to its ``cuda.tile.tune.exhaustive_search``: which tileprobe honours when
it tunes that search, and which make it refuse to.

cuda-tile 1.7.0's ``exhaustive_search`` takes ``quiet``, ``single_run_timeout_sec`` (wall seconds one launch may
take, enforced in a subprocess) and ``flush_l2`` (flush L2 before each run; default True). A search made with
``flush_l2=False`` is tuned without L2 flushes (the probe's ``flush_l2=False``: :func:`tileprobe.run.batch.l2_flush`)
and one made with ``single_run_timeout_sec=S`` with launches bounded to S seconds (``run_timeout_s``). Any other
keyword argument (a coming ``cuda.tile.tune.autotune`` adds ``context_fn`` and ``benchmark_fn``) changes how the
program's search measures in a way tileprobe cannot reproduce: such a search is refused, with the argument named.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Keyword arguments of cuda-tile 1.7.0's exhaustive_search that tileprobe honours (quiet changes no figure).
HONOURED = ("quiet", "flush_l2", "single_run_timeout_sec")


@dataclass(frozen=True)
class SearchOptions:
    """A recorded search's keyword arguments: ``flush_l2``, ``run_timeout_s`` (``single_run_timeout_sec``) and the
    names of the ``others``, which tileprobe does not reproduce."""
    flush_l2: bool = True
    run_timeout_s: float | None = None
    others: tuple[str, ...] = ()

    @classmethod
    def of(cls, options: dict | None) -> SearchOptions:
        """From the JSON the capture recorded (``{"flush_l2": false, "benchmark_fn": {"callable": "bench"}}``);
        a value of the wrong type counts as an argument not reproduced."""
        options = options or {}
        flush = options.get("flush_l2", True)
        timeout = options.get("single_run_timeout_sec")
        others = [k for k in options if k not in HONOURED]
        if not isinstance(flush, bool):
            others.append("flush_l2")
            flush = True
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            others.append("single_run_timeout_sec")
            timeout = None
        return cls(flush, float(timeout) if timeout is not None else None, tuple(others))

    def refusal(self, options: dict | None = None) -> str | None:
        """Why tileprobe does not tune the search (the arguments it cannot reproduce, with their values), or None."""
        if not self.others:
            return None
        shown = ", ".join(f"{k}={_value(options or {}, k)}" for k in self.others)
        return (f"the program passes {shown} to its search, which changes how it measures in a way tileprobe cannot "
                "reproduce: not tuned (drop the argument for the tune, or tune the kernel with a probe)")

    def text(self) -> str:
        """``flush_l2=False, single_run_timeout_sec=30`` (only what differs from cuda.tile.tune's defaults)."""
        parts = [] if self.flush_l2 else ["flush_l2=False"]
        if self.run_timeout_s is not None:
            parts.append(f"single_run_timeout_sec={self.run_timeout_s:g}")
        return ", ".join(parts)


def _value(options: dict, key: str) -> str:
    v = options.get(key)
    if isinstance(v, dict) and len(v) == 1:
        kind, name = next(iter(v.items()))
        return f"{name} (a {'function' if kind == 'callable' else 'value'})"
    return repr(v)
