"""Occupancy and arch limits: hand-worked cases, and an oracle built from NVIDIA's own ``cuda_occupancy.h``.

The oracle is a small C++ program compiled here with g++ against the header shipped in the pip package
``nvidia-cuda-runtime`` (the ``[test]`` extra). It is given device properties filled from our ``ArchLimits`` and
answers ``cudaOccMaxActiveBlocksPerMultiprocessor``; it also reports the header's own per-arch constants, which our
limits must match. A missing header or compiler is a failure, not a skip.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tileprobe.errors import TileprobeError
from tileprobe.model.arch import (
    ARCHS,
    MAX_THREADS_PER_CTA,
    SMEM_PER_CTA_DEFAULT_BYTES,
    SUBPARTITIONS_PER_SM,
    ArchLimits,
    get_arch,
)
from tileprobe.model.occupancy import LIMITERS, UNLIMITED, Occupancy, theoretical_occupancy

KB = 1024


# --------------------------------------------------------------------------------------------------------------
# Hand-worked cases. Comments show the arithmetic (rules in tileprobe/occupancy.py's docstring).
# --------------------------------------------------------------------------------------------------------------

def test_sm90_rmsnorm_occupancy1_cubin_fits_one_cta():
    # FIELD_NOTES: persistent RMSNorm, occupancy=1, TMA on: 256 threads, 255 registers, 154,328 B.
    # registers: 255*32 = 8160 -> 8192 per warp; 16384 per sub-partition // 8192 = 2 warps; 4*2 = 8 warps // 8 = 1
    # shared: 154,328 + 1,024 = 155,352 -> 155,392 (x128); 233,472 // 155,392 = 1
    occ = theoretical_occupancy(get_arch("sm_90"), 256, 255, 154_328)
    assert occ.ctas_per_sm == 1
    assert occ.limits == {"threads": 8, "registers": 1, "shared_memory": 1, "cta_slots": 32}
    assert occ.limiter == "registers"  # tie with shared_memory: registers come first in LIMITERS
    assert (occ.warps_per_sm, occ.occupancy_pct) == (8, 12.5)


def test_sm90_128_registers_gives_two_ctas():
    # 128*32 = 4096 per warp; 16384 // 4096 = 4 warps per sub-partition -> 16 warps // 8 = 2 CTAs.
    # shared (occupancy=2 cubin, 59,688 B): 60,712 -> 60,800; 233,472 // 60,800 = 3.
    occ = theoretical_occupancy(get_arch("sm_90"), 256, 128, 59_688)
    assert (occ.ctas_per_sm, occ.limiter, occ.warps_per_sm, occ.occupancy_pct) == (2, "registers", 16, 25.0)
    assert occ.limits["shared_memory"] == 3


def test_sm120_w4a16_one_cta_budget_is_168_registers():
    # 384 threads = 12 warps. 168*32 = 5376 (a multiple of 256); 16384 // 5376 = 3 per sub-partition -> 12 warps
    # -> 1 CTA. Per-CTA check: 5376 * 12 = 64,512 <= 65,536.
    # shared: 100,484 - 1,024 = 99,460 B; +1,024 = 100,484 -> 100,608; <= 99 KB + 1 KB; 102,400 // 100,608 = 1.
    arch = get_arch("sm_120")
    occ = theoretical_occupancy(arch, 384, 168, 100_484 - 1024)
    assert (occ.ctas_per_sm, occ.limiter, occ.warps_per_sm, occ.occupancy_pct) == (1, "registers", 12, 25.0)
    assert occ.limits == {"threads": 4, "registers": 1, "shared_memory": 1, "cta_slots": 24}
    # 169 registers: 5408 -> 5632 per warp; 5632 * 12 = 67,584 > 65,536: cannot launch at all.
    occ = theoretical_occupancy(arch, 384, 169, 0)
    assert (occ.ctas_per_sm, occ.limiter, occ.occupancy_pct) == (0, "registers", 0.0)


def test_sm90_32_registers_is_limited_by_threads():
    # threads: 64 warps // 8 = 8. registers: 1024 per warp -> 16 per sub-partition -> 64 warps // 8 = 8.
    # shared (occupancy=8 cubin, 26,744 B): 27,768 -> 27,776; 233,472 // 27,776 = 8. A three-way tie: "threads".
    occ = theoretical_occupancy(get_arch("sm_90"), 256, 32, 26_744)
    assert occ.limits == {"threads": 8, "registers": 8, "shared_memory": 8, "cta_slots": 32}
    assert (occ.ctas_per_sm, occ.limiter, occ.warps_per_sm, occ.occupancy_pct) == (8, "threads", 64, 100.0)
    assert theoretical_occupancy(get_arch("sm_90"), 256, 32, 2_072).limiter == "threads"


def test_shared_memory_at_and_above_the_per_cta_maximum():
    arch = get_arch("sm_90")
    at_max = theoretical_occupancy(arch, 128, 32, 227 * KB)  # 232,448 + 1,024 = 233,472 = all of the SM
    assert (at_max.ctas_per_sm, at_max.limiter) == (1, "shared_memory")
    above = theoretical_occupancy(arch, 128, 32, 227 * KB + 1)
    assert (above.ctas_per_sm, above.limiter, above.warps_per_sm) == (0, "shared_memory", 0)


def test_allocation_rounds_to_128_bytes_and_adds_the_reserve():
    arch = get_arch("sm_90")  # 233,472 B per SM
    # 45,576 + 1,024 = 46,600 -> 46,720 (x128); 233,472 // 46,720 = 4 (without rounding: 5; without the reserve: 5).
    assert theoretical_occupancy(arch, 32, 16, 45_576).limits["shared_memory"] == 4
    # sm_80 (167,936 B): 40,960 + 1,024 = 41,984 = 328 * 128 -> exactly 4; one byte more -> 42,112 -> 3.
    assert theoretical_occupancy(get_arch("sm_80"), 32, 16, 40_960).limits["shared_memory"] == 4
    assert theoretical_occupancy(get_arch("sm_80"), 32, 16, 40_961).limits["shared_memory"] == 3


def test_cta_slots_bind_small_ctas():
    # sm_86: 64 threads = 2 warps: 48 // 2 = 24 by threads, but only 16 CTA slots.
    occ = theoretical_occupancy(get_arch("sm_86"), 64, 32, 0)
    assert (occ.ctas_per_sm, occ.limiter, occ.occupancy_pct) == (16, "cta_slots", pytest.approx(100 * 32 / 48))
    # sm_90: 64 threads: threads and slots both allow 32; the tie goes to "threads".
    assert theoretical_occupancy(get_arch("sm_90"), 64, 32, 0).limiter == "threads"


def test_register_limit_per_cta_at_1024_threads():
    arch = get_arch("sm_90")
    # 64 registers: 2048 per warp * 32 warps = 65,536: fits; 16384 // 2048 = 8 per sub-partition -> 32 warps -> 1.
    occ = theoretical_occupancy(arch, 1024, 64, 0)
    assert (occ.ctas_per_sm, occ.limits["threads"], occ.limits["registers"]) == (1, 2, 1)
    # 65 registers: 2080 -> 2304 per warp * 32 = 73,728 > 65,536.
    assert theoretical_occupancy(arch, 1024, 65, 0).ctas_per_sm == 0


def test_partial_warps_take_whole_warp_slots():
    arch = get_arch("sm_90")
    # 33 threads = 2 warps; 255 registers -> 8192 per warp -> 2 warps per sub-partition, 8 per SM -> 4 CTAs.
    occ = theoretical_occupancy(arch, 33, 255, 0)
    assert (occ.ctas_per_sm, occ.warps_per_sm, occ.limiter) == (4, 8, "registers")
    # 224 threads = 7 warps fit in those 8; 225 threads = 8 warps still do; 257 threads = 9 warps do not.
    assert [theoretical_occupancy(arch, t, 255, 0).ctas_per_sm for t in (224, 225, 256, 257)] == [1, 1, 1, 0]


def test_limiter_tie_order_is_the_headers_bit_order():
    assert LIMITERS == ("threads", "registers", "shared_memory", "cta_slots")


def test_zero_registers_impose_no_limit():
    occ = theoretical_occupancy(get_arch("sm_90"), 32, 0, 0)
    assert occ.limits["registers"] == UNLIMITED
    assert (occ.ctas_per_sm, occ.limiter) == (32, "cta_slots")  # threads allow 64, slots 32


@pytest.mark.parametrize(("threads", "regs", "smem", "pattern"), [
    (0, 32, 0, r"threads_per_cta = 0 is impossible on sm_90 \(must be an int, 1-1024\)"),
    (1025, 32, 0, r"threads_per_cta = 1025 is impossible on sm_90 \(must be an int, 1-1024\)"),
    (256, 256, 0, r"regs_per_thread = 256 is impossible on sm_90 \(must be an int, 0-255\)"),
    (256, -1, 0, r"regs_per_thread = -1 is impossible"),
    (256, 32, -1, r"smem_per_cta_bytes = -1 is impossible on sm_90 \(must be an int, >= 0\)"),
    (256.0, 32, 0, r"threads_per_cta = 256\.0 is impossible"),
    (True, 32, 0, r"threads_per_cta = True is impossible"),
])
def test_impossible_inputs_raise(threads, regs, smem, pattern):
    with pytest.raises(TileprobeError, match=pattern):
        theoretical_occupancy(get_arch("sm_90"), threads, regs, smem)


def test_occupancy_record_is_frozen_hashable_and_checked():
    occ = theoretical_occupancy(get_arch("sm_90"), 256, 32, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        occ.ctas_per_sm = 3  # type: ignore[misc]
    assert hash(occ) == hash(theoretical_occupancy(get_arch("sm_90"), 256, 32, 0))
    with pytest.raises(TileprobeError, match=r"Occupancy\.limiter must be one of"):
        dataclasses.replace(occ, limiter="warps")
    with pytest.raises(TileprobeError, match=r"Occupancy\.ctas_per_sm = 7 is not"):
        dataclasses.replace(occ, ctas_per_sm=7)


# --------------------------------------------------------------------------------------------------------------
# get_arch and ArchLimits
# --------------------------------------------------------------------------------------------------------------

def test_archs_are_the_supported_tileiras_targets_without_sm_107():
    assert ARCHS == ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110",
                     "sm_120", "sm_121")


@pytest.mark.parametrize("spelling", ["sm_90", "90", "sm_90a", "SM_90", " sm_90 ", "9.0", "compute_90", "sm90"])
def test_get_arch_spellings(spelling):
    assert get_arch(spelling).name == "sm_90"


@pytest.mark.parametrize(("spelling", "name"), [("sm_100f", "sm_100"), ("sm_100a", "sm_100"), ("10.3", "sm_103"),
                                                ("121", "sm_121"), ("12.0", "sm_120"), ("sm_87", "sm_87")])
def test_get_arch_family_and_dotted_names(spelling, name):
    assert get_arch(spelling).name == name


SUPPORTED_RE = (r"Supported: sm_80, sm_86, sm_87, sm_88, sm_89, sm_90, sm_100, sm_103, sm_110, sm_120, sm_121 "
                r"\(also written 90, sm_90a, sm_100f or 9\.0\); pass one of these\.")


@pytest.mark.parametrize("bad", ["sm_95", "sm_75", "hopper", "", "sm_90b", "9.0.1", "1000"])
def test_get_arch_unknown_lists_supported_names(bad):
    with pytest.raises(TileprobeError, match=rf"^unknown GPU architecture {re.escape(repr(bad))}\. {SUPPORTED_RE}$"):
        get_arch(bad)


def test_get_arch_sm_107_says_why_it_is_missing():
    with pytest.raises(TileprobeError, match=r"^unknown GPU architecture 'sm_107a': sm_107 is a tileiras target, "
                                             r"but its resident threads per SM .* not established .*" + SUPPORTED_RE):
        get_arch("sm_107a")


def test_get_arch_rejects_non_strings():
    with pytest.raises(TileprobeError, match=r"unknown GPU architecture 90\. Supported"):
        get_arch(90)  # type: ignore[arg-type]


def test_known_limits_from_the_brief():
    sm120, sm121, sm90 = get_arch("sm_120"), get_arch("sm_121"), get_arch("sm_90")
    for arch in (sm120, sm121):
        assert (arch.max_threads_per_sm, arch.max_ctas_per_sm) == (1536, 24)
        assert (arch.smem_per_sm_bytes, arch.max_smem_per_cta_bytes) == (100 * KB, 99 * KB)
    assert (get_arch("sm_86").max_ctas_per_sm, get_arch("sm_86").max_threads_per_sm) == (16, 1536)
    assert get_arch("sm_89").max_ctas_per_sm == 24
    assert (sm90.max_threads_per_sm, sm90.max_ctas_per_sm) == (2048, 32)
    assert (sm90.smem_per_sm_bytes, sm90.max_smem_per_cta_bytes) == (228 * KB, 227 * KB)
    for name in ARCHS:
        arch = get_arch(name)
        assert (arch.regs_per_sm, arch.max_regs_per_cta, arch.reg_alloc_unit) == (65536, 65536, 256)
        assert (arch.smem_reserved_per_cta_bytes, arch.smem_alloc_unit_bytes, arch.warp_size) == (1024, 128, 32)
        assert "cuda_occupancy.h (nvidia-cuda-runtime 13.4.92)" in arch.source
        assert "Programming Guide" in arch.source


@pytest.mark.parametrize(("field", "value", "pattern"), [
    ("max_warps_per_sm", 63, r"ArchLimits\.max_warps_per_sm = 63 must equal max_threads_per_sm / warp_size"),
    ("max_ctas_per_sm", 0, r"ArchLimits\.max_ctas_per_sm must be an int >= 1, got 0"),
    ("smem_per_sm_bytes", 100, r"ArchLimits\.max_smem_per_cta_bytes = 232448 plus the reserve \(1024\) must fit"),
    ("max_smem_per_cta_bytes", 1000, r"ArchLimits\.max_smem_per_cta_bytes = 1000 must be a multiple of"),
    ("name", "sm_91", r"ArchLimits\.name 'sm_91' does not match cc \(9, 0\)"),
    ("regs_per_sm", "64K", r"ArchLimits\.regs_per_sm must be an int >= 1, got '64K'"),
    ("smem_reserved_per_cta_bytes", -1, r"ArchLimits\.smem_reserved_per_cta_bytes must be an int >= 0, got -1"),
])
def test_arch_limits_are_validated_on_construction(field, value, pattern):
    with pytest.raises(TileprobeError, match=pattern):
        dataclasses.replace(get_arch("sm_90"), **{field: value})


def test_arch_limits_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_arch("sm_90").max_ctas_per_sm = 64  # type: ignore[misc]


# --------------------------------------------------------------------------------------------------------------
# The oracle: NVIDIA's cuda_occupancy.h, compiled at test time.
# --------------------------------------------------------------------------------------------------------------

ORACLE_CPP = r"""
#include <cstdio>
#include <cstring>
#include "cuda_occupancy.h"

// Commands on stdin, one per line; one answer line each on stdout.
//  P major minor maxThreadsPerBlock maxThreadsPerSM regsPerBlock regsPerSM warpSize smemPerBlock smemPerSM
//    smemPerBlockOptin reservedSmemPerBlock                          -> sets the device; prints "ok"
//  Q threads regs staticSmem dynamicSmem maxDynamicSmem               -> cudaOccMaxActiveBlocksPerMultiprocessor:
//    "status active limitWarps limitRegs limitSmem limitBlocks limitingFactors"
//  K major minor smemPerSM -> the header's own constants for that arch:
//    "maxBlocks regGranularity smemGranularity subPartitions regMaxPerThread defaultCarveoutSmem
//     smemPerSMIsLargestStep occMajor occMinor statusSum"
int main() {
    cudaOccDeviceProp prop;
    char cmd[4];
    while (std::scanf("%3s", cmd) == 1) {
        if (cmd[0] == 'P') {
            std::scanf("%d %d %d %d %d %d %d %zu %zu %zu %zu", &prop.computeMajor, &prop.computeMinor,
                       &prop.maxThreadsPerBlock, &prop.maxThreadsPerMultiprocessor, &prop.regsPerBlock,
                       &prop.regsPerMultiprocessor, &prop.warpSize, &prop.sharedMemPerBlock,
                       &prop.sharedMemPerMultiprocessor, &prop.sharedMemPerBlockOptin,
                       &prop.reservedSharedMemPerBlock);
            prop.numSms = 1;
            std::printf("ok\n");
        } else if (cmd[0] == 'Q') {
            int threads, regs;
            size_t staticSmem, dynamicSmem, maxDynamicSmem;
            std::scanf("%d %d %zu %zu %zu", &threads, &regs, &staticSmem, &dynamicSmem, &maxDynamicSmem);
            // What cudaOccFuncAttributes(cudaFuncAttributes) builds for a real function: opt-in shared-memory
            // limit, one block barrier, partitioned global caching off, no virtual resources.
            cudaOccFuncAttributes attr;
            attr.maxThreadsPerBlock = 1024;
            attr.numRegs = regs;
            attr.sharedSizeBytes = staticSmem;
            attr.partitionedGCConfig = PARTITIONED_GC_OFF;
            attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
            attr.maxDynamicSharedSizeBytes = maxDynamicSmem;
            attr.numBlockBarriers = 1;
            attr.virtualResourceCount = 0;
            cudaOccDeviceState state;  // default: CACHE_PREFER_NONE, SHAREDMEM_CARVEOUT_DEFAULT
            cudaOccResult r;
            std::memset(&r, 0, sizeof r);
            cudaOccError e = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &prop, &attr, &state, threads, dynamicSmem);
            std::printf("%d %d %d %d %d %d %u\n", (int)e, r.activeBlocksPerMultiprocessor, r.blockLimitWarps,
                        r.blockLimitRegs, r.blockLimitSharedMem, r.blockLimitBlocks, r.limitingFactors);
        } else if (cmd[0] == 'K') {
            cudaOccDeviceProp p;
            size_t smemPerSM;
            std::scanf("%d %d %zu", &p.computeMajor, &p.computeMinor, &smemPerSM);
            p.sharedMemPerMultiprocessor = smemPerSM;
            int blocks = -1, regGran = -1, smemGran = -1, subParts = -1, regMax = -1;
            size_t carveout = 0, above = smemPerSM + 1;
            cudaOccDeviceState state;
            int status = (int)cudaOccMaxBlocksPerMultiprocessor(&blocks, &p)
                       + (int)cudaOccRegAllocationGranularity(&regGran, &p)
                       + (int)cudaOccSMemAllocationGranularity(&smemGran, &p)
                       + (int)cudaOccSubPartitionsPerMultiprocessor(&subParts, &p)
                       + (int)cudaOccRegAllocationMaxPerThread(&regMax, &p)
                       + (int)cudaOccSMemPerMultiprocessor(&carveout, &p, &state);
            // smemPerSM is the largest carveout step when one byte more cannot be aligned up to a step.
            int largest = cudaOccAlignUpShmemSizeVoltaPlus(&above, &p) == CUDA_OCC_ERROR_INVALID_INPUT;
            std::printf("%d %d %d %d %d %zu %d %d %d %d\n", blocks, regGran, smemGran, subParts, regMax, carveout,
                        largest, __CUDA_OCC_MAJOR__, __CUDA_OCC_MINOR__, status);
        }
    }
    return 0;
}
"""

RUNTIME_DISTRIBUTIONS = ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12")
INSTALL_HINT = ("the occupancy oracle needs NVIDIA's cuda_occupancy.h: run `pip install nvidia-cuda-runtime` "
                "(part of tileprobe's [test] extra) in this environment")


def _find_occupancy_header() -> tuple[Path, str]:
    """``cuda_occupancy.h`` from the installed ``nvidia-cuda-runtime`` wheel, and that wheel's name and version."""
    for dist_name in RUNTIME_DISTRIBUTIONS:
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in dist.files or ():
            if file.name == "cuda_occupancy.h":
                path = Path(dist.locate_file(file))
                if path.is_file():
                    return path, f"{dist_name} {dist.version}"
    pytest.fail(f"cuda_occupancy.h not found in any of {RUNTIME_DISTRIBUTIONS}: {INSTALL_HINT}", pytrace=False)


def test_missing_header_fails_with_the_install_command(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "RUNTIME_DISTRIBUTIONS", ("tileprobe-no-such-distribution",))
    with pytest.raises(pytest.fail.Exception, match=r"pip install nvidia-cuda-runtime"):
        _find_occupancy_header()


class Oracle:
    """The compiled header: feed it command lines, read one answer line per command."""

    def __init__(self, binary: Path, header_from: str):
        self.binary = binary
        self.header_from = header_from

    def ask(self, lines: list[str]) -> list[str]:
        done = subprocess.run([str(self.binary)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                              timeout=60, check=True)
        answers = done.stdout.splitlines()
        assert len(answers) == len(lines), f"oracle answered {len(answers)} of {len(lines)} lines: {done.stderr}"
        return answers


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> Oracle:
    header, header_from = _find_occupancy_header()
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("no C++ compiler (g++ or c++) on PATH: the occupancy oracle compiles cuda_occupancy.h; "
                    "install g++", pytrace=False)
    workdir = tmp_path_factory.mktemp("occupancy_oracle")
    source, binary = workdir / "oracle.cpp", workdir / "oracle"
    source.write_text(ORACLE_CPP)
    build = subprocess.run([compiler, "-O1", "-std=c++11", "-I", str(header.parent), "-o", str(binary), str(source)],
                           capture_output=True, text=True, timeout=120)
    if build.returncode != 0:
        pytest.fail(f"compiling the oracle against {header} ({header_from}) failed:\n{build.stderr}", pytrace=False)
    return Oracle(binary, header_from)


def _device_line(arch: ArchLimits) -> str:
    """``cudaOccDeviceProp`` for ``arch``, every value taken from our ArchLimits."""
    values = (arch.cc[0], arch.cc[1], MAX_THREADS_PER_CTA, arch.max_threads_per_sm, arch.max_regs_per_cta,
              arch.regs_per_sm, arch.warp_size, SMEM_PER_CTA_DEFAULT_BYTES, arch.smem_per_sm_bytes,
              arch.max_smem_per_cta_bytes, arch.smem_reserved_per_cta_bytes)
    return "P " + " ".join(map(str, values))


@pytest.mark.parametrize("name", ARCHS)
def test_arch_limits_match_the_headers_own_constants(oracle, name):
    arch = get_arch(name)
    (answer,) = oracle.ask([f"K {arch.cc[0]} {arch.cc[1]} {arch.smem_per_sm_bytes}"])
    (blocks, reg_unit, smem_unit, subparts, reg_max, carveout, largest, occ_major, occ_minor,
     status) = map(int, answer.split())
    where = f"{name} vs cuda_occupancy.h from {oracle.header_from}"
    assert status == 0, f"{where}: the header does not know compute capability {arch.cc}"
    assert arch.cc <= (occ_major, occ_minor), f"{where}: header supports up to {occ_major}.{occ_minor}"
    assert arch.max_ctas_per_sm == blocks, f"{where}: cudaOccMaxBlocksPerMultiprocessor"
    assert arch.reg_alloc_unit == reg_unit, f"{where}: cudaOccRegAllocationGranularity"
    assert arch.smem_alloc_unit_bytes == smem_unit, f"{where}: cudaOccSMemAllocationGranularity"
    assert SUBPARTITIONS_PER_SM == subparts, f"{where}: cudaOccSubPartitionsPerMultiprocessor"
    # The header's own per-thread check allows 256; ptxas and the Programming Guide stop at 255.
    assert arch.max_regs_per_thread <= reg_max, f"{where}: cudaOccRegAllocationMaxPerThread"
    assert arch.smem_per_sm_bytes == carveout, f"{where}: default carveout (cudaOccSMemPerMultiprocessor)"
    assert largest == 1, f"{where}: {arch.smem_per_sm_bytes} B is not the largest carveout step"


def _edge_configs(arch: ArchLimits) -> list[tuple[int, int, int]]:
    """Boundary (threads, registers, shared bytes) configurations: every threads × registers edge, each with a
    shared-memory edge, plus every shared-memory edge with a few CTA shapes."""
    max_smem = arch.max_smem_per_cta_bytes
    threads = (1, 31, 32, 33, 64, 96, 128, 160, 256, 288, 384, 512, 640, 768, 992, 1023, 1024)
    regs = (0, 1, 8, 16, 24, 32, 40, 56, 64, 65, 72, 96, 128, 168, 169, 232, 254, 255)
    smem = (0, 1, 127, 128, 129, 896, 1024, 2072, 48 * KB - 1024, 48 * KB, 48 * KB + 1, max_smem // 2,
            max_smem // 3 + 1, max_smem - 128, max_smem - 1, max_smem, max_smem + 1, max_smem + 128,
            arch.smem_per_sm_bytes)
    configs = [(t, r, smem[(i * 7 + j) % len(smem)]) for i, t in enumerate(threads) for j, r in enumerate(regs)]
    configs += [(t, r, s) for s in smem for t, r in ((1, 0), (128, 32), (256, 255), (384, 168), (1024, 64))]
    return configs


def _random_config(rng: random.Random, arch: ArchLimits) -> tuple[int, int, int]:
    """One random (threads, registers, shared bytes): mostly launchable shapes, some that cannot launch."""
    threads = rng.choice((rng.randint(1, 1024), 32 * rng.randint(1, 32), 2 ** rng.randint(5, 10)))
    warps = -(-threads // 32)
    warps4 = -(-warps // 4) * 4  # the hardware's per-CTA register check rounds warps up to 4 sub-partitions
    budget = min(255, (arch.max_regs_per_cta // warps4) // 32)  # roughly the most that still launches
    regs = rng.choice((rng.randint(0, 255), rng.randint(0, max(budget, 0)), rng.randint(max(budget - 8, 0), 255)))
    max_smem = arch.max_smem_per_cta_bytes
    smem = rng.choice((rng.randint(0, max_smem), rng.randint(0, 4096), rng.randint(max_smem - 512, max_smem + 512),
                       128 * rng.randint(0, max_smem // 128) + rng.choice((-1, 0, 1)),
                       rng.randint(0, 48 * KB), rng.randint(max_smem, arch.smem_per_sm_bytes + 4096)))
    return threads, regs, max(smem, 0)


def _query_line(rng: random.Random, arch: ArchLimits, threads: int, regs: int, smem: int) -> str:
    """Split ``smem`` at random into static and dynamic parts, as a kernel would declare it; the dynamic limit is
    what cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) could at most be set to."""
    split = rng.choice(("static", "dynamic", "both"))
    static = {"static": smem, "dynamic": 0, "both": rng.randint(0, smem)}[split]
    max_dynamic = 0 if split == "static" else max(arch.max_smem_per_cta_bytes - static, 0)
    return f"Q {threads} {regs} {static} {smem - static} {max_dynamic}"


HEADER_BITS = {"threads": 0x01, "registers": 0x02, "shared_memory": 0x04, "cta_slots": 0x08}


def _disagreement(config: tuple[int, int, int], ours: Occupancy, answer: str) -> str | None:
    status, active, by_warps, by_regs, by_smem, by_blocks, factors = map(int, answer.split())
    theirs = {"threads": by_warps, "registers": by_regs, "shared_memory": by_smem, "cta_slots": by_blocks}
    # The header sets a bit for every resource that ties; ours must be the lowest of them.
    header_limiter = min(((bit, name) for name, bit in HEADER_BITS.items() if factors & bit), default=(0, None))[1]
    if status == 0 and active == ours.ctas_per_sm and theirs == ours.limits and header_limiter == ours.limiter:
        return None
    return (f"threads, regs, smem = {config}: header status {status}, {active} CTAs/SM, limits {theirs}, "
            f"limiter {header_limiter} (factors {factors:#x}); ours {ours.ctas_per_sm}, {ours.limits}, {ours.limiter}")


@pytest.mark.parametrize("name", ARCHS)
def test_occupancy_matches_cuda_occupancy_h(oracle, name):
    arch = get_arch(name)
    rng = random.Random(f"tileprobe-occupancy-{name}")  # str seeds are stable across runs and platforms
    configs = _edge_configs(arch) + [_random_config(rng, arch) for _ in range(1200)]
    answers = oracle.ask([_device_line(arch)] + [_query_line(rng, arch, *config) for config in configs])
    assert answers[0] == "ok"
    problems = [p for config, answer in zip(configs, answers[1:])
                if (p := _disagreement(config, theoretical_occupancy(arch, *config), answer))]
    assert not problems, (f"{len(problems)} of {len(configs)} {name} configurations disagree with cuda_occupancy.h "
                          f"from {oracle.header_from}:\n" + "\n".join(problems[:10]))
    launchable = sum(theoretical_occupancy(arch, *config).ctas_per_sm > 0 for config in configs)
    assert launchable > len(configs) // 2, "the random configurations should mostly be launchable"
