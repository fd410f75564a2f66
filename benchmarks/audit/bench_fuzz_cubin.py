"""Fuzz the cubin reader: mutated cubins (compressed sections included) must give a CubinInfo or a CubinError —
no other exception, no hang, bounded memory.

    python benchmarks/audit/bench_fuzz_cubin.py                   # 10,000 inputs, seed 0
    python benchmarks/audit/bench_fuzz_cubin.py --n 20000 --seed 7 --timeout 5

Seeds: every cubin in tests/data/cubins (tileiras/ptxas 13.4.92, sm_80 … sm_121). Mutations (:data:`MUTATORS`, drawn
in turn): byte flips anywhere; ELF header fields and section header fields set to boundary values (0, 1, -1, huge,
the file size); truncation; a section we read (``.nv.info``, ``.nv.info.<kernel>``, ``.text.<kernel>``,
``.nv_debug_ptx_txt``, ``.nv.compat``, ``.symtab``) rewritten as a compressed section (``SHF_COMPRESSED``, an
``Elf64_Chdr``, zlib data appended to the file): honestly compressed, claiming a size larger or smaller than its
data, garbage instead of zlib, an unknown ``ch_type``, and zlib bombs — the issue's case: about 4 MB of compressed
zeros (256 MiB inflated) claiming 8.4 GB (:func:`bomb`).

Prints the inputs per mutator and outcome (parsed / CubinError / unhandled / hang), the slowest input, the peak
memory of this process (``ru_maxrss``) and the machine, command and date. Each input runs under a ``--timeout``
alarm (a hang), in this process. ``tests/test_cubin_fuzz.py`` runs 1,000 of the same inputs as a test.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import platform
import random
import resource
import signal
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tileprobe.errors import CubinError  # noqa: E402
from tileprobe.model.cubin import CubinInfo  # noqa: E402

SEEDS = ROOT / "tests" / "data" / "cubins"
SHF_COMPRESSED = 0x800
ELFCOMPRESS_ZLIB = 1
BOUNDARY = [0, 1, 2, 3, 4, 7, 8, 24, 63, 64, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
            0xFFFFFFFF, 1 << 32, 1 << 40, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
READ_SECTIONS = (".nv.info", ".nv.info.", ".text.", ".nv_debug_ptx_txt", ".nv.compat", ".symtab")


class Hang(Exception):
    """An input ran past the alarm."""


# --- ELF plumbing ---------------------------------------------------------------------------------------------------

def sections(data: bytes) -> list[dict]:
    """The section headers of an ELF64 LE file: index, header offset, name, sh_* fields (empty on a bad header)."""
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        out = []
        for i in range(shnum):
            at = shoff + i * shentsize
            name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from("<IIQQQQIIQQ", data, at)
            out.append(dict(index=i, at=at, name_off=name, type=typ, flags=flags, offset=off, size=size))
        strtab = out[shstrndx]
        for s in out:
            raw = data[strtab["offset"] + s["name_off"]:strtab["offset"] + s["name_off"] + 256]
            s["name"] = raw.split(b"\0", 1)[0].decode("latin-1")
        return out
    except (struct.error, IndexError):
        return []


def set_field(data: bytearray, at: int, fmt: str, value: int) -> None:
    """Write ``value`` (masked to the field width) at byte ``at``."""
    width = struct.calcsize(fmt)
    struct.pack_into(fmt, data, at, value & ((1 << (8 * width)) - 1))


def as_compressed(data: bytes, sec: dict, payload: bytes, claimed: int, ch_type: int = ELFCOMPRESS_ZLIB) -> bytes:
    """``data`` with section ``sec`` flagged SHF_COMPRESSED and its contents moved to the end of the file as an
    Elf64_Chdr (ch_type, ch_size = ``claimed``, ch_addralign 8) followed by ``payload``."""
    out = bytearray(data)
    pad = (-len(out)) % 8
    out += b"\0" * pad
    offset = len(out)
    out += struct.pack("<IIQQ", ch_type, 0, claimed, 8) + payload
    set_field(out, sec["at"] + 8, "<Q", sec["flags"] | SHF_COMPRESSED)
    set_field(out, sec["at"] + 24, "<Q", offset)
    set_field(out, sec["at"] + 32, "<Q", 24 + len(payload))
    return bytes(out)


_BOMB: dict[str, bytes] = {}


def bomb() -> bytes:
    """zlib data of 256 MiB of zeros (1.2 MB at level 1), built once by streaming 1 MiB chunks (never 256 MiB in
    memory); claimed as 8.4 GB it is the issue's input (a 4.2 MB cubin whose .nv.info claimed 8.4 GB)."""
    if "z" not in _BOMB:
        c = zlib.compressobj(1)
        chunk = b"\0" * (1 << 20)
        _BOMB["z"] = b"".join(c.compress(chunk) for _ in range(256)) + c.flush()
    return _BOMB["z"]


# --- mutators: (rng, seed bytes) -> mutated bytes --------------------------------------------------------------------

def flip_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def elf_header(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    at, fmt = rng.choice([(0x20, "<Q"), (0x28, "<Q"), (0x30, "<I"), (0x36, "<H"), (0x38, "<H"), (0x3A, "<H"),
                          (0x3C, "<H"), (0x3E, "<H"), (0x12, "<H"), (0x04, "<B"), (0x07, "<B"), (0x08, "<B")])
    set_field(out, at, fmt, rng.choice(BOUNDARY + [len(data), rng.randrange(1 << 16)]))
    return bytes(out)


def section_header(rng: random.Random, data: bytes) -> bytes:
    secs = sections(data)
    out = bytearray(data)
    sec = rng.choice(secs)
    at, fmt = rng.choice([(0, "<I"), (4, "<I"), (8, "<Q"), (24, "<Q"), (32, "<Q"), (40, "<I"), (44, "<I"),
                          (48, "<Q"), (56, "<Q")])
    set_field(out, sec["at"] + at, fmt, rng.choice(BOUNDARY + [len(data), len(data) - sec["offset"]]))
    return bytes(out)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[:rng.randrange(len(data))]


def info_records(rng: random.Random, data: bytes) -> bytes:
    """Corrupt one record of a .nv.info* section: format byte, attribute, size."""
    secs = [s for s in sections(data) if s["name"].startswith(".nv.info") and s["size"] >= 4]
    out = bytearray(data)
    sec = rng.choice(secs)
    at = sec["offset"] + 4 * rng.randrange(sec["size"] // 4)
    which = rng.randrange(3)
    if which == 0:
        out[at] = rng.choice([0, 1, 2, 3, 4, 5, 0xFF])
    elif which == 1:
        out[at + 1] = rng.randrange(256)
    else:
        set_field(out, at + 2, "<H", rng.choice([0, 1, 4, 8, 0xFFFF, rng.randrange(1 << 16)]))
    return bytes(out)


def _read_section(rng: random.Random, data: bytes) -> dict:
    secs = [s for s in sections(data) if s["name"].startswith(READ_SECTIONS) and s["type"] != 8]
    return rng.choice(secs)


def compressed(rng: random.Random, data: bytes) -> bytes:
    """A section we read rewritten as a compressed section, honest or lying (module doc)."""
    sec = _read_section(rng, data)
    body = data[sec["offset"]:sec["offset"] + sec["size"]]
    kind = rng.randrange(6)
    if kind == 0:   # honest
        return as_compressed(data, sec, zlib.compress(body), len(body))
    if kind == 1:   # claims more than its data inflates to
        return as_compressed(data, sec, zlib.compress(body), len(body) + rng.choice([1, 100, 1 << 20, 1 << 30]))
    if kind == 2:   # claims less
        return as_compressed(data, sec, zlib.compress(body), rng.randrange(max(1, len(body))))
    if kind == 3:   # not zlib
        return as_compressed(data, sec, bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))), len(body))
    if kind == 4:   # unknown compression type
        return as_compressed(data, sec, zlib.compress(body), len(body), ch_type=rng.choice([0, 2, 3, 0x7FFFFFFF]))
    # truncated zlib stream
    z = zlib.compress(body)
    return as_compressed(data, sec, z[:rng.randrange(1, max(2, len(z)))], len(body))


def zlib_bomb(rng: random.Random, data: bytes) -> bytes:
    """The issue's case: a section we read claiming a huge inflated size, its data 1.2 MB of compressed zeros
    (256 MiB inflated): claimed 8.4 GB, 1 GiB, or a size under the cap with a stream that inflates past it."""
    sec = _read_section(rng, data)
    claimed = rng.choice([8_400_000_000, 1 << 30, (64 << 20) - 1, 4096])
    return as_compressed(data, sec, bomb(), claimed)


MUTATORS: list[tuple[str, Callable[[random.Random, bytes], bytes], int]] = [
    ("flip_bytes", flip_bytes, 30), ("elf_header", elf_header, 12), ("section_header", section_header, 20),
    ("truncate", truncate, 8), ("info_records", info_records, 12), ("compressed", compressed, 16),
    ("zlib_bomb", zlib_bomb, 2)]


def inputs(n: int, seed: int = 0) -> Iterator[tuple[str, str, bytes]]:
    """``n`` mutated cubins, deterministic for ``seed``: (mutator name, seed file name, bytes)."""
    rng = random.Random(seed)
    files = sorted(p for p in SEEDS.glob("*.cubin"))
    blobs = [(p.name, p.read_bytes()) for p in files]
    names = [m[0] for m in MUTATORS]
    weights = [m[2] for m in MUTATORS]
    fns = dict((m[0], m[1]) for m in MUTATORS)
    for _ in range(n):
        name = rng.choices(names, weights)[0]
        src, data = rng.choice(blobs)
        yield name, src, fns[name](rng, data)


def _alarm(signum, frame):
    raise Hang()


def run_one(data: bytes, timeout_s: float) -> tuple[str, str, float]:
    """Parse ``data``: (outcome: parsed | cubin_error | unhandled | hang, detail, seconds)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    t0 = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        CubinInfo.from_bytes(data)
        outcome, detail = "parsed", ""
    except CubinError as e:
        outcome, detail = "cubin_error", str(e)[:200]
    except Hang:
        outcome, detail = "hang", ""
    except Exception as e:  # noqa: BLE001 — counting these is the point
        outcome, detail = "unhandled", f"{type(e).__name__}: {e}"[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return outcome, detail, time.perf_counter() - t0


def fuzz(n: int, seed: int = 0, timeout_s: float = 5.0) -> dict:
    """Run ``n`` inputs; return counts per (mutator, outcome), the unhandled/hang samples, the slowest input and
    the wall time."""
    counts: collections.Counter = collections.Counter()
    samples: list[str] = []
    slowest = (0.0, "")
    t0 = time.perf_counter()
    for i, (name, src, data) in enumerate(inputs(n, seed)):
        outcome, detail, dt = run_one(data, timeout_s)
        counts[(name, outcome)] += 1
        if outcome in ("unhandled", "hang") and len(samples) < 20:
            samples.append(f"#{i} {name} on {src}: {outcome} {detail}")
        if dt > slowest[0]:
            slowest = (dt, f"#{i} {name} on {src} ({outcome})")
    return {"counts": counts, "samples": samples, "slowest": slowest, "wall_s": time.perf_counter() - t0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="inputs (default 10,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds per input before it is a hang (default 5)")
    args = ap.parse_args(argv)
    res = fuzz(args.n, args.seed, args.timeout)
    counts = res["counts"]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"# bench_fuzz_cubin: {platform.node()} ({os.cpu_count()} CPUs, {platform.platform()}), Python "
          f"{platform.python_version()}, {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"# command: python benchmarks/audit/bench_fuzz_cubin.py --n {args.n} --seed {args.seed} --timeout {args.timeout}")
    print(f"{'mutator':16} {'inputs':>7} {'parsed':>7} {'CubinError':>10} {'unhandled':>9} {'hang':>5}")
    for name, _, _ in MUTATORS:
        row = [counts[(name, o)] for o in ("parsed", "cubin_error", "unhandled", "hang")]
        print(f"{name:16} {sum(row):7,} {row[0]:7,} {row[1]:10,} {row[2]:9,} {row[3]:5,}")
    total = {o: sum(v for (m, oo), v in counts.items() if oo == o) for o in ("parsed", "cubin_error", "unhandled",
                                                                              "hang")}
    print(f"{'total':16} {sum(total.values()):7,} {total['parsed']:7,} {total['cubin_error']:10,} "
          f"{total['unhandled']:9,} {total['hang']:5,}")
    print(f"unhandled exceptions: {total['unhandled']}")
    print(f"hangs (> {args.timeout:g} s): {total['hang']}")
    print(f"peak memory (ru_maxrss of this process): {peak_mb:,.0f} MB")
    print(f"slowest input: {res['slowest'][0] * 1000:,.1f} ms ({res['slowest'][1]}); wall {res['wall_s']:.1f} s")
    for s in res["samples"]:
        print("  " + s)
    return 0 if total["unhandled"] == total["hang"] == 0 and peak_mb < 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
