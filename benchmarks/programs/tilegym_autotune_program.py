"""A program that calls TileGym ops which autotune through their public API: each op's first call runs
TileGym's own ``cuda.tile.tune.exhaustive_search``, keyed in a per-process dict, so every process tunes again.

Ops (tilegym 1.5.1, backend "cutile"; each output checked against torch): bmm (8 × 1024³ fp16, static persistent),
fmha (1 × 16 heads × 2048 × 128 bf16, causal), matmul (4096³ fp16, static persistent), softmax (4096 × 4096 fp32),
group_gemm (4 × 1024³ fp16). Prints one line per op and the wall time; the exit code is the number of ops that
failed (an op whose search raises counts as failed, and the others still run).

    python benchmarks/programs/tilegym_autotune_program.py [--ops bmm,fmha,...] [--bench-space OUT.json]

``--bench-space OUT.json`` replaces TileGym's searches by a ``triton.testing.do_bench`` of every configuration of
the program's space (the very kernels, hints, grids and arguments TileGym's functions give), written to OUT.json per
search key (the key ``tileprobe record`` / ``tileprobe use`` compute), and continues with the do_bench best.
``--list`` prints the ops and exits (no GPU needed).
"""
import argparse
import json
import sys
import time

OPS = ("bmm", "fmha", "matmul", "softmax", "group_gemm")


def bench_space(out_path: str) -> None:
    """Answer every ``exhaustive_search`` (in every module that holds it) with a do_bench of its whole space."""
    import cuda.tile as ct
    import cuda.tile.tune._tune as tmod
    import triton.testing
    from tileprobe.record.hook import load_capture
    cap = load_capture()
    original = tmod.exhaustive_search
    results = []

    def search(space, stream, grid_fn, kernel, args_fn, hints_fn=None, **kw):
        configs = list(space)
        s = cap.Search(configs, grid_fn, kernel, args_fn, hints_fn)
        times, errors = [], {}
        for i, (cfg, k, hints, grid, args) in enumerate(s.entries):
            tuned = k.replace_hints(**hints)
            try:
                times.append(1000.0 * triton.testing.do_bench(lambda: ct.launch(stream, grid, tuned, args),
                                                             return_mode="median"))
            except Exception as e:     # a config that does not compile or run is a result
                times.append(None)
                errors[i] = f"{type(e).__name__}: {str(e)[:200]}"
        results.append({"key": s.key, "kernel": s.kernel_names.qualname, "us": times, "errors": errors,
                        "configs": [c.config for c in s.config_descs]})
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)
        ok = [i for i, t in enumerate(times) if t is not None]
        if not ok:
            raise ValueError(f"no configuration ran: {errors}")
        best = min(ok, key=lambda i: times[i])
        m = tmod.Measurement(config=configs[best], mean_us=times[best], num_samples=1, error_margin_us=0.0)
        return tmod.TuningResult(best=m, successes=(m,), failures=())

    for mod in list(sys.modules.values()):
        if getattr(mod, "exhaustive_search", None) is original:
            setattr(mod, "exhaustive_search", search)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated subset of {', '.join(OPS)}")
    p.add_argument("--bench-space", metavar="OUT.json", help="do_bench every configuration of each search instead")
    p.add_argument("--list", action="store_true", help="print the ops and exit")
    a = p.parse_args()
    wanted = [o for o in a.ops.split(",") if o]
    unknown = set(wanted) - set(OPS)
    if unknown:
        p.error(f"--ops: unknown op(s) {', '.join(sorted(unknown))}; known: {', '.join(OPS)}")
    if a.list:
        print(" ".join(wanted))
        return 0
    t0 = time.perf_counter()
    import torch
    import tilegym
    from tilegym import ops
    tilegym.set_backend("cutile")
    if a.bench_space:
        import tilegym.ops.cutile.attention, tilegym.ops.cutile.bmm, tilegym.ops.cutile.group_gemm  # noqa: E401,F401
        import tilegym.ops.cutile.matmul, tilegym.ops.cutile.softmax  # noqa: E401,F401
        bench_space(a.bench_space)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    f16, bf16 = torch.float16, torch.bfloat16
    cases = {
        "bmm": lambda: _case(lambda x, y: ops.bmm(x, y), lambda x, y: torch.bmm(x.float(), y.float()),
                             torch.randn(8, 1024, 1024, dtype=f16, device=dev),
                             torch.randn(8, 1024, 1024, dtype=f16, device=dev), tol=2e-2),
        "fmha": lambda: _fmha(ops, torch, dev, bf16),
        "matmul": lambda: _case(lambda x, y: ops.matmul(x, y), lambda x, y: x.float() @ y.float(),
                                torch.randn(4096, 4096, dtype=f16, device=dev),
                                torch.randn(4096, 4096, dtype=f16, device=dev), tol=2e-2),
        "softmax": lambda: _case(lambda x: ops.softmax(x), lambda x: torch.softmax(x, -1),
                                 torch.randn(4096, 4096, dtype=torch.float32, device=dev), tol=1e-4),
        "group_gemm": lambda: _group_gemm(ops, torch, dev, f16),
    }
    failures = 0
    for name in wanted:
        t = time.perf_counter()
        try:
            err, tol = cases[name]()
            ok = err <= tol
            print(f"{name}: rel. error {err:.3g} (tolerance {tol:g}) {'ok' if ok else 'WRONG'} "
                  f"({time.perf_counter() - t:.1f} s)", flush=True)
            failures += not ok
        except Exception as e:          # report and go on with the other ops
            print(f"{name}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:300]} "
                  f"({time.perf_counter() - t:.1f} s)", flush=True)
            failures += 1
    print(f"total: {len(wanted) - failures}/{len(wanted)} ops ok in {time.perf_counter() - t0:.1f} s", flush=True)
    return failures


def _rel(got, want) -> float:
    got, want = got.float(), want.float()
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def _case(run, ref, *inputs, tol):
    import torch
    for _ in range(2):              # the first call tunes, the second reuses the winner
        got = run(*inputs)
    torch.cuda.synchronize()
    return _rel(got, ref(*inputs)), tol


def _fmha(ops, torch, dev, dtype):
    q, k, v = (torch.randn(1, 16, 2048, 128, dtype=dtype, device=dev) for _ in range(3))
    import torch.nn.functional as F
    return _case(lambda q, k, v: ops.fmha(q, k, v, is_causal=True),
                 lambda q, k, v: F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True),
                 q, k, v, tol=2e-2)


def _group_gemm(ops, torch, dev, dtype):
    a = [torch.randn(1024, 1024, dtype=dtype, device=dev) for _ in range(4)]
    b = [torch.randn(1024, 1024, dtype=dtype, device=dev) for _ in range(4)]
    for _ in range(2):
        got = ops.group_gemm(a, b)
    torch.cuda.synchronize()
    return max(_rel(g, x.float() @ y.float()) for g, x, y in zip(got, a, b)), 2e-2


if __name__ == "__main__":
    sys.exit(main())
