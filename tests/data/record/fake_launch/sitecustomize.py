"""Test double for cuda.tile launches on a machine without a GPU (tests/test_record.py).

Put this folder on PYTHONPATH: every Python process then has ``cuda.tile._cext.launch`` (and ``cuda.tile.launch``)
replaced by a function that accepts the call, counts it in ``LAUNCHED`` and returns. ``tileprobe record``'s own
sitecustomize runs this one after installing its hook, and wraps the double as it would wrap the real launch.
"""
import cuda.tile as _ct
import cuda.tile._cext as _cext

LAUNCHED = []


def fake_launch(stream, grid, kernel, kernel_args, /, **kwargs):
    """With ``FAKE_COMPILE_S`` set, the first launch of each kernel stands for a JIT compile of that many seconds
    under the compiler timeout in force, as cuTile's (cuda/tile/_compile.py): past the timeout it raises
    ``TileCompilerTimeoutError`` after the timeout, else it returns after the compile time."""
    import os
    import time
    compile_s = float(os.environ.get("FAKE_COMPILE_S") or 0)
    if compile_s and id(kernel) not in _COMPILED:
        _COMPILED.add(id(kernel))
        limit = _cext.default_tile_context.config.compiler_timeout_sec
        if limit is not None and compile_s > limit:
            from cuda.tile._exception import TileCompilerTimeoutError
            time.sleep(limit)
            raise TileCompilerTimeoutError(f"`tileiras` compiler exceeded timeout {limit}s. (fake)", "", None)
        time.sleep(compile_s)
    LAUNCHED.append(grid)


_COMPILED = set()


_cext.launch = fake_launch
_ct.launch = fake_launch
