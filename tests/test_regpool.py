"""Register-pool balance of setmaxnreg: real cubins for the verdicts they show, hand-made SASS for the rest.

Real cubins (``tests/data/regpool``): examples/rms_norm_large.py compiled by tileiras 13.3.36 for sm_90 with
ALLOW_TMA=False, occupancy=16 (hung on an H200 under the watchdog, 2026-12-01) and occupancy=4 (ran); the same
kernel at occupancy=4 compiled by tileiras 13.4.92 (pip) for sm_100 (ALLOW_TMA=False) and sm_120 (both), whose
SASS spells integer adds ``IADD3 R0, PT, PT, R0, -0x5, RZ`` and ``IADD R0, R0, -0x5`` (2026-12-05).
"""
from pathlib import Path

import pytest

from tests.support_sass import needs_nvdisasm
from tileprobe.model.regpool import HANG_RISK, NONE, POOL_OK, UNKNOWN, check_listing
from tileprobe.model.sass import have_nvdisasm, register_pool, sass_summary, split_register_pool
from tileprobe.records import PoolInstruction, RegisterPool
from tileprobe.schema import POOL_NOT_CHECKED, VariantRecord

DATA = Path(__file__).resolve().parent / "data"
OCC16 = DATA / "regpool" / "rms_norm_large_13.3.36_tma_off_occ16_sm_90.cubin"
OCC4 = DATA / "regpool" / "rms_norm_large_13.3.36_tma_off_occ4_sm_90.cubin"


def _check(cubin: Path) -> RegisterPool:
    data = cubin.read_bytes()
    sass, pool = split_register_pool(sass_summary(data, ""))
    assert "register_pool" not in sass and sass.setmaxnreg
    return pool


@needs_nvdisasm
def test_occupancy_16_cubin_is_a_hang_risk():
    pool = _check(OCC16)
    assert pool.verdict == HANG_RISK
    assert (pool.registers_per_thread, pool.threads, pool.pool_registers) == (24, 256, 6144)
    assert [(i.action, i.target, i.warps, i.retry_loop) for i in pool.instructions] == [
        ("TRY_ALLOC", 32, [4], True), ("TRY_ALLOC", 32, [5, 6, 7], True)]
    assert "no reachable USETMAXREG.DEALLOC" in pool.reason and "6,144 registers" in pool.reason
    assert "0x2930" in pool.reason and "32 registers per thread" in pool.reason


@needs_nvdisasm
def test_occupancy_4_cubin_balances_its_pool():
    pool = _check(OCC4)
    assert pool.verdict == POOL_OK
    assert pool.warpgroup_counts == [96, 32]
    assert pool.demand_registers == pool.pool_registers == 64 * 256
    assert [(i.action, i.target, i.warps) for i in pool.instructions] == [
        ("TRY_ALLOC", 96, [0, 1, 2, 3]), ("DEALLOC", 32, [4]), ("DEALLOC", 32, [5, 6, 7])]


@needs_nvdisasm
def test_a_cubin_without_setmaxnreg_has_verdict_none():
    data = (DATA / "cubins" / "vec_add_sm_90.cubin").read_bytes()
    sass, pool = split_register_pool(sass_summary(data, ""))
    assert sass.setmaxnreg == [] and pool.verdict == NONE


@needs_nvdisasm
def test_matmul_producer_consumer_split_is_ok():
    """tests/data/cubins/matmul_occ4_sm_90.cubin (tileiras 13.4.92): warpgroup 0 grows to 224 past wgmma
    instructions (whose results must not be taken for the warp index), warpgroup 1's warps shrink to 32."""
    pool = _check(DATA / "cubins" / "matmul_occ4_sm_90.cubin")
    assert pool.verdict == POOL_OK and pool.warpgroup_counts == [224, 32]
    assert [i.warps for i in pool.instructions] == [[0, 1, 2, 3], [4], [5], [6, 7]]
    only_frees = _check(DATA / "cubins" / "matmul_sm_90.cubin")
    assert only_frees.verdict == POOL_OK and "never asked for more" in only_frees.reason


@needs_nvdisasm
def test_the_same_cubin_with_registers_to_spare_is_ok():
    """The occupancy-16 code launched with 32 registers per thread instead of 24: its TRY_ALLOC 32 asks for nothing
    more than the launch allocation."""
    from tileprobe.model.sass import disassemble
    data = OCC16.read_bytes()
    listing = disassemble(data)
    assert check_listing(listing, None, 32, 256, (256, 1, 1)).verdict == POOL_OK
    assert register_pool(data, listing, "nope", "sm_90a").verdict == HANG_RISK   # unknown name: the only kernel


def _listing(body: str) -> str:
    lines = [".section\t.text.k,\"ax\",@progbits"]
    for i, text in enumerate(body.strip().splitlines()):
        text = text.strip()
        lines.append(text if text.endswith(":") else f"        /*{i * 16:04x}*/   {text} ;")
    return "\n".join(lines) + "\n"


# warp w = tid.x >> 5; warpgroup 0 (warps 0-3) grows to `grow`, warpgroup 1 shrinks to `shrink`
_SPLIT = """
S2R R0, SR_TID.X
SHF.R.U32.HI R0, RZ, 0x5, R0
R2UR UR5, R0
UISETP.GT.U32.AND UP0, UPT, UR5, 0x3, UPT
PLOP3.LUT P0, PT, PT, PT, UP0, 0x80, 0x0
@P0 BRA `(.L_x_0)
.L_x_1:
USETMAXREG.TRY_ALLOC.CTAPOOL UP0, {grow}
PLOP3.LUT P0, PT, PT, PT, UP0, 0x80, 0x0
@!P0 BRA `(.L_x_1)
EXIT
.L_x_0:
USETMAXREG.DEALLOC.CTAPOOL {shrink}
EXIT
"""


def test_balance_that_overdraws_the_pool_is_a_hang_risk():
    c = check_listing(_listing(_SPLIT.format(grow="0xf0", shrink="0x28")), None, 128, 256, (256, 1, 1))
    assert c.verdict == HANG_RISK and c.warpgroup_counts == (240, 40)
    assert c.demand_registers == (240 + 40) * 128 > c.pool_registers == 128 * 256
    assert [s.warps for s in c.instructions] == [(0, 1, 2, 3), (4, 5, 6, 7)]


def test_balance_within_the_pool_is_ok():
    c = check_listing(_listing(_SPLIT.format(grow="0xe8", shrink="0x18")), None, 128, 256, (256, 1, 1))
    assert c.verdict == POOL_OK and c.warpgroup_counts == (232, 24) and c.demand_registers == 256 * 128


def test_a_register_target_is_unknown():
    c = check_listing(_listing(_SPLIT.format(grow="R4", shrink="0x28")), None, 128, 256, (256, 1, 1))
    assert c.verdict == UNKNOWN and "register operand" in c.reason


def test_a_count_off_the_ptx_steps_is_unknown():
    c = check_listing(_listing(_SPLIT.format(grow="0xe4", shrink="0x28")), None, 128, 256, (256, 1, 1))
    assert c.verdict == UNKNOWN and "24…256 in steps of 8" in c.reason


def test_warps_of_one_warpgroup_at_different_counts_is_unknown():
    """The split on warp > 1 (not > 3) puts warps 2 and 3 of warpgroup 0 on the DEALLOC side."""
    text = _SPLIT.format(grow="0xe8", shrink="0x18").replace("UR5, 0x3,", "UR5, 0x1,")
    c = check_listing(_listing(text), None, 128, 256, (256, 1, 1))
    assert c.verdict == UNKNOWN and "warpgroup 0 reach different" in c.reason


def test_a_branch_the_model_cannot_decide_is_unknown():
    """The split depends on a loaded value, so every warp may run both; the verdict says it cannot decide."""
    text = _SPLIT.format(grow="0xe8", shrink="0x18").replace("R2UR UR5, R0", "LDG.E R0, desc[UR4][R2.64]\n"
                                                                              "R2UR UR5, R0")
    c = check_listing(_listing(text), None, 128, 256, (256, 1, 1))
    assert c.verdict == UNKNOWN and "may reach counts {24, 232}" in c.reason
    # and it names the instruction that stopped the walk: the load the split depends on
    assert c.reason.endswith("the walk could not decide @P0 BRA `(.L_x_0) at 0x0060: P0 is computed from "
                             "LDG.E R0, desc[UR4][R2.64] at 0x0020, which the model does not read")


def test_an_indirect_branch_is_unknown():
    text = _SPLIT.format(grow="0xe8", shrink="0x18").replace("EXIT\n.L_x_0:", "BRX R6 -0x40\n.L_x_0:")
    c = check_listing(_listing(text), None, 128, 256, (256, 1, 1))
    assert c.verdict == UNKNOWN and "indirect branch" in c.reason


def test_a_cta_of_partial_warpgroups_is_unknown():
    c = check_listing(_listing(_SPLIT.format(grow="0xe8", shrink="0x18")), None, 128, 192, (192, 1, 1))
    assert c.verdict == UNKNOWN and "not whole warpgroups" in c.reason


def test_allocation_with_no_deallocation_anywhere_is_a_hang_risk_even_for_a_2d_cta():
    text = _SPLIT.format(grow="0x30", shrink="0x18").replace("USETMAXREG.DEALLOC.CTAPOOL 0x18", "MOV R1, R2")
    c = check_listing(_listing(text), None, 40, 256, (128, 2, 1))
    assert c.verdict == HANG_RISK and "48 registers per thread" in c.reason and "10,240 registers" in c.reason


def test_no_setmaxnreg_is_none():
    assert check_listing(_listing("S2R R0, SR_TID.X\nEXIT"), None, 16, 128).verdict == NONE


def test_an_old_record_gets_its_pool_verdict_from_its_sass():
    base = {"kernel": "k", "probe": "p", "case": {}, "hints": {}, "arch": "sm_90", "tileiras": "t", "status": "ok"}
    assert VariantRecord.from_dict({**base, "sass": {"setmaxnreg": []}}).pool_verdict == NONE
    old = VariantRecord.from_dict({**base, "sass": {"setmaxnreg": [["TRY_ALLOC", 32]]}})
    assert old.pool_verdict == UNKNOWN and old.register_pool.reason == POOL_NOT_CHECKED and not old.hang_risk
    assert VariantRecord.from_dict(base).register_pool is None
    new = VariantRecord.from_dict({**base, "register_pool": {"verdict": HANG_RISK, "reason": "r"}})
    assert new.hang_risk and VariantRecord.from_dict(new.to_dict()).register_pool == new.register_pool


def test_register_pool_is_a_record_that_writes_back_every_shape_unchanged():
    """``register_pool`` is a :class:`RegisterPool` inside the program; an old ``{verdict, reason}`` (no
    model_version), keys in another order and a newer tileprobe's unknown key all write back as they were read."""
    import json
    base = {"kernel": "k", "probe": "p", "case": {}, "hints": {}, "arch": "sm_90", "tileiras": "t", "status": "ok"}
    shapes = [{"verdict": POOL_OK, "reason": "fine"},
              {"reason": "r", "verdict": HANG_RISK, "model_version": 1, "future": {"x": [1]},
               "instructions": [{"address": 16, "action": "TRY_ALLOC", "target": 32, "later": True}]}]
    for pool in shapes:
        rec = VariantRecord.from_dict({**base, "register_pool": pool})
        assert isinstance(rec.register_pool, RegisterPool) and rec.pool_verdict == pool["verdict"]
        assert json.dumps(rec.to_dict()["register_pool"]) == json.dumps(pool)
    rec = VariantRecord.from_dict({**base, "register_pool": shapes[1]})
    (ins,) = rec.register_pool.instructions
    assert isinstance(ins, PoolInstruction) and (ins.address, ins.target, ins.warps) == (16, 32, None)
    assert rec.register_pool.extra == {"future": {"x": [1]}} and rec.register_pool.threads is None
    assert VariantRecord.from_dict({**base, "register_pool": shapes[0]}).register_pool.model_version is None
    with pytest.raises(TypeError, match="RegisterPool has no field verdic"):
        RegisterPool(verdic=HANG_RISK)


def test_the_check_builds_the_record_it_writes():
    """``PoolCheck.record()`` is what the record keeps, its JSON the keys it always had, in that order."""
    c = check_listing(_listing("S2R R0, SR_TID.X\nEXIT"), None, 16, 128)
    pool = c.record()
    assert isinstance(pool, RegisterPool) and (pool.verdict, pool.registers_per_thread, pool.threads) == (NONE, 16, 128)
    assert list(c.to_dict()) == ["verdict", "reason", "model_version", "registers_per_thread", "threads",
                                 "pool_registers", "demand_registers", "warpgroup_counts", "instructions"]


# --- the tune reads the SASS only where the register-pool check needs it (SASS_GATE) --------------------------------

def test_the_ptx_says_which_cubins_have_setmaxnreg():
    """The embedded PTX's setmaxnreg decides whether the SASS must be read before a launch; a cubin without PTX
    reads as unknown (None), so it is disassembled."""
    from tileprobe.model.sass import ptx_has_setmaxnreg
    assert ptx_has_setmaxnreg(OCC16.read_bytes()) is True
    assert ptx_has_setmaxnreg((DATA / "cubins" / "matmul_sm_90.cubin").read_bytes()) is True
    assert ptx_has_setmaxnreg((DATA / "cubins" / "matmul_occ4_sm_120.cubin").read_bytes()) is False
    assert ptx_has_setmaxnreg((DATA / "cubins" / "ptx_smem4k_sm_90.cubin").read_bytes()) is None
    assert ptx_has_setmaxnreg(b"not a cubin") is None


def test_a_gated_summary_of_a_cubin_without_setmaxnreg_is_the_verdict_none_alone(monkeypatch):
    """No nvdisasm run: the verdict comes from the PTX, the record keeps no traits (sass None)."""
    from tileprobe.model import sass as sass_mod
    monkeypatch.setattr(sass_mod, "sass_summary", lambda *a: pytest.fail("nvdisasm was run"))
    data = (DATA / "cubins" / "matmul_occ4_sm_120.cubin").read_bytes()
    sass, pool = split_register_pool(sass_mod.gated_summary(data, ""))
    assert sass is None and pool.verdict == NONE and "no setmaxnreg in the embedded PTX" in pool.reason
    record = VariantRecord(kernel="k", probe="p.py", case={}, hints={}, arch="sm_120", tileiras="13.4.92", status="ok",
                           register_pool=pool)
    assert record.hang_risk is False and record.pool_verdict == NONE


@needs_nvdisasm
def test_a_gated_summary_of_a_cubin_with_setmaxnreg_reads_the_sass():
    from tileprobe.model.sass import gated_summary
    sass, pool = split_register_pool(gated_summary(OCC16.read_bytes(), ""))
    assert sass.setmaxnreg and pool.verdict == HANG_RISK


@needs_nvdisasm
def test_the_facts_listing_without_dataflow_gives_the_facts_of_the_plain_listing(nvdisasm_listing):
    """nvdisasm -ndf -novliw (FACTS_OPTIONS, faster) against plain -c on every cubin of tests/data: the same SASS
    traits and register-pool checks (the reason may quote an instruction without its dataflow annotation)."""
    from tileprobe.model import sass as S
    cubins = sorted(DATA.glob("**/*.cubin"))
    assert len(cubins) >= 30
    for path in cubins:
        data = path.read_bytes()
        plain, fast = nvdisasm_listing(path), nvdisasm_listing(path, S.FACTS_OPTIONS)   # S._disassemble's, once a run
        assert len(plain.splitlines()) == len(fast.splitlines()), path
        tp, tf = S.parse_nvdisasm(plain), S.parse_nvdisasm(fast)
        assert [k.record(tp.target).to_dict() for k in tp.kernels] == \
            [k.record(tf.target).to_dict() for k in tf.kernels], path
        for kp, kf in zip(tp.kernels, tf.kernels):
            pp = S.register_pool(data, plain, kp.name, tp.target).to_dict()
            pf = S.register_pool(data, fast, kf.name, tf.target).to_dict()
            assert {**pp, "reason": None} == {**pf, "reason": None}, path


def _with_ptx_section(data: bytes, edit) -> bytes:
    """``data`` with its ``.nv_debug_ptx_txt`` section's bytes replaced by ``edit(old bytes)`` (same size or shorter:
    the section header's size is set to the new length)."""
    import io
    import struct

    from elftools.elf.elffile import ELFFile
    elf = ELFFile(io.BytesIO(data))
    index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == ".nv_debug_ptx_txt")
    sec = elf.get_section(index)
    new = edit(sec.data())
    assert len(new) <= sec["sh_size"]
    out = bytearray(data)
    off = sec["sh_offset"]
    out[off:off + len(new)] = new
    hdr = elf["e_shoff"] + index * elf["e_shentsize"]
    struct.pack_into("<Q", out, hdr + 32, len(new))         # Elf64_Shdr.sh_size
    return bytes(out)


@pytest.mark.parametrize("edit", [
    lambda d: b"",                                            # an empty section
    lambda d: d[:d.index(b"setmaxnreg")],                     # cut short before the first setmaxnreg
    lambda d: b"\xff" * len(d),                               # not text
    lambda d: d.replace(b"setmaxnreg", b"setmaxn\0reg")[:len(d)],   # a NUL inserted in the word (a new line)
    lambda d: d.replace(b"setmaxnreg", b"setmaxnreG"),        # a damaged letter
], ids=["empty", "cut", "not-text", "nul-split", "case"])
def test_a_damaged_ptx_never_lets_the_gate_skip_the_sass_of_a_hang(edit):
    """Hostile test (session 7): the occupancy-16 cubin hangs (its SASS says so); with its PTX section damaged in
    these ways the gate must not answer 'no setmaxnreg' (False), so the SASS is read."""
    from tileprobe.model.sass import ptx_has_setmaxnreg
    data = _with_ptx_section(OCC16.read_bytes(), edit)
    assert ptx_has_setmaxnreg(data) is not False


def test_the_gate_never_raises_on_a_damaged_cubin():
    """Hostile test (session 7): a PTX section flagged compressed with a bad stream raised zlib.error through the
    gate (the tune crashed); every damaged input now reads as 'cannot tell' (None)."""
    import random
    import struct

    from tileprobe.model.sass import ptx_has_setmaxnreg
    base = OCC16.read_bytes()
    import io

    from elftools.elf.elffile import ELFFile
    elf = ELFFile(io.BytesIO(base))
    index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == ".nv_debug_ptx_txt")
    bad = bytearray(base)
    hdr = elf["e_shoff"] + index * elf["e_shentsize"]
    flags = struct.unpack_from("<Q", bad, hdr + 8)[0]
    struct.pack_into("<Q", bad, hdr + 8, flags | 0x800)      # SHF_COMPRESSED over bytes that are no zlib stream
    assert ptx_has_setmaxnreg(bytes(bad)) is None
    rng = random.Random(7)
    head = elf["e_shoff"]
    for _ in range(300):
        d = bytearray(base)
        for _ in range(8):
            i = rng.choice([rng.randrange(0, 64), rng.randrange(head, len(d))])
            d[i] = rng.randrange(256)
        assert ptx_has_setmaxnreg(bytes(d)) in (None, True, False)


@pytest.mark.parametrize("word", [b"setmaxn\0eg", b"setmaxneeg", b"xxxxxxxxxx"])
def test_a_ptx_that_lies_is_caught_by_the_sm90_machine_code(word):
    """A letter of the word replaced (hostile test, session 7) leaves no trace in the PTX; on sm_90 the instruction
    words still show the USETMAXREG (low 12 bits 0x9c8), so the gated summary reads the SASS and finds the hang."""
    from tileprobe.model.sass import gated_summary, machine_code_may_setmaxnreg, ptx_has_setmaxnreg
    data = _with_ptx_section(OCC16.read_bytes(), lambda d: d.replace(b"setmaxnreg", word))
    assert ptx_has_setmaxnreg(data) is False and machine_code_may_setmaxnreg(data) is True
    if have_nvdisasm():
        assert split_register_pool(gated_summary(data, ""))[1].verdict == HANG_RISK


def test_the_machine_code_signal_finds_the_usetmaxreg_of_sm90_sm100_sm120_cubins():
    from tileprobe.model.sass import machine_code_may_setmaxnreg
    cubins = DATA / "cubins"
    assert machine_code_may_setmaxnreg(OCC4.read_bytes()) is True
    for arch in ("sm_90", "sm_100", "sm_120"):
        assert machine_code_may_setmaxnreg((cubins / f"matmul_cluster2_{arch}.cubin").read_bytes()) is True, arch
        assert machine_code_may_setmaxnreg((cubins / f"vec_add_{arch}.cubin").read_bytes()) is False, arch
    assert machine_code_may_setmaxnreg((cubins / "ptx_smem4k_sm_121.cubin").read_bytes()) is None   # not checked
    assert machine_code_may_setmaxnreg((cubins / "vec_add_sm_80.cubin").read_bytes()) is None
    assert machine_code_may_setmaxnreg(b"garbage") is None


@pytest.mark.parametrize("arch", ["sm_90", "sm_100", "sm_120"])
def test_another_kernels_ptx_in_the_section_does_not_let_the_gate_skip_the_sass(arch):
    """Hostile test 9: vec_add's whole PTX put in the matmul cubin's section said 'no setmaxnreg' on sm_100/sm_120
    (the SASS has 4 and 3 USETMAXREG). The PTX must name the cubin's kernel, and the instruction words of these
    three architectures are scanned."""
    from tileprobe.model.cubin import CubinInfo, embedded_ptx
    from tileprobe.model.sass import gated_summary, machine_code_may_setmaxnreg, ptx_has_setmaxnreg
    other = embedded_ptx((DATA / "cubins" / f"vec_add_{arch}.cubin").read_bytes()).replace("\n", "\0").encode()
    base = (DATA / "cubins" / f"matmul_cluster2_{arch}.cubin").read_bytes()
    data = _with_ptx_section(base, lambda d: other[:len(d)])
    symbol = CubinInfo.from_bytes(base).kernels[0].name
    assert ptx_has_setmaxnreg(data, symbol) is None                  # vec_add's entry, not the matmul's
    assert machine_code_may_setmaxnreg(data) is True
    if have_nvdisasm():
        sass, pool = split_register_pool(gated_summary(data, symbol))
        assert sass is not None and sass.setmaxnreg


def test_a_symbol_name_that_is_no_utf8_does_not_crash_the_sass_read():
    """Hostile test 9: one byte of the kernel's name in .strtab set to 0xff made nvdisasm's output undecodable and a
    UnicodeDecodeError escaped the gate, the store and the compile worker."""
    from tileprobe.model.sass import gated_summary, sass_summary
    data = bytearray((DATA / "cubins" / "matmul_sm_90.cubin").read_bytes())
    name = b"matmul_"
    i = data.find(name, data.find(b".strtab"))
    i = data.find(name) if i < 0 else i
    data[i + 1] = 0xFF
    for fn in (gated_summary, sass_summary):
        out = fn(bytes(data), "")
        assert isinstance(out, dict)



# --- every integer-add spelling nvdisasm writes, sm_80 … sm_120 ------------------------------------------------
NEW_ARCHS = {"rms_norm_large_13.4.92_tma_off_occ4_sm_100.cubin": "sm_100",
             "rms_norm_large_13.4.92_tma_off_occ4_sm_120.cubin": "sm_120",
             "rms_norm_large_13.4.92_tma_on_occ4_sm_120.cubin": "sm_120"}


@needs_nvdisasm
@pytest.mark.parametrize("name", sorted(NEW_ARCHS))
def test_sm_100_and_sm_120_cubins_balance_their_pool(name):
    """Warp group 0 (warps 0-3) grows to 96, warps 4-7 shrink to 32: the split the sm_90 cubin of 13.3.36 has.
    Before the walk read the carry-predicate IADD3 / IADD adds (and CS2R.32 as one register) it lost the warp
    index and called these ``unknown``."""
    pool = _check(DATA / "regpool" / name)
    assert pool.verdict == POOL_OK, pool.reason
    assert pool.warpgroup_counts == [96, 32]
    assert [(i.action, i.target, i.warps) for i in pool.instructions] == [
        ("TRY_ALLOC", 96, [0, 1, 2, 3]), ("DEALLOC", 32, [4]), ("DEALLOC", 32, [5, 6, 7])]


def _real_adds(nvdisasm_listing):
    """(arch, instruction) for every plain 32-bit integer add in the cubins of tests/data, by nvdisasm -c (the
    listings the facts test above made: tests/support_sass.py)."""
    import re

    from tileprobe.model.regpool import _ADDS, _NOT_PLAIN_ADD, _parse
    out = []
    for f in sorted((DATA / "cubins").glob("matmul_*.cubin")) + sorted((DATA / "regpool").glob("*.cubin")):
        arch = re.search(r"sm_\d+", f.name).group(0)
        listing = nvdisasm_listing(f, ("-c",))
        out += [(arch, i) for i in _parse(listing, None) if i.base in _ADDS and not (_NOT_PLAIN_ADD & set(i.mods))]
    return out


@needs_nvdisasm
def test_every_plain_integer_add_of_each_arch_is_read_as_an_add(nvdisasm_listing):
    """Every IADD3 / UIADD3 / VIADD / IADD (not .X, not .64) of the matmul cubins of sm_80, sm_90, sm_100, sm_120
    and the register-pool cubins gives its destination the sum of its terms when they are known."""
    from tileprobe.model.regpool import _PREDICATE_OPERAND, _effect
    adds = _real_adds(nvdisasm_listing)
    archs = {a for a, _ in adds}
    assert archs == {"sm_80", "sm_90", "sm_100", "sm_120"}
    spellings = {(i.base, len(i.operands)) for _, i in adds}
    assert {("IADD3", 4), ("IADD3", 5), ("IADD3", 6), ("UIADD3", 6), ("VIADD", 3), ("IADD", 3)} <= spellings
    for arch, ins in adds:
        env = {}
        terms = [o for o in ins.operands[1:] if not _PREDICATE_OPERAND.fullmatch(o)]
        for k, o in enumerate(terms):
            reg = o.lstrip("-~").removesuffix(".reuse")
            if reg not in ("RZ", "URZ") and not reg.startswith(("0x", "c[")) and not reg.isdigit():
                env[reg] = 7 + k
        if any(o.startswith("c[") for o in terms) or ins.operands[0] in ("RZ", "URZ"):
            continue          # a constant-bank operand (not known statically), or a NOP-like add to RZ
        got = _effect(ins, env).get(ins.operands[0])
        assert got is not None, f"{arch}: {ins.text()} not read as an add"


def test_the_add_spellings_compute_their_sums():
    from tileprobe.model.regpool import _effect, _parse
    body = _listing("""
IADD3 R1, PT, PT, R0, -0x5, RZ
IADD R2, R0, -0x5
IADD3 R3, P1, R0, 0x2, RZ
UIADD3 UR4, UPT, UPT, UR5, 0x1, URZ
VIADD R4, R0.reuse, 0xfffffffe
IADD3 R5, R0, ~R6, RZ
""")
    env = {"R0": 9, "UR5": 3, "R6": 0, "P1": True}
    for ins in _parse(body, None):
        env = _effect(ins, env)
    assert (env["R1"], env["R2"], env["R3"], env["UR4"], env["R4"]) == (4, 4, 11, 4, 7)
    assert env["R5"] == 8             # 9 + ~0 = 9 - 1
    assert "P1" not in env            # the carry-out predicate is no longer known


def _reach_one_warp_at_a_time(instructions, warps: int) -> dict[int, set[int]]:
    """warp_reach without the memo the warps' walks share: each warp's walk on its own."""
    from tileprobe.model.regpool import _blocks, _walk
    labels = {lab: i for i, ins in enumerate(instructions) for lab in ins.labels}
    reached: dict[int, set[int]] = {}
    for w in range(warps):
        for i in _walk(instructions, labels, w, _blocks(instructions)):
            reached.setdefault(i, set()).add(w)
    return reached


def test_shared_block_memo_gives_each_warp_its_own_reach_on_a_split():
    from tileprobe.model.regpool import warp_reach
    from tileprobe.model.regpool_ops import _parse
    ins = _parse(_listing(_SPLIT.format(grow="0xe8", shrink="0x18")), None)
    reached, problem = warp_reach(ins, 8)
    assert problem is None
    assert reached == _reach_one_warp_at_a_time(ins, 8)
    alloc = next(i for i, x in enumerate(ins) if "TRY_ALLOC" in x.opcode)
    dealloc = next(i for i, x in enumerate(ins) if "DEALLOC" in x.opcode)
    assert reached[alloc] == {0, 1, 2, 3} and reached[dealloc] == {4, 5, 6, 7}


@needs_nvdisasm
@pytest.mark.parametrize("cubin", sorted((DATA / "regpool").glob("*.cubin")), ids=lambda p: p.name)
def test_shared_block_memo_gives_the_same_reach_as_warps_walked_alone(cubin):
    from tileprobe.model.regpool import warp_reach
    from tileprobe.model.regpool_ops import _parse
    from tileprobe.model.sass import disassemble
    ins = _parse(disassemble(cubin.read_bytes()), None)
    reached, problem = warp_reach(ins, 8)
    assert problem is None and reached
    assert reached == _reach_one_warp_at_a_time(ins, 8)


@needs_nvdisasm
def test_a_listing_read_twice_gives_equal_records_that_are_not_shared():
    from tileprobe.model.sass import disassemble, facts_from_listing
    data = OCC16.read_bytes()
    listing = disassemble(data)
    (s1, p1), (s2, p2) = facts_from_listing(data, "", listing), facts_from_listing(data, "", listing)
    assert p1.verdict == HANG_RISK and p1 == p2 and p1 is not p2
    assert s1 == s2 and s1 is not s2 and s1.opcodes is not s2.opcodes
