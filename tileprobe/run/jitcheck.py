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
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any

# Imports inside functions here are lazy on purpose: at the module head they would add 0.06 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.


class _Captured(Exception):
    pass


@dataclass
class JitCapture:
    """One variant as JIT compiled it (a row of the JIT process's JSON): the probe's kernel label, case, hints and
    arch, and the mangled symbol and sha256 of the cubin it built (saved as ``jit_cubins/<sha>.cubin``), or
    ``error`` when ``ct.launch`` compiled nothing or failed (None: captured)."""
    kernel: str
    case: dict[str, Any]
    hints: dict[str, Any]
    arch: str | None = None
    symbol: str | None = None
    cubin_sha256: str | None = None
    error: str | None = None

    def key(self) -> tuple[str, str, str]:
        """The variant's identity: (kernel, case, hints) with the dicts as sorted JSON."""
        return self.kernel, json.dumps(self.case, sort_keys=True), json.dumps(self.hints, sort_keys=True)

    def to_wire(self) -> dict:
        """The row as the JIT process prints it (``error`` only when there is one, symbol and sha only when
        captured)."""
        out: dict = {"kernel": self.kernel, "case": self.case, "hints": self.hints, "arch": self.arch}
        if self.error is not None:
            return {**out, "error": self.error}
        return out if self.symbol is None else {**out, "symbol": self.symbol, "cubin_sha256": self.cubin_sha256}


@dataclass
class AuditedVariant:
    """The fields of an audited variant (a ``variants`` item of ``tileprobe audit --json``) the comparison uses:
    identity, status, the cubin's symbol and hashes, resources (threads per CTA, registers per thread, static and
    driver-reported shared bytes, stack bytes) and the static CTAs/SM."""
    kernel: str
    case: dict[str, Any]
    hints: dict[str, Any]
    status: str
    error: str = ""
    symbol: str = ""
    cubin_sha256: str | None = None
    code_sha256: str | None = None
    threads: int | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    driver_shared_bytes: int | None = None
    stack_bytes: int | None = None
    ctas_per_sm: int | None = None

    def key(self) -> tuple[str, str, str]:
        """The variant's identity, as :meth:`JitCapture.key`."""
        return self.kernel, json.dumps(self.case, sort_keys=True), json.dumps(self.hints, sort_keys=True)


@dataclass
class DriverOccupancy:
    """What the CUDA driver says of a loaded kernel: registers per thread, static shared bytes, and the most CTAs
    per SM at the real CTA size and at 1 thread (``cuOccupancyMaxActiveBlocksPerMultiprocessor``)."""
    regs: int
    shared_bytes: int
    ctas_per_sm: int
    ctas_per_sm_block1: int


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


@dataclass
class _Seen:
    """What the compile hook saw last: cuTile's inferred signature and the cubin's bytes."""
    signature: Any = None
    cubin: bytes = b""


def jit_capture(probe_paths: list[str], arch: str | None) -> list[JitCapture]:
    """In this (GPU) process: JIT-compile every variant through ``ct.launch`` and capture signature + cubin."""

    import cuda.tile as ct
    import torch

    from tileprobe._cutile import jit_compile_hook, kernel_function
    from tileprobe.probe.define import load_probes
    captured = _Seen()

    def seen(signature, result):
        captured.signature, captured.cubin = signature, result[0]
        raise _Captured()

    out: list[JitCapture] = []
    stream = torch.cuda.current_stream()
    with jit_compile_hook(seen):
        for path in probe_paths:
            for probe in load_probes(path):
                kernel = probe.resolve_kernel()
                for case in probe.case_grid():
                    args = _materialize(probe.launch_args(case), torch)
                    for hints in probe.hint_grid():
                        k = kernel.replace_hints(**{h: v for h, v in hints.items() if v is not None}) if hints else kernel
                        captured.signature, captured.cubin = None, b""
                        row = JitCapture(probe.label, case, hints, arch)
                        try:
                            ct.launch(stream, (1,), k, tuple(args))
                            row.error = "launch did not compile (cached?)"
                        except _Captured:
                            cubin = captured.cubin
                            os.makedirs("jit_cubins", exist_ok=True)
                            sha = hashlib.sha256(cubin).hexdigest()
                            with open(os.path.join("jit_cubins", sha + ".cubin"), "wb") as f:
                                f.write(cubin)
                            sig = captured.signature
                            if sig.symbol is None:  # JIT mangles inside compile_tile; name it the same way
                                sig = sig.with_mangled_symbol(kernel_function(k).__name__)
                            row.symbol, row.cubin_sha256 = sig.symbol, sha
                        except Exception as e:  # the JIT itself failed (e.g. unsupported dtype on this arch)
                            row.error = f"{type(e).__name__}: {e}"
                        out.append(row)
    return out


def driver_occupancy(cubin: bytes, symbol: str, threads: int) -> DriverOccupancy:
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
    return DriverOccupancy(int(regs), int(smem), int(ctas), int(ctas_block1))


def differing_sections(a: bytes, b: bytes) -> list[str]:
    """Names of ELF sections whose contents differ between two cubins (or that only one has); an ``SHT_NOBITS``
    section's contents are its size (``.nv.shared.<kernel>``: the static shared memory)."""
    from tileprobe.model.cubin import cubin_sections

    def contents(cubin: bytes) -> dict:
        return {s.name: s.data if s.type != "SHT_NOBITS" else ("SHT_NOBITS", s.size) for s in cubin_sections(cubin)}
    sa, sb = contents(a), contents(b)
    return sorted(n for n in set(sa) | set(sb) if sa.get(n) != sb.get(n))


@dataclass
class Comparison:
    """One variant's JIT capture beside its audit (a row of ``--out``'s ``rows``): ``status`` same | DIFFERENT |
    not compared; for one not compared, why (the JIT's error, the audit's status and error); else whether the
    symbols, the file bytes, the machine code (sha256) and the resources (threads, registers, shared, stack: the
    ``jit`` and ``audit`` tuples) are equal, the sections that differ, and the driver's occupancy of the audited
    cubin against the static CTAs/SM (``driver_error`` when the driver could not be asked)."""
    kernel: str
    case: dict[str, Any]
    hints: dict[str, Any]
    status: str = "not compared"
    jit_error: str | None = None
    audit_status: str | None = None
    audit_error: str | None = None
    symbol_equal: bool | None = None
    bytes_equal: bool | None = None
    code_equal: bool | None = None
    resources_equal: bool | None = None
    jit: tuple | None = None
    audit: tuple | None = None
    differing_sections: list[str] = field(default_factory=list)
    driver: DriverOccupancy | None = None
    static_ctas_per_sm: int | None = None
    occupancy_agrees: bool | None = None
    driver_shared_equal: bool | None = None
    driver_error: str | None = None

    @property
    def compared(self) -> bool:
        """Whether both sides were there to compare."""
        return self.status != "not compared"

    def to_wire(self) -> dict:
        """The row as ``--out`` holds it (the keys of what was compared, in the order they were found)."""
        out: dict = {"kernel": self.kernel, "case": self.case, "hints": self.hints}
        if not self.compared:
            return {**out, "status": self.status, "jit_error": self.jit_error, "audit_status": self.audit_status,
                    "audit_error": self.audit_error}
        out = {**out, "symbol_equal": self.symbol_equal, "bytes_equal": self.bytes_equal,
               "code_equal": self.code_equal, "resources_equal": self.resources_equal, "jit": self.jit,
               "audit": self.audit, "differing_sections": self.differing_sections}
        if self.driver is not None:
            out = {**out, "driver": asdict(self.driver), "static_ctas_per_sm": self.static_ctas_per_sm,
                   "occupancy_agrees": self.occupancy_agrees, "driver_shared_equal": self.driver_shared_equal}
        if self.driver_error is not None:
            out = {**out, "driver_error": self.driver_error}
        return {**out, "status": self.status}


def compare(jit_rows: list[JitCapture], audited: list[AuditedVariant], cubin_dir: str) -> list[Comparison]:
    """Join JIT captures and audit records per variant and compare them (see module doc)."""
    recs = {r.key(): r for r in audited}
    out = []
    for j in jit_rows:
        a = recs.get(j.key())
        row = Comparison(j.kernel, j.case, j.hints)
        if a is None or j.error is not None or a.status != "ok" or j.cubin_sha256 is None:
            row.jit_error = j.error
            row.audit_status, row.audit_error = (None, None) if a is None else (a.status, a.error[:200])
            out.append(row)
            continue
        _compare_cubins(row, j, a, cubin_dir)
        out.append(row)
    return out


def _compare_cubins(row: Comparison, j: JitCapture, a: AuditedVariant, cubin_dir: str) -> None:
    """Fill ``row`` from the two cubins' bytes, their resources and the driver's occupancy of the audited one."""
    from tileprobe.model.cubin import CubinInfo
    with open(os.path.join("jit_cubins", f"{j.cubin_sha256}.cubin"), "rb") as f:
        jit_bytes = f.read()
    with open(os.path.join(cubin_dir, f"{a.cubin_sha256}.cubin"), "rb") as f:
        audit_bytes = f.read()
    ji = CubinInfo.from_bytes(jit_bytes)
    k = ji.kernel(j.symbol) if any(x.name == j.symbol for x in ji.kernels) else ji.kernel()
    row.jit = (k.threads_per_cta, k.regs_per_thread, k.smem_static_bytes, k.stack_bytes)
    row.audit = (a.threads, a.registers, a.shared_bytes, a.stack_bytes)
    row.symbol_equal, row.bytes_equal = j.symbol == a.symbol, jit_bytes == audit_bytes
    row.code_equal, row.resources_equal = ji.code_sha256 == a.code_sha256, row.jit == row.audit
    row.differing_sections = [] if row.bytes_equal else differing_sections(jit_bytes, audit_bytes)
    try:
        drv = driver_occupancy(audit_bytes, a.symbol, a.threads or 1)
        row.driver, row.static_ctas_per_sm = drv, a.ctas_per_sm
        row.occupancy_agrees = drv.ctas_per_sm == a.ctas_per_sm
        row.driver_shared_equal = drv.shared_bytes == a.driver_shared_bytes
    except Exception as e:
        row.driver_error = f"{type(e).__name__}: {e}"
    same = row.bytes_equal or (row.symbol_equal and row.resources_equal and row.code_equal)
    row.status = "same" if same else "DIFFERENT"


@dataclass
class AuditEnvironment:
    """The releases an audit ran with (its JSON's ``environment``; None: not recorded)."""
    cuda_tile: str | None = None
    tileiras: str | None = None


@dataclass
class AuditDoc:
    """The parts of ``tileprobe audit --json`` the comparison reads: the variants and the releases."""
    variants: list[AuditedVariant] = field(default_factory=list)
    environment: AuditEnvironment = field(default_factory=AuditEnvironment)


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
        captured = jit_capture(args.probes, args.arch)
        sys.stdout.write("\n" + json.dumps([r.to_wire() for r in captured], default=str) + "\n")
        return 0
    import torch

    from tileprobe.jsonrecord import from_dict
    arch = args.arch or "sm_{}{}".format(*torch.cuda.get_device_capability())
    jit = subprocess.run([sys.executable, "-m", "tileprobe.run.jitcheck", *args.probes, "--arch", arch, "--jit-only"],
                         capture_output=True, text=True)
    if jit.returncode != 0:
        print(jit.stderr[-4000:], file=sys.stderr)
        return 2
    jit_rows = [from_dict(JitCapture, r, where="the JIT process's output")
                for r in json.loads(jit.stdout.strip().splitlines()[-1])]
    work = tempfile.mkdtemp(prefix="jitcheck-")
    audit_json = os.path.join(work, "audit.json")
    subprocess.run([sys.executable, "-m", "tileprobe", "audit", *args.probes, "--arch", arch, "--no-store",
                    "--format", "none", "--json", audit_json, "--bundle", work], check=True)
    with open(audit_json) as f:
        doc = from_dict(AuditDoc, json.load(f), where=audit_json)
    rows = compare(jit_rows, doc.variants, os.path.join(work, "cubins"))
    compared = [r for r in rows if r.compared]
    summary = {"arch": arch, "gpu": torch.cuda.get_device_name(), "cuda_tile": doc.environment.cuda_tile,
               "tileiras": doc.environment.tileiras, "variants": len(rows),
               "same": sum(r.status == "same" for r in rows), "bytes_equal": sum(bool(r.bytes_equal) for r in rows),
               "occupancy_agrees": sum(bool(r.occupancy_agrees) for r in rows)}
    with open(args.out, "w") as f:
        json.dump({**summary, "rows": [r.to_wire() for r in rows]}, f, indent=1, default=str)
    print(json.dumps(summary, default=str))
    return 0 if all(r.status == "same" for r in compared) else 1


if __name__ == "__main__":
    sys.exit(main())
