"""Read what the compiler decided from a cubin: threads, registers, shared memory, stack, cluster, hashes.

A cubin is a 64-bit little-endian ELF file for ``EM_CUDA`` (190). tileprobe reads it with pyelftools only, and
only here (other modules take :func:`kernel_attributes` and :func:`cubin_sections`, read with the same checks);
cuobjdump is the test oracle, never a run-time dependency. Each kernel is a ``STT_FUNC`` symbol flagged
``STO_CUDA_ENTRY`` (0x10 in ``st_other``) with a ``.text.<kernel>`` section.

Where each number comes from (checked against ``cuobjdump -res-usage`` / ``-elf`` 13.4.92 on tileiras 13.4.92
and ptxas 13.4.92 cubins for sm_80 … sm_121; ``tests/data/cubins/expected.json`` pins the oracle).

``.nv.info`` sections are lists of records ``{u8 format, u8 attribute, u16 value-or-size}``; format 4
(``EIFMT_SVAL``) is followed by ``size`` payload bytes, formats 1/2/3 (``NVAL``/``BVAL``/``HVAL``) keep their
value in the upper 16 bits of the 4-byte record. Attribute ids (names as cuobjdump prints them; the cluster ids
were confirmed by compiling PTX with ``.reqnctapercluster``, ``.explicitcluster`` and ``.maxclusterrank``):

- EIATTR_REGCOUNT 0x2f, global ``.nv.info``: {symbol index u32, registers per thread u32} = cuobjdump REG.
- EIATTR_FRAME_SIZE 0x11, global ``.nv.info``: {symbol index u32, bytes per thread u32} = cuobjdump STACK.
- EIATTR_REQNTID 0x10, ``.nv.info.<kernel>``: u32 x, y, z threads per CTA (PTX ``.reqntid``).
- EIATTR_MAXREG_COUNT 0x1b, ``.nv.info.<kernel>``: HVAL, the register cap ptxas worked under (255: none).
- EIATTR_CTA_PER_CLUSTER 0x3d, ``.nv.info.<kernel>``: u32 x, y, z CTAs per cluster (``.reqnctapercluster``).
- EIATTR_EXPLICIT_CLUSTER 0x3e: NVAL, cluster shape given at launch (``.explicitcluster``).
- EIATTR_MAX_CLUSTER_RANK 0x3f: u32, ``.maxclusterrank``.
- EIATTR_BLOCKS_ARE_CLUSTERS 0x5b: NVAL, written by tileiras with ``num_ctas`` > 1 next to CTA_PER_CLUSTER.
- EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET 0x09, ``.nv.compat``: BVAL, 1 for an 'a' target (sm_90a, sm_120a).

The register field of the ``.text.<kernel>`` section header (``sh_info >> 24``) is 0 on sm_90 and later; it is
used only when EIATTR_REGCOUNT is missing.

Architecture: ELF ABI version 8 (CUDA 13) keeps the SM number in ``e_flags`` bits 8-15 for every target
(0x0b005004 sm_80, 0x0c005a04 sm_90, 0x0b006402 sm_100, 0x0b007802 sm_120; the low byte is 0x04 up to sm_90
and 0x02 from sm_100, the top byte varies between builds, 0x06/0x0b/0x0c, meaning unknown). ``e_flags`` is
identical for sm_90 and sm_90a (bit 3, LLVM's EF_CUDA_ACCELERATORS, stays clear), so the 'a' comes from
``.nv.compat``; sm_100 and sm_100f cubins are identical, so 'f' cannot be recovered. Older ABIs (CUDA <= 12)
keep the SM in the low byte and 'a' in bit 11 (0x800), per LLVM's ``BinaryFormat/ELF.h``; not seen here.

Compressed sections (``SHF_COMPRESSED``, an ``Elf64_Chdr`` then zlib data) are read, but the sizes they claim are
capped before anything is inflated: at most :data:`MAX_INFLATED_BYTES` in all per cubin (a 4.2 MB cubin whose
``.nv.info`` claimed 8.4 GB used to be inflated whole: 8.4 GB of memory and 24 s before it was refused).
``.symtab`` must not be compressed (pyelftools reads symbols from the raw bytes), and ``SHT_NOBITS`` sections hold
no bytes whatever size they claim. ``benchmarks/audit/bench_fuzz_cubin.py`` feeds the reader 10,000+ mutated cubins.

Static shared memory and the 1 KB per-CTA reserve (``smem_driver_bytes``): from sm_90 on, ptxas places user
shared memory after the 1 KB system reserve (SASS forms shared addresses from 0x400) and ``.nv.shared.<kernel>``
spans the reserve too: a PTX kernel with a 4,096-byte ``.shared`` array gives SHARED = 5,120 on sm_90, 90a, 100,
100a, 103, 110, 120 and 121, but 4,096 on sm_80, 86, 87 and 89 (ptxas 13.4.92). Exactly the first group carries
a ``.nv.shared.reserved.0`` section (0 B on sm_90, 64 B on sm_100/103/120/121, 192 B on sm_110: what the kernel
uses inside the reserve). So: with a ``.nv.shared.reserved.*`` section and SHARED >= 1,024, the driver's static
size is SHARED - 1,024; otherwise it is SHARED (0 when the kernel has no ``.nv.shared.<kernel>``). Confidence:
on sm_90 an H200 driver reported CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = SHARED - 1,024 (FIELD_NOTES, 2026-11-29);
sm_100 … sm_121 rest on the same cubin layout only, not yet on a driver; for sm_8x the cubin holds just the
user's bytes and the driver adds the reserve itself (not yet checked on an sm_8x driver either).
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from typing import NamedTuple

from elftools.common.exceptions import ELFError
from elftools.construct import ConstructError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from tileprobe.errors import CubinError
from tileprobe.records import PtxFacts

__all__ = [
    "RESERVED_SMEM_PER_CTA_BYTES",
    "CubinInfo",
    "CubinSection",
    "KernelResources",
    "NvInfoRecord",
    "PtxDirectives",
    "cubin_sections",
    "embedded_ptx",
    "kernel_attributes",
]

EM_CUDA = 190
STO_CUDA_ENTRY = 0x10
_ELF_MAGIC = b"\x7fELF"
_FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, a fatbinary (several cubins/PTX); not a cubin.
_SYM_SIZE = 24  # sizeof(Elf64_Sym); st_other is byte 5 (pyelftools drops its CUDA bits).

EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_PARAM_CBANK = 0x0A
EIATTR_EXTERNS = 0x0F
EIATTR_REQNTID = 0x10
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_MAXREG_COUNT = 0x1B
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F
EIATTR_CTA_PER_CLUSTER = 0x3D
EIATTR_EXPLICIT_CLUSTER = 0x3E
EIATTR_MAX_CLUSTER_RANK = 0x3F
EIATTR_BLOCKS_ARE_CLUSTERS = 0x5B
EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET = 0x09
# Global .nv.info records whose payload is {symbol index, value}.
_PER_SYMBOL_ATTRS = (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE, EIATTR_MIN_STACK_SIZE, EIATTR_MAX_STACK_SIZE)

#: Most bytes the reader inflates from compressed sections of one cubin (64 MiB: the largest cubin in
#: tests/data/cubins is 0.18 MB, and tileiras' cubins seen so far were a few MB at most, none compressed).
MAX_INFLATED_BYTES = 64 << 20

#: Shared memory the driver reserves for system use in every CTA (cudaDevAttrReservedSharedMemoryPerBlock,
#: 1 KB on sm_80 and later).
RESERVED_SMEM_PER_CTA_BYTES = 1024


class NvInfoRecord(NamedTuple):
    """One record of a ``.nv.info*`` section (the layout is in the module docstring).

    Attributes:
        fmt: EIFMT_NVAL (1), EIFMT_BVAL (2), EIFMT_HVAL (3) or EIFMT_SVAL (4).
        attr: the attribute id (EIATTR_REGCOUNT 0x2f, EIATTR_KPARAM_INFO_V2 0x45 …).
        value: the 16-bit value of an NVAL/BVAL/HVAL record; the payload bytes of an EIFMT_SVAL one.
    """

    fmt: int
    attr: int
    value: int | bytes


@dataclass(frozen=True)
class CubinSection:
    """One named ELF section of a cubin.

    Attributes:
        name: ``".text.vec_add_…"``, ``".nv.info"``, ``".nv.shared.<kernel>"`` ….
        type: its ELF type as pyelftools names it (``"SHT_PROGBITS"``, ``"SHT_NOBITS"`` …); a CUDA type it has no
            name for stays a number (``.nv.info``: 0x70000000).
        size: ``sh_size``, in bytes, as the header gives it (an ``SHT_NOBITS`` section holds none of them).
        data: its bytes: empty for ``SHT_NOBITS``, inflated when compressed (within :data:`MAX_INFLATED_BYTES`).
    """

    name: str
    type: str | int
    size: int
    data: bytes


@dataclass(frozen=True)
class PtxDirectives:
    """Performance directives of one ``.entry`` in the PTX embedded in the cubin (``.nv_debug_ptx_txt``).

    They show what tileiras asked ptxas for: ``maxnreg`` (registers per thread cap, from an occupancy hint),
    ``reqntid`` (threads per CTA, x/y/z as written), ``minnctapersm`` (CTAs per SM). ``None`` = not written.
    """

    maxnreg: int | None
    reqntid: tuple[int, ...] | None
    minnctapersm: int | None

    def __post_init__(self):
        for field in ("maxnreg", "minnctapersm"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"PtxDirectives.{field} must be a non-negative int or None, got {value!r}")
        if self.reqntid is not None and not _positive_ints(self.reqntid):
            raise ValueError(f"PtxDirectives.reqntid must be a tuple of positive ints, got {self.reqntid!r}")

    def record(self) -> PtxFacts:
        """What a variant record keeps of them (``VariantRecord.ptx``): ``reqntid`` as a list, or None when not
        written."""
        return PtxFacts(maxnreg=self.maxnreg, reqntid=list(self.reqntid) if self.reqntid else None,
                        minnctapersm=self.minnctapersm)


@dataclass(frozen=True)
class KernelResources:
    """What the compiler gave one kernel. Sizes in bytes; registers per thread.

    Attributes:
        name: the kernel's symbol (mangled by cuTile, e.g. ``vec_add_Kt1_A1f32_...``).
        threads_per_cta: product of ``reqntid``; 0 when the cubin fixes no CTA size (not a cuTile kernel).
        reqntid: EIATTR_REQNTID (x, y, z), or ``()`` when absent.
        regs_per_thread: EIATTR_REGCOUNT (cuobjdump REG).
        max_regs: EIATTR_MAXREG_COUNT, the cap ptxas worked under (255 when nothing capped it), or None.
        smem_static_bytes: size of ``.nv.shared.<kernel>`` (cuobjdump SHARED); 0 when there is none.
        smem_driver_bytes: what the driver reports as static shared memory
            (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES): ``smem_static_bytes`` minus the per-CTA reserve when the
            cubin already counts it (sm_90 and later; see the module docstring).
        stack_bytes: EIATTR_FRAME_SIZE of the kernel (cuobjdump STACK), per thread; spills live here.
        local_bytes: size of ``.nv.local.<kernel>`` (cuobjdump LOCAL), per thread; 0 when absent.
        cluster_dims: EIATTR_CTA_PER_CLUSTER (x, y, z), or None (no cluster fixed at compile time).
        ptx: directives of this entry in the embedded PTX, or None when the cubin carries no PTX for it.
        blocks_are_clusters: EIATTR_BLOCKS_ARE_CLUSTERS (tileiras ``num_ctas`` > 1).
        explicit_cluster: EIATTR_EXPLICIT_CLUSTER (cluster shape given at launch).
        max_cluster_rank: EIATTR_MAX_CLUSTER_RANK, or None.
    """

    name: str
    threads_per_cta: int
    reqntid: tuple[int, ...]
    regs_per_thread: int
    max_regs: int | None
    smem_static_bytes: int
    smem_driver_bytes: int
    stack_bytes: int
    local_bytes: int
    cluster_dims: tuple[int, ...] | None
    ptx: PtxDirectives | None
    blocks_are_clusters: bool = False
    explicit_cluster: bool = False
    max_cluster_rank: int | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"KernelResources.name must be a non-empty str, got {self.name!r}")
        for field in ("threads_per_cta", "regs_per_thread", "smem_static_bytes", "smem_driver_bytes",
                      "stack_bytes", "local_bytes"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"KernelResources.{field} must be a non-negative int, got {value!r}")
        if self.reqntid and not _positive_ints(self.reqntid):
            raise ValueError(f"KernelResources.reqntid must be positive ints, got {self.reqntid!r}")
        expected = math.prod(self.reqntid) if self.reqntid else 0
        if self.threads_per_cta != expected:
            raise ValueError(f"KernelResources.threads_per_cta={self.threads_per_cta} does not match "
                             f"reqntid={self.reqntid!r} (product {expected})")
        if self.smem_driver_bytes > self.smem_static_bytes:
            raise ValueError(f"KernelResources.smem_driver_bytes={self.smem_driver_bytes} exceeds "
                             f"smem_static_bytes={self.smem_static_bytes}")
        if self.cluster_dims is not None and not _positive_ints(self.cluster_dims):
            raise ValueError(f"KernelResources.cluster_dims must be positive ints or None, "
                             f"got {self.cluster_dims!r}")


@dataclass(frozen=True)
class CubinInfo:
    """One cubin: its target, hashes and kernels.

    Attributes:
        arch: real architecture, ``"sm_90"``: ELF ``e_flags`` bits 8-15 (ELF ABI 8, CUDA 13), the low byte for
            older ABIs.
        sha256: hex SHA-256 of the whole file (differs for every hint value: debug sections and the embedded
            Tile IR/PTX text carry the hints).
        code_sha256: hex SHA-256 of the machine code and resources only (all ``.text.*`` sections, the
            ``.nv.info*`` records with symbol indices replaced by names, shared/local sizes; not the register
            cap EIATTR_MAXREG_COUNT): equal for two compiles that produced the same SASS and resources.
        kernels: one :class:`KernelResources` per entry point, sorted by name.
        accelerated: True for an architecture-specific ('a') target such as sm_90a; from ``.nv.compat``
            EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET under ELF ABI 8 (e_flags is the same for sm_90 and sm_90a
            there), from e_flags bit 11 (0x800) under older ABIs. The 'f' family suffix leaves no trace.
    """

    arch: str
    sha256: str
    code_sha256: str
    kernels: tuple[KernelResources, ...]
    accelerated: bool = False

    @property
    def target(self) -> str:
        """``arch`` with the 'a' suffix when the cubin is architecture-specific (``"sm_90a"``)."""
        return self.arch + ("a" if self.accelerated else "")

    def kernel(self, name: str | None = None) -> KernelResources:
        """The kernel called ``name``; with ``name=None``, the only kernel.

        Raises:
            CubinError: no such kernel, or ``name=None`` and the cubin holds zero or several kernels.
        """
        names = [k.name for k in self.kernels]
        if name is None:
            if len(self.kernels) == 1:
                return self.kernels[0]
            raise CubinError(f"this {self.arch} cubin holds {len(names)} kernels ({', '.join(names) or 'none'}); "
                             "pass the kernel name to choose one")
        for k in self.kernels:
            if k.name == name:
                return k
        raise CubinError(f"no kernel {name!r} in this {self.arch} cubin; it holds: {', '.join(names) or 'none'}")

    @classmethod
    def from_path(cls, path: str | os.PathLike) -> CubinInfo:
        """Read the cubin at ``path``.

        Raises:
            CubinError: the file cannot be read, or is not a readable CUDA cubin.
        """
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise CubinError(f"{os.fspath(path)}: cannot read the cubin ({exc.strerror or exc}); "
                             "check the path and permissions") from exc
        return cls.from_bytes(data, source=os.fspath(path))

    @classmethod
    def from_bytes(cls, data: bytes, source: str | None = None) -> CubinInfo:
        """Parse a cubin image. ``source`` names it in error messages (a path; default ``"<bytes>"``).

        Raises:
            CubinError: not ELF, not a 64-bit CUDA ELF, truncated, or malformed ``.nv.info`` records.
        """
        return _read(data, source, _Reader.info, "CubinInfo.from_bytes")


def kernel_attributes(data: bytes, source: str | None = None) -> dict[str, tuple[NvInfoRecord, ...]]:
    """The ``.nv.info.<kernel>`` records of a cubin, by kernel name (in section order; every kernel tileiras and
    ptxas write has such a section): the walk :class:`CubinInfo` reads its kernels' attributes with, for those it
    does not keep, such as the parameter table (EIATTR_KPARAM_INFO_V2: :func:`tileprobe.run.launch.cubin_params`).
    A damaged record is an error, never skipped; compressed sections are inflated within :data:`MAX_INFLATED_BYTES`.

    Raises:
        CubinError: not a readable CUDA cubin, or malformed ``.nv.info`` records (as :meth:`CubinInfo.from_bytes`).
    """
    return _read(data, source, _Reader.kernel_attributes, "kernel_attributes")


def cubin_sections(data: bytes, source: str | None = None) -> list[CubinSection]:
    """Every named section of a cubin, in file order, read with the reader's checks (sections inside the file,
    compressed ones inflated within :data:`MAX_INFLATED_BYTES`, no bytes for ``SHT_NOBITS``).

    Raises:
        CubinError: not a readable CUDA cubin (as :meth:`CubinInfo.from_bytes`).
    """
    return _read(data, source, _Reader.named_sections, "cubin_sections")


def _read(data, source: str | None, read, what: str):
    """``read(reader)`` on a :class:`_Reader` of ``data``; pyelftools' and struct's errors become a CubinError."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} expects bytes, got {type(data).__name__}")
    data = bytes(data)
    src = source or "<bytes>"
    _check_header(data, src)
    try:
        return read(_Reader(data, src))
    except CubinError:
        raise
    except (ELFError, ConstructError, struct.error, ValueError, IndexError, KeyError, OverflowError,
            EOFError, ZeroDivisionError, zlib.error) as exc:
        raise CubinError(f"{src}: cannot parse the cubin ({type(exc).__name__}: {exc}); the file is damaged "
                         "or not written by ptxas/tileiras: recompile it (e.g. with "
                         "cuda.tile.compilation.export_kernel(..., output_format='cubin'))") from exc


def embedded_ptx(data: bytes, source: str | None = None) -> str | None:
    """The PTX text tileiras embeds in the cubin (``.nv_debug_ptx_txt``), or None when it carries none.

    Raises:
        CubinError: not a cubin, or a damaged one (see :meth:`CubinInfo.from_bytes`). TypeError: not bytes.
    """
    return _read(data, source, lambda r: r._ptx_text(), "embedded_ptx")


def _positive_ints(values) -> bool:
    return isinstance(values, tuple) and all(isinstance(v, int) and v > 0 for v in values)


def _check_header(data: bytes, src: str) -> None:
    """Refuse anything that is not a complete 64-bit little-endian EM_CUDA ELF before pyelftools sees it."""
    redo = "recompile it or copy it again"
    if data[:4] == _FATBIN_MAGIC:
        raise CubinError(f"{src}: this is a fatbinary, not a cubin; extract the cubins with "
                         f"`cuobjdump -xelf all {src}` and pass one of them")
    if data[:4] != _ELF_MAGIC:
        raise CubinError(f"{src}: not an ELF file (it starts with {data[:4]!r}); expected a cubin such as "
                         "cuda.tile.compilation.export_kernel(..., output_format='cubin') writes")
    if len(data) < 64:
        raise CubinError(f"{src}: truncated cubin: {len(data)} bytes, shorter than the 64-byte ELF header; {redo}")
    if data[4] != 2 or data[5] != 1:
        raise CubinError(f"{src}: not a cubin: a cubin is a 64-bit little-endian ELF file "
                         f"(EI_CLASS={data[4]}, EI_DATA={data[5]})")
    (machine,) = struct.unpack_from("<H", data, 18)
    if machine != EM_CUDA:
        raise CubinError(f"{src}: an ELF file for machine {machine}, not a CUDA cubin (EM_CUDA = {EM_CUDA})")
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    for table, count, end in (("section", shnum, shoff + shentsize * shnum),
                              ("program header", phnum, phoff + phentsize * phnum)):
        if (count and end > len(data)) or (table == "section" and not count):
            raise CubinError(f"{src}: truncated cubin: its {table} table needs bytes up to {end} but the file "
                             f"has {len(data)}; {redo}")


class _Reader:
    """One pass over a cubin with pyelftools; ``info()`` builds the :class:`CubinInfo`."""

    def __init__(self, data: bytes, src: str):
        self.data, self.src = data, src
        self.inflate_budget = MAX_INFLATED_BYTES
        self.elf = ELFFile(BytesIO(data))
        self.sections = {}
        self.in_order = []
        for sec in self.elf.iter_sections():
            if sec["sh_type"] != "SHT_NOBITS" and sec["sh_offset"] + sec["sh_size"] > len(data):
                raise CubinError(f"{src}: truncated cubin: section {sec.name!r} needs bytes up to "
                                 f"{sec['sh_offset'] + sec['sh_size']} but the file has {len(data)}; "
                                 "recompile it or copy it again")
            self.sections[sec.name] = sec
            self.in_order.append(sec)
        self.symbols = self._symbols()

    def _data(self, sec) -> bytes:
        """A section's bytes: empty for SHT_NOBITS; for a compressed section, inflated only when the size it
        claims fits in what is left of :data:`MAX_INFLATED_BYTES` (pyelftools stops inflating at that size)."""
        if sec["sh_type"] == "SHT_NOBITS":
            return b""
        if sec.compressed:
            size = sec.data_size
            if size > self.inflate_budget:
                raise CubinError(f"{self.src}: section {sec.name!r} is compressed and claims {size:,} bytes inflated, "
                                 f"over the {MAX_INFLATED_BYTES:,}-byte limit for one cubin (tileiras writes no "
                                 "compressed sections); the file is damaged or hostile")
            self.inflate_budget -= size
        return sec.data()

    def info(self) -> CubinInfo:
        arch, accelerated = self._arch()
        global_attrs = list(self._records(".nv.info"))
        ptx = self._ptx_text()
        kernels = tuple(sorted((self._kernel(name, index, global_attrs, ptx)
                                for index, (name, is_entry) in enumerate(self.symbols) if is_entry),
                               key=lambda k: k.name))
        if not kernels:
            raise CubinError(f"{self.src}: the cubin holds no kernel (no STO_CUDA_ENTRY function symbol); "
                             "pass a cubin compiled from a kernel")
        return CubinInfo(arch=arch, sha256=hashlib.sha256(self.data).hexdigest(),
                         code_sha256=self._code_sha256(global_attrs, kernels), kernels=kernels,
                         accelerated=accelerated)

    def kernel_attributes(self) -> dict[str, tuple[NvInfoRecord, ...]]:
        """The records of each ``.nv.info.<kernel>`` section, by kernel name (:func:`kernel_attributes`)."""
        prefix = ".nv.info."
        return {name[len(prefix):]: tuple(self._records(name)) for name in self.sections if name.startswith(prefix)}

    def named_sections(self) -> list[CubinSection]:
        """Every named section in file order (:func:`cubin_sections`)."""
        return [CubinSection(sec.name, sec["sh_type"], sec["sh_size"], self._data(sec))
                for sec in self.in_order if sec.name]

    def _symbols(self) -> list[tuple[str, bool]]:
        """(name, is_kernel) per ``.symtab`` index; a kernel is an STT_FUNC with STO_CUDA_ENTRY."""
        symtab = self.sections.get(".symtab")
        if not isinstance(symtab, SymbolTableSection):
            raise CubinError(f"{self.src}: the cubin has no .symtab; it cannot name its kernels")
        if symtab.compressed or symtab["sh_type"] == "SHT_NOBITS" or symtab["sh_entsize"] != _SYM_SIZE:
            raise CubinError(f"{self.src}: its .symtab is compressed, empty or not {_SYM_SIZE}-byte entries "
                             f"(sh_entsize {symtab['sh_entsize']}); the file is damaged")
        raw = self._data(symtab)
        out = []
        for i, sym in enumerate(symtab.iter_symbols()):
            st_other = raw[i * _SYM_SIZE + 5]
            out.append((sym.name, sym["st_info"]["type"] == "STT_FUNC" and bool(st_other & STO_CUDA_ENTRY)))
        return out

    def _arch(self) -> tuple[str, bool]:
        flags = self.elf.header["e_flags"]
        if self.elf.header["e_ident"]["EI_ABIVERSION"] >= 8:  # CUDA 13 layout (LLVM EF_CUDA_SM_OFFSET = 8)
            sm = (flags >> 8) & 0xFF
            compat = {attr: value for _, attr, value in self._records(".nv.compat")}
            accelerated = compat.get(EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET) == 1
        else:  # CUDA <= 12 layout: EF_CUDA_SM = 0xff, EF_CUDA_ACCELERATORS_V1 = 0x800 (not seen here)
            sm, accelerated = flags & 0xFF, bool(flags & 0x800)
        if sm < 20:
            raise CubinError(f"{self.src}: e_flags {flags:#x} names no known SM architecture; "
                             "is this a cubin from a newer toolkit than tileprobe knows?")
        return f"sm_{sm}", accelerated

    def _records(self, section_name: str) -> Iterator[NvInfoRecord]:
        """Each record of a ``.nv.info*`` section: its value an int, or the payload bytes for EIFMT_SVAL."""
        sec = self.sections.get(section_name)
        if sec is None:
            return
        data, off = self._data(sec), 0
        while off + 4 <= len(data):
            fmt, attr, value = struct.unpack_from("<BBH", data, off)
            off += 4
            if fmt == EIFMT_SVAL:
                if off + value > len(data):
                    raise CubinError(f"{self.src}: section {section_name!r} is damaged: attribute {attr:#x} "
                                     f"needs {value} bytes, {len(data) - off} left; recompile the cubin")
                yield NvInfoRecord(fmt, attr, data[off:off + value])
                off += value
            elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
                yield NvInfoRecord(fmt, attr, value)
            else:
                raise CubinError(f"{self.src}: section {section_name!r} is damaged: unknown record format "
                                 f"{fmt} at byte {off - 4}; recompile the cubin")

    def _kernel(self, name: str, sym_index: int, global_attrs, ptx: str | None) -> KernelResources:
        per_symbol = {}
        for _, attr, value in global_attrs:
            if attr in _PER_SYMBOL_ATTRS and isinstance(value, bytes) and len(value) >= 8:
                index, number = struct.unpack_from("<II", value)
                if index == sym_index:
                    per_symbol[attr] = number
        records = list(self._records(".nv.info." + name))
        attrs = {attr: value for _, attr, value in records}
        lists = {attr: _u32s(value) for fmt, attr, value in records if fmt == EIFMT_SVAL and isinstance(value, bytes)}
        numbers = {attr: value for fmt, attr, value in records if fmt != EIFMT_SVAL and isinstance(value, int)}
        regs = per_symbol.get(EIATTR_REGCOUNT)
        if regs is None:
            text = self.sections.get(".text." + name)
            regs = text["sh_info"] >> 24 if text is not None else 0
            if not regs:
                raise CubinError(f"{self.src}: kernel {name!r} has no register count (no EIATTR_REGCOUNT in "
                                 ".nv.info, none in its .text section header); recompile the cubin")
        reqntid = lists.get(EIATTR_REQNTID, ())
        smem = self._size(".nv.shared." + name)
        rank = lists.get(EIATTR_MAX_CLUSTER_RANK, ())
        return KernelResources(
            name=name, threads_per_cta=math.prod(reqntid) if reqntid else 0, reqntid=reqntid,
            regs_per_thread=regs, max_regs=numbers.get(EIATTR_MAXREG_COUNT),
            smem_static_bytes=smem, smem_driver_bytes=self._driver_smem_bytes(smem),
            stack_bytes=per_symbol.get(EIATTR_FRAME_SIZE, 0), local_bytes=self._size(".nv.local." + name),
            cluster_dims=lists.get(EIATTR_CTA_PER_CLUSTER),
            ptx=_ptx_directives(ptx, name) if ptx is not None else None,
            blocks_are_clusters=EIATTR_BLOCKS_ARE_CLUSTERS in attrs,
            explicit_cluster=EIATTR_EXPLICIT_CLUSTER in attrs,
            max_cluster_rank=rank[0] if rank else None)

    def _size(self, section_name: str) -> int:
        sec = self.sections.get(section_name)
        return sec["sh_size"] if sec is not None else 0

    def _driver_smem_bytes(self, smem_static_bytes: int) -> int:
        """Static shared memory as the driver reports it, in bytes (the rule is in the module docstring)."""
        has_reserve = any(name.startswith(".nv.shared.reserved.") for name in self.sections)
        if has_reserve and smem_static_bytes >= RESERVED_SMEM_PER_CTA_BYTES:
            return smem_static_bytes - RESERVED_SMEM_PER_CTA_BYTES
        return smem_static_bytes

    def _ptx_text(self) -> str | None:
        sec = self.sections.get(".nv_debug_ptx_txt")
        if sec is None or sec["sh_type"] == "SHT_NOBITS":
            return None
        return self._data(sec).replace(b"\0", b"\n").decode("utf-8", errors="replace")

    def _code_sha256(self, global_attrs, kernels: tuple[KernelResources, ...]) -> str:
        """SHA-256 over SASS and resources, stable under changes of symbol/section numbering and debug data.

        EIATTR_MAXREG_COUNT is left out: it is the cap ptxas was given (an input, reported as ``max_regs``), and
        a cap the code did not need leaves the same machine code and resources.
        """
        h = hashlib.sha256()

        def put(*items):
            for item in items:
                blob = item if isinstance(item, bytes) else repr(item).encode()
                h.update(len(blob).to_bytes(8, "little") + blob)

        for name in sorted(n for n in self.sections if n.startswith(".text.")):
            put(name, self._data(self.sections[name]))
        put("global", *(self._normalised(attr, value) for _, attr, value in global_attrs))
        for k in kernels:
            put(k.name, k.smem_static_bytes, k.local_bytes)
            put(*(self._normalised(attr, value) for _, attr, value in self._records(".nv.info." + k.name)
                  if attr != EIATTR_MAXREG_COUNT))
        return h.hexdigest()

    def _normalised(self, attr: int, value):
        """A record with the symbol indices it holds replaced by symbol names."""
        if not isinstance(value, bytes):
            return attr, value
        if attr in _PER_SYMBOL_ATTRS or attr == EIATTR_PARAM_CBANK:
            words: list[int | str] = list(_u32s(value))
            if words and isinstance(words[0], int):
                words[0] = self._symbol_name(words[0])
            return attr, tuple(words)
        if attr == EIATTR_EXTERNS:
            return attr, tuple(self._symbol_name(i) for i in _u32s(value))
        return attr, value

    def _symbol_name(self, index: int) -> str:
        return self.symbols[index][0] if index < len(self.symbols) else f"#{index}"


def _u32s(payload: bytes) -> tuple[int, ...]:
    return struct.unpack_from(f"<{len(payload) // 4}I", payload) if payload else ()


_ENTRY = r"\.entry\s+{name}\s*\("


def _ptx_directives(ptx: str, name: str) -> PtxDirectives | None:
    """Directives between the parameter list of ``.entry <name>`` and its body's ``{``; None if no entry."""
    match = re.search(_ENTRY.format(name=re.escape(name)), ptx)
    if match is None:
        return None
    body = ptx.find("{", match.end())
    header = ptx[match.end():body if body >= 0 else len(ptx)]
    header = header[header.rfind(")") + 1:]

    def number(directive):
        m = re.search(rf"\.{directive}\s+(\d+)", header)
        return int(m.group(1)) if m else None

    m = re.search(r"\.reqntid\s+(\d+(?:\s*,\s*\d+){0,2})", header)
    reqntid = tuple(int(v) for v in m.group(1).split(",")) if m else None
    return PtxDirectives(maxnreg=number("maxnreg"), reqntid=reqntid, minnctapersm=number("minnctapersm"))
