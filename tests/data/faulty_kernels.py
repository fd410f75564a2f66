"""Planted faults for ``tileprobe run``: a kernel that never finishes, one that writes far out of bounds, and a
healthy one between them, as one probe file (``probes = [...]``). A sweep over it must report ``hang``, ``ok`` and
``crash`` and finish within the timeout plus 10 s per fault.

* ``spin_forever``: two nested loops whose trip counts come from a runtime scalar (the compiler cannot bound
  them), launched with ``n = 2**31 - 1``: ~4.6e18 iterations of a floating-point recurrence that cannot be
  folded into a closed form. One CTA; it never stores until the end.
* ``write_out_of_bounds``: ``ct.scatter`` with bounds checks off, at element ``±far`` of a 16-element float64
  array, with ``far = 2**31 - 64`` given at run time: 16 GiB before and after the array, where nothing is mapped,
  so the GPU faults (CUDA_ERROR_ILLEGAL_ADDRESS, 700: sticky, the worker must be replaced). Offsets stay within
  int32 elements so index arithmetic cannot wrap into mapped memory.
* ``healthy``: y = x + 1, checked — shows the sweep goes on in a clean context after each fault.

    tileprobe run tests/data/faulty_kernels.py --timeout 10
"""
import cuda.tile as ct

from tileprobe import Probe

SPIN_N = 2**31 - 1
FAR = 2**31 - 64
N = 1024


@ct.kernel
def spin_forever(OUT, n):
    acc = ct.full((16,), 1.0, dtype=ct.float32)
    for i in range(n):
        for j in range(n):
            acc = acc * 0.999 + 1.0
    ct.store(OUT, index=(0,), tile=acc)


@ct.kernel
def write_out_of_bounds(OUT, far):
    idx = ct.arange(16, dtype=ct.int32)
    ct.scatter(OUT, idx + far, 1.0, check_bounds=False)
    ct.scatter(OUT, idx - far, 2.0, check_bounds=False)


@ct.kernel
def add_one(X, Y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(Y, index=(bid,), tile=ct.load(X, index=(bid,), shape=(TILE,)) + 1.0)


probes = [
    Probe(kernel=spin_forever, name="planted_hang",
          args=lambda case, arrays: (arrays.empty((16,), "float32"), SPIN_N),
          grid=lambda case, hints, num_sms: (1,)),
    Probe(kernel=add_one, name="healthy",
          args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.empty((N,), "float32"), 256),
          grid=lambda case, hints, num_sms: (N // 256,),
          reference=lambda case, a: {1: a[0] + 1.0}),
    Probe(kernel=write_out_of_bounds, name="planted_crash",
          args=lambda case, arrays: (arrays.zeros((16,), "float64"), FAR),
          grid=lambda case, hints, num_sms: (1,)),
]
