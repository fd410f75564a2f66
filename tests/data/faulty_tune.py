"""A tunable probe with planted faults for ``tileprobe tune``: the case constant MODE picks, at compile time,
a healthy kernel (0), one that never finishes (1: the nested runtime loops of ``faulty_kernels.spin_forever``) or
one that writes 16 GiB out of bounds (2: ``faulty_kernels.write_out_of_bounds``, CUDA_ERROR_ILLEGAL_ADDRESS, sticky).
MODE and TILE are tunable; a constraint keeps the faulty modes at TILE 256. A tune must report ``hang`` and
``crash``, go on in a fresh worker, and name a healthy winner (checked against the reference).

    tileprobe tune tests/data/faulty_tune.py --timeout 10 --no-store
"""
import cuda.tile as ct

from tileprobe import Probe

SPIN_N = 2**31 - 1
FAR = 2**31 - 64
N = 1 << 20


@ct.kernel
def planted(X, Y, n, far, TILE: ct.Constant[int], MODE: ct.Constant[int]):
    bid = ct.bid(0)
    x = ct.load(X, index=(bid,), shape=(TILE,))
    acc = ct.full((TILE,), 0.0, dtype=ct.float32)
    if MODE == 1:
        for i in range(n):
            for j in range(n):
                acc = acc * 0.999 + 1.0
    if MODE == 2:
        idx = ct.arange(16, dtype=ct.int32)
        ct.scatter(Y, idx + far, 1.0, check_bounds=False)
        ct.scatter(Y, idx - far, 2.0, check_bounds=False)
    ct.store(Y, index=(bid,), tile=x + 1.0 + acc * 0.0)


def healthy_or_small(case, hints):
    return case["MODE"] == 0 or case["TILE"] == 256


probe = Probe(
    kernel=planted, name="planted_tune",
    args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.empty((N,), "float32"), SPIN_N, FAR,
                               case["TILE"], case["MODE"]),
    cases={"TILE": [256, 1024], "MODE": [0, 1, 2]},
    tunable=("TILE", "MODE"),
    constraint=healthy_or_small,
    grid=lambda case, hints, num_sms: (N // case["TILE"],),
    reference=lambda case, a: {1: a[0] + 1.0},
)
