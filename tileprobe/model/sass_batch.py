"""SASS facts of many cubins with few ``nvdisasm`` runs: their kernels' raw code, one run per architecture.

``nvdisasm`` spends 0.4-0.6 s of CPU starting, whatever the cubin, and then about 27 µs per instruction (13.4.92,
the 2-core machine under other developers' load, 2026-12-05: 5 sm_120 cubins of tests/data one run each 2.38 s of
CPU, their 3,488 instructions in one raw run 0.67 s). It takes one ELF image per run, but with ``--binary SMxy`` it
decodes a raw instruction stream. :func:`sass_facts_many` concatenates the distinct ``.text.*`` sections of the
cubins of one target, decodes them in one run, splits the listing back by address (16-byte instructions on
sm_75 and later) and puts each cubin's listing together in the form :func:`~tileprobe.model.sass.facts_from_listing`
reads: its ``.target``, then for each ``.text.<kernel>`` section in file order the section line and its
instructions at section-relative addresses. Each result equals :func:`~tileprobe.model.sass.sass_facts`'s
(tests/test_sass_batch.py checks every cubin of tests/data); a cubin is read the old way (one ``nvdisasm -c`` run
on the ELF file) when:

* its code has a USETMAXREG: the register-pool walk follows branches to the ``.L_x_N`` labels only the ELF
  listing has (a raw listing prints target addresses, absolute in the concatenated stream);
* it cannot be read as a cubin (the old way gives the error record), or its target has no raw mode
  (:data:`RAW_TARGETS`);
* the raw run fails, times out, or its instruction count differs from the code's size ÷ 16.

Identical sections (one machine code for several hint values) are decoded once; a ``cache`` dict keeps decoded
sections across calls (a batch of an audit reuses the ones of earlier batches).
"""
from __future__ import annotations

import bisect
import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass

from tileprobe.errors import TileprobeError
from tileprobe.model.sass import FACTS_OPTIONS, NVDISASM_TIMEOUT_S, facts_from_listing, find_nvdisasm, sass_facts
from tileprobe.records import RegisterPool, SassFacts

__all__ = ["INSTRUCTION_BYTES", "RAW_TARGETS", "raw_arch", "sass_facts_many", "sass_summaries_many"]

#: Bytes per instruction on every architecture nvdisasm's raw mode is used for here (sm_75 … sm_121: 128-bit).
INSTRUCTION_BYTES = 16
#: Targets nvdisasm 13.4.92's ``--binary`` accepts (its ``--help``), as cubins name them (:attr:`CubinInfo.target`).
RAW_TARGETS = frozenset({"sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a",
                         "sm_100", "sm_100a", "sm_101", "sm_101a", "sm_103", "sm_103a", "sm_107", "sm_107a",
                         "sm_110", "sm_110a", "sm_120", "sm_120a", "sm_121", "sm_121a"})
#: The raw-mode options: :data:`~tileprobe.model.sass.FACTS_OPTIONS` less ``-c`` (a raw stream has no sections).
RAW_OPTIONS = tuple(o for o in FACTS_OPTIONS if o != "-c")
#: Seconds a raw run may take per instruction beyond :data:`~tileprobe.model.sass.NVDISASM_TIMEOUT_S` (about 40×
#: the 27 µs measured: a loaded machine).
_TIMEOUT_PER_INSTRUCTION_S = 1e-3
_ADDRESS = re.compile(r"^(\s*)/\*([0-9a-f]+)\*/")
#: The instructions whose last operand nvdisasm prints as a code address in a raw listing and as a label or
#: symbol (``\`(.L_x_1)``, ``\`($__internal_0_…)``) in an ELF one: on every cubin of tests/data the two listings
#: differ only there (13.4.92, 2026-12-05). Group 2: the opcode's base; group 3: the address.
_TARGET = re.compile(r"^(\s*(?:@!?U?P(?:T|\d+)\s+)?((?:BRA|BSSY|CALL|RET))(?:\.[A-Z0-9_]+)*\b.*?)"
                     r"(-?0x[0-9a-f]+)(\s*;.*)$")
#: Instructions whose code addresses a raw listing cannot turn back into the ELF listing's: an absolute jump or
#: call, an indirect branch (the ELF listing labels the targets of a BRX from its jump table in constant memory, as
#: in tests/data's sm_100 matmul cubins; a raw listing has no constant memory). A cubin with a USETMAXREG and one of
#: these is read the old way.
_UNTRANSLATED = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*(?:@!?U?P(?:T|\d+)\s+)?"
                           r"(?:JMP|JMX|JMXU|BRX|BRXU|(?:CALL|RET)\.ABS)\b", re.M)


@dataclass(frozen=True)
class _Member:
    """A cubin to read in a raw run: its place in the caller's list, its target and its ``.text.*`` sections
    as ``(name, key)`` in file order (``key``: the cache key of the section's code)."""
    index: int
    target: str
    sections: tuple[tuple[str, str], ...]
    relocated: bool = False   # a .rel(a).text.* section holds relocations: the ELF listing would show their symbols


def raw_arch(target: str) -> str:
    """nvdisasm's ``--binary`` value for a cubin target: ``"sm_90a"`` → ``"SM90a"``."""
    return "SM" + target.removeprefix("sm_")


def sass_summaries_many(items: Sequence[tuple[bytes, str]],
                        cache: MutableMapping[str, str] | None = None) -> list[dict]:
    """:func:`sass_facts_many` in the compile worker's pipe form (:func:`tileprobe.model.sass.sass_summary`)."""
    return [sass.to_dict() if pool is None else {**sass.to_dict(), "register_pool": pool.to_dict()}
            for sass, pool in sass_facts_many(items, cache)]


def sass_facts_many(items: Sequence[tuple[bytes, str]],
                    cache: MutableMapping[str, str] | None = None) -> list[tuple[SassFacts, RegisterPool | None]]:
    """``[sass_facts(cubin, symbol) for cubin, symbol in items]``, with one nvdisasm run per target for the
    cubins that allow it (see the module doc). ``cache``: section key → decoded lines, read and filled.

    Never raises for a cubin or nvdisasm failure: like :func:`~tileprobe.model.sass.sass_facts`, such a cubin's
    result is ``(SassFacts(error=…), None)``.
    """
    cache = {} if cache is None else cache
    out: list = [None] * len(items)
    groups: dict[str, list[_Member]] = {}
    code: dict[str, bytes] = {}
    for i, (cubin, _symbol) in enumerate(items):
        member = _member(i, cubin, code)
        if member is None:
            out[i] = sass_facts(cubin, _symbol)
        else:
            groups.setdefault(member.target, []).append(member)
    for target, members in groups.items():
        _decode(target, [k for m in members for _, k in m.sections if k not in cache], code, cache)
        for m in members:
            cubin, symbol = items[m.index]
            out[m.index] = _facts(m, cubin, symbol, cache)
    return out


def _member(index: int, cubin: bytes, code: dict[str, bytes]) -> _Member | None:
    """The raw-run view of one cubin (its sections' code added to ``code``), or None when it is read the old way."""
    from tileprobe.model.cubin import CubinInfo, _check_header, cubin_sections
    try:
        _check_header(cubin, "the cubin")
        target = CubinInfo.from_bytes(cubin).target
        every = cubin_sections(cubin)
        texts = [s for s in every if s.name.startswith(".text.")]
        relocated = any(s.name.startswith((".rel.text.", ".rela.text.")) and s.size for s in every)
    except Exception:
        return None
    if target not in RAW_TARGETS or any(len(s.data) % INSTRUCTION_BYTES or len(s.data) != s.size for s in texts):
        return None
    sections = []
    for s in texts:
        key = target + ":" + hashlib.sha256(s.data).hexdigest()
        code[key] = s.data
        sections.append((s.name[len(".text."):], key))
    return _Member(index, target, tuple(sections), relocated)


def _facts(m: _Member, cubin: bytes, symbol: str, cache: MutableMapping[str, str]):
    """One cubin's facts from its decoded sections; the old way when one is missing, or its code has a
    USETMAXREG (the register-pool walk needs the ELF listing's labels)."""
    if any(k not in cache for _, k in m.sections):
        return sass_facts(cubin, symbol)
    parts = [f"\t.target\t{m.target}\n"]
    for name, key in m.sections:
        parts.append(f'\t.section\t.text.{name},"ax",@progbits\n')
        parts.append(cache[key])
    listing = "".join(parts)
    if "USETMAXREG" in listing:   # the register-pool walk follows branches: labels as the ELF listing has them
        labelled = _labelled(m, cubin, cache)
        if labelled is None:
            return sass_facts(cubin, symbol)
        listing = labelled
    try:
        return facts_from_listing(cubin, symbol, listing)
    except TileprobeError:
        return sass_facts(cubin, symbol)


def _labelled(m: _Member, cubin: bytes, cache: MutableMapping[str, str]) -> str | None:
    """The cubin's listing with branch targets as the ELF listing writes them: a function symbol's name where one
    starts at the target, else a ``.L_x_N`` label, its line put before the instruction it names. None when that
    cannot be done faithfully: the code has relocations, an absolute or indirect jump, or a target outside its
    section (the caller reads the cubin the old way)."""
    if m.relocated:
        return None
    symbols = _function_symbols(cubin)
    if symbols is None:
        return None
    parts, n = [f"\t.target\t{m.target}\n"], 0
    for name, key in m.sections:
        text = cache[key]
        if _UNTRANSLATED.search(text):
            return None
        lines = text.splitlines(keepends=True)
        size = len(lines) * INSTRUCTION_BYTES
        named, ends = symbols.get(name, ({}, set()))
        labels: dict[int, str] = {}
        for end in sorted(ends - set(named)):   # the ELF listing ends a function's .size with a label (or the
            #                                         symbol that starts there)
            labels[end] = f".L_x_{n}"
            n += 1
        out = []
        for line in lines:
            head, _, rest = line.partition("*/")
            t = _TARGET.match(rest)
            if t:
                target = int(t.group(3), 16)
                if not 0 <= target <= size:
                    return None
                if target not in named and target not in labels:
                    labels[target] = f".L_x_{n}"
                    n += 1
                rest = f"{t.group(1)}`({named.get(target) or labels[target]}){t.group(4)}\n"
            out.append((head + "*/" + rest, int(head.strip().lstrip("/*"), 16)))
        parts.append(f'\t.section\t.text.{name},"ax",@progbits\n')
        for line, address in out:
            if address in labels:
                parts.append(f"{labels[address]}:\n")
            parts.append(line)
        if size in labels:
            parts.append(f"{labels[size]}:\n")
    return "".join(parts)


def _function_symbols(cubin: bytes) -> dict[str, tuple[dict[int, str], set[int]]] | None:
    """Function symbols by code section: ``{kernel: ({offset: name}, {end offset})}`` (``kernel``: the section
    name after ``.text.``; ``end``: offset + size, where the ELF listing puts the label its ``.size`` line names);
    None when the symbol table cannot be read."""
    import io

    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection
    try:
        elf = ELFFile(io.BytesIO(cubin))
        symtab = elf.get_section_by_name(".symtab")
        if symtab is not None and not isinstance(symtab, SymbolTableSection):
            return None   # a .symtab that is no symbol table: unreadable
        out: dict[str, tuple[dict[int, str], set[int]]] = {}
        for sym in symtab.iter_symbols() if symtab is not None else ():
            if sym["st_info"]["type"] != "STT_FUNC" or not sym.name or not isinstance(sym["st_shndx"], int):
                continue
            section = elf.get_section(sym["st_shndx"]).name
            if section.startswith(".text."):
                names, ends = out.setdefault(section[len(".text."):], ({}, set()))
                names.setdefault(sym["st_value"], sym.name)
                ends.add(sym["st_value"] + sym["st_size"])
        return out
    except Exception:
        return None


def _decode(target: str, keys: list[str], code: dict[str, bytes], cache: MutableMapping[str, str]) -> None:
    """Decode the sections ``keys`` (distinct ones once) of ``target`` in one raw nvdisasm run; each one decoded
    whole goes into ``cache`` as its listing lines at section-relative addresses. Leaves out what it cannot
    decode (the caller reads those cubins the old way)."""
    keys = list(dict.fromkeys(keys))
    if not keys:
        return
    blob = b"".join(code[k] for k in keys)
    starts = list(_starts(len(code[k]) for k in keys))
    listing = _run_raw(target, blob)
    if listing is None:
        return
    lines: list[list[str]] = [[] for _ in keys]
    for line in listing.splitlines():
        m = _ADDRESS.match(line)
        if not m:
            continue
        address = int(m.group(2), 16)
        at = bisect.bisect_right(starts, address) - 1
        if at < 0 or at >= len(keys):
            return
        rest = line[m.end():]
        t = _TARGET.match(rest)
        if t:   # a branch target, absolute in the stream: made relative to its section (negative: outside it)
            rest = f"{t.group(1)}{_hex(int(t.group(3), 16) - starts[at])}{t.group(4)}"
        lines[at].append(f"{m.group(1)}/*{address - starts[at]:04x}*/{rest}\n")
    for k, found in zip(keys, lines):
        if len(found) == len(code[k]) // INSTRUCTION_BYTES:   # every instruction decoded, one line each
            cache[k] = "".join(found)


def _starts(sizes) -> list[int]:
    """Start offsets of consecutive blocks of ``sizes`` bytes: ``[0, s0, s0+s1, …]`` (one per block)."""
    out, at = [], 0
    for s in sizes:
        out.append(at)
        at += s
    return out


def _hex(value: int) -> str:
    return f"-{-value:#x}" if value < 0 else f"{value:#x}"


def _run_raw(target: str, blob: bytes) -> str | None:
    """nvdisasm's raw-mode listing of ``blob`` for ``target``, or None when it is missing, fails or is too slow."""
    try:
        tool = find_nvdisasm()
    except TileprobeError:
        return None
    timeout = NVDISASM_TIMEOUT_S + _TIMEOUT_PER_INSTRUCTION_S * (len(blob) // INSTRUCTION_BYTES)
    with tempfile.TemporaryDirectory(prefix="tileprobe-sass-") as tmp:
        path = os.path.join(tmp, "code.bin")
        with open(path, "wb") as f:
            f.write(blob)
        try:
            proc = subprocess.run([tool, "--binary", raw_arch(target), *RAW_OPTIONS, path], capture_output=True,
                                  text=True, errors="replace", timeout=timeout)
        except (subprocess.TimeoutExpired, OSError):
            return None
    return proc.stdout if proc.returncode == 0 else None
