"""A program that tunes a cuTile matmul at the shape it is given, through ``cuda.tile.tune.exhaustive_search``
(benchmarks/programs/bench_warm_start.py): fp16 M × K @ K × N, 81 configurations (tile M, N, K ∈ 64/128/256,
64/128/256, 32/64/128 × occupancy 1/2/4), the pick kept per shape and launched once, checked against torch.

    python benchmarks/programs/warm_start_program.py M [N K]      # N and K default to M
    python benchmarks/programs/warm_start_program.py --list       # the space, no GPU
"""
import itertools
import sys
from types import SimpleNamespace

import cuda.tile as ct

SPACE = [SimpleNamespace(tm=tm, tn=tn, tk=tk, occupancy=o)
         for tm, tn, tk, o in itertools.product((64, 128, 256), (64, 128, 256), (32, 64, 128), (1, 2, 4))]


@ct.kernel
def matmul(X, Y, Out, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):
    """Out = X @ Y, one (tm × tn) tile per CTA, K in steps of tk (the example of cuda.tile.tune's docs)."""
    i, j = ct.bid(0), ct.bid(1)
    x_view = X.tiled_view((tm, tk), padding_mode=ct.PaddingMode.ZERO)
    y_view = Y.tiled_view((tk, tn), padding_mode=ct.PaddingMode.ZERO)
    acc = ct.zeros((tm, tn), ct.float32)
    for k in range(x_view.num_tiles(1)):
        acc = ct.mma(x_view.load((i, k)), y_view.load((k, j)), acc)
    ct.store(Out, (i, j), acc.astype(Out.dtype))


def main(argv) -> int:
    if argv[:1] == ["--list"]:
        print(f"{len(SPACE)} configurations: {SPACE[0]} … {SPACE[-1]}")
        return 0
    import torch
    from cuda.tile.tune import exhaustive_search

    m = int(argv[0])
    n, k = (int(argv[1]), int(argv[2])) if len(argv) >= 3 else (m, m)
    x = torch.randn((m, k), dtype=torch.float16, device="cuda")
    y = torch.randn((k, n), dtype=torch.float16, device="cuda")
    out = torch.empty((m, n), dtype=torch.float16, device="cuda")
    stream = torch.cuda.current_stream()
    grid = lambda c: (ct.cdiv(m, c.tm), ct.cdiv(n, c.tn), 1)
    result = exhaustive_search(SPACE, stream, grid, matmul, lambda c: (x, y, out, c.tm, c.tn, c.tk),
                               lambda c: {"occupancy": c.occupancy}, quiet=True)
    c = result.best.config
    ct.launch(stream, grid(c), matmul.replace_hints(occupancy=c.occupancy), (x, y, out, c.tm, c.tn, c.tk))
    torch.cuda.synchronize()
    err = ((out.float() - x.float() @ y.float()).abs().max() / (x.float() @ y.float()).abs().max()).item()
    print(f"{m}x{n}x{k} pick tm={c.tm} tn={c.tn} tk={c.tk} occupancy={c.occupancy} {result.best.mean_us:.1f} us "
          f"check {'ok' if err < 1e-2 else f'WRONG ({err:.2e})'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
