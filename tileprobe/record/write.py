"""Write probe files from probe plans, and the recording's summary (``record.json``).

A written probe imports its kernel from where it lives, reproduces each case's launch with ``arrays.*`` calls,
keeps counts, grids, launch hints and call sites as data and comments, and says in TODO comments what its source
could not tell. It loads and audits with ``tileprobe audit`` unchanged.
"""
from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass, field

from tileprobe.record.args import ArgsText, args_text, inert
from tileprobe.record.group import Case, ProbePlan

# Imports inside functions here are lazy on purpose: at the module head they would add 0.11 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

SUMMARY_FILE = "record.json"
PROBE_DIR = "probes"
SCHEMA = 1


@dataclass
class Origin:
    """Where the launches came from: ``kind`` "record" (``command`` run in ``cwd``) or "cache" (``path``)."""
    kind: str
    when: str
    command: list[str] = field(default_factory=list)
    path: str = ""
    cuda_tile: str = ""

    def sentence(self) -> str:
        """The origin as the phrase a written probe's header uses (``by `tileprobe record` on … from: …``)."""
        if self.kind == "cache":
            return f"from cuTile's compile cache {self.path} on {self.when}"
        return f"by `tileprobe record` on {self.when} from: {' '.join(self.command)}"


def _n(v) -> str:
    return "?" if v is None else f"{v:,}"


def _header(plan: ProbePlan, origin: Origin, probe_dir: str) -> list[str]:
    k = plan.kernel
    where = f"{k.file}:{k.line}" if k.file else "unknown file"
    lines = [f'"""Probe of {k.name}, written {origin.sentence()}', "",
             f"Kernel: {k.spec(probe_dir) or '(cannot be imported: see TODO below)'}  (defined at {where})",
             "Declared hints: " + " ".join(f"{h}={hint_text(v)}" for h, v in k.declared.items())]
    if plan.archs:
        lines.append("Seen on: " + ", ".join(plan.archs))
    counted = f"{_n(plan.total)} launches, " if origin.kind == "record" else ""
    lines.append(f"{counted}{plan.distinct} distinct, {len(plan.cases) + len(plan.omitted)} case(s) "
                 f"(one per JIT signature); the {len(plan.cases)} most frequent are below.")
    if plan.omitted:
        left = sum(c.count or 0 for c in plan.omitted)
        lines.append(f"Left out: {len(plan.omitted)} case(s), {_n(left)} launches "
                     "(`tileprobe record --top N` writes more).")
    lines += ["", "Array values are not recorded: floating inputs are random, integer arrays zeros. There is no",
              "reference=, so `tileprobe run` times the kernel without checking its output (add one to check it)."]
    if origin.kind == "record":
        lines += ["The grid is the one launched; if the program derives it from the hints (persistent kernels:",
                  "SMs x occupancy), compute it in grid() from hints and num_sms."]
    lines += plan.notes
    return ['"""' + doc_text(lines[0][3:])] + [doc_text(x) for x in lines[1:]] + ['"""']


def doc_text(text) -> str:
    """``text`` as one line inside the written probe's docstring: :func:`~tileprobe.record.args.inert`, with
    backslashes and quotes escaped so that nothing read from a log can end the docstring."""
    return inert(text).replace("\\", "\\\\").replace('"', '\\"')


def _kernel_lines(plan: ProbePlan, probe_dir: str) -> tuple[list[str], str]:
    """Lines defining the kernel (if any) and the expression for ``kernel=``."""
    k = plan.kernel
    spec = k.spec(probe_dir)
    lines = []
    if k.in_script:
        lines += ["# The kernel lives in the recorded script itself: importing it runs the script's top level unless",
                  "# that is guarded by `if __name__ == \"__main__\":`."]
    if spec is None:
        why = ("it is defined inside a function" if k.qualname and "<locals>" in k.qualname
               else "its module is unknown" if not k.module else "its module holds no name for it")
        lines += [inert(f"# TODO: tileprobe cannot import {k.qualname or k.name} ({why}): set KERNEL to the @ct.kernel"),
                  "# object, e.g. by moving the kernel to module level and importing it here.", "KERNEL = None", ""]
        return lines, "KERNEL"
    root = k.import_root()
    if root is not None:
        rel = os.path.relpath(root, probe_dir)
        lines += [inert(f"# The recorded program imported {k.module} from {root} (not an installed package)."),
                  f"sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), {rel!r}))", ""]
    if k.ref_kind == "function":
        lines += ["# The program wraps this plain function with ct.kernel(...) at run time (hints set there are the",
                  "# cases' launch hints).",
                  f"KERNEL = ct.kernel(import_object({spec!r}, base_dir=os.path.dirname(os.path.abspath(__file__))))",
                  ""]
        return lines, "KERNEL"
    return lines, repr(spec)


def _case_lines(plan: ProbePlan, case: Case) -> tuple[list[str], list[str], ArgsText]:
    """(LAUNCHES entry lines, ARGS entry lines, ArgsText) for one case."""
    la = case.rep
    info = []
    share = ""
    if case.count is not None and plan.total:
        share = f" ({100 * case.count / plan.total:.0f}% of this kernel's)"
    if case.count is not None:
        info.append(f"    # {_n(case.count)} launch{'' if case.count == 1 else 'es'}{share}"
                    + (f", {len(case.launches)} distinct (the most frequent is reproduced)" if len(case.launches) > 1
                       else ""))
    if case.symbol:
        info.append(f"    # JIT signature {case.symbol}")
    sites = case.sites().most_common(3)
    via = case.launch_sites().most_common(1)
    if sites and sites[0][0] != "?":
        info.append("    #   from " + ", ".join(f"{s} ({_n(n)})" for s, n in sites)
                    + (f" via {via[0][0]}" if via and via[0][0] not in {s for s, _ in sites} else ""))
    sets = case.hint_sets()
    if len(sets) > 1 or sets[0][0]:
        info.append("    #   launched with " + ", ".join(
            f"{_hints_text(h)} ({_n(n)})" for h, n in sets))
    entry = {"count": case.count, "hints": [h for h, _ in sets], "grid": tuple(la.grid) if la.grid else None}
    launches = [inert(x) for x in info] + [f"    {case.label!r}: {entry!r},"]
    text = args_text(la.args)
    body = text.tuple_text("    ")
    return launches, [f"    {case.label!r}: lambda arrays: {body},"], text


def hint_text(value) -> str:
    """A recorded hint value as cuTile spells it (``ByTarget(sm_100=16)`` for a by-target value)."""
    if isinstance(value, dict) and "by_target" in value:
        parts = [f"{t}={v}" for t, v in value["by_target"].items()]
        if value.get("default") is not None:
            parts.append(f"default={value['default']}")
        return f"ByTarget({', '.join(parts)})"
    return str(value)


def _hints_text(hints: dict) -> str:
    return " ".join(f"{h}={hint_text(v)}" for h, v in hints.items()) or "the declared hints"


def render_probe(plan: ProbePlan, origin: Origin, probe_dir: str) -> str:
    """The text of a probe file for ``plan`` (to be written in ``probe_dir``)."""
    kernel_lines, kernel_expr = _kernel_lines(plan, probe_dir)
    launch_lines: list[str] = []
    arg_lines: list[str] = []
    imports: set[str] = set()
    todos: list[str] = []
    for case in plan.cases:
        ll, al, text = _case_lines(plan, case)
        launch_lines += ll
        arg_lines += al
        imports |= text.imports
        todos += [f"{case.label}: {t}" for t in text.todos]
    if plan.kernel.ref_kind == "function":
        imports |= {"import os", "import cuda.tile as ct", "from tileprobe.probe.define import import_object"}
    if plan.kernel.import_root() is not None:
        imports |= {"import os", "import sys"}
    has_grid = all(c.rep.grid for c in plan.cases)
    out = _header(plan, origin, probe_dir)
    if todos:
        out[-1:] = ["TODO (arguments tileprobe could not reproduce):"] + [doc_text(f"  {t}") for t in todos] + ['"""']
    out += sorted(i for i in imports if i.startswith("import ")) + sorted(i for i in imports if i.startswith("from "))
    out += ["from tileprobe import Probe", ""] + kernel_lines
    out += ["#: Per case (one JIT signature): launches counted, the hints the launched kernel objects set",
            "#: (replace_hints / ct.kernel(...); {}: as declared), and the grid of the most frequent launch.",
            "LAUNCHES = {", *launch_lines, "}", "",
            "#: Per case: the ct.launch arguments as launched (shapes, dtypes, strides in elements, base alignment).",
            "ARGS = {", *arg_lines, "}", "", "",
            "def args(case, arrays):", '    return ARGS[case["launch"]](arrays)', "", ""]
    if has_grid:
        out += ["def grid(case, hints, num_sms):", '    return LAUNCHES[case["launch"]]["grid"]', "", ""]
    else:
        out += ["# TODO: the grid is unknown (the compile cache does not keep it): add",
                "# grid=lambda case, hints, num_sms: (...) for `tileprobe run`.", ""]
    fields = [f"    kernel={kernel_expr},", "    args=args,",
              f"    cases={{\"launch\": {[c.label for c in plan.cases]!r}}},"]
    if plan.hints:
        fields.append(f"    hints={plan.hints!r},")
    if has_grid:
        fields.append("    grid=grid,")
    fields.append(f"    name={plan.kernel.name!r},")
    out += ["probe = Probe(", *fields, ")", ""]
    probe_text = "\n".join(out)
    check_probe_text(probe_text)
    return probe_text


#: The top-level statements a written probe may hold (its docstring, imports, assignments, sys.path.insert, the
#: args/grid functions): anything else means text from the log became code, and nothing is written.
_ALLOWED_TOP = ("Import", "ImportFrom", "Assign", "FunctionDef")


def check_probe_text(text: str) -> None:
    """Refuse a rendered probe that does not parse, or whose top level holds a statement a written probe never has
    (a call other than ``sys.path.insert``, a loop …): text from a launch log must stay data.

    Raises:
        TileprobeError: naming the statement's line.
    """
    from tileprobe.errors import TileprobeError
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise TileprobeError(f"the probe written for this kernel would not parse (line {e.lineno}: {e.msg}); the launch "
                             "log holds text tileprobe cannot write into Python: report it") from e
    for i, node in enumerate(tree.body):
        kind = type(node).__name__
        call = node.value if isinstance(node, ast.Expr) else None
        if kind in _ALLOWED_TOP or (kind == "Expr" and i == 0 and isinstance(call, ast.Constant)):
            continue
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "sys.path.insert":
            continue
        raise TileprobeError(f"the probe written for this kernel has an unexpected statement at line {node.lineno} "
                             f"({kind}): the launch log holds text that would run as code; nothing was written")


def probe_filename(name: str, taken: set) -> str:
    """``<name>.py`` made file-safe, with ``_2``, ``_3`` … when two kernels share a name."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "kernel"
    stem, i = base, 1
    while f"{stem}.py" in taken:
        i += 1
        stem = f"{base}_{i}"
    taken.add(f"{stem}.py")
    return f"{stem}.py"


def write_probes(plans: list[ProbePlan], out_dir: str, origin: Origin) -> list[tuple[str, ProbePlan]]:
    """Write one probe file per plan under ``out_dir/probes/``; return (path, plan) pairs."""
    probe_dir = os.path.join(os.path.abspath(out_dir), PROBE_DIR)
    os.makedirs(probe_dir, exist_ok=True)
    taken: set = set()
    written = []
    for plan in plans:
        path = os.path.join(probe_dir, probe_filename(plan.kernel.name, taken))
        with open(path, "w", encoding="utf-8") as f:
            f.write(render_probe(plan, origin, probe_dir))
        written.append((path, plan))
    return written


def summary(written: list[tuple[str, ProbePlan]], origin: Origin, out_dir: str, **extra) -> dict:
    """The JSON summary of a recording (``record.json``): per probe file, its cases with counts, launch hints,
    the hints of the variant that reproduces each launch, grids, signatures and call sites."""
    probes = []
    for path, plan in written:
        probes.append({
            "file": os.path.relpath(path, out_dir), "kernel": plan.kernel.spec(os.path.dirname(path)),
            "name": plan.kernel.name, "launches": plan.total, "distinct": plan.distinct, "hints": plan.hints,
            "archs": plan.archs, "notes": plan.notes,
            "cases": [{"label": c.label, "count": c.count, "symbol": c.symbol,
                       "launched": [{"launch_hints": h, "variant_hints": plan.variant_hints(h), "count": n}
                                    for h, n in c.hint_sets()],
                       "grid": list(c.rep.grid) if c.rep.grid else None,
                       "sites": dict(c.sites().most_common(5))} for c in plan.cases],
            "omitted": {"cases": len(plan.omitted), "launches": sum(c.count or 0 for c in plan.omitted)},
        })
    return {"schema": SCHEMA, "origin": origin.__dict__, "probes": probes, **extra}


def write_summary(data: dict, out_dir: str) -> str:
    """Write ``out_dir/record.json``; return its path."""
    path = os.path.join(out_dir, SUMMARY_FILE)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=repr)
    return path
