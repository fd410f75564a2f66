"""A broken probe for the golden CLI transcripts (make_cli_goldens.py): a misspelt hint."""
from tileprobe import Probe

probe = Probe(kernel="simple_kernels.py:vadd", args=lambda case, arrays: (), hints={"ocupancy": [1]})
