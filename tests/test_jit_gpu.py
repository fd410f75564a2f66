"""On a GPU: the audit's cubin is the cubin JIT builds, and the driver's occupancy equals ours.

Runs ``python -m tileprobe.run.jitcheck`` (JIT through ``ct.launch`` with real torch tensors in one process, the
driver-free audit in another) over the bundled probes that compile for the GPU's arch. Needs the CUDA driver,
torch, cuda-tile and tileiras. Result of 2026-11-29 on an H200: docs/LOG.md.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(__file__))
pytestmark = pytest.mark.gpu


def test_audit_cubins_equal_jit_cubins_and_driver_occupancy(tmp_path):
    probes = [os.path.join(ROOT, p) for p in ("examples/rms_norm.py", "tests/data/probe_vadd.py",
                                              "examples/w4a16_gemm_sm90.py")]
    out = tmp_path / "jitcheck.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "tileprobe.run.jitcheck", *probes, "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert out.exists(), proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    compared = [r for r in doc["rows"] if r["status"] != "not compared"]
    assert len(compared) >= 20, doc["rows"]
    assert [r for r in compared if r["status"] != "same"] == []
    assert all(r["occupancy_agrees"] and r["driver_shared_equal"] for r in compared)
