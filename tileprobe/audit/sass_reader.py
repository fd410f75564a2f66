"""The audit's SASS facts read beside its compiles: cubins gathered in batches, each batch one ``nvdisasm`` run per
target (:func:`tileprobe.model.sass_batch.sass_summaries_many`) on a thread of the audit's process.

Until 2026-12-05 each compile worker ran ``nvdisasm`` once per variant, right after its compile: 0.4-0.6 s of CPU
starting up each time, about 40 % of an audit's CPU (issue: "audit at the compiler's pace"). Here the workers only
compile; the audit hands each compiled cubin to a :class:`SassReader`, which reads a batch as soon as
:data:`BATCH` cubins wait (while the next compiles run) and the rest when the compiles are done, split over
``jobs`` runs at once; a cubin that has waited :data:`MAX_WAIT_S` is read with whatever waits beside it. A record is saved and handed on (``on_record``) once its facts are read, with the same
``sass`` and ``register_pool`` the worker would have given it.
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Hashable, Sequence

from tileprobe.model.sass_batch import sass_summaries_many

__all__ = ["BATCH", "SassReader"]

#: Cubins that wait before a batch is read while compiles still run. On the 2-core machine (2026-12-05) one raw
#: nvdisasm run costs 0.6 s of CPU to start plus 27 µs per distinct instruction; 16 cubins of the examples (about
#: 2,000 instructions each) put the start-up under a quarter of the batch. The last batch waits for the compiles'
#: end: a smaller batch makes that tail shorter, a larger one the start-ups fewer.
BATCH = 16
#: Seconds a compiled cubin waits at most for its batch while compiles still run: a batch is also read once its
#: oldest cubin has waited this long, so a record is saved at most about this long after its compile finished and
#: a SIGKILLed audit loses no more than the compiles of these last seconds (the next run compiles them again).
MAX_WAIT_S = 5.0
#: Decoded sections kept for later batches (identical machine code across hint values), about 150 KB each at most.
CACHE_SECTIONS = 512


class SassReader:
    """Reads SASS facts of cubins on a background thread, a batch at a time.

    ``submit(key, cubin, symbol)`` hands one over; ``take()`` returns the ``(key, summary)`` pairs read so far
    (``summary``: :func:`tileprobe.model.sass.sass_summary`'s dict); ``close()`` reads the rest and returns them;
    ``abandon()`` stops without reading more and returns what was read and the keys that were not. ``read`` is
    the batch reader (tests pass a fake). Errors in ``read`` reach the caller from ``take``/``close``.
    """

    def __init__(self, batch: int = BATCH, jobs: int = 1,
                 read: Callable[[Sequence[tuple[bytes, str]], dict], list[dict]] = sass_summaries_many):
        self.batch, self.jobs, self._read = max(1, batch), max(1, jobs), read
        self._cond = threading.Condition()
        self._pending: list[tuple[Hashable, bytes, str]] = []
        self._oldest = 0.0             # time.monotonic() when the oldest pending cubin was submitted
        self._done: list[tuple[Hashable, dict]] = []
        self._closing = self._stopped = False
        self._error: BaseException | None = None
        self._cache: dict[str, str] = {}
        self.batches = 0               # read() calls made (a benchmark and the tests read it)
        self._thread = threading.Thread(target=self._loop, name="tileprobe-sass-reader", daemon=True)
        self._thread.start()

    def submit(self, key: Hashable, cubin: bytes, symbol: str) -> None:
        """Queue one cubin (kernel ``symbol``) to be read; ``key`` comes back with its facts."""
        with self._cond:
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.append((key, cubin, symbol))
            if len(self._pending) >= self.batch:
                self._cond.notify_all()

    def take(self) -> list[tuple[Hashable, dict]]:
        """The facts read since the last call (never waits).

        Raises:
            Exception: what the batch reader raised (a tileprobe bug: nvdisasm failures are results).
        """
        with self._cond:
            self._raise()
            out, self._done = self._done, []
        return out

    def close(self) -> list[tuple[Hashable, dict]]:
        """Read every cubin still queued (split over ``jobs`` runs at once) and return what :meth:`take` has not.

        Raises:
            Exception: what the batch reader raised.
        """
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        return self.take()

    def abandon(self) -> tuple[list[tuple[Hashable, dict]], list[Hashable]]:
        """Stop now (after the batch being read): ``(facts read and not taken, keys never read)``."""
        with self._cond:
            self._stopped = self._closing = True
            self._cond.notify_all()
        self._thread.join()
        with self._cond:
            done, self._done = self._done, []
            unread, self._pending = [k for k, _, _ in self._pending], []
        return done, unread

    def _overdue(self) -> bool:
        """The oldest pending cubin has waited :data:`MAX_WAIT_S` (call with the lock held)."""
        return bool(self._pending) and time.monotonic() - self._oldest >= MAX_WAIT_S

    def _due(self) -> bool:
        """A batch is to be read now, or the reader is to stop (call with the lock held)."""
        return self._stopped or self._closing or len(self._pending) >= self.batch or self._overdue()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _loop(self) -> None:
        while True:
            with self._cond:
                left = MAX_WAIT_S - (time.monotonic() - self._oldest) if self._pending else None
                self._cond.wait_for(self._due, timeout=None if left is None else max(left, 0.01))
                if not self._due():
                    continue
                if self._stopped or not self._pending:
                    if self._closing or self._stopped:
                        return
                    continue
                work, self._pending = self._pending, []
                final = self._closing
            try:
                got = self._read_all(work, self.jobs if final else 1)
            except BaseException as e:
                with self._cond:
                    self._error = e
                return
            with self._cond:
                self._done.extend(got)

    def _read_all(self, work: list[tuple[Hashable, bytes, str]], ways: int) -> list[tuple[Hashable, dict]]:
        """``work``'s facts: one batch read, or ``ways`` at once (interleaved) when the compiles are done."""
        if len(self._cache) > CACHE_SECTIONS:
            self._cache.clear()
        ways = min(ways, len(work))
        parts = [work[i::ways] for i in range(ways)]
        if ways == 1:
            results = [self._read([(c, s) for _, c, s in work], self._cache)]
        else:
            with concurrent.futures.ThreadPoolExecutor(ways, thread_name_prefix="tileprobe-sass") as ex:
                results = list(ex.map(lambda part: self._read([(c, s) for _, c, s in part], self._cache), parts))
        self.batches += len(parts)
        return [(k, summary) for part, summaries in zip(parts, results)
                for (k, _, _), summary in zip(part, summaries)]
