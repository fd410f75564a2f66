"""The register-pool gate's second rule: a kernel whose every ``setmaxnreg`` asks for no more than its launch
allocation cannot wait on the CTA's register pool, and that can be read without nvdisasm.

Why: ``tileprobe tune`` reads the SASS before a launch only for the register-pool check (:data:`SASS_GATE`), and
nvdisasm costs 0.4–0.8 s per cubin on the 2-core machine (0.74 s for the 982-KB cubin of the launch-bound RMSNorm's
occupancy-1 TMA variant, 2026-12-06), often the last step of a tune's slowest compile. Most warp-specialised
kernels only *release* registers (``setmaxnreg.dec``: TileGym's matmul on sm_90, that RMSNorm at occupancy 1), and
the check's rule for them needs no walk: a ``USETMAXREG.TRY_ALLOC`` is the only instruction that waits on the pool
(PTX ISA, "setmaxnreg": ``.inc`` "blocks" until the pool has the registers), and one that asks for no more than the
launch allocation is no grow (:func:`tileprobe.model.regpool.check_register_pool`: ``pool_ok``, "no reachable
USETMAXREG asks for more than the launch allocation").

Two signals must agree, each read from the cubin alone, or the gate reads the SASS as before:

* **The embedded PTX** (``.nv_debug_ptx_txt``): one ``.entry``, and every ``setmaxnreg`` written
  ``setmaxnreg.inc|dec.sync.aligned.u32 N`` with a literal count (the PTX ISA's only form).
* **The instruction words** of the kernel's ``.text.<kernel>`` section: each 128-bit instruction whose first
  64-bit word has a USETMAXREG opcode in its low 12 bits (:data:`USETMAXREG_LOW12`) decodes to an action and a
  count, in the encoding read with ``nvdisasm -hex`` on every such cubin of tests/data (sm_90, sm_100, sm_120;
  tileiras 13.3.36 and 13.4.92) and on the RMSNorm's (2026-12-06): the count (registers per thread) in bits 32–47
  of the first word; in the second word, bits 8–11 are 6 for ``TRY_ALLOC`` and 5 for ``DEALLOC``, whose bits 17–19
  are 7 (no predicate written). Every other bit but the scheduling ones (96–127) must be as tileiras writes it
  (:func:`word_setmaxnreg`); any other word is not decoded, and the SASS is read.

The PTX's (action, count) list must equal the words' as multisets (``.inc`` ↔ TRY_ALLOC, ``.dec`` ↔ DEALLOC),
every count a multiple of 8 in 24…256, and no TRY_ALLOC may ask for more than the launch allocation (the cubin's
EIATTR_REGCOUNT rounded up to the architecture's per-warp allocation unit, as the walk rounds it). Only then is the
verdict ``pool_ok`` without the SASS; the walk would say the same, since it counts only the reachable subset of the
same instructions (``tests/test_sass_gate.py`` checks both on every cubin of tests/data).
"""
from __future__ import annotations

import re
from collections import Counter

from tileprobe.model.regpool import COUNT_STEP, MAX_COUNT, MIN_COUNT, MODEL_VERSION, POOL_OK, launch_allocation
from tileprobe.records import RegisterPool

__all__ = ["DEALLOC", "TRY_ALLOC", "USETMAXREG_LOW12", "has_usetmaxreg_bits", "no_grow_pool", "ptx_setmaxnreg",
           "word_setmaxnreg"]

TRY_ALLOC, DEALLOC = "TRY_ALLOC", "DEALLOC"
#: The low 12 bits of a 128-bit instruction's first 64-bit word that nvdisasm 13.4 decodes as USETMAXREG on sm_90:
#: 0x9c8 (an immediate count: the only form tileiras writes, every such cubin of tests/data and an sm_90 audit's
#: 149 cubins, 2026-12-06) and 0x3c8 (the count in a uniform register, ``USETMAXREG.TRY_ALLOC.CTAPOOL UP0, UR32``:
#: found by the hostile tester, session 17, by trying every value of the two low bytes). A word with either is a
#: USETMAXREG to every rule of the gate (:func:`has_usetmaxreg_bits`); only the first form is decoded.
USETMAXREG_LOW12 = (0x9C8, 0x3C8)
#: The first word of a USETMAXREG the gate decodes, the count (bits 32–47) left out: opcode 0x9c8, no guard
#: predicate (PT, bits 12–15 = 7), every other bit zero.
_FIRST_WORD = 0x79C8
_FIRST_MASK = ~(0xFFFF << 32) & (2**64 - 1)
#: The low 32 bits of the second word (the high 32 are the scheduling bits: stall counts, barriers, reuse, which
#: vary): DEALLOC with no predicate written; TRY_ALLOC writing UP0–UP6 (bits 17–19), as tests/data's cubins show.
_DEALLOC_LOW = 0x080E0500
_TRY_ALLOC_LOW = 0x08000600
_TRY_ALLOC_MASK = 0xFFF1FFFF
#: The architectures whose cubins showed this encoding (tests/data): elsewhere the gate reads the SASS, and a scan of
#: the words that finds no USETMAXREG is no answer (:func:`tileprobe.model.sass.machine_code_may_setmaxnreg`).
CHECKED_ARCHS = frozenset({"sm_90", "sm_100", "sm_120"})
_PTX_FORM = re.compile(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32(\d+);")


def has_usetmaxreg_bits(code: bytes) -> bool:
    """Any 16-byte instruction of ``code`` whose first 64-bit word has one of :data:`USETMAXREG_LOW12` in its low
    12 bits (byte 0 and byte 1's low nibble; strided slices: C speed on a 64 MiB section)."""
    low, high = code[0::16], code[1::16]
    for opcode in USETMAXREG_LOW12:
        byte0, nibble = opcode & 0xFF, opcode >> 8
        start = 0
        while (i := low.find(bytes([byte0]), start)) >= 0:
            if i < len(high) and high[i] & 0x0F == nibble and 16 * i + 15 < len(code):
                return True
            start = i + 1
    return False


def word_setmaxnreg(code: bytes) -> list[tuple[str, int]] | None:
    """``(action, registers per thread)`` of each USETMAXREG of one kernel's machine code (``.text.<kernel>``), in
    address order; None when a word with USETMAXREG's opcode bits (:data:`USETMAXREG_LOW12`) is not exactly one of
    the two forms above (the count apart): another opcode form, a guard predicate, a bit the gate does not know."""
    found = []
    for at in range(0, len(code) - 15, 16):
        if (code[at] | (code[at + 1] & 0x0F) << 8) not in USETMAXREG_LOW12:
            continue
        first = int.from_bytes(code[at:at + 8], "little")
        low = int.from_bytes(code[at + 8:at + 12], "little")
        if first & _FIRST_MASK != _FIRST_WORD:
            return None
        if low == _DEALLOC_LOW:
            action = DEALLOC
        elif low & _TRY_ALLOC_MASK == _TRY_ALLOC_LOW and (low >> 17) & 0x7 != 0x7:
            action = TRY_ALLOC
        else:
            return None
        found.append((action, (first >> 32) & 0xFFFF))
    return found


def ptx_setmaxnreg(ptx: str, entry: str = "") -> list[tuple[str, int]] | None:
    """``(action, count)`` of each ``setmaxnreg`` of a PTX module with one ``.entry`` (of the kernel ``entry`` when
    given) (``.inc`` → TRY_ALLOC, ``.dec`` → DEALLOC), in text order; None when it has several entries, another
    kernel's, or a ``setmaxnreg`` of another form. White space (the embedded section's NUL-split lines read as new
    lines) is ignored."""
    text = re.sub(r"\s+", "", ptx)
    if text.count(".entry") != 1 or f".entry{entry}" not in text:
        return None
    forms = _PTX_FORM.findall(text)
    if len(forms) != text.count("setmaxnreg"):
        return None
    return [(TRY_ALLOC if kind == "inc" else DEALLOC, int(n)) for kind, n in forms]


def no_grow_pool(cubin: bytes, symbol: str, gate_version: int) -> RegisterPool | None:
    """The register-pool verdict ``pool_ok`` read without the SASS, when the PTX and the instruction words agree
    that no ``setmaxnreg`` asks for more than the launch allocation (the module doc); None when that cannot be told
    this way (the caller reads the SASS). Never raises."""
    try:
        facts = _facts(cubin, symbol)
    except Exception:
        return None
    if facts is None:
        return None
    found, regs, launch, threads = facts
    if any(not MIN_COUNT <= n <= MAX_COUNT or n % COUNT_STEP for _, n in found):
        return None
    if any(action == TRY_ALLOC and n > launch for action, n in found):
        return None
    kinds = Counter(action for action, _ in found)
    return RegisterPool(
        verdict=POOL_OK, model_version=MODEL_VERSION, gate_version=gate_version, registers_per_thread=regs,
        threads=threads,
        reason=f"every setmaxnreg asks for at most the launch allocation ({launch} per thread): "
               f"{kinds[DEALLOC]} DEALLOC, {kinds[TRY_ALLOC]} TRY_ALLOC, read from the embedded PTX and the "
               "instruction words, which agree; none waits on the CTA's register pool (the SASS was not read: "
               "`tileprobe audit` reads it)")


def _facts(cubin: bytes, symbol: str) -> tuple[list[tuple[str, int]], int, int, int] | None:
    """(the words' setmaxnreg list, EIATTR_REGCOUNT, the launch allocation per thread, threads per CTA) of the
    cubin's one kernel, when the PTX and the words agree; else None. Raises CubinError on a damaged cubin."""
    from tileprobe.model.arch import get_arch
    from tileprobe.model.cubin import CubinInfo, cubin_sections, embedded_ptx
    info = CubinInfo.from_bytes(cubin)
    if info.arch not in CHECKED_ARCHS or len(info.kernels) != 1 or (symbol and info.kernels[0].name != symbol):
        return None
    kernel = info.kernels[0]
    code = [s.data for s in cubin_sections(cubin) if s.name == f".text.{kernel.name}"]
    ptx = embedded_ptx(cubin)
    if len(code) != 1 or not ptx or "\ufffd" in ptx or _ptx_arch(ptx) != info.arch:
        return None
    words, written = word_setmaxnreg(code[0]), ptx_setmaxnreg(ptx, kernel.name)
    if words is None or written is None or not words or Counter(words) != Counter(written):
        return None
    launch = launch_allocation(kernel.regs_per_thread, get_arch(info.target).reg_alloc_unit)
    return words, kernel.regs_per_thread, launch, kernel.threads_per_cta


def _ptx_arch(ptx: str) -> str | None:
    """The real architecture of the PTX's one ``.target`` directive (``sm_90a`` → ``sm_90``), comments left out;
    None without exactly one: it must be the ELF header's (an ``e_flags`` edited to another architecture decodes
    the words in an encoding they are not in; a ``// .target`` comment beside the real one is no directive)."""
    code = re.sub(r"/\*.*?\*/|//[^\n\0]*", "", ptx, flags=re.DOTALL)
    found = re.findall(r"\.target\s+(sm_\d+)", code)
    return found[0] if len(found) == 1 else None
