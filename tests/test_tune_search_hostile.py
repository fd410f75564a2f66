"""Hostile tests (session 8) of the continuous budgeted search's order (tileprobe.tune.search.SearchOrder), no
compiles: each failed before its fix (session 8)."""
from __future__ import annotations

import contextlib
import math
import signal

import pytest
from test_tune_search import space

from tileprobe.tune.search import SearchOrder, SearchSettings


class Spinning(Exception):
    pass


@contextlib.contextmanager
def at_most(seconds: float):
    """Turn a call that never returns (a pure-Python loop) into a test failure after ``seconds``."""
    def ring(*_):
        raise Spinning(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def drain(order: SearchOrder, now: float = 0.0) -> list:
    out = []
    while (c := order.next(now)) is not None:
        out.append(c)
    return out


def test_next_ends_when_stored_configurations_outrank_the_last_untried_one():
    """Smallest case: 2×2×2, the store holds A=1 B=1 C=1, the default A=0 B=0 C=0 is compiled. The refill's
    balanced_sample does not count the stored configurations as taken (``[*self.tried, *offered]``), so it keeps
    returning A=1 B=1 C=1 (the most "new" pairs), which ``_choices`` skips as tried, refills again with the same
    result ... forever (``pending`` grows without bound). search.py _choices' refill loop."""
    configs = space(A=[0, 1], B=[0, 1], C=[0, 1])
    stored = [c for c in configs if c.label == "A=1 B=1 C=1"]
    order = SearchOrder(configs, [configs[0]], SearchSettings(jobs=1, full_max=1), deadline=1e9)
    for c in stored:
        order.landed(c, 1.0)
    with at_most(5.0):
        got = drain(order)
    assert set(got) | set(stored) == set(configs) and len(got) == len(set(got))


def test_next_ends_when_a_knob_got_a_new_value_since_the_last_tune():
    """The realistic case, the e2e tests' space and settings (jobs 2, full_max 4): every configuration of TILE up to
    4096 is stored (an earlier tune), TILE=8192 was added to the probe since. The first wave's second pick (no
    leaders asked yet) never returns."""
    configs = space(TILE=[256, 512, 1024, 2048, 4096, 8192], occupancy=[1, 2])
    by = {c.label: c for c in configs}
    order = SearchOrder(configs, [by["TILE=256 occupancy=1"], by["TILE=1024 occupancy=1"]],   # default, stored pick
                        SearchSettings(jobs=2, full_max=4), deadline=1e9)
    for c in configs:
        if dict(c.tunables)["TILE"] != 8192:
            order.landed(c, 1.0)
    with at_most(5.0):
        got = drain(order)
    assert {c.label for c in got} == {"TILE=8192 occupancy=1", "TILE=8192 occupancy=2"}


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_compile_time_that_is_no_positive_finite_number_neither_raises_nor_stops_the_search(bad):
    """``landed`` skips only falsy times: -1 makes ``expected_s`` raise ValueError (math.log) inside the compile
    pool's fill (the tune dies); NaN or inf makes every expected time NaN, so ``next`` refuses every choice and the
    search stops after its first wave with hours left. search.py landed (``if compile_s:``)."""
    configs = space(TILE=[1, 2, 3, 4, 5, 6, 7])
    order = SearchOrder(configs, [], SearchSettings(jobs=1), deadline=1000.0)
    first = order.next(0.0)
    order.landed(first, bad)
    second = order.next(1.0)
    assert second is not None and second != first
    order.landed(second, 1.0)
    assert math.isfinite(order.expected_s(configs[-1]))


def test_near_the_deadline_a_cheap_sample_choice_still_starts_behind_many_dear_neighbours():
    """Session 9's hostile test: two leaders' one- and two-knob neighbours (5 knobs: 80 of them, all dear) filled the
    look-ahead window, and ``next`` said None with 79 untried 0.1-s configurations and 3 s left. Each source is now
    looked through on its own."""
    from tileprobe.tune import search as S
    dear = {1: 0.1, 2: 4.0, 3: 8.0, 4: 8.0}
    configs = space(K0=[1, 2, 3, 4], K1=[1, 2, 3], K2=[1, 2, 3], K3=[1, 2, 3], K4=[1, 2, 3])
    secs = lambda c: dear[dict(c.tunables)["K0"]]
    lead = [c for c in configs if c.label in ("K0=4 K1=2 K2=2 K3=2 K4=2", "K0=4 K1=2 K2=2 K3=2 K4=1")]
    o = SearchOrder(configs, [], SearchSettings(jobs=4), deadline=1000.0, leaders=lambda: lead)
    for _ in range(4):                  # the first wave
        c = o.next(0.0)
        o.landed(c, secs(c))
    for v in (1, 2, 3, 4):              # one landed compile of each K0 value: the model knows K0=1 is cheap
        c = next(c for c in configs if dict(c.tunables)["K0"] == v and c not in o._tried)
        o.landed(c, secs(c))
    assert len([c for c in lead for n in (1, 2) for c in o._neighbours(c, n)]) > S.LOOK_AHEAD
    now = 1000.0 - S.WORKER_OVERHEAD_S - S.LAST_RACE_S - S.FINISH_S - 3.0   # 3 s of compile left
    pick = o.next(now)
    assert pick is not None and secs(pick) < 1.0
    assert o.expected_s(pick) <= 3.0
