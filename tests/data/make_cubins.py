"""Build the cubin fixtures and their pinned oracle.

Run from anywhere (CPU only; needs cuda-tile with tileiras, and the cuobjdump wheel)::

    python tests/data/make_cubins.py

It compiles the kernels of ``kernels.py`` ahead of time with cuTile's public API
(``cuda.tile.compilation.export_kernel``) into ``cubins/<fixture>_<arch>.cubin``, assembles a tiny PTX probe
for every target from sm_80 to sm_121 (``cubins/ptx_smem4k_<target>.cubin``, see PTX_TARGETS) and writes
``cubins/expected.json``: for every cubin, what ``cuobjdump -res-usage`` (REG, STACK, SHARED, LOCAL) and
``cuobjdump -elf`` (target, REQNTID, EIATTR_CTA_PER_CLUSTER, ...) say. ``tests/test_cubin.py`` checks
``tileprobe.model.cubin`` against that file, and against a live cuobjdump when one is installed, with the parsers
below. Fixtures were made with cuda-tile 1.7.0, tileiras / cuobjdump 13.4.92 (recorded in the JSON).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CUBIN_DIR = HERE / "cubins"
EXPECTED = CUBIN_DIR / "expected.json"
ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")

#: fixture name -> (kernel attribute in kernels.py, signature kind, targets)
FIXTURES = {
    "vec_add": ("vec_add", "vec", ARCHS),
    "matmul": ("matmul", "mm", ARCHS),
    "matmul_cluster2": ("matmul_cluster2", "mm", ("sm_90", "sm_100", "sm_120")),
    "matmul_occ4": ("matmul_occ4", "mm", ARCHS),
    "vec_add_occ1": ("vec_add_occ1", "vec", ("sm_90",)),
    "vec_add_occ2": ("vec_add_occ2", "vec", ("sm_90",)),
    "vec_add_occ4": ("vec_add_occ4", "vec", ("sm_90",)),
}
#: Pairs compiled with hint values that change nothing in the machine code, but the files differ. occ1/occ2:
#: identical .text and .nv.info. occ1/occ4: tileiras passes a 128-register cap (EIATTR_MAXREG_COUNT 128 instead
#: of 255), the kernel needs 28 registers either way, the SASS is identical.
SAME_CODE_PAIRS = (("vec_add_occ1_sm_90.cubin", "vec_add_occ2_sm_90.cubin"),
                   ("vec_add_occ1_sm_90.cubin", "vec_add_occ4_sm_90.cubin"))

#: ptxas probes, ``ptx_smem4k_<target>.cubin``: one kernel with exactly 4,096 bytes of static shared memory,
#: for every target ptxas 13.4 knows from sm_80 on, 'a' variants included. They pin, per architecture, whether
#: the cubin's SHARED counts the 1 KB per-CTA reserve (it does from sm_90 on: 5,120) and how 'a' is recorded.
PTX_TARGETS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_103", "sm_110",
               "sm_120", "sm_121")
PTX_SMEM4K = """\
.version 9.0
.target {target}
.address_size 64
.visible .entry smem4k(.param .u64 out) .reqntid 128
{{
  .shared .align 16 .b8 buf[4096];
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, buf;
  add.u32 %r3, %r3, %r2;
  st.shared.u32 [%r3], %r1;
  bar.sync 0;
  ld.shared.u32 %r2, [%r3+4];
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  st.global.u32 [%rd2], %r2;
  ret;
}}
"""


def pip_tool(distribution: str, program: str) -> str | None:
    """``bin/<program>`` of an installed NVIDIA wheel (``nvidia/cu13/bin``), or None when it is missing."""
    from importlib import metadata
    try:
        files = metadata.distribution(distribution).files or ()
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == program and f.parent.name == "bin" and os.access(f.locate(), os.X_OK):
            return str(f.locate())
    return None


def find_cuobjdump() -> str | None:
    """cuobjdump from the ``nvidia-cuda-cuobjdump`` wheel, or None when the wheel is not installed."""
    return pip_tool("nvidia-cuda-cuobjdump", "cuobjdump")


def cuobjdump_facts(cuobjdump: str, path: str | os.PathLike) -> dict:
    """What cuobjdump says about one cubin: ``{"target": "sm_90a", "kernels": {name: {...}}}``.

    Per kernel: REG, STACK, SHARED, LOCAL (``-res-usage``, registers per thread and bytes) and, from the
    ``.nv.info.<kernel>`` listing of ``-elf``: REQNTID (list), CTA_PER_CLUSTER (list or None),
    MAXREG_COUNT (int or None), EXPLICIT_CLUSTER (bool), MAX_CLUSTER_RANK (int or None).
    """
    res = _run(cuobjdump, "-res-usage", path)
    elf = _run(cuobjdump, "-elf", path)
    header = re.search(r"^64-bit ELF: .*?\bsm=(\w+)", elf, re.M)
    kernels = {}
    for m in re.finditer(r"Function (\S+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", res):
        name = m.group(1)
        attrs = _elf_attributes(elf, name)
        kernels[name] = {
            "REG": int(m.group(2)), "STACK": int(m.group(3)), "SHARED": int(m.group(4)), "LOCAL": int(m.group(5)),
            "REQNTID": _ints(attrs.get("EIATTR_REQNTID")),
            "CTA_PER_CLUSTER": _ints(attrs["EIATTR_CTA_PER_CLUSTER"]) if "EIATTR_CTA_PER_CLUSTER" in attrs else None,
            "MAXREG_COUNT": _ints(attrs["EIATTR_MAXREG_COUNT"])[0] if "EIATTR_MAXREG_COUNT" in attrs else None,
            "EXPLICIT_CLUSTER": "EIATTR_EXPLICIT_CLUSTER" in attrs,
            "MAX_CLUSTER_RANK": (_ints(attrs["EIATTR_MAX_CLUSTER_RANK"])[0]
                                 if "EIATTR_MAX_CLUSTER_RANK" in attrs else None),
        }
    return {"target": "sm_" + header.group(1) if header else None, "kernels": kernels}


def _run(tool: str, *args) -> str:
    return subprocess.run([tool, *map(os.fspath, args)], check=True, capture_output=True, text=True).stdout


def _elf_attributes(elf_listing: str, kernel: str) -> dict[str, str]:
    """EIATTR name -> first value line, from the ``.nv.info.<kernel>`` block of ``cuobjdump -elf``."""
    lines = elf_listing.splitlines()
    try:
        start = lines.index(".nv.info." + kernel)
    except ValueError:
        return {}
    attrs, name = {}, None
    for line in lines[start + 1:]:
        if line and not line.startswith(("\t", " ")):
            break
        m = re.match(r"\s*Attribute:\s*(\S+)", line)
        if m:
            name = m.group(1)
            attrs[name] = ""
        m = re.match(r"\s*Value:\s*(.*)", line)
        if m and name is not None and not attrs[name]:
            attrs[name] = m.group(1).strip()
    return attrs


def _ints(text: str | None) -> list[int]:
    return [int(v, 0) for v in re.findall(r"0x[0-9a-fA-F]+|\d+", text or "")]


def _signature(kind: str):
    """The AOT signature of each fixture: contiguous arrays, 16-byte aligned, shapes divisible by 16."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature
    import kernels as K

    def array(dtype, ndim):
        return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False, stride_constant=(None,) * (ndim - 1) + (1,),
                               shape_divisible_by=16, stride_divisible_by=(16,) * (ndim - 1) + (1,),
                               base_addr_divisible_by=16)

    conv = CallingConvention.cutile_python_v1()
    if kind == "vec":
        return KernelSignature([array(ct.float32, 1)] * 3 + [K.VEC_TILE], conv)
    return KernelSignature([array(ct.float16, 2)] * 3 + list(K.MM_TILE), conv)


def compile_fixtures() -> list[Path]:
    """Compile every fixture for its targets; returns the cubin paths."""
    sys.path.insert(0, str(HERE))
    import kernels as K
    from cuda.tile.compilation import export_kernel

    CUBIN_DIR.mkdir(exist_ok=True)
    paths = []
    for fixture, (attr, kind, archs) in FIXTURES.items():
        for arch in archs:
            path = CUBIN_DIR / f"{fixture}_{arch}.cubin"
            export_kernel(getattr(K, attr), [_signature(kind)], str(path), gpu_code=arch, output_format="cubin")
            print(f"{path.name}: {path.stat().st_size} bytes")
            paths.append(path)
    return paths


def assemble_ptx_probes() -> list[Path]:
    """Assemble ``PTX_SMEM4K`` with the ptxas of the ``nvidia-cuda-nvcc`` wheel for each of PTX_TARGETS."""
    ptxas = pip_tool("nvidia-cuda-nvcc", "ptxas")
    if ptxas is None:
        raise SystemExit("ptxas not found: pip install nvidia-cuda-nvcc")
    paths = []
    for target in PTX_TARGETS:
        src = CUBIN_DIR / f"ptx_smem4k_{target}.ptx"
        path = CUBIN_DIR / f"ptx_smem4k_{target}.cubin"
        src.write_text(PTX_SMEM4K.format(target=target))
        try:
            _run(ptxas, "-arch", target, src, "-o", path)
        finally:
            src.unlink()
        print(f"{path.name}: {path.stat().st_size} bytes")
        paths.append(path)
    return paths


def _versions(cuobjdump: str) -> dict:
    from importlib import metadata
    tool = _run(cuobjdump, "--version")
    return {"cuda-tile": metadata.version("cuda-tile"),
            "nvidia-cuda-tileiras": metadata.version("nvidia-cuda-tileiras"),
            "nvidia-cuda-nvcc (ptxas)": metadata.version("nvidia-cuda-nvcc"),
            "cuobjdump": re.search(r"V[\d.]+", tool).group(0)}


def main() -> int:
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        print("cuobjdump not found: pip install nvidia-cuda-cuobjdump", file=sys.stderr)
        return 1
    for stale in CUBIN_DIR.glob("*.cubin"):
        stale.unlink()
    paths = compile_fixtures() + assemble_ptx_probes()
    expected = {
        "schema_version": 1,
        "generated_by": "tests/data/make_cubins.py",
        "tools": _versions(cuobjdump),
        "same_code_pairs": [list(p) for p in SAME_CODE_PAIRS],
        "cubins": {p.name: {"sha256": hashlib.sha256(p.read_bytes()).hexdigest(), **cuobjdump_facts(cuobjdump, p)}
                   for p in sorted(paths)},
    }
    EXPECTED.write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    total = sum(p.stat().st_size for p in CUBIN_DIR.iterdir())
    print(f"wrote {EXPECTED} ({len(paths)} cubins, {total} bytes in {CUBIN_DIR.name}/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
