"""What tests/conftest.py sets up for parallel runs (pytest-xdist): a results store per test process, one store for
the whole run, and the files with a slow test scheduled first."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import conftest


def test_the_default_store_is_this_test_process_own(tmp_path):
    """Nothing a test starts without --store reaches the developer's store: $TILEPROBE_STORE is a fresh file in a
    temp folder made for this process (each xdist worker has its own)."""
    from tileprobe.store import default_path
    path = default_path()
    assert path == os.environ["TILEPROBE_STORE"]
    folder = Path(path).parent
    assert folder.name.startswith("tileprobe-tests-store-") and folder.parent == Path(tempfile.gettempdir())


def test_the_shared_store_is_one_path_for_every_worker_of_the_run(shared_store_path, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    expected = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    assert Path(shared_store_path) == expected / "shared-results.sqlite"


def _item(path: str, slow: bool):
    return SimpleNamespace(path=Path(path), name=path,
                           get_closest_marker=lambda name: object() if slow and name == "slow" else None)


def test_files_with_a_slow_test_come_first_in_their_order():
    items = [_item("a.py", False), _item("b.py", False), _item("v.py", True), _item("v.py", False),
             _item("c.py", False), _item("g.py", True)]
    conftest._slow_files_first(items)
    assert [(i.name, i.get_closest_marker("slow") is not None) for i in items] == [
        ("v.py", True), ("v.py", False), ("g.py", True), ("a.py", False), ("b.py", False), ("c.py", False)]


def test_auto_starts_two_workers_per_cpu_up_to_eight_more(monkeypatch):
    """``-n auto``: the CPUs this process may use plus as many again, at most 8 more (the tests wait as much as they
    compute); pytest-xdist's own variable, when set, decides instead (the hook answers None and xdist reads it)."""
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    for cpus, workers in ((1, 2), (2, 4), (8, 16), (32, 40)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cpus: set(range(n)))
        assert conftest.pytest_xdist_auto_num_workers(None) == workers
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert conftest.pytest_xdist_auto_num_workers(None) is None

