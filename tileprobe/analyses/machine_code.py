"""Machine code on demand: one variant's SASS (or embedded PTX), and the diff of two variants' machine code.

``tileprobe sass PROBE --arch sm_90 --where "GATHER=True,occupancy=2"`` prints the SASS of the one variant the
selection names; ``--ptx`` its embedded PTX; ``--diff occupancy=1`` (another value of a hint or case constant) or
``--tileiras A,B`` (two compilers) compares two variants (:mod:`tileprobe.model.sass_diff`). The cubins come from
the results store when the variant is stored (nothing is compiled again), else from a compile of that variant
alone, which is then stored.

Python API: :func:`variant_cubins` (records and cubins), :func:`sass_listing`, :func:`ptx_listing`,
:func:`diff_variants`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tileprobe.errors import TileprobeError
from tileprobe.model.sass_diff import SassDiff, diff_instructions, kernel_instructions
from tileprobe.schema import VariantRecord

# Imports inside functions here are lazy on purpose: at the module head they would add 0.33 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

if TYPE_CHECKING:
    from tileprobe.toolchain import Toolchain


@dataclass
class VariantCode:
    """One compiled variant and its cubin bytes."""
    record: VariantRecord
    cubin: bytes


def variant_cubins(probe: str, arch: str, where: dict, *, toolchains: Sequence[Toolchain] | None = None, store=None,
                   jobs: int | None = None, command_line: str | None = None) -> list[VariantCode]:
    """The variant(s) of ``probe`` on ``arch`` that ``where`` selects, one per compiler, with their cubins.

    Only variants whose case and hints match ``where`` are compiled (and only when not in ``store``); the audit is
    stored with ``command_line`` (the command's arguments, as ``history`` lists them; default
    ``sass PROBE --arch ARCH``).

    Raises:
        WhereError: ``where`` names something that is neither a case constant nor a hint, or selects nothing
            (the message lists the values), or several variants per compiler (the message says which names to
            add); TileprobeError: the variant failed to compile (its status and message).
    """
    from tileprobe.audit import audit
    from tileprobe.model.sass import have_nvdisasm
    from tileprobe.select import WhereError, matches_values, select_or_explain
    result = audit([probe], [arch], toolchains=toolchains, store=store, jobs=jobs, where=where, with_sass=have_nvdisasm(),
                   select=lambda v: matches_values(v.case_dict, v.hints_dict, where))
    if store is not None:
        store.save_audit(result, command_line or f"sass {probe} --arch {arch}")
    chosen = select_or_explain(result.records, where)
    if not chosen:
        raise TileprobeError(f"no variant of {probe} on {arch} was compiled for --where "
                             f"{','.join(f'{k}={v}' for k, v in where.items())}{'; ' if result.probe_errors else ''}"
                             f"{'; '.join(result.probe_errors)}")
    out = []
    for build in dict.fromkeys(r.tileiras for r in chosen):
        mine = [r for r in chosen if r.tileiras == build]
        if len(mine) > 1:
            varying = sorted({k for r in mine for k, v in [*r.case.items(), *r.hints.items()]
                              if any((o.case | o.hints).get(k) != v for o in mine)})
            raise WhereError(f"--where selects {len(mine)} variants; name one, adding "
                                 f"{', '.join(varying) or 'more names'} to --where")
        r = mine[0]
        if not r.ok:
            raise TileprobeError(f"{r.kernel} {' '.join(f'{k}={v}' for k, v in [*r.case.items(), *r.hints.items()])} "
                                 f"did not compile ({r.status}): {(r.error or '').strip().splitlines()[:1]}")
        data = result.cubins.get(r.cubin_sha256) or (store.cubin(r.cubin_sha256) if store is not None else None)
        if data is None:
            raise TileprobeError(f"the cubin of {r.kernel} ({r.cubin_sha256}) is not in the store; audit again with "
                                 "--no-store to compile it")
        out.append(VariantCode(r, data))
    return out


def sass_listing(code: VariantCode, nvdisasm: str | None = None) -> str:
    """The SASS of the variant's kernel as ``nvdisasm -c`` prints it (only its ``.text`` section).

    Raises:
        ToolchainError: nvdisasm missing or failing.
    """
    from tileprobe.model.sass import disassemble
    text = disassemble(code.cubin, nvdisasm)
    lines, keep = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("//----") or line.lstrip().startswith(".section"):
            keep = code.record.symbol in line or not code.record.symbol
        if keep or line.lstrip().startswith(".target"):
            lines.append(line)
    return "\n".join(lines) + "\n" if lines else text


def ptx_listing(code: VariantCode) -> str:
    """The PTX tileiras embedded in the variant's cubin, from its first non-blank line, ending in one newline (the
    embedded text starts with blank lines).

    Raises:
        TileprobeError: the cubin carries no PTX.
    """
    from tileprobe.model.cubin import embedded_ptx
    text = embedded_ptx(code.cubin)
    if not text:
        raise TileprobeError("this cubin carries no embedded PTX (.nv_debug_ptx_txt); tileiras adds it to its "
                             "cubins, so it was made some other way")
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n") + "\n"


def diff_variants(a: VariantCode, b: VariantCode, nvdisasm: str | None = None) -> SassDiff:
    """The aligned machine-code diff of two variants' kernels (:func:`tileprobe.model.sass_diff.diff_instructions`).

    Raises:
        ToolchainError: nvdisasm missing or failing.
    """
    from tileprobe.model.sass import disassemble
    ia = kernel_instructions(disassemble(a.cubin, nvdisasm), a.record.symbol or None)
    ib = kernel_instructions(disassemble(b.cubin, nvdisasm), b.record.symbol or None)
    return diff_instructions(ia, ib)
