"""Deadlines are absolute (a hostile tester, 2026-12-04): a probe that found its loader's connection and sent a
stage message every second held an audit 200 s with ``--probe-timeout 10``; a flood of stage messages is that
probe's error, and the probe beside it loads."""
from __future__ import annotations

import os
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "tests", "data", "probe_vadd.py")

#: Probe code that sends stage messages on its loader's message socket (argv[1]) every ``PAUSE`` s for 60 s.
_STAGES = """import os, sys, time
from multiprocessing.connection import Connection
from tileprobe.probe import wire
c = Connection(os.dup(int(sys.argv[1])))
end = time.monotonic() + 60
n = 0
while time.monotonic() < end:
    n += 1
    wire.send(c, ("stage", f"still busy {n}" + "x" * SIZE))
    time.sleep(PAUSE)
"""


def _load(tmp_path, monkeypatch, head: str, timeout_s: float):
    from tileprobe.probe import contained, loader
    monkeypatch.setattr(loader, "STARTUP_S", 5.0)     # the limits are read where a loader child is watched
    src = open(PROBE).read().replace("__file__", repr(PROBE))
    bad, good = tmp_path / "p_stages.py", tmp_path / "p_good.py"
    bad.write_text(head + src.replace('name="vadd"', 'name="vadd_stages"'))
    good.write_text(src)
    t0 = time.monotonic()
    reports = contained.load_probe_files([str(bad), str(good)], ["sm_90"], tmp_root=str(tmp_path), jobs=2,
                                         timeout_s=timeout_s)
    return reports, time.monotonic() - t0


def test_stage_messages_cannot_hold_a_load_past_its_bound(tmp_path, monkeypatch):
    from tileprobe.probe import loader
    monkeypatch.setattr(loader, "JOB_BOUND_STAGES", 3)
    reports, took = _load(tmp_path, monkeypatch, _STAGES.replace("PAUSE", "0.3").replace("SIZE", "0"), 2.0)
    # bound: 5 s start + 2 s + 3 × 2 s = 13 s (the loop would go on for 60 s)
    assert took < 40, took
    error = "\n".join(reports[0].errors)
    assert "took longer than 13 s in all" in error and "still busy" in error and "raise --probe-timeout" in error
    assert not reports[1].errors and [p.label for p in reports[1].plans] == ["vadd"]


def test_a_flood_of_stage_messages_is_that_probes_error(tmp_path, monkeypatch):
    from tileprobe.probe import loader
    monkeypatch.setattr(loader, "MAX_STAGE_MESSAGES", 2000)
    reports, took = _load(tmp_path, monkeypatch, _STAGES.replace("PAUSE", "0").replace("SIZE", "3000"), 30.0)
    assert took < 50, took
    error = "\n".join(reports[0].errors)
    assert "more than 2,000 stage messages" in error, error
    assert not reports[1].errors and [p.label for p in reports[1].plans] == ["vadd"]
