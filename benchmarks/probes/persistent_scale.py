"""A persistent kernel whose launch constant depends on the hints and the SM count: ``PROGRAMS = SMs //
num_ctas * occupancy`` is both a ``ct.Constant`` of the kernel and the grid, as in TileGym's persistent kernels, so
``args`` takes ``arch``, ``hints`` and ``num_sms``. A candidate built from other hints than its own (a tune bug
fixed 2026-12-04) launches a grid that disagrees with its constant: with fewer programs than the constant assumes, tiles
are never written, and the reference check (y = 2 x) says ``wrong``.

    tileprobe tune benchmarks/probes/persistent_scale.py --dry-run --arch sm_90 --num-sms 132
    tileprobe tune benchmarks/probes/persistent_scale.py --arch sm_90 --budget 60      # on the GPU
"""
import cuda.tile as ct

from tileprobe import Probe

N = 1 << 24


@ct.kernel
def persistent_scale(X, Y, TILE: ct.Constant[int], PROGRAMS: ct.Constant[int]):
    for t in range(ct.bid(0), ct.num_tiles(X, axis=0, shape=(TILE,)), PROGRAMS):
        ct.store(Y, index=(t,), tile=ct.load(X, index=(t,), shape=(TILE,)) * 2)


def programs(hints, num_sms) -> int:
    """TileGym's persistent grid: SMs // num_ctas × occupancy (132 SMs when the audit has no SM count)."""
    return (num_sms or 132) // (hints.get("num_ctas") or 1) * (hints.get("occupancy") or 1)


def args(case, arrays, *, arch=None, hints=None, num_sms=None):
    return (arrays.randn((N,), "float32"), arrays.empty((N,), "float32"), case["TILE"],
            programs(hints or {}, num_sms))


probe = Probe(kernel=persistent_scale, args=args, cases={"TILE": [1024, 4096]}, tunable=("TILE",),
              hints={"occupancy": [1, 2, 4], "num_ctas": [1, 2]},
              grid=lambda case, hints, num_sms: (programs(hints, num_sms),),
              reference=lambda case, a: {1: a[0] * 2}, name="persistent_scale")
