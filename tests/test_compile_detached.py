"""Compiles are judged by the compiler's exit (a hostile tester, 2026-12-04): a tileiras that starts ``setsid sleep
&``, writes a good cubin and exits 0 made the audit wait 200 s on the pipe the sleeper held, and with ``--timeout 15``
stored the good compile as a timeout. Now each variant is ``ok`` at once and the sleepers are killed."""
from __future__ import annotations

import os
import time

from support import fake_tileiras, live_processes_with

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "tests", "data", "probe_vadd.py")   # 2 tiles × occupancy 1, 2: four variants


def test_a_compiler_that_leaves_a_detached_sleeper_still_compiles_ok_at_once(tmp_path):
    from tileprobe._cutile import which_tool
    from tileprobe.audit import audit
    marker = f"201.{os.getpid()}"
    fake = fake_tileiras(tmp_path, f'setsid sleep {marker} &\nexec {which_tool("tileiras")} "$@"\n')
    t0 = time.monotonic()
    res = audit([PROBE], ["sm_90"], toolchains=[{"tileiras": fake}], jobs=2, timeout_s=15)
    took = time.monotonic() - t0
    assert [r.status for r in res.records] == ["ok"] * 4, [(r.status, r.error) for r in res.records]
    assert took < 120, took
    time.sleep(0.5)
    assert live_processes_with(marker) == []
