"""Broken probes for the golden CLI transcripts (make_cli_goldens.py): args() fails."""
import os

from tileprobe import Probe


def _args(case, arrays):
    return (arrays.empty((4096,), "float32"),) * 3 + (4096 // case["TILE"],)


probe = Probe(kernel=os.path.join(os.path.dirname(__file__), "simple_kernels.py") + ":vadd", args=_args,
              cases={"TILE": [0]}, hints={"occupancy": [1]}, name="vadd_args")
