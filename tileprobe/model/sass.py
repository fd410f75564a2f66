"""SASS traits: what the machine code of each kernel does, read from ``nvdisasm`` output.

``sass_traits(cubin)`` disassembles a cubin (sm_80 … sm_121) with ``nvdisasm -c`` and counts, per kernel
(``.text.<kernel>`` section): instructions, thread-local memory traffic (LDL/STL: spills and refills),
``setmaxnreg`` (USETMAXREG, sm_90+ warp-specialised register reallocation), TMA / bulk-copy instructions
(UTMA*, UBLK*, sm_90+) and matrix instructions (HMMA/IMMA/QMMA on sm_80+ and sm_120, HGMMA/QGMMA/IGMMA on
sm_90, UTCHMMA/UTCQMMA/... tcgen05 on sm_100).

nvdisasm comes from the ``nvidia-cuda-nvdisasm`` wheel (preferred: it matches cuTile's pip toolchain, and an
older toolkit's nvdisasm cannot decode newer architectures), else from ``PATH``; ``nvdisasm=`` overrides both.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING

from tileprobe.errors import CubinError, TileprobeError, ToolchainError
from tileprobe.model.arch import get_arch
from tileprobe.model.regpool import UNKNOWN, check_listing
from tileprobe.records import RegisterPool, SassFacts, keyed_from_dict

if TYPE_CHECKING:
    from tileprobe.schema import VariantRecord

__all__ = [
    "GATE_VERSION",
    "SASS_GATE",
    "TMA_DATA_OPCODES",
    "KernelSassTraits",
    "SassTraits",
    "facts_from_listing",
    "find_nvdisasm",
    "gated_summary",
    "have_nvdisasm",
    "machine_code_may_setmaxnreg",
    "parse_nvdisasm",
    "ptx_has_setmaxnreg",
    "register_pool",
    "sass_facts",
    "sass_summary",
    "sass_traits",
    "split_register_pool",
    "tma_data_ops",
]

#: The third value of an audit's ``with_sass``: read the SASS only where the register-pool check needs
#: it before a launch (the embedded PTX has ``setmaxnreg`` or does not look whole, or an instruction word is
#: a USETMAXREG); elsewhere the record gets the check's verdict ``none`` and no traits. ``tileprobe tune`` compiles
#: this way: nvdisasm starts in 0.4-0.5 s of CPU for any cubin (the 2-core machine, 2026-12-03) and the
#: register-pool walk of a 16,161-line listing took 0.5-0.7 s, the last step of a tune's slowest compile
#: (docs/LOG.md §33).
SASS_GATE = "gate"
#: Bumped whenever the gate's rules change: a verdict ``none`` the gate wrote under other rules (``gate_version``
#: of the record's register pool) is checked again from the stored cubin (``Store.lookup``). 3: ``pool_ok`` without
#: the SASS where no setmaxnreg asks for more than the launch allocation (:mod:`tileprobe.model.sass_gate`).
GATE_VERSION = 3

NVDISASM_TIMEOUT_S = 120
#: nvdisasm's options for the facts (traits and the register-pool check): ``-ndf`` skips the dataflow pass, which
#: only annotates lines (``(*"SpillRefill"*)``, an indirect branch's ``BRANCH_TARGETS``) that neither reads;
#: ``-novliw`` prints sm_80+ code as it is printed anyway. The listing is otherwise the same line for line
#: (tests/test_regpool.py checks the facts on tests/data's cubins), and nvdisasm 13.4.92 takes 0.25-0.36 s of CPU
#: instead of 0.38-0.48 s on a small cubin, 0.52-0.70 s instead of 0.57-0.90 s on the 16,161-line RMSNorm one (the
#: 2-core machine, 2026-12-03). ``tileprobe sass`` shows the plain ``-c`` listing, annotations included.
FACTS_OPTIONS = ("-c", "-ndf", "-novliw")

#: TMA and bulk-copy opcodes that move data (UTMACCTL / UTMACMDFLUSH only manage descriptors and queues).
TMA_DATA_OPCODES = frozenset({"UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "UBLKCP", "UBLKRED", "UBLKPF"})
# Matrix multiply-accumulate opcodes: [HIQDBO]MMA (mma.sync), [HIQB]GMMA (sm_90 wgmma), UTC*MMA (sm_100 tcgen05).
_MATRIX = re.compile(r"(?:UTC[A-Z]*MMA|[A-Z]?GMMA|[A-Z]MMA)")
_TMA = re.compile(r"(?:UTMA|UBLK)[A-Z_]*")
_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
# /*0050*/  [{] [@!UP0] OPCODE.MOD.MOD operands ;
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*\{?\s*(?:@!?U?P(?:T|\d+)\s+)?"
                          r"([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)(.*)")


@dataclass(frozen=True)
class KernelSassTraits:
    """SASS facts of one ``.text.<kernel>`` section; counts are static (instructions in the code, not executed).

    Attributes:
        name: the kernel (section name without ``.text.``).
        instructions: instructions in the section, NOPs (alignment padding) excluded.
        opcode_counts: base opcode (text before the first '.') → count, NOPs included.
        spill_loads: LDL instructions (loads from thread-local memory: spill refills or local arrays).
        spill_stores: STL instructions (stores to thread-local memory).
        setmaxnreg: ``(action, registers per thread)`` of each USETMAXREG in address order, e.g.
            ``("DEALLOC", 32)``, ``("TRY_ALLOC", 232)``.
        tma_counts: UTMA* / UBLK* opcode → count (TMA and bulk copies, sm_90+).
        matrix_counts: matrix instruction opcode → count (HMMA, HGMMA, UTCHMMA, ...).
    """

    name: str
    instructions: int
    opcode_counts: Mapping[str, int] = field(repr=False)
    spill_loads: int
    spill_stores: int
    setmaxnreg: tuple[tuple[str, int], ...]
    tma_counts: Mapping[str, int]
    matrix_counts: Mapping[str, int]

    def __post_init__(self):
        for name in ("instructions", "spill_loads", "spill_stores"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"KernelSassTraits.{name} must be a non-negative int, got {value!r}")

    @property
    def matrix_families(self) -> tuple[str, ...]:
        """Matrix instruction opcodes present, sorted (``("HGMMA",)``)."""
        return tuple(sorted(self.matrix_counts))

    @property
    def has_tma(self) -> bool:
        """True when the code moves data with TMA or bulk copies (any of :data:`TMA_DATA_OPCODES`)."""
        return any(op in TMA_DATA_OPCODES for op in self.tma_counts)

    def record(self, target: str | None) -> SassFacts:
        """What a variant record keeps of this kernel (``VariantRecord.sass``): ``target`` (nvdisasm's ``.target``)
        and :meth:`to_dict`'s keys, in that order."""
        return SassFacts(target=target, **self.to_dict())

    def to_dict(self) -> dict:
        """JSON-ready summary; ``opcodes`` is ``opcode_counts`` without NOPs (a few dozen base opcodes: what
        ``compare`` reads for instruction families added or dropped)."""
        return {"instructions": self.instructions, "spill_loads": self.spill_loads,
                "spill_stores": self.spill_stores, "setmaxnreg": [list(s) for s in self.setmaxnreg],
                "tma": dict(self.tma_counts), "has_tma": self.has_tma, "matrix": dict(self.matrix_counts),
                "matrix_families": list(self.matrix_families),
                "opcodes": {op: n for op, n in sorted(self.opcode_counts.items()) if op != "NOP"}}


@dataclass(frozen=True)
class SassTraits:
    """SASS traits of every kernel in a cubin. ``target``: nvdisasm's ``.target`` line (``"sm_90a"``)."""

    target: str | None
    kernels: tuple[KernelSassTraits, ...]

    def to_dict(self) -> dict:
        """JSON-ready form for the variant record's ``sass`` field: ``{"target", "kernels": {name: {...}}}``."""
        return {"target": self.target, "kernels": {k.name: k.to_dict() for k in self.kernels}}

    def kernel(self, name: str | None = None) -> KernelSassTraits:
        """The kernel called ``name``; with ``name=None``, the only one.

        Raises:
            CubinError: no such kernel, or ``name=None`` and there are zero or several.
        """
        names = [k.name for k in self.kernels]
        if name is None and len(self.kernels) == 1:
            return self.kernels[0]
        for k in self.kernels:
            if k.name == name:
                return k
        wanted = "pass the kernel name to choose one" if name is None else f"no kernel {name!r}"
        raise CubinError(f"{wanted}; the cubin's code sections are: {', '.join(names) or 'none'}")


def find_nvdisasm(nvdisasm: str | os.PathLike | None = None) -> str:
    """Path of the nvdisasm to run: ``nvdisasm`` if given, else the pip wheel's, else the one on PATH.

    Raises:
        ToolchainError: the given path is not an executable file, or no nvdisasm is installed.
    """
    if nvdisasm is not None:
        path = os.fspath(nvdisasm)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise ToolchainError(f"nvdisasm {path!r} is not an executable file; pass the path of nvdisasm or "
                                 "leave nvdisasm=None to use `pip install nvidia-cuda-nvdisasm`")
        return path
    found = _pip_binary("nvidia-cuda-nvdisasm", "nvdisasm") or shutil.which("nvdisasm")
    if found is None:
        raise ToolchainError("nvdisasm not found (not in the nvidia-cuda-nvdisasm wheel, not on PATH); "
                             "install it with `pip install nvidia-cuda-nvdisasm`")
    return found


def have_nvdisasm() -> bool:
    """Whether :func:`find_nvdisasm` finds one (the SASS traits are read by default when it does)."""
    try:
        find_nvdisasm()
        return True
    except ToolchainError:
        return False


def _pip_binary(distribution: str, program: str) -> str | None:
    """``bin/<program>`` shipped by an installed wheel (``nvidia/cu13/bin/...`` for CUDA 13), or None."""
    try:
        files = metadata.distribution(distribution).files or ()
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == program and f.parent.name == "bin":
            path = str(f.locate())
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


def sass_traits(cubin: bytes | str | os.PathLike, nvdisasm: str | os.PathLike | None = None) -> SassTraits:
    """Disassemble ``cubin`` (bytes, or a path) and return the traits of each kernel.

    Raises:
        CubinError: the input is not a cubin, or nvdisasm finds it damaged (:func:`nvdisasm_failure`).
        ToolchainError: nvdisasm is missing, cannot decode the cubin's architecture, or takes longer than
            NVDISASM_TIMEOUT_S.
    """
    from tileprobe.model.cubin import _check_header

    tool = find_nvdisasm(nvdisasm)
    if isinstance(cubin, (bytes, bytearray, memoryview)):
        data, src = bytes(cubin), "the cubin"
    else:
        src = os.fspath(cubin)
        try:
            with open(src, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise CubinError(f"{src}: cannot read the cubin ({exc.strerror or exc}); check the path") from exc
    _check_header(data, src)
    return parse_nvdisasm(_disassemble(tool, data, src, FACTS_OPTIONS))


def disassemble(cubin: bytes, nvdisasm: str | os.PathLike | None = None) -> str:
    """The text of ``nvdisasm -c`` for ``cubin`` (every kernel section).

    Raises:
        CubinError: not a cubin. ToolchainError: nvdisasm missing, failing or too slow.
    """
    from tileprobe.model.cubin import _check_header
    _check_header(cubin, "the cubin")
    return _disassemble(find_nvdisasm(nvdisasm), cubin, "the cubin")


def _disassemble(tool: str, data: bytes, src: str, options: tuple[str, ...] = ("-c",)) -> str:
    with tempfile.TemporaryDirectory(prefix="tileprobe-sass-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(data)
        try:
            proc = subprocess.run([tool, *options, path], capture_output=True, text=True, errors="replace",
                                  timeout=NVDISASM_TIMEOUT_S)   # a symbol name that is no UTF-8 (hostile test 9)
        except subprocess.TimeoutExpired as exc:
            raise ToolchainError(f"{tool} took over {NVDISASM_TIMEOUT_S} s on {src}; try again, or pass "
                                 "another nvdisasm") from exc
        except OSError as exc:
            raise ToolchainError(f"cannot run {tool} ({exc.strerror or exc}); reinstall it with "
                                 "`pip install --force-reinstall nvidia-cuda-nvdisasm`") from exc
    if proc.returncode != 0:
        raise nvdisasm_failure(tool, src, proc.returncode, proc.stderr)
    return proc.stdout


#: nvdisasm's words when it does not know the cubin's architecture (13.4.92: "nvdisasm fatal : Cannot decode
#: architecture 'SM250a'"); anything else it prints on failure is about the file itself.
_UNKNOWN_ARCH = re.compile(r"Cannot decode architecture|[Uu]nsupported (?:architecture|arch|target)|"
                           r"[Uu]nknown (?:architecture|arch|SM)")


def nvdisasm_failure(tool: str, src: str, returncode: int, stderr: str) -> TileprobeError:
    """The error for nvdisasm exiting ``returncode`` on ``src``: a :class:`ToolchainError` saying to upgrade nvdisasm
    only when it says it cannot decode the architecture; otherwise a :class:`CubinError` (a damaged cubin: "Illegal
    instruction found", "is an invalid ELF file" …) with nvdisasm's own first distinct lines."""
    lines: list[str] = []
    for line in (stderr or "").splitlines():
        line = line.strip()
        if line and line not in lines:
            lines.append(line)
    shown = "; ".join(lines[:3]) + (f" (+{len(lines) - 3} more lines)" if len(lines) > 3 else "")
    if _UNKNOWN_ARCH.search(stderr or ""):
        return ToolchainError(f"{tool} cannot decode the architecture of {src} (exit {returncode}): {shown}; an "
                              "nvdisasm older than the cubin's architecture cannot read it: "
                              "`pip install -U nvidia-cuda-nvdisasm`")
    return CubinError(f"{tool} could not decode {src} (exit {returncode}): {shown or 'no message'}; it knows the "
                      "architecture, so either the cubin is damaged (a copied or edited file: recompile it) or this "
                      "nvdisasm cannot decode an instruction the compiler emitted (a cubin tileiras just wrote: try "
                      "another nvdisasm release, and report the cubin to NVIDIA); the cubin's ELF facts (threads, "
                      "registers, shared memory, stack) do not depend on nvdisasm")


def parse_nvdisasm(listing: str) -> SassTraits:
    """Traits from the text of ``nvdisasm -c`` (exposed for tests and for stored listings)."""
    target = re.search(r"^\s*\.target\s+(\S+)", listing, re.M)
    sections: dict[str, list[tuple[str, str, str]]] = {}
    current = None
    for line in listing.splitlines():
        m = _SECTION.match(line)
        if m:
            current = sections.setdefault(m.group(1), [])
            continue
        m = _INSTRUCTION.match(line)
        if m and current is not None:
            current.append((m.group(1), m.group(2), m.group(3)))   # opcode, modifiers, operands
    kernels = tuple(_kernel_traits(name, ins) for name, ins in sorted(sections.items()))
    return SassTraits(target=target.group(1) if target else None, kernels=kernels)


def _kernel_traits(name: str, instructions: list[tuple[str, str, str]]) -> KernelSassTraits:
    counts = Counter(op for op, _, _ in instructions)
    maxnreg = []
    for op, modifiers, operands in instructions:
        if op == "USETMAXREG":
            value = re.findall(r"0x[0-9a-fA-F]+|\b\d+\b", operands)
            action = modifiers.split(".")[1] if modifiers else ""
            if value:
                maxnreg.append((action, int(value[-1], 0)))
    return KernelSassTraits(
        name=name, instructions=sum(counts.values()) - counts["NOP"], opcode_counts=dict(counts),
        spill_loads=counts["LDL"], spill_stores=counts["STL"], setmaxnreg=tuple(maxnreg),
        tma_counts={op: n for op, n in sorted(counts.items()) if _TMA.fullmatch(op)},
        matrix_counts={op: n for op, n in sorted(counts.items()) if _MATRIX.fullmatch(op)})


def sass_facts(cubin: bytes, symbol: str) -> tuple[SassFacts, RegisterPool | None]:
    """What a variant record keeps of the SASS: ``(sass, register_pool)``, the target and the traits of kernel
    ``symbol`` (the only kernel when no kernel has that name; :meth:`KernelSassTraits.record`) and its register-pool
    check (:func:`register_pool`), or ``(SassFacts(error=…), None)`` when nvdisasm is missing or fails. Both fresh
    compiles (in the worker, through :func:`sass_summary`) and the store's back-filled records use this."""
    try:
        from tileprobe.model.cubin import _check_header
        _check_header(cubin, "the cubin")
        return facts_from_listing(cubin, symbol, _disassemble(find_nvdisasm(), cubin, "the cubin", FACTS_OPTIONS))
    except TileprobeError as e:
        return SassFacts(error=str(e)), None


def facts_from_listing(cubin: bytes, symbol: str, listing: str) -> tuple[SassFacts, RegisterPool]:
    """:func:`sass_facts` from a listing already made (``nvdisasm`` with :data:`FACTS_OPTIONS`, or one
    :mod:`tileprobe.model.sass_batch` put together in that form): the traits of kernel ``symbol`` (the only kernel
    when none has that name) and its register-pool check.

    Raises:
        CubinError: the cubin has several kernels and none is called ``symbol``.
    """
    traits = _traits_of(listing)
    names = [k.name for k in traits.kernels]
    kernel = traits.kernel(symbol if symbol in names else None)
    return kernel.record(traits.target), register_pool(cubin, listing, kernel.name, traits.target)


def sass_summary(cubin: bytes, symbol: str) -> dict:
    """:func:`sass_facts` as the compile worker sends it over its pipe (``CompileResult.sass``): the ``sass``
    object with the ``register_pool`` object as its last key (none after an ``error``); :func:`split_register_pool`
    makes the records again in the parent."""
    sass, pool = sass_facts(cubin, symbol)
    return sass.to_dict() if pool is None else {**sass.to_dict(), "register_pool": pool.to_dict()}


def tma_data_ops(r: VariantRecord) -> int | None:
    """TMA / bulk-copy *data* instructions (:data:`TMA_DATA_OPCODES`) in a variant record's SASS summary
    (:func:`sass_summary`); None when the record has no SASS traits."""
    sass = r.sass or SassFacts()
    if "tma" not in sass:
        return None
    return sum(n for op, n in (sass.tma or {}).items() if op in TMA_DATA_OPCODES)


def register_pool(cubin: bytes, listing: str, kernel: str, target: str | None) -> RegisterPool:
    """The register-pool check of ``kernel`` (:func:`tileprobe.model.regpool.check_listing`) as the record keeps
    it, with the launch count and CTA shape read from the cubin; ``RegisterPool(verdict="unknown", reason=…)`` when
    the cubin's facts cannot be read."""
    from tileprobe.model.cubin import CubinInfo
    try:
        info = CubinInfo.from_bytes(cubin)
        k = info.kernel(kernel) if any(x.name == kernel for x in info.kernels) else info.kernel()
    except CubinError as e:
        return RegisterPool(verdict=UNKNOWN, reason=f"the cubin's launch facts cannot be read: {e}")
    try:
        unit = get_arch(target or info.target).reg_alloc_unit
    except TileprobeError:
        unit = 256   # every arch tileprobe has limits for allocates registers in 256-register units per warp
    return _pool_check(listing, kernel, k.regs_per_thread, k.threads_per_cta, tuple(k.reqntid), unit).record()


#: Listings whose traits and register-pool checks are kept (:func:`_traits_of`, :func:`_pool_check`): an audit's
#: variants whose hint values leave the machine code alone have one listing (27 of the 127 sm_120 cubins of
#: ``examples/*.py`` repeat one, 2026-12-05); a listing is tens to hundreds of KB.
LISTINGS_KEPT = 32


@functools.lru_cache(maxsize=LISTINGS_KEPT)
def _traits_of(listing: str) -> SassTraits:
    """:func:`parse_nvdisasm`, once per listing (the caller makes records from it, never changes it)."""
    return parse_nvdisasm(listing)


@functools.lru_cache(maxsize=LISTINGS_KEPT)
def _pool_check(listing: str, kernel: str, registers: int, threads: int, reqntid: tuple[int, ...], unit: int):
    """:func:`tileprobe.model.regpool.check_listing`, once per listing and launch facts (a pure function of
    them; the caller makes a record from it, never changes it)."""
    return check_listing(listing, kernel, registers, threads, reqntid, unit)


def ptx_has_setmaxnreg(cubin: bytes, symbol: str = "") -> bool | None:
    """Whether the PTX tileiras embedded in ``cubin`` (``.nv_debug_ptx_txt``) has a ``setmaxnreg``; None when that
    cannot be told: no PTX, a cubin that cannot be read, or a PTX that does not look whole (empty, bytes that are
    not text, no ``.version`` / ``.target`` / ``.entry`` of ``symbol`` (the kernel; any entry when empty),
    unbalanced braces: cut short, damaged or another kernel's). ptxas writes
    SASS ``USETMAXREG`` only for a PTX ``setmaxnreg`` (the PTX ISA's only way to ask for it): on the cubins of
    ``tests/data`` and 84 compiled for sm_90/100/120 the PTX's count equals the SASS's (2026-12-03). The search
    ignores case and white space (the section's lines are NUL-separated, read as new lines). Never raises."""
    from tileprobe.model.cubin import embedded_ptx
    try:
        ptx = embedded_ptx(cubin)
    except Exception:
        return None
    if not ptx or "\ufffd" in ptx or not _whole_ptx(ptx, symbol):
        return None
    return "setmaxnreg" in re.sub(r"\s+", "", ptx).lower()   # its lines are NUL-separated: a NUL inside the word too


def _whole_ptx(ptx: str, symbol: str = "") -> bool:
    """A PTX module that looks complete: ``.version``, ``.target``, an ``.entry`` (of ``symbol`` when given: the
    cubin's kernel), and its braces balanced."""
    entry = f".entry {symbol}" if symbol else ".entry"
    return (".version" in ptx and ".target" in ptx and entry in ptx
            and ptx.count("{") == ptx.count("}") > 0)


def machine_code_may_setmaxnreg(cubin: bytes) -> bool | None:
    """Whether the cubin's kernel code may hold a USETMAXREG, read from the instruction words alone (any word with
    :data:`tileprobe.model.sass_gate.USETMAXREG_LOW12`): True when one has them; False when none has and the
    architecture is one of :data:`tileprobe.model.sass_gate.CHECKED_ARCHS` (there a scan that finds none is an
    answer); None otherwise (another architecture, or a cubin that cannot be read). The gate's
    second signal, beside the PTX: it catches a PTX section that lost its ``setmaxnreg`` or belongs to another
    kernel. About 10 ms for a 1 MB cubin. Never raises."""
    try:
        from tileprobe.model.cubin import CubinInfo, cubin_sections  # the reader's checks: inflation bounded
        arch = CubinInfo.from_bytes(cubin).arch
        from tileprobe.model.sass_gate import CHECKED_ARCHS, has_usetmaxreg_bits
        if any(sec.name.startswith(".text.") and has_usetmaxreg_bits(sec.data) for sec in cubin_sections(cubin)):
            return True
        return False if arch in CHECKED_ARCHS else None
    except Exception:
        return None


def gated_summary(cubin: bytes, symbol: str) -> dict:
    """:func:`sass_summary` where the register-pool check may need the SASS (:func:`ptx_has_setmaxnreg` is not
    False, or :func:`machine_code_may_setmaxnreg` is True) and no ``setmaxnreg`` is known to stay within the launch
    allocation (:func:`tileprobe.model.sass_gate.no_grow_pool`: its verdict ``pool_ok``); else only that check's
    verdict, ``none``, read from the PTX and the instruction words (:data:`SASS_GATE`). In both shortcuts no
    nvdisasm runs."""
    if ptx_has_setmaxnreg(cubin, symbol) is not False or machine_code_may_setmaxnreg(cubin) is True:
        from tileprobe.model.sass_gate import no_grow_pool
        ok = no_grow_pool(cubin, symbol, GATE_VERSION)
        return sass_summary(cubin, symbol) if ok is None else {"register_pool": ok.to_dict()}
    from tileprobe.model.regpool import MODEL_VERSION, NONE
    pool = RegisterPool(verdict=NONE, model_version=MODEL_VERSION,
                        reason="no setmaxnreg in the embedded PTX, no USETMAXREG bits in the instruction words, so "
                               "no USETMAXREG in the SASS (the SASS was not read: `tileprobe audit` reads it)",
                        gate_version=GATE_VERSION)
    return {"register_pool": pool.to_dict()}


def split_register_pool(summary: dict | None) -> tuple[SassFacts | None, RegisterPool | None]:
    """``(sass, register_pool)`` as the record keeps them (``VariantRecord.sass``, ``.register_pool``) from
    :func:`sass_summary`'s dict (the compile worker's pipe form): the summary without its ``register_pool`` entry,
    and that entry. None (not read) stays None."""
    if summary is None:
        return None, None
    sass = dict(summary)
    pool = sass.pop("register_pool", None)
    return (SassFacts.from_dict(sass) if sass else None), keyed_from_dict(RegisterPool, pool)
