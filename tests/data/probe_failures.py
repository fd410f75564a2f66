"""A probe whose kernel cannot compile for sm_90 (cuTile refuses float4_e2m1fn there) but can for sm_120."""
import os

from tileprobe import Probe

probe = Probe(
    kernel=os.path.join(os.path.dirname(__file__), "simple_kernels.py") + ":fp4_unpack",
    args=lambda case, arrays: (arrays.randint((4096,), "uint8", 0, 256), arrays.empty((8192,), "float16"), 256),
    hints={"occupancy": [1]},
    name="fp4_unpack",
)
