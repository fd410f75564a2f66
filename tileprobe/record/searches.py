"""Tuning probes from recorded searches: one probe per ``cuda.tile.tune.exhaustive_search`` of a program
(kernel, problem, space), whose space is exactly the program's configurations.

A written search probe has one problem (``cases["search"]`` = the search key) and one tunable case name,
``config``, whose values ``C0 … Cn`` are the program's configurations in its order. ``CONFIGS`` keeps per label the
configuration as the program made it, the hints its ``hints_fn`` gave and the grid its ``grid_fn`` gave; ``ARGS``
the arguments its ``args_fn`` gave (shapes, dtypes, strides, alignment, scalars, constants). The hint grid is the
union of those hints, and the constraint ``programs_own`` keeps each configuration with its own hints only, so the
tune compiles and times the program's configurations and nothing else. The default is the program's first
configuration, and the arguments the search wrote (its outputs, found by their values changing during the
program's search) are ``arrays.empty``: every candidate's output is checked against the default's.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace

from tileprobe.record.argdesc import ArgDesc, arg_desc
from tileprobe.record.args import args_text, inert
from tileprobe.record.group import ProbePlan, plain_hint
from tileprobe.record.model import RecordedSearch
from tileprobe.record.search_options import SearchOptions
from tileprobe.record.write import Origin, _kernel_lines, check_probe_text, doc_text, hint_text, probe_filename

SEARCH_CASE = "search"
CONFIG_CASE = "config"


@dataclass(frozen=True)
class SearchProbe:
    """A search probe written: its path, the search, and the label of each configuration (``C0`` …)."""
    path: str
    search: RecordedSearch

    @property
    def labels(self) -> list[str]:
        """``C0`` … ``Cn``: the program's configurations in its order."""
        return [f"C{i}" for i in range(len(self.search.configs))]


def hint_names(s: RecordedSearch) -> list[str]:
    """Every hint any configuration of the search sets, in first-seen order."""
    return list(dict.fromkeys(h for c in s.configs for h in (c.hints or {})))


def config_hints(s: RecordedSearch, i: int) -> dict:
    """The hints of configuration ``i`` over :func:`hint_names` (None: not set, as declared), ``ByTarget`` values
    resolved for the recorded arch."""
    archs = sorted(s.archs)
    hints = s.configs[i].hints or {}
    return {h: plain_hint(hints.get(h), archs) for h in hint_names(s)}


def _marked_args(s: RecordedSearch, i: int) -> list[ArgDesc | None]:
    """Configuration ``i``'s argument descriptions with the outputs flagged (``arrays.empty``); None for one that
    is no JSON object."""
    out = []
    for pos, d in enumerate(s.configs[i].args or []):
        a = arg_desc(d)
        if pos in s.outputs and a is not None:
            a = _flag_output(a)
        out.append(a)
    return out


def _flag_output(a: ArgDesc) -> ArgDesc:
    if a.kind == "array":
        return replace(a, output=True)
    if a.kind == "sequence":
        return replace(a, items=[x if x is None else _flag_output(x) for x in a.item_descs()])
    return a


def literal(value) -> str:
    """``value`` (JSON data as a program's configuration holds it: dicts, lists, strings, numbers, booleans, None)
    as Python source that evaluates back to it: NaN and ±infinity as ``float("nan")`` / ``float("inf")`` (``repr``
    writes ``nan``, a NameError in the probe), integers of any size, nesting kept; anything else by ``repr`` of its
    text."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return 'float("nan")' if value != value else ('float("inf")' if value > 0 else '-float("inf")')
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        items = ", ".join(literal(v) for v in value)
        return f"({items}{',' if len(value) == 1 else ''})" if isinstance(value, tuple) else f"[{items}]"
    return repr(str(value))


def probe_name(s: RecordedSearch) -> str:
    """The name of a search's probe: the kernel's name and the search key's first 8 digits, so that several searches
    of one kernel (problem sizes, dtypes, call sites) are several probes; the table's rows go back under the kernel's
    name (:func:`tileprobe.tune.export.annotate_searches`)."""
    return f"{s.kernel.name}@{s.key[:8]}"


def _header(s: RecordedSearch, origin: Origin, probe_dir: str) -> list[str]:
    k = s.kernel
    site = s.sites.most_common(1)[0][0] if s.sites else "?"
    via = s.launch_sites.most_common(1)[0][0] if s.launch_sites else "?"
    pick = (f"C{s.best}" + (f" ({s.best_us:,.1f} µs by cuda.tile.tune)" if s.best_us is not None else "")
            if s.best is not None else f"none ({s.error})" if s.error else "not seen")
    lines = [f"Tuning probe of {k.name}'s search at {site}, written {origin.sentence()}", "",
             f"Kernel: {k.spec(probe_dir) or '(cannot be imported: see TODO below)'}  "
             f"(defined at {k.file}:{k.line})",
             f"The program's search (cuda.tile.tune.exhaustive_search via {via}): {len(s.configs)} configurations, "
             f"searched {s.count} time(s); its pick: {pick}"
             + (f"; its search took {s.wall_s:.1f} s" if s.wall_s is not None else "") + ".",
             "Space: exactly the program's configurations (programs_own keeps each with the hints the program gives "
             "it); default: its first, C0.",
             f"Problem (search key {s.key}): the arguments equal in every configuration, positions "
             f"{', '.join(map(str, s.problem)) or 'none'}.",
             ("Outputs (written by the program's search): arguments " + ", ".join(map(str, s.outputs))
              + "; every candidate is checked against C0's output.") if s.outputs else
             "No argument was seen written by the program's search (values not readable here): outputs are not "
             "checked until you make them arrays.empty.",
             "Array values are not recorded: floating inputs are random, integer arrays zeros."]
    if s.compiler_timeout_s is not None:
        lines.append(f"The program searched under ct.compiler_timeout({s.compiler_timeout_s:g}).")
    opts = SearchOptions.of(s.options)
    if opts.text():
        lines.append(f"The program's search passed {opts.text()}: tuned so (flush_l2=False: timed without L2 "
                     "flushes; single_run_timeout_sec: a slower launch fails its candidate).")
    if s.skipped:
        lines.append(f"Left out: {len(s.skipped)} of the program's {s.space_size or len(s.configs) + len(s.skipped)} "
                     "configurations (positions from 0; C0 … are the others in order): "
                     + "; ".join(f"#{i} {why}" for i, why in s.skipped[:5])
                     + (f"; and {len(s.skipped) - 5} more" if len(s.skipped) > 5 else "") + ".")
    return ['"""' + doc_text(lines[0])] + [doc_text(x) for x in lines[1:]] + ['"""']


def render_search_probe(s: RecordedSearch, origin: Origin, probe_dir: str) -> str:
    """The text of the tuning probe of one recorded search (to be written in ``probe_dir``)."""
    plan = ProbePlan(s.kernel, [])
    kernel_lines, kernel_expr = _kernel_lines(plan, probe_dir)
    names = hint_names(s)
    labels = [f"C{i}" for i in range(len(s.configs))]
    config_lines, arg_lines, imports, todos = [], [], {"from tileprobe import Probe"}, []
    for i, (label, c) in enumerate(zip(labels, s.configs)):
        grid = tuple(c.grid or ())
        entry = {"config": c.config, "hints": config_hints(s, i), "grid": grid}
        raw = c.hints or {}
        if any(isinstance(v, dict) for v in raw.values()):
            config_lines.append(inert("    # hints as the program gave them: "
                                      + " ".join(f"{h}={hint_text(v)}" for h, v in raw.items())))
        config_lines.append(f"    {label!r}: {literal(entry)},")
        arg_text = args_text(_marked_args(s, i))
        arg_lines.append(f"    {label!r}: lambda arrays: {arg_text.tuple_text('    ')},")
        imports |= arg_text.imports
        todos += [f"{label}: {t}" for t in arg_text.todos]
    if s.kernel.ref_kind == "function":
        imports |= {"import os", "import cuda.tile as ct", "from tileprobe.probe.define import import_object"}
    if s.kernel.import_root() is not None:
        imports |= {"import os", "import sys"}
    hints = {h: sorted(dict.fromkeys(config_hints(s, i)[h] for i in range(len(labels))),
                       key=lambda x: (x is not None, x if isinstance(x, (int, float)) else 0)) for h in names}
    default = {CONFIG_CASE: labels[0], **config_hints(s, 0)}
    out = _header(s, origin, probe_dir)
    if todos:
        out[-1:] = ["TODO (arguments tileprobe could not reproduce):"] + [doc_text(f"  {t}") for t in todos] + ['"""']
    out += sorted(i for i in imports if i.startswith("import ")) + sorted(i for i in imports if i.startswith("from "))
    out += [""] + kernel_lines
    out += [f"SEARCH = {s.key!r}",
            "#: Per configuration of the program, in its order: the configuration object as JSON, the hints its",
            "#: hints_fn gave (None: not set), the grid its grid_fn gave.",
            "CONFIGS = {", *config_lines, "}", "",
            "#: Per configuration: the arguments its args_fn gave (shapes, dtypes, strides in elements, base alignment).",
            "ARGS = {", *arg_lines, "}", "", "",
            "def args(case, arrays):", f"    return ARGS[case[{CONFIG_CASE!r}]](arrays)", "", "",
            "def grid(case, hints, num_sms):", f"    return CONFIGS[case[{CONFIG_CASE!r}]][\"grid\"]", "", "",
            "def programs_own(case, hints):",
            '    """Each configuration with the hints the program gives it: the space is the program\'s, no more."""',
            f"    return all(hints.get(h) == v for h, v in CONFIGS[case[{CONFIG_CASE!r}]][\"hints\"].items())", "", "",
            "probe = Probe(", f"    kernel={kernel_expr},", "    args=args,",
            f"    cases={{{SEARCH_CASE!r}: [SEARCH], {CONFIG_CASE!r}: {labels!r}}},",
            f"    tunable=({CONFIG_CASE!r},),"]
    if hints:
        out.append(f"    hints={literal(hints)},")
    out += ["    constraint=programs_own,", f"    default={literal(default)},", "    grid=grid,",
            f"    name={probe_name(s)!r},"]
    opts = SearchOptions.of(s.options)
    if not opts.flush_l2:
        out.append("    flush_l2=False,")
    if opts.run_timeout_s is not None:
        out.append(f"    run_timeout_s={opts.run_timeout_s!r},")
    out += [")", ""]
    text = "\n".join(out)
    check_probe_text(text)
    return text


def write_search_probes(searches: list[RecordedSearch], out_dir: str, origin: Origin,
                        probe_dir_name: str = "probes") -> tuple[list[SearchProbe], list[str]]:
    """Write ``out_dir/probes/search_<kernel>_<key>.py`` per search; return (probes written, notes on searches
    that got none: configurations of several kernel functions, no importable kernel)."""
    probe_dir = os.path.join(os.path.abspath(out_dir), probe_dir_name)
    os.makedirs(probe_dir, exist_ok=True)
    taken = set(os.listdir(probe_dir))
    written, notes = [], []
    for s in searches:
        if not s.same_kernel:
            notes.append(f"search {s.key} of {s.kernel.name}: its configurations use several kernel functions; "
                         "no tuning probe written (one probe tunes one kernel)")
            continue
        refused = SearchOptions.of(s.options).refusal(s.options)
        if refused:
            notes.append(f"search {s.key} of {s.kernel.name}: {refused}")
            continue
        path = os.path.join(probe_dir, probe_filename(f"search_{s.kernel.name}_{s.key[:8]}", taken))
        with open(path, "w", encoding="utf-8") as f:
            f.write(render_search_probe(s, origin, probe_dir))
        written.append(SearchProbe(path, s))
    return written, notes


def problem_dims(args: list, problem: list) -> list[int]:
    """The dimensions of a search's problem from its first configuration's argument descriptions (the capture's
    JSON): each array's shape (a sequence's arrays in order), each integer scalar, at the ``problem`` positions."""
    out: list[int] = []

    def add(d) -> None:
        a = arg_desc(d)
        if a is None:
            return
        if a.kind == "array":
            out.extend(int(x) for x in a.shape or [] if isinstance(x, int) and not isinstance(x, bool))
        elif a.kind == "sequence":
            for x in a.items or []:
                add(x)
        elif isinstance(a.value, int) and not isinstance(a.value, bool):
            out.append(int(a.value))
    for i in problem:
        if isinstance(i, int) and 0 <= i < len(args):
            add(args[i])
    return out


def program_label(config, hints: dict) -> str:
    """A configuration as the program wrote it, for tables: ``TILE=128 occupancy=1`` — the fields of its
    configuration object (``config_json``: a dict, namespace or named tuple; tuples as ``64×64``) then the hints
    its ``hints_fn`` gave that the object does not hold (None: left to the kernel, left out); a configuration that
    is no such object by its JSON text (``[128, 64]``)."""
    def value(v) -> str:
        if isinstance(v, list) and all(isinstance(x, (int, float, str)) for x in v):
            return "×".join(map(str, v))
        return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), default=str)
    fields = config if isinstance(config, dict) else {}
    parts = [f"{k}={value(v)}" for k, v in fields.items()] if fields else ([value(config)] if config is not None
                                                                            else [])
    parts += [f"{h}={value(v)}" for h, v in (hints or {}).items() if v is not None and h not in fields]
    return " ".join(parts)


def program_labels(s: RecordedSearch) -> list[str]:
    """:func:`program_label` of each configuration of ``s`` in its order; where two read alike (or one reads as
    nothing), every configuration is ``C<i> text`` instead, so that the labels stay distinct."""
    texts = [program_label(c.config, c.hints or {}) for c in s.configs]
    if len(set(texts)) == len(texts) and all(texts):
        return texts
    return [f"C{i} {t}".rstrip() for i, t in enumerate(texts)]


def search_summary(written: list[SearchProbe], out_dir: str) -> list[dict]:
    """``record.json``'s ``searches``: per search probe, its key, kernel, configurations (as the program made them,
    with the hints it gave), the program's pick and time, sites — what a tune table's rows are annotated with."""
    out = []
    for sp in written:
        s = sp.search
        first_args = (s.configs[0].args or []) if s.configs else []
        out.append({"file": os.path.relpath(sp.path, out_dir), "key": s.key, "name": s.kernel.name,
                    "kernel": s.kernel.spec(os.path.dirname(sp.path)), "kernel_file": s.kernel.file, "count": s.count,
                    "configs": [{"label": lab, "config": c.config, "hints": c.hints or {},
                                 "text": text}
                                for lab, c, text in zip(sp.labels, s.configs, program_labels(s))],
                    "skipped": s.skipped, "space_size": s.space_size,
                    "problem": s.problem, "outputs": s.outputs, "program_pick": s.best,
                    "problem_args": [[i, first_args[i]] for i in s.problem if i < len(first_args)],
                    "program_pick_us": s.best_us, "program_search_s": s.wall_s, "error": s.error,
                    "failures": s.failures, "source_sha256": s.source_sha256, "archs": sorted(s.archs),
                    "sites": dict(s.sites.most_common(5)), "compiler_timeout_s": s.compiler_timeout_s,
                    "options": s.options, "dims": problem_dims(first_args, s.problem)})
    return out
