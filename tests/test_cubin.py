"""tileprobe.model.cubin and tileprobe.model.sass against real cubins and a pinned oracle.

Fixtures: ``tests/data/cubins/*.cubin``, built by ``tests/data/make_cubins.py``: cuTile kernels (cuda-tile
1.7.0, tileiras 13.4.92) for sm_80/90/100/120, and ``ptx_smem4k_*`` ptxas probes for every target from sm_80 to
sm_121 ('a' variants included). Oracle: ``tests/data/cubins/expected.json`` (what cuobjdump 13.4.92 said when
they were built) and, live, the cuobjdump / nvdisasm wheels (a missing wheel fails the test, it never skips).
"""
from __future__ import annotations

import hashlib
import json
import re
import struct
import subprocess
from pathlib import Path

import pytest

from tileprobe.errors import CubinError, ToolchainError
from tileprobe.model import sass
from tileprobe.model.cubin import RESERVED_SMEM_PER_CTA_BYTES, CubinInfo
from tileprobe.model.sass import find_nvdisasm, parse_nvdisasm, sass_traits

DATA = Path(__file__).resolve().parent / "data"
CUBINS = DATA / "cubins"
EXPECTED = json.loads((CUBINS / "expected.json").read_text())
NAMES = sorted(EXPECTED["cubins"])
TILE_NAMES = [n for n in NAMES if not n.startswith("ptx_")]  # compiled by cuTile / tileiras
PTX_NAMES = [n for n in NAMES if n.startswith("ptx_")]  # ptxas probes: 4,096 B of shared, sm_80 ... sm_121


def _load_make_cubins():
    from support import load_script
    return load_script(DATA / "make_cubins.py")


make_cubins = _load_make_cubins()


def _arch(name: str) -> str:
    return re.search(r"_(sm_\d+)a?\.cubin$", name).group(1)


def _cc(arch: str) -> int:
    return int(arch[3:])


def _info(name: str) -> CubinInfo:
    return CubinInfo.from_path(CUBINS / name)


def _assert_matches_cuobjdump(info: CubinInfo, facts: dict, name: str) -> None:
    assert info.target == facts["target"], name
    assert {k.name for k in info.kernels} == set(facts["kernels"]), name
    for k in info.kernels:
        want = facts["kernels"][k.name]
        got = {"REG": k.regs_per_thread, "STACK": k.stack_bytes, "SHARED": k.smem_static_bytes,
               "LOCAL": k.local_bytes, "REQNTID": list(k.reqntid),
               "CTA_PER_CLUSTER": list(k.cluster_dims) if k.cluster_dims else None,
               "MAXREG_COUNT": k.max_regs, "EXPLICIT_CLUSTER": k.explicit_cluster,
               "MAX_CLUSTER_RANK": k.max_cluster_rank}
        assert got == want, f"{name} kernel {k.name}"
        assert k.threads_per_cta == (want["REQNTID"][0] * want["REQNTID"][1] * want["REQNTID"][2])


def test_fixture_set_is_complete_and_small():
    """Every arch has the basic kernels; the folder stays small enough to commit."""
    for fixture in ("vec_add", "matmul", "matmul_occ4"):
        for arch in ("sm_80", "sm_90", "sm_100", "sm_120"):
            assert f"{fixture}_{arch}.cubin" in EXPECTED["cubins"]
    assert sorted(f"ptx_smem4k_{t}.cubin" for t in make_cubins.PTX_TARGETS) == PTX_NAMES
    assert sorted(p.name for p in CUBINS.glob("*.cubin")) == NAMES
    assert sum(p.stat().st_size for p in CUBINS.iterdir()) < 2_000_000


# (a) the pinned oracle ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_cubin_matches_pinned_cuobjdump(name):
    info = _info(name)
    assert info.sha256 == EXPECTED["cubins"][name]["sha256"], (
        f"{name} changed on disk but expected.json did not: rerun tests/data/make_cubins.py")
    assert info.arch == _arch(name)
    _assert_matches_cuobjdump(info, EXPECTED["cubins"][name], name)


@pytest.mark.parametrize("name", NAMES)
def test_driver_shared_memory_rule(name):
    """sm_90+: the cubin counts the 1 KB reserve (driver reports SHARED - 1024); sm_80: it does not."""
    data = (CUBINS / name).read_bytes()
    has_reserved_section = b".nv.shared.reserved." in data  # section name in .shstrtab
    arch = _arch(name)
    assert has_reserved_section == (_cc(arch) >= 90)
    for k in _info(name).kernels:
        if _cc(arch) >= 90 and k.smem_static_bytes:
            assert k.smem_driver_bytes == k.smem_static_bytes - RESERVED_SMEM_PER_CTA_BYTES
        else:
            assert k.smem_driver_bytes == k.smem_static_bytes


@pytest.mark.parametrize("name", PTX_NAMES)
def test_shared_reserve_per_arch(name):
    """4,096 declared bytes: SHARED = 4,096 on sm_80 ... sm_89; 5,120 (reserve included) on sm_90 ... sm_121."""
    k = _info(name).kernel("smem4k")
    assert k.smem_driver_bytes == 4096
    assert k.smem_static_bytes == 4096 + (RESERVED_SMEM_PER_CTA_BYTES if _cc(_arch(name)) >= 90 else 0)
    assert k.threads_per_cta == 128 and k.ptx is None  # ptxas embeds no PTX


@pytest.mark.parametrize("name", PTX_NAMES)
def test_accelerated_suffix(name):
    """e_flags is the same for sm_90 and sm_90a; .nv.compat tells them apart (cuobjdump agrees, test (a))."""
    info = _info(name)
    assert info.target == name[len("ptx_smem4k_"):-len(".cubin")]
    assert info.accelerated == name.endswith("a.cubin")


@pytest.mark.parametrize("name", TILE_NAMES)
def test_shared_reserve_against_ptx_declaration(name):
    """The embedded PTX declares the user's shared bytes; ptxas adds the 1 KB reserve from sm_90 on."""
    from elftools.elf.elffile import ELFFile
    with open(CUBINS / name, "rb") as f:
        ptx = ELFFile(f).get_section_by_name(".nv_debug_ptx_txt").data().replace(b"\0", b"\n").decode()
    declared = sum(int(n) for n in re.findall(r"^\s*\.shared\s+\.align\s+\d+\s+\.b8\s+\S+\[(\d+)\]", ptx, re.M))
    k = _info(name).kernel()
    reserve = RESERVED_SMEM_PER_CTA_BYTES if declared and _cc(_arch(name)) >= 90 else 0
    assert k.smem_static_bytes == declared + reserve
    assert k.smem_driver_bytes == declared


@pytest.mark.parametrize("name", NAMES)
def test_arch_from_e_flags(name):
    """CUDA 13 cubins (ELF ABI 8) keep the SM number in e_flags bits 8-15; 'a' comes from .nv.compat."""
    data = (CUBINS / name).read_bytes()
    assert data[8] == 8  # EI_ABIVERSION
    (flags,) = struct.unpack_from("<I", data, 48)
    info = _info(name)
    assert info.arch == f"sm_{(flags >> 8) & 0xFF}"
    if name in TILE_NAMES:
        assert info.accelerated == (_cc(info.arch) >= 90)  # tileiras compiles sm_90+ as sm_90a/100a/120a


def test_cluster_dims():
    for arch in ("sm_90", "sm_100", "sm_120"):
        k = _info(f"matmul_cluster2_{arch}.cubin").kernel()
        assert k.cluster_dims == (2, 1, 1) and k.blocks_are_clusters
        assert _info(f"matmul_{arch}.cubin").kernel().cluster_dims is None


def test_embedded_ptx_directives():
    occ1, occ2 = _info("vec_add_occ1_sm_90.cubin").kernel(), _info("vec_add_occ2_sm_90.cubin").kernel()
    assert occ1.ptx.maxnreg is None and occ2.ptx.maxnreg == 256  # asked for, but 255 is the cap anyway
    assert occ1.ptx.reqntid == (128,) and occ1.ptx.minnctapersm == 1
    # what a variant record keeps (VariantRecord.ptx): a PtxFacts, its JSON the audit's keys in order
    assert occ1.ptx.record().to_dict() == {"maxnreg": None, "reqntid": [128], "minnctapersm": 1}
    assert list(occ2.ptx.record().to_dict()) == ["maxnreg", "reqntid", "minnctapersm"]
    occ4 = _info("vec_add_occ4_sm_90.cubin").kernel()
    assert occ4.ptx.maxnreg == occ4.max_regs == 128 and occ4.regs_per_thread == occ1.regs_per_thread == 28
    capped = _info("matmul_occ4_sm_100.cubin").kernel()
    assert capped.ptx.maxnreg == capped.max_regs == capped.regs_per_thread == 64


def test_kernel_attributes_are_the_records_the_reader_walks():
    """The public walk of ``.nv.info.<kernel>``: the records KernelResources is built from, and the others
    (the parameter table) as they stand in the cubin."""
    from tileprobe.model.cubin import NvInfoRecord, kernel_attributes
    data = (CUBINS / "matmul_cluster2_sm_90.cubin").read_bytes()
    k = CubinInfo.from_bytes(data).kernel()
    records = kernel_attributes(data)
    assert list(records) == [k.name]
    by_attr = {}
    for r in records[k.name]:
        by_attr.setdefault(r.attr, []).append(r)
    assert by_attr[0x10] == [NvInfoRecord(4, 0x10, struct.pack("<3I", 256, 1, 1))]      # EIATTR_REQNTID
    assert by_attr[0x3D] == [NvInfoRecord(4, 0x3D, struct.pack("<3I", 2, 1, 1))]        # EIATTR_CTA_PER_CLUSTER
    assert by_attr[0x1B] == [NvInfoRecord(3, 0x1B, 255)] and by_attr[0x5B] == [NvInfoRecord(1, 0x5B, 0)]
    assert k.reqntid == (256, 1, 1) and k.cluster_dims == (2, 1, 1) and k.max_regs == 255 and k.blocks_are_clusters
    params = [struct.unpack("<IHHI", r.value) for r in by_attr[0x45]]                   # EIATTR_KPARAM_INFO_V2
    assert sorted(p[1] for p in params) == list(range(15))
    assert {p[1]: p[2] for p in params}[1] == 8                                          # after the 8-byte pointer


def test_cubin_sections_in_file_order_with_no_bytes_for_nobits():
    from tileprobe.model.cubin import cubin_sections
    data = (CUBINS / "matmul_cluster2_sm_90.cubin").read_bytes()
    sections = cubin_sections(data)
    names = [s.name for s in sections]
    assert names[:3] == [".shstrtab", ".strtab", ".symtab"] and "" not in names
    k = CubinInfo.from_bytes(data).kernel()
    (shared,) = [s for s in sections if s.name == f".nv.shared.{k.name}"]
    assert (shared.type, shared.size, shared.data) == ("SHT_NOBITS", k.smem_static_bytes, b"") == \
        ("SHT_NOBITS", 148688, b"")
    (text,) = [s for s in sections if s.name == f".text.{k.name}"]
    assert text.type == "SHT_PROGBITS" and len(text.data) == text.size == 12032
    nv_info = next(s for s in sections if s.name == ".nv.info")
    assert nv_info.type == 0x70000000 and len(nv_info.data) == nv_info.size == 36
    with pytest.raises(CubinError, match=r"not an ELF file"):
        cubin_sections(b"hello, not a cubin")


def test_kernel_lookup():
    info = _info("vec_add_sm_90.cubin")
    k = info.kernel()
    assert info.kernel(k.name) is k
    with pytest.raises(CubinError, match=r"no kernel 'nope' in this sm_90 cubin; it holds: vec_add_"):
        info.kernel("nope")


# (b) live cross-check with the cuobjdump wheel --------------------------------------------------------------

def _cuobjdump() -> str:
    tool = make_cubins.find_cuobjdump()
    if tool is None:
        pytest.fail("cuobjdump is the oracle of these tests and is missing: pip install nvidia-cuda-cuobjdump")
    return tool


@pytest.mark.parametrize("name", NAMES)
def test_cubin_matches_live_cuobjdump(name):
    facts = make_cubins.cuobjdump_facts(_cuobjdump(), CUBINS / name)
    _assert_matches_cuobjdump(_info(name), facts, name)


# (c) hashes --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pair", EXPECTED["same_code_pairs"])
def test_code_hash_ignores_ignored_hints(pair):
    a, b = (_info(n) for n in pair)
    assert a.sha256 != b.sha256  # debug sections and embedded Tile IR/PTX carry the hint value
    assert a.code_sha256 == b.code_sha256
    # Same resources; only what the compiler was asked for (PTX directives, the register cap) may differ.
    same = [dict(vars(k), ptx=None, max_regs=None) for k in a.kernels]
    assert same == [dict(vars(k), ptx=None, max_regs=None) for k in b.kernels]
    a_sass, b_sass = (sass_traits(CUBINS / n, nvdisasm=_nvdisasm()).kernels for n in pair)
    assert a_sass == b_sass


def test_code_hash_sees_code_changes():
    hashes = {name: _info(name).code_sha256 for name in NAMES}
    assert hashes["vec_add_sm_90.cubin"] == hashes["vec_add_occ1_sm_90.cubin"]  # occupancy=1 is the default
    different = ["vec_add_sm_80.cubin", "vec_add_sm_90.cubin", "matmul_sm_80.cubin", "matmul_occ4_sm_80.cubin",
                 "matmul_sm_90.cubin", "matmul_cluster2_sm_90.cubin"]
    assert len({hashes[n] for n in different}) == len(different)
    data = (CUBINS / "vec_add_sm_90.cubin").read_bytes()
    assert CubinInfo.from_bytes(data).sha256 == hashlib.sha256(data).hexdigest()


# (d) errors ----------------------------------------------------------------------------------------------------

def test_not_elf(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, not a cubin\n")
    with pytest.raises(CubinError, match=r"notes\.txt: not an ELF file .*export_kernel"):
        CubinInfo.from_path(path)


def test_fatbinary_is_explained():
    with pytest.raises(CubinError, match=r"fatbinary, not a cubin; .*cuobjdump -xelf all"):
        CubinInfo.from_bytes(b"\x50\xed\x55\xba" + bytes(60))


@pytest.mark.parametrize("keep", [10, 40, 2000, 0.5, -1])
def test_truncated_cubin(tmp_path, keep):
    data = (CUBINS / "matmul_sm_90.cubin").read_bytes()
    cut = data[:int(len(data) * keep)] if isinstance(keep, float) else data[:keep]
    path = tmp_path / "cut.cubin"
    path.write_bytes(cut)
    with pytest.raises(CubinError, match=r"cut\.cubin: truncated cubin: .*(recompile it or copy it again)"):
        CubinInfo.from_path(path)


def test_truncated_section_data(tmp_path):
    """A file whose section table survives but whose data is cut (sections point past the end)."""
    data = bytearray((CUBINS / "vec_add_sm_90.cubin").read_bytes())
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    table = bytes(data[shoff:shoff + shentsize * shnum])
    short = bytearray(data[:shoff // 2]) + table
    struct.pack_into("<Q", short, 0x28, len(short) - len(table))
    struct.pack_into("<H", short, 0x38, 0)  # no program headers, so the section data check is what fires
    with pytest.raises(CubinError, match=r"truncated cubin: section '.*' needs bytes up to \d+"):
        CubinInfo.from_bytes(bytes(short), source="short.cubin")


def test_non_cuda_elf():
    data = bytearray((CUBINS / "vec_add_sm_90.cubin").read_bytes())
    struct.pack_into("<H", data, 18, 62)  # EM_X86_64
    with pytest.raises(CubinError, match=r"an ELF file for machine 62, not a CUDA cubin"):
        CubinInfo.from_bytes(bytes(data))


def test_damaged_nv_info():
    from elftools.elf.elffile import ELFFile
    path = CUBINS / "vec_add_sm_90.cubin"
    with open(path, "rb") as f:
        offset = ELFFile(f).get_section_by_name(".nv.info")["sh_offset"]
    data = bytearray(path.read_bytes())
    data[offset] = 9  # no such record format
    with pytest.raises(CubinError, match=r"section '\.nv\.info' is damaged: unknown record format 9"):
        CubinInfo.from_bytes(bytes(data))


def test_missing_file(tmp_path):
    with pytest.raises(CubinError, match=r"cannot read the cubin"):
        CubinInfo.from_path(tmp_path / "absent.cubin")


# (e) SASS traits -------------------------------------------------------------------------------------------------

def _nvdisasm() -> str:
    try:
        return find_nvdisasm()
    except ToolchainError as exc:
        pytest.fail(f"SASS traits need nvdisasm: {exc}")


_MMA_BY_ARCH = {"sm_80": {"HMMA"}, "sm_90": {"HGMMA", "HMMA"}, "sm_100": {"UTCHMMA", "HMMA"}, "sm_120": {"HMMA"}}


def _grep_count(listing: str, opcode: str) -> int:
    return sum(1 for line in listing.splitlines() if re.match(rf"\s*/\*[0-9a-f]+\*/.*\b{opcode}\b", line))


@pytest.mark.parametrize("name", TILE_NAMES)
def test_sass_traits(name):
    tool = _nvdisasm()
    arch = _arch(name)
    traits = sass_traits(CUBINS / name, nvdisasm=tool)
    info = _info(name)
    assert [k.name for k in traits.kernels] == [k.name for k in info.kernels]
    assert traits.target == info.target
    k = traits.kernel()
    listing = subprocess.run([tool, "-c", str(CUBINS / name)], check=True, capture_output=True, text=True).stdout
    assert k.spill_loads == _grep_count(listing, "LDL")
    assert k.spill_stores == _grep_count(listing, "STL")
    assert k.instructions > 50
    if name.startswith("matmul"):
        assert k.matrix_families and set(k.matrix_families) <= _MMA_BY_ARCH[arch], k.matrix_counts
        assert k.has_tma == (_cc(arch) >= 90)
        if _cc(arch) >= 90:
            assert k.tma_counts["UTMALDG"] > 0
            if "occ4" not in name:  # warp-specialised pipelines: producer warps give registers back
                assert ("DEALLOC", 32) in k.setmaxnreg
            assert all(action in ("DEALLOC", "TRY_ALLOC") and 24 <= regs <= 256 and regs % 8 == 0
                       for action, regs in k.setmaxnreg)
    else:
        assert not k.matrix_counts and not k.tma_counts and not k.setmaxnreg
    # Local-memory traffic and the stack frame tell the same story.
    assert (k.spill_loads + k.spill_stores > 0) == (info.kernel().stack_bytes > 0)


def test_forced_spills_are_seen():
    tool = _nvdisasm()
    for arch in ("sm_80", "sm_120"):
        k = sass_traits((CUBINS / f"matmul_occ4_{arch}.cubin").read_bytes(), nvdisasm=tool).kernel()
        assert k.spill_loads > 100 and k.spill_stores > 100


def test_sass_traits_from_bytes_equal_from_path():
    tool = _nvdisasm()
    path = CUBINS / "matmul_sm_90.cubin"
    assert sass_traits(path, nvdisasm=tool) == sass_traits(path.read_bytes(), nvdisasm=tool)


def test_parse_nvdisasm_listing():
    listing = """\t.target\tsm_90a
\t.section\t.text.k1,"ax",@progbits
        /*0000*/                   USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8 ;
        /*0010*/              @!P0 LDL.LU.64 R2, [R1+0x8] ;
        /*0020*/               @P1 STL [R1], R4 ;
        /*0030*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], R24 ;
        /*0040*/                   UTMALDG.2D [UR8], [UR4], desc[URZ] ;
        /*0050*/                   UBLKCP.S.G [UR4], [UR6], UR8 ;
        /*0060*/                   UTMACMDFLUSH ;
        /*0070*/                   NOP;
\t.section\t.text.k2,"ax",@progbits
        /*0000*/                   USETMAXREG.DEALLOC.CTAPOOL 0x28;
        /*0010*/                   UTCQMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR10], idesc[UR12], UPT ;
        /*0020*/                   QMMA.16832.F32.E4M3.E4M3 R4, R8, R12, R4 ;
"""
    traits = parse_nvdisasm(listing)
    k1, k2 = traits.kernel("k1"), traits.kernel("k2")
    assert traits.target == "sm_90a"
    assert (k1.instructions, k1.spill_loads, k1.spill_stores) == (7, 1, 1)
    assert k1.setmaxnreg == (("TRY_ALLOC", 232),) and k2.setmaxnreg == (("DEALLOC", 40),)
    assert k1.tma_counts == {"UBLKCP": 1, "UTMACMDFLUSH": 1, "UTMALDG": 1} and k1.has_tma
    assert k1.matrix_families == ("HGMMA",) and k2.matrix_families == ("QMMA", "UTCQMMA")
    assert not k2.has_tma
    assert json.loads(json.dumps(traits.to_dict()))["kernels"]["k1"]["setmaxnreg"] == [["TRY_ALLOC", 232]]
    with pytest.raises(CubinError, match="pass the kernel name"):
        traits.kernel()


def test_missing_nvdisasm_says_how_to_install(monkeypatch):
    monkeypatch.setattr(sass, "_pip_binary", lambda *a: None)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ToolchainError, match=r"pip install nvidia-cuda-nvdisasm"):
        sass_traits(CUBINS / "vec_add_sm_90.cubin")
    with pytest.raises(ToolchainError, match=r"is not an executable file"):
        find_nvdisasm("/nonexistent/nvdisasm")


@pytest.mark.parametrize("name", PTX_NAMES)
def test_sass_traits_every_arch(name):
    """nvdisasm decodes every target from sm_80 to sm_121."""
    traits = sass_traits(CUBINS / name, nvdisasm=_nvdisasm())
    k = traits.kernel("smem4k")
    assert traits.target == _info(name).target
    assert k.instructions >= 10 and k.opcode_counts["BAR"] == 1 and not k.matrix_counts and not k.spill_loads


def test_sass_traits_refuses_non_cubin():
    _nvdisasm()
    with pytest.raises(CubinError, match="not an ELF file"):
        sass_traits(b"not a cubin at all, just some bytes that are long enough to pass a size check.....")


def test_damaged_cubins_raise_only_cubin_error():
    """Random damage to headers, tables and data: a CubinError or a parse, never a pyelftools traceback."""
    import random
    data = (CUBINS / "matmul_cluster2_sm_90.cubin").read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    rng = random.Random(0)
    for i in range(300):
        damaged = bytearray(data)
        if i % 3 == 0:
            for _ in range(rng.randint(1, 4)):
                damaged[rng.choice((rng.randrange(64), rng.randrange(shoff, len(data))))] = rng.randrange(256)
        elif i % 3 == 1:
            for _ in range(rng.randint(1, 50)):
                damaged[rng.randrange(len(data))] = rng.randrange(256)
        else:
            damaged = damaged[:rng.randrange(len(data))]
        try:
            CubinInfo.from_bytes(bytes(damaged))
        except CubinError as exc:
            assert str(exc).startswith("<bytes>: ")
