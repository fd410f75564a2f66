"""Prove the audit compiles what JIT compiles: capture JIT's signature and cubin on a GPU, compare with the audit's.

Run on a machine with a GPU, the CUDA driver, torch, cuda-tile and tileiras::

    python -m tileprobe.run.jitcheck examples/rms_norm.py ... --out jitcheck.json

For every variant (case × hints) of each probe, a *JIT process* calls ``ct.launch`` with real torch tensors of the
probe's shapes/dtypes/strides; a hook on ``cuda.tile._execution.kernel._compile`` records the signature cuTile
inferred and the cubin it built, then aborts the launch (no kernel runs: values do not matter, only layout).
An *audit process* (fake driver, as on a machine with no GPU) compiles the same variants with ``tileprobe.audit``.
The two are compared: mangled symbol (it encodes the whole signature), machine-code hash, resources, and the
file bytes (sections that differ are named). The driver's occupancy for each audited cubin is also queried with
the real CTA size (``cuOccupancyMaxActiveBlocksPerMultiprocessor``) and compared with ours.
"""
from __future__ import annotations

import getopt
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace

# Imports inside functions here are lazy on purpose: at the module head they would add 0.06 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


class _Captured(Exception):
    pass


def _torch_array(spec, torch):
    """A zero-filled CUDA tensor with ``spec``'s shape, dtype and strides (elements); offset in bytes honoured."""
    dt = getattr(torch, spec.dtype if spec.dtype != "bool" else "bool")
    isz = torch.empty((), dtype=dt).element_size()
    span = max(spec.nbytes, isz)
    raw = torch.zeros(span + spec.offset + 256, dtype=torch.uint8, device="cuda")
    base = raw[spec.offset:spec.offset + span]
    flat = base.view(dt) if span % isz == 0 else base[: (span // isz) * isz].view(dt)
    t = torch.as_strided(flat, spec.shape, spec.strides)
    t._tileprobe_keepalive = raw
    return t


def _materialize(args, torch):
    from tileprobe.probe.signature import ArraySpec
    out = []
    for a in args:
        if isinstance(a, ArraySpec):
            out.append(_torch_array(a, torch))
        elif isinstance(a, (tuple, list)) and any(isinstance(x, ArraySpec) for x in a):
            out.append(type(a)(_materialize(a, torch)))
        else:
            out.append(a)
    return out


def jit_capture(probe_paths: list[str], arch: str) -> list[dict]:
    """In this (GPU) process: JIT-compile every variant through ``ct.launch`` and capture signature + cubin."""

    import cuda.tile as ct
    import torch

    from tileprobe._cutile import jit_compile_hook, kernel_function
    from tileprobe.probe.define import load_probes
    captured = {}

    def seen(signature, result):
        captured["sig"], captured["cubin"] = signature, result[0]
        raise _Captured()

    out = []
    stream = torch.cuda.current_stream()
    with jit_compile_hook(seen):
        for path in probe_paths:
            for probe in load_probes(path):
                kernel = probe.resolve_kernel()
                for case in probe.case_grid():
                    args = _materialize(probe.launch_args(case), torch)
                    for hints in probe.hint_grid():
                        k = kernel.replace_hints(**{h: v for h, v in hints.items() if v is not None}) if hints else kernel
                        captured.clear()
                        row = {"kernel": probe.label, "case": case, "hints": hints, "arch": arch}
                        try:
                            ct.launch(stream, (1,), k, tuple(args))
                            row["error"] = "launch did not compile (cached?)"
                        except _Captured:
                            cubin = captured["cubin"]
                            os.makedirs("jit_cubins", exist_ok=True)
                            sha = hashlib.sha256(cubin).hexdigest()
                            with open(os.path.join("jit_cubins", sha + ".cubin"), "wb") as f:
                                f.write(cubin)
                            sig = captured["sig"]
                            if sig.symbol is None:  # JIT mangles inside compile_tile; name it the same way
                                sig = sig.with_mangled_symbol(kernel_function(k).__name__)
                            row.update(symbol=sig.symbol, cubin_sha256=sha)
                        except Exception as e:  # the JIT itself failed (e.g. unsupported dtype on this arch)
                            row["error"] = f"{type(e).__name__}: {e}"
                        out.append(row)
    return out


def driver_occupancy(cubin: bytes, symbol: str, threads: int) -> dict:
    """Ask the CUDA driver: registers, static shared bytes and max active CTAs/SM at the real CTA size."""
    from cuda.bindings import driver as cu

    def ok(res):
        err, *rest = res if isinstance(res, tuple) else (res,)
        if int(err) != 0:
            raise RuntimeError(f"CUDA driver error {err}")
        return rest[0] if len(rest) == 1 else rest

    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    mod = ok(cu.cuModuleLoadData(cubin))
    fn = ok(cu.cuModuleGetFunction(mod, symbol.encode()))
    attr = cu.CUfunction_attribute
    regs = ok(cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, fn))
    smem = ok(cu.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn))
    ctas = ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads, 0))
    ctas_block1 = ok(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, 1, 0))
    ok(cu.cuModuleUnload(mod))
    return {"regs": int(regs), "shared_bytes": int(smem), "ctas_per_sm": int(ctas), "ctas_per_sm_block1": int(ctas_block1)}


def differing_sections(a: bytes, b: bytes) -> list[str]:
    """Names of ELF sections whose contents differ between two cubins (or that only one has); an ``SHT_NOBITS``
    section's contents are its size (``.nv.shared.<kernel>``: the static shared memory)."""
    from tileprobe.model.cubin import cubin_sections

    def contents(cubin: bytes) -> dict:
        return {s.name: s.data if s.type != "SHT_NOBITS" else ("SHT_NOBITS", s.size) for s in cubin_sections(cubin)}
    sa, sb = contents(a), contents(b)
    return sorted(n for n in set(sa) | set(sb) if sa.get(n) != sb.get(n))


def compare(jit_rows: list[dict], audit_doc: dict, cubin_dir: str) -> list[dict]:
    """Join JIT captures and audit records per variant and compare them (see module doc)."""
    from tileprobe.model.cubin import CubinInfo
    recs = {(r["kernel"], json.dumps(r["case"], sort_keys=True), json.dumps(r["hints"], sort_keys=True)): r
            for r in audit_doc["variants"]}
    out = []
    for j in jit_rows:
        key = (j["kernel"], json.dumps(j["case"], sort_keys=True), json.dumps(j["hints"], sort_keys=True))
        a = recs.get(key)
        row = {"kernel": j["kernel"], "case": j["case"], "hints": j["hints"]}
        if a is None or "error" in j or a["status"] != "ok":
            row.update(status="not compared", jit_error=j.get("error"), audit_status=a and a["status"],
                       audit_error=a and a.get("error", "")[:200])
            out.append(row)
            continue
        with open(os.path.join("jit_cubins", j["cubin_sha256"] + ".cubin"), "rb") as f:
            jit_bytes = f.read()
        with open(os.path.join(cubin_dir, a["cubin_sha256"] + ".cubin"), "rb") as f:
            audit_bytes = f.read()
        ji = CubinInfo.from_bytes(jit_bytes)
        k = ji.kernel(j["symbol"]) if any(x.name == j["symbol"] for x in ji.kernels) else ji.kernel()
        jit_res = (k.threads_per_cta, k.regs_per_thread, k.smem_static_bytes, k.stack_bytes)
        aud_res = (a["threads"], a["registers"], a["shared_bytes"], a["stack_bytes"])
        row.update(symbol_equal=j["symbol"] == a["symbol"], bytes_equal=jit_bytes == audit_bytes,
                   code_equal=ji.code_sha256 == a["code_sha256"], resources_equal=jit_res == aud_res,
                   jit=jit_res, audit=aud_res, differing_sections=[] if jit_bytes == audit_bytes
                   else differing_sections(jit_bytes, audit_bytes))
        try:
            drv = driver_occupancy(audit_bytes, a["symbol"], a["threads"])
            row.update(driver=drv, static_ctas_per_sm=a["ctas_per_sm"],
                       occupancy_agrees=drv["ctas_per_sm"] == a["ctas_per_sm"],
                       driver_shared_equal=drv["shared_bytes"] == a["driver_shared_bytes"])
        except Exception as e:
            row["driver_error"] = f"{type(e).__name__}: {e}"
        same = row["bytes_equal"] or (row["symbol_equal"] and row["resources_equal"] and row["code_equal"])
        row["status"] = "same" if same else "DIFFERENT"
        out.append(row)
    return out


USAGE = "usage: python -m tileprobe.run.jitcheck PROBE... [--arch sm_90 (default: the GPU's)] [--out jitcheck.json]"


def parse_args(argv: list[str]) -> SimpleNamespace:
    """``probes``, ``arch`` (None: the GPU's), ``out`` and ``jit_only`` from the command line. getopt, not
    argparse: this GPU-host script sits below the CLI layer. Exits 2 with the usage on bad input."""
    try:
        opts, probes = getopt.gnu_getopt(list(argv), "h", ["arch=", "out=", "jit-only", "help"])
    except getopt.GetoptError as e:
        _usage_error(str(e))
    given = dict(opts)
    if "-h" in given or "--help" in given:
        print(f"{USAGE}\n\n{__doc__.splitlines()[0]}")
        sys.exit(0)
    if not probes:
        _usage_error("give at least one probe file")
    return SimpleNamespace(probes=probes, arch=given.get("--arch"), out=given.get("--out", "jitcheck.json"),
                           jit_only="--jit-only" in given)


def _usage_error(text: str) -> None:
    print(f"{USAGE}\nerror: {text}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    """``python -m tileprobe.run.jitcheck PROBE…``: JIT-capture in a child process, audit in another, compare;
    write ``--out`` and print the summary. Returns 0 when every compared variant is the same, 1 otherwise, 2 when
    the JIT process failed."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.jit_only:
        rows = jit_capture(args.probes, args.arch)
        sys.stdout.write("\n" + json.dumps(rows, default=str) + "\n")
        return 0
    import torch
    arch = args.arch or "sm_{}{}".format(*torch.cuda.get_device_capability())
    jit = subprocess.run([sys.executable, "-m", "tileprobe.run.jitcheck", *args.probes, "--arch", arch, "--jit-only"],
                         capture_output=True, text=True)
    if jit.returncode != 0:
        print(jit.stderr[-4000:], file=sys.stderr)
        return 2
    jit_rows = json.loads(jit.stdout.strip().splitlines()[-1])
    work = tempfile.mkdtemp(prefix="jitcheck-")
    audit_json = os.path.join(work, "audit.json")
    subprocess.run([sys.executable, "-m", "tileprobe", "audit", *args.probes, "--arch", arch, "--no-store",
                    "--format", "none", "--json", audit_json, "--bundle", work], check=True)
    with open(audit_json) as f:
        doc = json.load(f)
    rows = compare(jit_rows, doc, os.path.join(work, "cubins"))
    summary = {"arch": arch, "gpu": torch.cuda.get_device_name(), "cuda_tile": doc["environment"].get("cuda_tile"),
               "tileiras": doc["environment"].get("tileiras"), "variants": len(rows),
               "same": sum(r["status"] == "same" for r in rows),
               "bytes_equal": sum(bool(r.get("bytes_equal")) for r in rows),
               "occupancy_agrees": sum(bool(r.get("occupancy_agrees")) for r in rows), "rows": rows}
    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1, default=str)
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, default=str))
    return 0 if summary["same"] == sum(r["status"] != "not compared" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
