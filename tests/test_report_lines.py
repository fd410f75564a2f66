"""The audit's reason lines: each ``PTX:`` line sits under its own variant's label, never under the reason of the
variant before it (the hint-less build has no verdict line of its own when the kernel declares no value)."""
from __future__ import annotations

import io

from rich.console import Console

from tileprobe.judge.verdict import judge_records
from tileprobe.records import PtxFacts
from tileprobe.report.terminal import render_audit
from tileprobe.schema import VariantRecord


def _rec(occ, regs, ctas, code, maxnreg):
    return VariantRecord(kernel="rms_norm", probe="p.py", case={"N": 5120}, hints={"occupancy": occ}, arch="sm_120",
                         tileiras="V13.4.92", status="ok", threads=128, registers=regs, shared_bytes=0,
                         driver_shared_bytes=0, stack_bytes=0, ctas_per_sm=ctas, limiter="registers",
                         code_sha256=code, ptx=PtxFacts(maxnreg=maxnreg, reqntid=[128], minnctapersm=1))


def test_each_ptx_line_is_under_its_own_variant():
    rows = [_rec(4, 128, 4, "B", 128), _rec(None, 126, 4, "A", None)]
    judge_records(rows)
    assert "occupancy" not in rows[1].verdicts          # hint-less, nothing declared: no verdict line
    out = io.StringIO()
    render_audit(rows, Console(file=out, width=100, force_terminal=False, color_system=None))
    lines = [ln.rstrip() for ln in out.getvalue().splitlines()]
    ptx = [i for i, ln in enumerate(lines) if ln.strip().startswith("PTX:")]
    assert len(ptx) == 2
    assert lines[ptx[1]].strip() == "PTX: .reqntid 128 .minnctapersm 1"
    assert lines[ptx[1] - 1].strip() == "N=5120 occupancy=hint-less:"        # its own label, one name
