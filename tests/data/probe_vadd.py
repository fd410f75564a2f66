"""A small probe used by the tests: vector add, two tiles, occupancy 1/2."""
import os

from tileprobe import Probe

N = 1 << 16

probe = Probe(
    kernel=os.path.join(os.path.dirname(__file__), "simple_kernels.py") + ":vadd",
    args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                               arrays.empty((N,), "float32"), case["TILE"]),
    cases={"TILE": [256, 1024]},
    hints={"occupancy": [1, 2]},
    grid=lambda case, hints, num_sms: (N // case["TILE"],),
    reference=lambda case, a: {2: a[0] + a[1]},
    name="vadd",
)
