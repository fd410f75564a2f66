"""Compile claims: one compile of a variant at a time among the processes sharing a results store.

**Claims.** Processes that share a store (two audits, an audit and a tune, a Ray driver) never compile
one variant twice at once: before a variant is handed to a compile worker, its key is claimed in a
``BEGIN IMMEDIATE`` transaction (:meth:`Store.claim`); a process that finds a live claim of another waits for that
compile's result in the store instead of compiling. A claim is live while its owner holds it: same host and the pid
alive, and its lease (the compile's deadline) not past. A stale claim (owner dead, lease expired) is taken over.
Saving the compile releases the claim in the same transaction; a process releases what it still holds when it ends.
The ``claims`` table (store schema 4): ``key`` → ``owner_host``, ``owner_pid``, ``claimed`` and ``lease_until``
(``time.time()`` seconds).
"""
from __future__ import annotations

import os
import time

from tileprobe.store.connection import StoreConnection


class ClaimsMixin(StoreConnection):
    """The compile claims of :class:`~tileprobe.store.Store` (module doc): claim, wait, release."""

    # --- claims: one compile of a variant at a time among the processes sharing this store ---------------------

    def claim(self, key: str, lease_s: float, *, since: str = "", pid: int | None = None) -> str:
        """Claim compile ``key`` for this process for ``lease_s`` seconds, in one ``BEGIN IMMEDIATE`` transaction.

        Returns ``"mine"`` (claimed now, or already ours: compile it), ``"stored"`` (a compile of ``key`` was saved
        at or after ``since``, an ISO time as :func:`now`: another process finished it meanwhile, read it from the
        store) or ``"theirs"`` (a live claim of another process: wait for its result, :meth:`claim_state`). A claim
        whose owner is dead (same host, pid gone) or whose lease is past is taken over (``"mine"``).
        """
        pid = os.getpid() if pid is None else pid
        t = time.time()
        with self._transaction() as c:
            if c.execute("SELECT 1 FROM compiles WHERE key = ? AND created >= ?", (key, since)).fetchone():
                return "stored"
            held = c.execute("SELECT owner_host, owner_pid, lease_until FROM claims WHERE key = ?", (key,)).fetchone()
            if held is not None and (held[0], held[1]) != (self.host, pid) and self._live(held, t):
                return "theirs"
            c.execute("INSERT OR REPLACE INTO claims (key, owner_host, owner_pid, claimed, lease_until) "
                      "VALUES (?, ?, ?, ?, ?)", (key, self.host, pid, t, t + lease_s))
        return "mine"

    def _live(self, held: tuple, now: float) -> bool:
        host, pid, lease_until = held
        if lease_until < now:
            return False
        if host != self.host:
            return True        # another machine: only its lease says it is gone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def claim_state(self, key: str, since: str = "") -> str:
        """``"stored"`` (a compile of ``key`` saved at or after ``since``), ``"claimed"`` (a live claim of another
        process) or ``"free"`` (neither: the claim was released or went stale without a result)."""
        if self._query("SELECT 1 FROM compiles WHERE key = ? AND created >= ?", (key, since)):
            return "stored"
        held = self._query("SELECT owner_host, owner_pid, lease_until FROM claims WHERE key = ?", (key,))
        return "claimed" if held and self._live(held[0], time.time()) else "free"

    def release_claims(self, pid: int | None = None) -> int:
        """Drop every claim this process (``pid`` on this host) still holds; return how many."""
        pid = os.getpid() if pid is None else pid
        with self._transaction() as c:
            return c.execute("DELETE FROM claims WHERE owner_host = ? AND owner_pid = ?", (self.host, pid)).rowcount
