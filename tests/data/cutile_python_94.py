"""cutile-python issue #94 ("tileiras SIGSEGV on aliased advanced-index load/store around reduction or matmul",
github.com/NVIDIA/cutile-python/issues/94, filed 2026-08-05 against tileiras 13.3.36): the reduction form.

A width-32 row is loaded through ``load_advanced_indexing``, summed, and stored back into an aliased slice of the
same array through ``store_advanced_indexing``. The issue's text shown to us stops inside the store's index tuple;
the store below (one element of the row it loaded, the sum reshaped to (1, 1, 1)) is our completion of it.

Seen here (2026-12-01, sm_120, cuda-tile 1.7.0): tileiras 13.3.36 is killed by SIGSEGV; 13.4.59 and 13.4.92 exit 5
with only "error: failed to compile Tile IR program" (the crash became an error in 13.4.59).
"""
import cuda.tile as ct

from tileprobe import Probe


@ct.kernel()
def cutile_python_94_sum(source):
    row = ct.arange(1, dtype=ct.int32)
    matrix = ct.load_advanced_indexing(source, (ct.Slice(0, 1), row, ct.Slice(0, 32))).reshape((1, 32))
    result = ct.sum(matrix, axis=1)
    ct.store_advanced_indexing(source, (ct.Slice(0, 1), row, ct.Slice(0, 1)), result.reshape((1, 1, 1)))


probe = Probe(
    kernel=cutile_python_94_sum,
    args=lambda case, arrays: (arrays.randn((1, 1, 32), "float32"),),
    grid=lambda case, hints, num_sms: (1,),
)
