"""One compile of a variant at a time among the processes that share a results store.

Two audits on one store used to compile everything twice. Now each variant is claimed in the store just before
it is handed to a compile worker (the pool and the Ray executor read their variants lazily, so "just before" is
"at dispatch"): :meth:`tileprobe.store.Store.claim` in one ``BEGIN IMMEDIATE`` transaction, with a lease of the
variant's compile deadline (:func:`tileprobe.compile.pool.variant_limit_s`). A variant another live process holds is
not compiled here: its result is awaited by polling the store (:meth:`Claims.settle`); a claim whose owner died or
whose lease passed is taken over and compiled here.

The store object is duck-typed (this layer does not import :mod:`tileprobe.store`): ``claim``, ``claim_state``,
``release_claims``, ``compile_key``, ``lookup``.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from tileprobe.compile.job import Variant
from tileprobe.compile.pool import variant_limit_s
from tileprobe.toolchain import Toolchain

#: Seconds between two looks at the store while waiting for another process's compiles.
POLL_S = 0.5


class Claims:
    """The claims of one audit's resolved toolchain ``tc`` (keyed by ``tc.build``) in ``store``.

    ``since``: the audit's start (:func:`tileprobe.store.now`): a compile saved after it by anyone is an answer.
    ``timeout_s``: the audit's compiler timeout (a lease is one compile's whole deadline).
    """

    def __init__(self, store, tc: Toolchain, since: str, timeout_s: float):
        self.store, self.tc, self.since, self.timeout_s = store, tc, since, timeout_s
        self.waiting: dict[str, Variant] = {}    # key -> variant another process is compiling (or has compiled)
        self.taken_over = 0                      # stale claims this process took over

    def _key(self, v: Variant) -> str:
        return self.store.compile_key(v, self.tc.build)

    def dispatch(self, variants: Iterable[Variant]) -> Iterator[Variant]:
        """``variants`` less those claimed by another live process or just stored (kept in :attr:`waiting`)."""
        for v in variants:
            key = self._key(v)
            if self.store.claim(key, variant_limit_s(v, self.timeout_s), since=self.since) == "mine":
                yield v
            else:
                self.waiting[key] = v

    def settle(self, compile_: Callable[[list[Variant]], None], found: Callable[[list], None],
               poll_s: float = POLL_S, until: float | None = None) -> None:
        """Wait for every variant in :attr:`waiting`: a stored result goes to ``found(records)``; a variant whose
        claim was released or went stale without a result is claimed here and handed to ``compile_(variants)``.
        ``until``: a ``time.monotonic()`` value after which it waits no more (a budgeted tune's cut: the variants
        still held by others get no record here; session 8's hostile test saw a 10-s budget wait 46 s for another
        process's compile)."""
        while self.waiting and (until is None or time.monotonic() < until):
            stored, free = [], []
            for key, v in list(self.waiting.items()):
                state = self.store.claim_state(key, self.since)
                if state == "stored":
                    stored.append(v)
                    del self.waiting[key]
                elif state == "free" and self.store.claim(key, variant_limit_s(v, self.timeout_s),
                                                          since=self.since) == "mine":
                    free.append(v)
                    del self.waiting[key]
            if stored:
                records, other = self.store.lookup(stored, self.tc, any_status=True)
                found(records)
                free.extend(other)     # stored by another compiler with the same build string: compiled here
            if free:
                self.taken_over += len(free)
                compile_(free)
            if self.waiting and not stored and not free:
                time.sleep(poll_s)

    def release(self) -> None:
        """Drop what this process still holds (an interrupted audit; a finished one holds nothing)."""
        self.store.release_claims()
