"""On CPU: jitcheck's comparison of a JIT capture with its audit record (fixture cubins, the driver faked).

The GPU test (tests/test_jit_gpu.py) runs the whole check; this one checks the join, the verdicts and the rows
``--out`` holds, with the JIT's and the audit's cubins chosen to agree or not.
"""
import hashlib
import json
import os
import shutil

import pytest

from tileprobe.jsonrecord import FieldError, from_dict
from tileprobe.model.cubin import CubinInfo
from tileprobe.run import jitcheck

DATA = os.path.join(os.path.dirname(__file__), "data", "cubins")


def _cubin(name: str) -> bytes:
    with open(os.path.join(DATA, f"{name}.cubin"), "rb") as f:
        return f.read()


def _place(tmp_path, jit_name: str, audit_name: str) -> tuple[str, str, str]:
    """The JIT's cubin under ``jit_cubins/`` of the working folder (tmp_path), the audit's under ``cubins/``;
    returns (jit sha, audit sha, the audit's cubin folder)."""
    shas = []
    for folder, name in (("jit_cubins", jit_name), ("cubins", audit_name)):
        data = _cubin(name)
        sha = hashlib.sha256(data).hexdigest()
        os.makedirs(tmp_path / folder, exist_ok=True)
        shutil.copyfile(os.path.join(DATA, f"{name}.cubin"), tmp_path / folder / f"{sha}.cubin")
        shas.append(sha)
    return shas[0], shas[1], str(tmp_path / "cubins")


def _audited(name: str, sha: str, **over) -> dict:
    info = CubinInfo.from_bytes(_cubin(name))
    k = info.kernel()
    return {"kernel": "matmul", "case": {"M": 128}, "hints": {"occupancy": 1}, "status": "ok", "symbol": k.name,
            "cubin_sha256": sha, "code_sha256": info.code_sha256, "threads": k.threads_per_cta,
            "registers": k.regs_per_thread, "shared_bytes": k.smem_static_bytes, "driver_shared_bytes":
            k.smem_static_bytes, "stack_bytes": k.stack_bytes, "ctas_per_sm": 1, "compile_s": 1.5, **over}


def _fake_driver(ctas: int):
    def occupancy(cubin, symbol, threads):
        k = CubinInfo.from_bytes(cubin).kernel(symbol)
        return jitcheck.DriverOccupancy(k.regs_per_thread, k.smem_static_bytes, ctas, ctas * 2)
    return occupancy


def _run(tmp_path, monkeypatch, jit_name, audit_name, ctas=1, **over):
    jit_sha, audit_sha, cubin_dir = _place(tmp_path, jit_name, audit_name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(jitcheck, "driver_occupancy", _fake_driver(ctas))
    symbol = CubinInfo.from_bytes(_cubin(jit_name)).kernel().name
    jit = jitcheck.JitCapture("matmul", {"M": 128}, {"occupancy": 1}, "sm_90", symbol, jit_sha)
    audited = from_dict(jitcheck.AuditDoc, {"variants": [_audited(audit_name, audit_sha, **over)],
                                            "environment": {"cuda_tile": "1.7.0", "tileiras": "13.4.92"}})
    (row,) = jitcheck.compare([jit], audited.variants, cubin_dir)
    return row


def test_the_same_cubin_is_the_same_and_its_row_keeps_its_keys(tmp_path, monkeypatch):
    row = _run(tmp_path, monkeypatch, "matmul_sm_90", "matmul_sm_90")
    assert (row.status, row.bytes_equal, row.symbol_equal, row.code_equal) == ("same", True, True, True)
    assert row.jit == row.audit == (256, 255, 197784, 0) and row.occupancy_agrees is True
    wire = json.loads(json.dumps(row.to_wire()))
    assert list(wire) == ["kernel", "case", "hints", "symbol_equal", "bytes_equal", "code_equal", "resources_equal",
                          "jit", "audit", "differing_sections", "driver", "static_ctas_per_sm", "occupancy_agrees",
                          "driver_shared_equal", "status"]
    assert wire["driver"] == {"regs": 255, "shared_bytes": 197784, "ctas_per_sm": 1, "ctas_per_sm_block1": 2}
    assert wire["driver_shared_equal"] is True and wire["differing_sections"] == []


def test_another_cubin_is_different_and_names_its_sections(tmp_path, monkeypatch):
    row = _run(tmp_path, monkeypatch, "matmul_sm_80", "matmul_occ4_sm_80", ctas=2)
    assert row.status == "DIFFERENT" and row.bytes_equal is False and row.resources_equal is False
    assert row.jit == (128, 255, 114688, 8) and row.audit == (128, 128, 32768, 984)
    assert any(s.startswith(".text.matmul_") for s in row.differing_sections) and ".nv.info" in row.differing_sections
    assert row.to_wire()["differing_sections"] == sorted(row.differing_sections)
    assert row.occupancy_agrees is False and row.static_ctas_per_sm == 1


def test_a_variant_the_audit_failed_is_not_compared(tmp_path, monkeypatch):
    row = _run(tmp_path, monkeypatch, "matmul_sm_90", "matmul_sm_90", status="error", error="E" * 300)
    assert row.to_wire() == {"kernel": "matmul", "case": {"M": 128}, "hints": {"occupancy": 1},
                             "status": "not compared", "jit_error": None, "audit_status": "error",
                             "audit_error": "E" * 200}
    missing = jitcheck.compare([jitcheck.JitCapture("other", {}, {}, "sm_90", error="JIT failed")], [], "")
    assert missing[0].to_wire()["jit_error"] == "JIT failed" and missing[0].audit_status is None


def test_a_jit_row_of_the_wrong_shape_names_its_field():
    with pytest.raises(FieldError, match=r"JitCapture.hints holds 3 \(int\), not an object"):
        from_dict(jitcheck.JitCapture, {"kernel": "k", "case": {}, "hints": 3}, where="the JIT process's output")
    row = jitcheck.JitCapture("k", {"N": 1}, {}, "sm_90", error="launch did not compile (cached?)")
    assert row.to_wire() == {"kernel": "k", "case": {"N": 1}, "hints": {}, "arch": "sm_90",
                             "error": "launch did not compile (cached?)"}
