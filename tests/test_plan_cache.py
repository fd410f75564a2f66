"""Loader reports kept across runs (tileprobe/probe/plancache.py): a probe file whose code has not
changed is not imported again on a warm re-audit, and any change to the code it ran, or to the question, makes
it be imported again."""
from __future__ import annotations

import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache on, in a folder of this test; a copy of probe_vadd.py and its kernel file; a loader counter."""
    monkeypatch.setenv("TILEPROBE_PLAN_CACHE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("probe_vadd.py", "simple_kernels.py"):
        shutil.copy(os.path.join(DATA, name), tmp_path / name)
    from tileprobe.probe import contained
    started = []
    real = contained._Loader.__init__

    def counting(self, path, *a, **kw):
        started.append(path)
        real(self, path, *a, **kw)
    monkeypatch.setattr(contained._Loader, "__init__", counting)
    return tmp_path, started


def _facts(res) -> list:
    return sorted((str(r.case), str(r.hints), r.status, r.code_sha256, r.signature and str(r.signature))
                  for r in res.records)


def test_a_warm_audit_imports_no_unchanged_probe_file_and_gives_the_same_records(cache):
    from tileprobe.audit import audit
    tmp, started = cache
    probe = str(tmp / "probe_vadd.py")
    first = audit([probe], ["sm_90"], jobs=1)
    second = audit([probe], ["sm_90"], jobs=1)
    assert started == [probe] and len(first.records) == 4
    assert _facts(first) == _facts(second)
    assert len(os.listdir(tmp / "cache" / "tileprobe" / "plans")) == 1


def test_a_changed_kernel_file_or_question_imports_the_probe_again(cache):
    from tileprobe.audit import audit
    tmp, started = cache
    probe = str(tmp / "probe_vadd.py")
    audit([probe], ["sm_90"], jobs=1)
    kernel = tmp / "simple_kernels.py"
    kernel.write_text(kernel.read_text() + "\n# changed\n")          # size and mtime change: the kernel's module
    audit([probe], ["sm_90"], jobs=1)
    assert started == [probe, probe]
    audit([probe], ["sm_90"], jobs=1, cases={"TILE": [256]})      # another question
    audit([probe], ["sm_120"], jobs=1)
    assert started == [probe] * 4
    audit([probe], ["sm_120"], jobs=1)                             # asked before: kept
    assert len(started) == 4


def test_a_report_with_errors_is_not_kept_and_the_switch_turns_the_cache_off(cache, monkeypatch):
    from tileprobe.audit import audit
    tmp, started = cache
    bad = tmp / "bad.py"
    bad.write_text((tmp / "probe_vadd.py").read_text() + "\nraise RuntimeError('planted')\n")
    for _ in range(2):
        from tileprobe.errors import IncompleteError
        with pytest.raises(IncompleteError, match="planted"):
            audit([str(bad)], ["sm_90"], jobs=1)
    assert started == [str(bad)] * 2
    monkeypatch.setenv("TILEPROBE_PLAN_CACHE", "0")
    probe = str(tmp / "probe_vadd.py")
    audit([probe], ["sm_90"], jobs=1)
    audit([probe], ["sm_90"], jobs=1)
    assert started[2:] == [probe, probe]


def test_an_edit_that_keeps_size_and_mtime_and_a_new_module_beside_the_probe_are_seen(cache):
    """A hostile tester (2026-12-02): ``cp -p``/``rsync -a`` keep the mtime, and a module created beside the probe
    changes what an ``ImportError`` fallback imports; both must make the probe be imported again."""
    from tileprobe.audit import audit
    tmp, started = cache
    probe = tmp / "probe_vadd.py"
    src = probe.read_text()
    probe.write_text(src.replace('cases={"TILE": [256, 1024]}', 'cases={"TILE": TILES}').replace(
        "from tileprobe import Probe\n", "from tileprobe import Probe\ntry:\n    from local_tiles import TILES\n"
        "except ImportError:\n    TILES = [256]\n"))
    first = audit([str(probe)], ["sm_90"], jobs=1)
    assert len(first.records) == 2
    (tmp / "local_tiles.py").write_text("TILES = [256, 1024]\n")
    assert len(audit([str(probe)], ["sm_90"], jobs=1).records) == 4
    st = os.stat(probe)
    probe.write_text(probe.read_text().replace("occupancy\": [1, 2]", "occupancy\": [2, 1]"))
    os.utime(probe, ns=(st.st_atime_ns, st.st_mtime_ns))          # as cp -p: same size, same mtime
    audit([str(probe)], ["sm_90"], jobs=1)
    assert len(started) == 3


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "folder"])
def test_an_unsafe_cache_entry_is_a_miss_not_a_hang(cache, kind):
    """A FIFO hung the audit, a link to /dev/zero took 10 GB (a hostile tester, 2026-12-02): each is a miss now."""
    from tileprobe.audit import audit
    tmp, started = cache
    probe = str(tmp / "probe_vadd.py")
    audit([probe], ["sm_90"], jobs=1)
    plans = tmp / "cache" / "tileprobe" / "plans"
    (entry,) = list(plans.iterdir())
    entry.unlink()
    {"fifo": lambda: os.mkfifo(entry), "dev_zero": lambda: os.symlink("/dev/zero", entry),
     "folder": lambda: entry.mkdir()}[kind]()
    assert len(audit([probe], ["sm_90"], jobs=1).records) == 4
    assert len(started) == 2 and not [n for n in os.listdir(plans) if n.startswith(".")]


def test_inside_a_loader_session_the_save_is_made_by_the_saver_thread_and_waited_for_at_its_end(cache, monkeypatch):
    """The report is encoded and written off the command's path, with the fields it had when kept; the
    session's end waits for the write, so the next process finds it."""
    import threading

    from tileprobe.probe import contained, plancache
    tmp, started = cache
    probe = str(tmp / "probe_vadd.py")
    saved_by = []
    real_save = plancache.save

    def slow_save(k, report, files):
        saved_by.append(threading.current_thread().name)
        import time
        time.sleep(0.3)          # the write is still going when load_probe_files returns
        real_save(k, report, files)
    monkeypatch.setattr(plancache, "save", slow_save)
    plans = tmp / "cache" / "tileprobe" / "plans"
    with contained.loader_sessions():
        (report,) = contained.load_probe_files([probe], ["sm_90"], tmp_root=str(tmp), jobs=1)
        report.default_tileiras = "/set/after/the/keep"
        assert not plans.exists() or not os.listdir(plans)      # not yet written
    assert saved_by == ["tileprobe-plan-saves_0"]          # the session's saver thread (ThreadPoolExecutor's name)
    (name,) = os.listdir(plans)
    kept = plancache.lookup(name[:-len(".json")])
    assert kept["default_tileiras"] != "/set/after/the/keep" and len(kept["plans"]) == len(report.plans)
    started.clear()
    (again,) = contained.load_probe_files([probe], ["sm_90"], tmp_root=str(tmp), jobs=1)
    assert started == [] and len(again.plans) == len(report.plans)


def test_outside_a_session_the_save_is_made_before_load_probe_files_returns(cache):
    from tileprobe.probe import contained
    tmp, _ = cache
    contained.load_probe_files([str(tmp / "probe_vadd.py")], ["sm_90"], tmp_root=str(tmp), jobs=1)
    assert len(os.listdir(tmp / "cache" / "tileprobe" / "plans")) == 1
