"""Launch facts kept one candidate at a time (tileprobe/tune/launch_cache.py): a warm re-tune whose candidates are
all stored does not import the probe file for their grids and arguments, however its candidates land in batches,
and an edit of the probe file is seen. A probe whose import sleeps and logs each import stands in for a TileGym
probe's torch import; the GPU is the CPU fake of tests/test_tune_pipeline.py."""
from __future__ import annotations

import json
import os
import time

import pytest
from test_tune_pipeline import INIT, PLAN_ENV, PROBE, TASKS

from tileprobe.run.watchdog import Watchdog
from tileprobe.store import Store
from tileprobe.tune import launch_cache, tune

SLEEPY = "import os, sys, time\n" \
         "open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'imports.log'), 'a').write(f'{os.getpid()}\\n')\n" \
         "time.sleep(1.0)   # torch and TileGym's import, in small\n"
TIMES = {"times": {"256": 90.0, "512": 100.0, "1024": 80.0, "2048": 120.0}}


@pytest.fixture
def cache_on(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEPROBE_PLAN_CACHE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def _imports(folder) -> int:
    log = folder / "imports.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _tune(probe, store, **kw):
    with Watchdog(timeout_s=3.0, init=INIT, env={PLAN_ENV: json.dumps(TIMES)}, grace_s=0.5) as wd, \
            Store.open(store) as s:
        return tune([str(probe)], arch="sm_90", watchdog=wd, tasks=TASKS, store=s, timeout_s=3.0, jobs=2, **kw)


def test_a_warm_re_tune_imports_the_probe_for_no_launch_fact_and_an_edit_is_seen(cache_on):
    probe, store = cache_on / "vec_tune.py", str(cache_on / "results.sqlite")
    probe.write_text(SLEEPY + PROBE)
    cold = _tune(probe, store)      # compiles; the race asks the launch facts of each batch that lands
    assert cold.problems[0].pick.label == "TILE=1024 occupancy=1"
    cold_imports = _imports(cache_on)
    assert cold_imports >= 1

    # warm: every candidate from the store, landing in other batches than the compiles did
    res = _tune(probe, store)
    assert res.problems[0].pick.label == "TILE=1024 occupancy=1"
    assert res.problems[0].pick.grid == [64, 1, 1]            # N // TILE
    assert _imports(cache_on) == cold_imports                 # no loader imported the probe file
    assert res.times["compile_s"] < 1.0                       # everything came from the store

    # an edit of the probe (its grid) is seen: the facts are asked again, never the kept ones
    time.sleep(0.01)
    probe.write_text(SLEEPY + PROBE.replace("(N // case[\"TILE\"],)", "(2 * (N // case[\"TILE\"]),)"))
    res = _tune(probe, store)
    assert _imports(cache_on) > cold_imports
    assert res.problems[0].pick.grid == [128, 1, 1]


def _item(num_sms=132, tile=256):
    return launch_cache.LaunchItem(0, num_sms, {}, [[["TILE", tile]], [["occupancy", 1]]], "vec_add", "sm_90",
                                   {"occupancy": 1}, {"occupancy": 1}, [{"kind": "array"}])


def test_kept_facts_are_per_candidate_and_only_good_ones_are_kept(cache_on):
    code = cache_on / "kernel.py"
    code.write_text("x = 1\n")
    st = os.stat(code)
    files = [[str(code), st.st_size, st.st_mtime_ns, None]]
    path = str(cache_on / "probe.py")
    items = [_item(tile=256), _item(tile=512), _item(tile=1024), _item(tile=2048)]
    facts = [[[64, 1, 1], ["a"]], "probe.py:3: grid() failed", [[16, 1, 1], ["<function f at 0x7f00deadbeef>"]],
             [[8, 1, 1], ["b"]]]
    assert launch_cache.learn(path, items, facts, files) == 2        # not the error, not the address
    assert launch_cache.known(path, items) == [[[64, 1, 1], ["a"]], None, None, [[8, 1, 1], ["b"]]]
    # another batch adds to the entry; what was kept stays
    assert launch_cache.learn(path, [_item(tile=512)], [[[32, 1, 1], ["c"]]], files) == 1
    assert launch_cache.known(path, items)[:2] == [[[64, 1, 1], ["a"]], [[32, 1, 1], ["c"]]]
    # the same candidate on a GPU of another SM count is another question
    assert launch_cache.known(path, [_item(num_sms=78, tile=256)]) == [None]
    # a changed module file makes every kept fact of the entry stale
    code.write_text("x = 22\n")
    assert launch_cache.known(path, items) == [None, None, None, None]


def test_nothing_is_kept_with_the_plan_cache_off(cache_on, monkeypatch):
    monkeypatch.setenv("TILEPROBE_PLAN_CACHE", "0")
    code = cache_on / "kernel.py"
    code.write_text("x = 1\n")
    st = os.stat(code)
    path = str(cache_on / "probe.py")
    assert launch_cache.learn(path, [_item()], [[[64, 1, 1], []]], [[str(code), st.st_size, st.st_mtime_ns, None]]) == 0
    monkeypatch.setenv("TILEPROBE_PLAN_CACHE", "1")
    assert launch_cache.known(path, [_item()]) == [None]


FORGED_GRIDS = [["x", -5], [0, 0, 0], [2**40, 10**6, 1], [1, 1, 1, 1, 1], [1.5, 1, 1], [True, 1, 1], [64]]


@pytest.mark.parametrize("grid", FORGED_GRIDS)
def test_a_kept_fact_whose_grid_the_fresh_path_would_refuse_is_a_miss(cache_on, grid):
    code = cache_on / "kernel.py"
    code.write_text("x = 1\n")
    st = os.stat(code)
    files = [[str(code), st.st_size, st.st_mtime_ns, None]]
    path, items = str(cache_on / "probe.py"), [_item(tile=256), _item(tile=512), _item(tile=1024)]
    forged = [[grid, ["a"]], [[64, 1, 1], {"__class__": "os.system"}]]
    assert launch_cache.learn(path, items, [*forged, [[64, 1, 1], ["c"]]], files) == 1     # only the good one
    assert launch_cache.learn(path, items, [[[64, 1, 1], ["a"]], [[64, 1, 1], ["b"]]], files) == 2
    _forge(path, {launch_cache.item_key(i): f for i, f in zip(items, forged)})    # then the entry is rewritten
    assert launch_cache.known(path, items) == [None, None, [[64, 1, 1], ["c"]]]


def _forge(path, facts: dict) -> None:
    """Rewrite the kept entry of ``path`` with ``facts`` (item key → fact): legal wire data, as anyone who can
    write the cache folder could."""
    from tileprobe.probe import plancache, wire
    entry = os.path.join(plancache._folder(), launch_cache._entry_key(path) + ".json")
    doc = wire.loads(open(entry, "rb").read())
    doc["report"]["facts"].update(facts)
    open(entry, "wb").write(wire.dumps(doc, "a forged entry"))


def test_a_warm_tune_asks_the_loader_again_for_forged_kept_grids(cache_on):
    from tileprobe.probe import plancache, wire
    probe, store = cache_on / "vec_tune.py", str(cache_on / "results.sqlite")
    probe.write_text(PROBE)
    assert _tune(probe, store).problems[0].pick.grid == [64, 1, 1]
    entry = os.path.join(plancache._folder(), launch_cache._entry_key(str(probe)) + ".json")
    facts = wire.loads(open(entry, "rb").read())["report"]["facts"]
    assert facts
    _forge(str(probe), {k: [[2**40, 10**6, 1], runtime] for k, (_, runtime) in facts.items()})   # no GPU launches it
    res = _tune(probe, store)
    assert res.problems[0].pick.label == "TILE=1024 occupancy=1"
    assert res.problems[0].pick.grid == [64, 1, 1]                 # asked afresh, not the forged grid


#: Probe code, run at import in the loader child, that swaps the child's own launch function for one giving a grid
#: no GPU can launch: what the child sends is checked in tileprobe as the kept facts are.
FORGING = "import tileprobe.tune.static as _s\n_s.probe_launch = lambda c, n: ((0, 0, 0), [])\n"


def test_a_loader_that_sends_an_impossible_grid_costs_only_its_candidates_and_is_not_kept(cache_on):
    probe, store = cache_on / "vec_tune.py", str(cache_on / "results.sqlite")
    probe.write_text(FORGING + PROBE)
    res = _tune(probe, store)
    p = res.problems[0]
    assert p.pick is None or p.pick.grid != [0, 0, 0]
    assert p.dropped.get("probe_error", 0) >= 1, p.dropped
    from tileprobe.probe import plancache
    entry = os.path.join(plancache._folder(), launch_cache._entry_key(str(probe)) + ".json")
    assert not os.path.exists(entry) or "[0, 0, 0]" not in open(entry, "rb").read().decode("utf-8", "replace")
