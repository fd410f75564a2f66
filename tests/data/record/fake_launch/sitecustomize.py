"""Test double for cuda.tile launches on a machine without a GPU (tests/test_record.py).

Put this folder on PYTHONPATH: every Python process then has ``cuda.tile._cext.launch`` (and ``cuda.tile.launch``)
replaced by a function that accepts the call, counts it in ``LAUNCHED`` and returns. ``tileprobe record``'s own
sitecustomize runs this one after installing its hook, and wraps the double as it would wrap the real launch.
"""
import cuda.tile as _ct
import cuda.tile._cext as _cext

LAUNCHED = []


def fake_launch(stream, grid, kernel, kernel_args, /, **kwargs):
    LAUNCHED.append(grid)


_cext.launch = fake_launch
_ct.launch = fake_launch
