"""A program that calls TileGym ops through their public torch API on a GPU — what `gpu_record_tilegym.py record`
records. Each op's output is checked against torch; the exit code is the number of ops that failed.

Ops (tilegym 1.5.1, backend "cutile"): rms_norm (two sizes: static persistent and multi-wave kernels), softmax,
matmul, apply_rope_base (RoPE; launched with replace_hints(occupancy=9) when TILEGYM_DISABLE_AUTOTUNE=1),
silu_and_mul, swiglu.

    python benchmarks/programs/tilegym_workload.py [--ops rms_norm,softmax,...]   (default: all)
"""
import argparse
import sys

import torch


OPS = ("rms_norm", "softmax", "matmul", "rope", "silu_and_mul", "swiglu")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated subset of {', '.join(OPS)}")
    ops_wanted = set(p.parse_args().ops.split(","))
    unknown = ops_wanted - set(OPS)
    if unknown:
        p.error(f"--ops: unknown op(s) {', '.join(sorted(unknown))}; known: {', '.join(OPS)}")
    import tilegym
    from tilegym import ops
    tilegym.set_backend("cutile")
    torch.manual_seed(0)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    print(f"GPU: {props.name}, sm_{props.major}{props.minor}, {props.multi_processor_count} SMs; "
          f"torch {torch.__version__}, tilegym {getattr(tilegym, '__version__', '?')}", flush=True)
    bf16, f16 = torch.bfloat16, torch.float16
    failures = 0

    def check(name, run, reference, tol, repeat=3):
        nonlocal failures
        if name.split()[0].replace("apply_rope_base", "rope") not in ops_wanted:
            return
        try:
            for _ in range(repeat):
                got = run()
            torch.cuda.synchronize()
            want = reference()
            err = (got.float() - want.float()).abs().max().item()
            ok = err <= tol
            print(f"{name}: max abs error {err:.3g} (tolerance {tol}) {'ok' if ok else 'WRONG'}", flush=True)
            failures += not ok
        except Exception as e:  # report and go on: the other ops are still recorded
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            failures += 1

    def rms(x, w, eps=1e-6):
        xf = x.float()
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()

    for m in (8192, 64):   # M > 2 x SMs: static persistent kernel; small M: the multi-wave kernel
        x = torch.randn(m, 4096, dtype=bf16, device=dev)
        w = torch.randn(4096, dtype=bf16, device=dev)
        check(f"rms_norm {m}x4096", lambda: ops.rms_norm(x, (4096,), w, 1e-6), lambda: rms(x, w), 0.1)

    s = torch.randn(4096, 2048, dtype=torch.float32, device=dev)
    check("softmax 4096x2048", lambda: ops.softmax(s), lambda: torch.softmax(s, dim=-1), 1e-4)

    a = torch.randn(2048, 2048, dtype=f16, device=dev)
    b = torch.randn(2048, 2048, dtype=f16, device=dev)
    check("matmul 2048^3 fp16", lambda: ops.matmul(a, b), lambda: a.float() @ b.float(), 1.0)

    q0 = torch.randn(2, 32, 1024, 128, dtype=bf16, device=dev)
    k0 = torch.randn(2, 8, 1024, 128, dtype=bf16, device=dev)
    ang = torch.randn(1, 1024, 64, device=dev)
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(bf16)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(bf16)

    def rope_ref():
        def rot(t):
            return torch.cat([-t[..., 64:], t[..., :64]], -1)
        c, sn = cos.unsqueeze(1).float(), sin.unsqueeze(1).float()
        return q0.float() * c + rot(q0.float()) * sn

    check("apply_rope_base q 2x32x1024x128", lambda: ops.apply_rope_base(q0.clone(), k0.clone(), cos, sin)[0],
          rope_ref, 0.1)

    g = torch.randn(4096, 2 * 4096, dtype=bf16, device=dev)
    check("silu_and_mul 4096x8192", lambda: ops.silu_and_mul(g),
          lambda: torch.nn.functional.silu(g[:, :4096].float()) * g[:, 4096:].float(), 0.1)

    u = torch.randn(4096, 4096, dtype=bf16, device=dev)
    v = torch.randn(4096, 4096, dtype=bf16, device=dev)
    check("swiglu 4096x4096", lambda: ops.get_swiglu()(u, v),
          lambda: torch.nn.functional.silu(u.float()) * v.float(), 0.1)
    print(f"workload done: {failures} op(s) failed", flush=True)
    return failures


if __name__ == "__main__":
    sys.exit(main())
