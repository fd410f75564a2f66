"""The register-pool gate's no-grow rule (:mod:`tileprobe.model.sass_gate`): setmaxnreg read from the instruction
words and the embedded PTX, checked against nvdisasm and the SASS walk on every cubin of tests/data, and refused
(the SASS is read) wherever the two signals disagree or a word does not decode."""
import io
import struct
from pathlib import Path

import pytest

from tests.support_sass import CUBINS, needs_nvdisasm
from tileprobe.model.cubin import CubinInfo, cubin_sections, embedded_ptx
from tileprobe.model.regpool import POOL_OK, launch_allocation
from tileprobe.model.sass import (
    FACTS_OPTIONS,
    gated_summary,
    parse_nvdisasm,
    register_pool,
    split_register_pool,
)
from tileprobe.model.sass_gate import CHECKED_ARCHS, DEALLOC, TRY_ALLOC, no_grow_pool, ptx_setmaxnreg, word_setmaxnreg

DATA = Path(__file__).resolve().parent / "data"
DEC_ONLY = DATA / "cubins" / "matmul_sm_90.cubin"                     # three DEALLOC, no TRY_ALLOC
GROWS = DATA / "cubins" / "matmul_occ4_sm_90.cubin"                   # TRY_ALLOC 224 over a launch of 128
HANG = DATA / "regpool" / "rms_norm_large_13.3.36_tma_off_occ16_sm_90.cubin"


def _kernel(data: bytes):
    info = CubinInfo.from_bytes(data)
    return info, info.kernels[0]


def _code(data: bytes, name: str) -> bytes:
    return next(s.data for s in cubin_sections(data) if s.name == f".text.{name}")


@needs_nvdisasm
def test_the_words_give_the_setmaxnreg_nvdisasm_gives_on_every_cubin(nvdisasm_listing):
    """On sm_90, sm_100 and sm_120 the decoded (action, count) list equals nvdisasm's, address order kept; the PTX's
    list is the same multiset; elsewhere nothing is claimed. At least ten cubins of tests/data have setmaxnreg."""
    with_setmaxnreg = 0
    for path in CUBINS:
        data = path.read_bytes()
        info, k = _kernel(data)
        if info.arch not in CHECKED_ARCHS or len(info.kernels) != 1:
            continue
        traits = parse_nvdisasm(nvdisasm_listing(path, FACTS_OPTIONS))
        listed = list(next(t for t in traits.kernels if t.name == k.name).setmaxnreg)
        assert word_setmaxnreg(_code(data, k.name)) == listed, path
        ptx = embedded_ptx(data)
        if ptx is not None and listed:
            assert sorted(ptx_setmaxnreg(ptx, k.name)) == sorted(listed), path
        with_setmaxnreg += bool(listed)
    assert with_setmaxnreg >= 10


@needs_nvdisasm
def test_the_gate_says_pool_ok_exactly_where_no_setmaxnreg_grows_and_the_walk_agrees(nvdisasm_listing):
    """Over every cubin: the gate answers (pool_ok) only where the walk says pool_ok, and it answers wherever the
    SASS has setmaxnreg none of which asks above the launch allocation (the dec-only matmuls, at least four)."""
    answered = 0
    for path in CUBINS:
        data = path.read_bytes()
        info, k = _kernel(data)
        listing = nvdisasm_listing(path, FACTS_OPTIONS)
        walk = register_pool(data, listing, k.name, info.target)
        gate = no_grow_pool(data, k.name, 3)
        listed = [s for t in parse_nvdisasm(listing).kernels if t.name == k.name for s in t.setmaxnreg]
        launch = launch_allocation(k.regs_per_thread)
        no_grow = bool(listed) and all(a == DEALLOC or n <= launch for a, n in listed)
        if gate is not None:
            assert walk.verdict == POOL_OK and gate.verdict == POOL_OK and gate.gate_version == 3, path
            answered += 1
        assert (gate is not None) == (no_grow and info.arch in CHECKED_ARCHS and embedded_ptx(data) is not None), path
    assert answered >= 4


def test_a_dec_only_kernel_gets_pool_ok_without_nvdisasm(monkeypatch):
    from tileprobe.model import sass as sass_mod
    monkeypatch.setattr(sass_mod, "sass_summary", lambda *a: pytest.fail("nvdisasm was run"))
    data = DEC_ONLY.read_bytes()
    _, k = _kernel(data)
    sass, pool = split_register_pool(gated_summary(data, k.name))
    assert sass is None and pool.verdict == POOL_OK and pool.gate_version == 3
    assert pool.registers_per_thread == k.regs_per_thread and pool.threads == k.threads_per_cta
    assert "3 DEALLOC, 0 TRY_ALLOC" in pool.reason and "the SASS was not read" in pool.reason


@needs_nvdisasm
def test_a_kernel_that_grows_or_hangs_still_has_its_sass_read():
    for path in (GROWS, HANG):
        data = path.read_bytes()
        assert no_grow_pool(data, _kernel(data)[1].name, 3) is None
        sass, _ = split_register_pool(gated_summary(data, _kernel(data)[1].name))
        assert sass is not None and sass.setmaxnreg, path


def _patched(data: bytes, name: str, patch) -> bytes:
    """``data`` with section ``name``'s bytes replaced by ``patch(old)`` (same length)."""
    from elftools.elf.elffile import ELFFile
    sec = next(s for s in ELFFile(io.BytesIO(data)).iter_sections() if s.name == name)
    new = patch(bytes(sec.data()))
    assert len(new) == sec["sh_size"]
    out = bytearray(data)
    out[sec["sh_offset"]:sec["sh_offset"] + len(new)] = new
    return bytes(out)


def _usetmaxreg_at(code: bytes) -> list[int]:
    return [at for at in range(0, len(code) - 15, 16) if code[at] == 0xC8 and code[at + 1] & 0x0F == 0x09]


def _second_word(code: bytes, at: int, value: int) -> bytes:
    out = bytearray(code)
    struct.pack_into("<Q", out, at + 8, value)
    return bytes(out)


@pytest.mark.parametrize("what", ["try-alloc-224", "unknown-action", "count-off-steps", "predicate-written"])
def test_a_word_that_grows_or_does_not_decode_makes_the_gate_read_the_sass(what):
    """One DEALLOC of the dec-only matmul made a TRY_ALLOC asking 224 (above its launch allocation), given an action
    field no cubin showed, a count off the PTX ISA's steps, or a written predicate: no pool_ok from the gate."""
    data = DEC_ONLY.read_bytes()
    name = _kernel(data)[1].name
    section = f".text.{name}"
    at = _usetmaxreg_at(_code(data, name))[0]

    def patch(code: bytes) -> bytes:
        first, second = struct.unpack_from("<QQ", code, at)
        if what == "try-alloc-224":
            code = _second_word(code, at, (second & ~0xF00 & ~(0x7 << 17)) | 0x600)
            return code[:at] + struct.pack("<Q", (first & ~(0xFFFF << 32)) | (224 << 32)) + code[at + 8:]
        if what == "unknown-action":
            return _second_word(code, at, (second & ~0xF00) | 0x700)
        if what == "count-off-steps":
            return code[:at] + struct.pack("<Q", (first & ~(0xFFFF << 32)) | (33 << 32)) + code[at + 8:]
        return _second_word(code, at, second & ~(0x7 << 17))
    bad = _patched(data, section, patch)
    assert no_grow_pool(bad, name, 3) is None
    if what == "try-alloc-224":
        assert word_setmaxnreg(_code(bad, name))[0] == (TRY_ALLOC, 224)


@pytest.mark.parametrize("edit", [
    lambda t: t.replace("setmaxnreg.dec.sync.aligned.u32 \t32;", "setmaxnreg.inc.sync.aligned.u32 \t32;", 1),
    lambda t: t.replace("setmaxnreg.dec.sync.aligned.u32 \t32;", "setmaxnreg.dec.sync.aligned.u32 \t%r1;", 1),
    lambda t: t + "\n.entry other()\n{\n}\n",
], ids=["inc-where-the-words-say-dealloc", "register-count", "two-entries"])
def test_a_ptx_that_disagrees_with_the_words_makes_the_gate_read_the_sass(edit):
    ptx = embedded_ptx(DEC_ONLY.read_bytes())
    assert ptx is not None
    assert ptx_setmaxnreg(ptx, _kernel(DEC_ONLY.read_bytes())[1].name) == [(DEALLOC, 32)] * 3
    assert ptx_setmaxnreg(edit(ptx)) is None or sorted(ptx_setmaxnreg(edit(ptx))) != [(DEALLOC, 32)] * 3


def test_another_kernels_ptx_or_another_symbol_makes_the_gate_read_the_sass():
    data = DEC_ONLY.read_bytes()
    name = _kernel(data)[1].name
    ptx = embedded_ptx(data)
    assert ptx_setmaxnreg(ptx, "vec_add_other") is None
    assert no_grow_pool(data, "vec_add_other", 3) is None
    assert no_grow_pool(data, name, 3) is not None


def test_the_gate_never_raises_on_damaged_cubins():
    import random
    base = DEC_ONLY.read_bytes()
    rng = random.Random(11)
    answers = set()
    for _ in range(200):
        d = bytearray(base)
        for _ in range(8):
            d[rng.randrange(len(d))] = rng.randrange(256)
        pool = no_grow_pool(bytes(d), "", 3)
        answers.add(None if pool is None else pool.verdict)
    assert answers <= {None, POOL_OK}
    assert no_grow_pool(b"garbage", "", 3) is None and no_grow_pool(base[:1000], "", 3) is None


def _first_usetmaxreg(data: bytes) -> tuple[str, int]:
    name = _kernel(data)[1].name
    return f".text.{name}", _usetmaxreg_at(_code(data, name))[0]


@pytest.mark.parametrize("base", [DEC_ONLY, DATA / "cubins" / "vec_add_sm_90.cubin"], ids=["dec-only", "none"])
def test_a_usetmaxreg_with_its_count_in_a_register_makes_the_gate_read_the_sass(base):
    """Hostile test (session 17): nvdisasm also decodes opcode 0x3c8 as USETMAXREG (``TRY_ALLOC.CTAPOOL UP0, UR32``,
    the count in a uniform register). Written over an instruction of the dec-only matmul the gate said pool_ok, and
    over vec_add's the old rule said none; the walk says unknown. Both rules now see it."""
    from tileprobe.model.sass import machine_code_may_setmaxnreg
    data = base.read_bytes()
    name = _kernel(data)[1].name
    forged = bytes.fromhex("c8730000e00000000006000800640e00")
    bad = _patched(data, f".text.{name}", lambda code: code[:0x10] + forged + code[0x20:])
    assert machine_code_may_setmaxnreg(bad) is True
    assert no_grow_pool(bad, name, 3) is None
    assert word_setmaxnreg(_code(bad, name)) is None


@pytest.mark.parametrize("bit", [91, 72, 12, 48])
def test_a_usetmaxreg_word_with_a_bit_the_gate_does_not_know_makes_it_read_the_sass(bit):
    """Hostile test (session 17): flipping bit 91 of a DEALLOC (nvdisasm: 'Unrecognized operation') still decoded as
    DEALLOC. Every bit of the two words but the count and the scheduling bits (96–127) must be as tileiras writes
    them: a guard predicate (bits 12–15), a bit above the count (48), bits of the second word's low half."""
    data = DEC_ONLY.read_bytes()
    section, at = _first_usetmaxreg(data)
    name = _kernel(data)[1].name

    def flip(code: bytes) -> bytes:
        out = bytearray(code)
        out[at + bit // 8] ^= 1 << (bit % 8)
        return bytes(out)
    assert no_grow_pool(_patched(data, section, flip), name, 3) is None


def test_the_scheduling_bits_of_a_usetmaxreg_do_not_matter_to_the_gate():
    """Bits 96–127 (stall counts, barriers, reuse) differ between the USETMAXREGs of one cubin; the gate ignores them."""
    data = DEC_ONLY.read_bytes()
    section, at = _first_usetmaxreg(data)
    name = _kernel(data)[1].name
    changed = _patched(data, section, lambda code: code[:at + 12] + bytes([0x00, 0x40, 0x1E, 0x00]) + code[at + 16:])
    assert no_grow_pool(changed, name, 3) is not None


def test_an_elf_header_naming_another_architecture_makes_the_gate_read_the_sass():
    """Hostile test (session 17): the dec-only sm_90 matmul with e_flags edited to sm_100 was decoded as sm_100 words
    (pool_ok) where nvdisasm refuses it. The PTX's .target must name the ELF header's architecture."""
    data = bytearray(DEC_ONLY.read_bytes())
    flags = struct.unpack_from("<I", data, 0x30)[0]
    struct.pack_into("<I", data, 0x30, (flags & ~0xFF00) | (100 << 8))
    assert CubinInfo.from_bytes(bytes(data)).arch == "sm_100"
    assert no_grow_pool(bytes(data), _kernel(bytes(data))[1].name, 3) is None


@pytest.mark.parametrize("comment", [b"//.target sm_90", b"/*.target sm_90*/"])
def test_a_target_in_a_ptx_comment_does_not_stand_for_the_directive(comment):
    """Hostile test (session 17): an sm_100 cubin with e_flags set to sm_90 and ``//.target sm_90`` written before
    its real ``.target sm_100a`` got pool_ok (nvdisasm cannot decode it). Comments are left out, and exactly one
    ``.target`` must remain."""
    data = bytearray((DATA / "cubins" / "matmul_sm_100.cubin").read_bytes())
    flags = struct.unpack_from("<I", data, 0x30)[0]
    struct.pack_into("<I", data, 0x30, (flags & ~0xFF00) | (90 << 8))
    at = bytes(data).index(b"\x00" * 8 + b".version 9.4\x00.target sm_100a")   # the real .target stays
    data[at:at + 21] = comment.ljust(21, b"\x00")
    assert CubinInfo.from_bytes(bytes(data)).arch == "sm_90"
    assert no_grow_pool(bytes(data), "", 3) is None
