"""The cubin reader on 1,000 mutated cubins (a subset of benchmarks/audit/bench_fuzz_cubin.py): a CubinInfo or a
CubinError for each, never another exception or a hang; compressed sections are capped before they are inflated."""
import os
import struct
import sys
import zlib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "audit"))

import bench_fuzz_cubin as fuzz  # noqa: E402

from tileprobe.errors import CubinError  # noqa: E402
from tileprobe.model.cubin import MAX_INFLATED_BYTES, CubinInfo  # noqa: E402

SEED = os.path.join(ROOT, "tests", "data", "cubins", "vec_add_sm_90.cubin")


def test_thousand_mutated_cubins_parse_or_raise_cubin_error():
    res = fuzz.fuzz(1000, seed=1, timeout_s=10.0)
    outcomes = {o: sum(v for (_, oo), v in res["counts"].items() if oo == o)
                for o in ("parsed", "cubin_error", "unhandled", "hang")}
    assert outcomes["unhandled"] == 0 and outcomes["hang"] == 0, res["samples"]
    assert sum(outcomes.values()) == 1000
    # the mutators do reach the reader's checks and the compressed-section path
    assert outcomes["cubin_error"] > 100 and outcomes["parsed"] > 100
    assert res["counts"][("compressed", "parsed")] > 0 and res["counts"][("compressed", "cubin_error")] > 0


def _nv_info(data):
    return next(s for s in fuzz.sections(data) if s["name"] == ".nv.info")


def test_honestly_compressed_nv_info_reads_the_same():
    data = open(SEED, "rb").read()
    sec = _nv_info(data)
    body = data[sec["offset"]:sec["offset"] + sec["size"]]
    packed = fuzz.as_compressed(data, sec, zlib.compress(body), len(body))
    a, b = CubinInfo.from_bytes(data), CubinInfo.from_bytes(packed)
    assert a.kernels == b.kernels and a.code_sha256 == b.code_sha256


def test_section_claiming_8_gb_is_refused_before_inflating(monkeypatch):
    """The issue's input: .nv.info flagged compressed, 1.2 MB of zlib zeros claiming 8.4 GB. Refused by the size it
    claims, before inflating (pyelftools' zlib is never asked to), with a CubinError naming the section and the
    limit."""
    import elftools.elf.elffile as elffile
    import elftools.elf.sections as sections
    inflated = []

    class _Watched:
        @staticmethod
        def decompressobj(*a, **k):
            inflated.append(1)
            return zlib.decompressobj(*a, **k)
        error = zlib.error
    monkeypatch.setattr(elffile, "zlib", _Watched)
    monkeypatch.setattr(sections, "zlib", _Watched)
    data = open(SEED, "rb").read()
    bomb = fuzz.as_compressed(data, _nv_info(data), fuzz.bomb(), 8_400_000_000)
    with pytest.raises(CubinError, match=r"'\.nv\.info' is compressed and claims 8,400,000,000 bytes inflated, over "
                                         rf"the {MAX_INFLATED_BYTES:,}-byte limit"):
        CubinInfo.from_bytes(bomb)
    assert inflated == []


def test_compressed_symtab_and_bad_compression_are_cubin_errors():
    data = open(SEED, "rb").read()
    symtab = next(s for s in fuzz.sections(data) if s["name"] == ".symtab")
    body = data[symtab["offset"]:symtab["offset"] + symtab["size"]]
    with pytest.raises(CubinError, match=r"symtab"):   # pyelftools' own check or ours
        CubinInfo.from_bytes(fuzz.as_compressed(data, symtab, zlib.compress(body), len(body)))
    sec = _nv_info(data)
    with pytest.raises(CubinError, match="cannot parse the cubin"):
        CubinInfo.from_bytes(fuzz.as_compressed(data, sec, b"not zlib at all", 64))
    with pytest.raises(CubinError, match="cannot parse the cubin"):
        CubinInfo.from_bytes(fuzz.as_compressed(data, sec, zlib.compress(b"x" * 8), 64, ch_type=7))
    # a NOBITS .nv.info claiming 2^40 bytes is empty, not a terabyte of zeros
    out = bytearray(data)
    struct.pack_into("<I", out, sec["at"] + 4, 8)            # SHT_NOBITS
    struct.pack_into("<Q", out, sec["at"] + 32, 1 << 40)
    with pytest.raises(CubinError, match="no register count"):
        CubinInfo.from_bytes(bytes(out))
