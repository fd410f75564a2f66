"""Probe of the schema-1 fixtures (tests/data/schema1_*): vector add, occupancy 1/2 × opt_level 2/3, sm_90.

The fixtures were written by tileprobe at commit 26b4e22 (result schema 1) with:
    tileprobe audit tests/data/probe_schema1.py --arch sm_90 --json tests/data/schema1_audit.json \
        --store tests/data/schema1_store.sqlite
"""
import os

from tileprobe import Probe

N = 1 << 16

probe = Probe(
    kernel=os.path.join(os.path.dirname(__file__), "simple_kernels.py") + ":vadd",
    args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                               arrays.empty((N,), "float32"), case["TILE"]),
    cases={"TILE": [1024]},
    hints={"occupancy": [1, 2], "opt_level": [2, 3]},
    grid=lambda case, hints, num_sms: (N // case["TILE"],),
    name="vadd_schema1",
)
