"""``tileprobe tune [options] -- COMMAND …`` and ``tileprobe tune --refresh TABLE``: from a program's own
``cuda.tile.tune`` searches to a table that ``tileprobe use`` answers them from.

Record the program (its searches become one tuning probe each, whose space is the program's configurations:
:mod:`tileprobe.record.searches`), tune those probes with the usual pipeline (parallel compiles, dedupe, race,
correctness against the program's first configuration), export the table and give each row the program's own
configuration (:func:`tileprobe.tune.export.annotate_searches`). ``--refresh`` re-tunes the rows that no longer hold
here, and the misses ``tileprobe use`` noted, from the probes kept in ``TABLE.record``, and says per row whether
the winner changed and what keeping the old one costs.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from tileprobe.errors import TileprobeError
from tileprobe.jsonrecord import FieldError, from_dict
from tileprobe.report.text import say

# Imports inside functions here are lazy on purpose: at the module head they would add 0.35 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

if TYPE_CHECKING:
    from tileprobe.tune.result import CandidateRow, ProblemResult

DEFAULT_TABLE = "tileprobe-tune.json"


@dataclass
class SearchConfig:
    """One configuration of a recorded search (``record.json``'s ``searches[i].configs[j]``): its probe label
    (``C0``, ``C1``, …), the program's configuration and hints as JSON, and the program's own name for it
    (``TILE=128 occupancy=1``; None in a recording of an older tileprobe)."""
    label: str | None = None
    config: Any = None
    hints: Any = None
    text: str | None = None

    @property
    def shown(self) -> str | None:
        """The program's name for it, else its label."""
        return self.text or self.label


@dataclass
class SearchEntry:
    """One search of a recording (``record.json``'s ``searches`` item, written by
    :func:`tileprobe.record.searches.search_summary`), read once by :func:`read_searches`. ``raw`` is the JSON
    object itself, for the table annotation that writes its fields into rows
    (:func:`tileprobe.tune.export.annotate_searches`). Times in s; ``program_pick``: the index of the program's own
    pick among ``configs`` (None: the program's search gave none, ``error`` says why); ``skipped``: ``[index,
    why]`` of the configurations left out; ``dims``: the problem's dimensions (:mod:`tileprobe.tune.warm`)."""
    key: str
    file: str
    name: str
    configs: list[SearchConfig]
    sites: Any
    raw: dict = field(default_factory=dict, repr=False)
    skipped: list | None = None
    space_size: int | None = None
    options: dict | None = None
    program_pick: int | None = None
    program_search_s: float | None = None
    error: str | None = None
    dims: list | None = None
    kernel_file: str | None = None

    @property
    def short(self) -> str:
        """The search key's first 8 characters, as the messages show it."""
        return self.key[:8]

    def texts(self) -> dict[str | None, str | None]:
        """Probe label → the program's name for the configuration (its label where it has none)."""
        return {c.label: c.shown for c in self.configs}


def searches_of(searches: Any, where: str) -> list[SearchEntry]:
    """A recording's searches (``record.json``'s ``searches``, or :func:`~tileprobe.record.searches.search_summary`'s
    list) as records, each checked: ``key``, ``file``, ``name`` strings, ``configs`` a list of objects,
    ``sites`` an object or list, the rest of the types :class:`SearchEntry` declares.

    Raises:
        TileprobeError: naming ``where``, the search's index and its field, with the fix (record again).
    """
    if not isinstance(searches, list):
        raise TileprobeError(f"{where}: \"searches\" is a JSON {_kind(searches)}, not a list; record again with "
                             "`tileprobe tune --export TABLE -- COMMAND`")
    return [_entry(s, i, where) for i, s in enumerate(searches)]


def _entry(s: Any, i: int, where: str) -> SearchEntry:
    if not isinstance(s, dict):
        raise TileprobeError(f"{where}: searches[{i}] is a JSON {_kind(s)}, not an object; record again")
    for name, want in (("key", str), ("file", str), ("name", str), ("configs", list), ("sites", (dict, list))):
        if not isinstance(s.get(name), want):
            raise TileprobeError(f"{where}: searches[{i}].{name} is a JSON {_kind(s.get(name))}, not "
                                 f"{'a string' if want is str else 'a list' if want is list else 'an object'}; "
                                 "record again")
    try:
        entry = from_dict(SearchEntry, {**s, "raw": {}}, where=f"{where}: searches[{i}]")
    except FieldError as e:
        raise TileprobeError(f"{e}; record again with `tileprobe tune --export TABLE -- COMMAND`") from None
    entry.raw = s
    return entry


def record_dir_of(table: str, given: str | None = None) -> str:
    """Where a table's recording lives: ``--record-dir`` or ``TABLE.record`` beside it."""
    return given or os.path.abspath(table) + ".record"


def cmd_tune_program(args, command: list[str] | None, run_tune, report) -> int:
    """Record ``command`` (or, with ``--refresh``, read what was recorded), tune its searches, write the table.
    ``run_tune(args, err) -> TuneResult`` and ``report(args, result, err) -> exit code`` are ``tileprobe tune``'s
    own (:mod:`tileprobe.cli.tune`, passed in: it imports this module)."""
    from tileprobe.cli._common import console
    from tileprobe.tune.pipeline import process_age_s
    err = console(stderr=True)
    args.tune_fns = (run_tune, report)
    args.startup_s = process_age_s()   # --budget bounds the tune: the recorded program's own run does not count
    if args.refresh:
        if command:
            raise TileprobeError("give either --refresh TABLE or -- COMMAND, not both")
        return _refresh(args, err)
    if not command:
        raise TileprobeError("no command after --: tileprobe tune --export table.json -- python app.py")
    table = args.export = args.export or DEFAULT_TABLE
    rec_dir = record_dir_of(table, args.record_dir)
    replacing = check_record_dir(rec_dir, default=not args.record_dir)
    from tileprobe.record.session import record
    if replacing and os.path.exists(table):
        say(err, f"note: replacing the recording {rec_dir} that `tileprobe tune --refresh {table}` reads: rows of "
                 f"{table} whose search this command does not make again can no longer be refreshed")
    say(err, f"recording {' '.join(command)} (its cuda.tile.tune searches) into {rec_dir} …")
    from tileprobe.record.hook import load_capture
    in_use = os.environ.get(load_capture().ENV_USE)
    if in_use:
        say(err, f"note: TILEPROBE_USE_TABLE={in_use} is set here; the recorded program runs without it (its searches "
                 "must run to be tuned)")
    res = record(command, rec_dir, force=True, keep_use=False)
    with open(os.path.join(rec_dir, TUNE_MARK), "w", encoding="utf-8") as f:
        f.write("recorded by `tileprobe tune -- COMMAND`; `tileprobe tune --refresh` reads this folder\n")
    if res.program is not None and res.program.signals:
        say(err, f"stopped by {', '.join(dict.fromkeys(res.program.signals))} while the command ran (it exited with "
                 f"{res.exit_code}): nothing tuned; what it recorded is in {rec_dir}")
        return res.exit_code or 1
    if res.exit_code:
        say(err, f"the command exited with {res.exit_code}: tuning the searches it made before")
    searches = _summary(rec_dir)
    for note in res.notes:
        say(err, f"note: {note}")
    if not searches:
        undescribed = res.recording.undescribed if res.recording is not None else []
        if undescribed:
            say(err, f"{len(undescribed)} cuda.tile.tune search(es) seen, none that could be described (said above): "
                     "nothing to tune")
        elif res.recording is not None and res.recording.exit_errors:    # it ended before it searched
            from tileprobe.report.record import exit_error_line
            say(err, f"no cuda.tile.tune search was seen: nothing to tune; {exit_error_line(res.recording)}")
        else:
            say(err, "no cuda.tile.tune search was seen: nothing to tune (is exhaustive_search called? see "
                     "docs/RECORD.md)")
        return 1
    for s in searches:
        say(err, f"search {s.name} at {next(iter(s.sites), '?')}: {_count_text(s)}; {_program_text(s)}"
                 + _options_text(s))
    return _tune_searches(args, err, table, rec_dir, searches)


TUNE_MARK = "made-by-tileprobe-tune"


def check_record_dir(rec_dir: str, default: bool) -> bool:
    """Whether ``rec_dir`` holds a recording that ``tileprobe tune`` made (and may replace); False when it is
    missing or empty. ``default``: it is ``TABLE.record`` (a recording there with a ``record.json`` counts as
    tune's, as tune wrote it before the mark existed).

    Raises:
        TileprobeError: a non-empty folder that is not a recording made by ``tileprobe tune`` (named, with the fix).
    """
    if not os.path.isdir(rec_dir):
        if os.path.exists(rec_dir):
            raise TileprobeError(f"--record-dir {rec_dir}: exists and is not a folder; give a new or empty folder")
        return False
    if not os.listdir(rec_dir):
        return False
    if os.path.exists(os.path.join(rec_dir, TUNE_MARK)) or \
            (default and os.path.isfile(os.path.join(rec_dir, "record.json"))):
        return True
    raise TileprobeError(f"{rec_dir}: a non-empty folder that is not a recording made by `tileprobe tune`; tune would "
                         "replace what is in it: give a new or empty folder with --record-dir, or remove it")


def _count_text(s: SearchEntry) -> str:
    """``6 configurations``, or for a search tuned in part ``5 of the program's 6 configurations (left out: #3
    args_fn raised ValueError: …)``."""
    skipped = [x for x in s.skipped or [] if isinstance(x, list) and len(x) == 2]
    if not skipped:
        return f"{len(s.configs)} configurations"
    total = s.space_size or len(s.configs) + len(skipped)
    shown = "; ".join(f"#{i} {why}" for i, why in skipped[:3]) + (f"; {len(skipped) - 3} more" if len(skipped) > 3
                                                                   else "")
    return f"tuned in part: {len(s.configs)} of the program's {total} configurations (left out: {shown})"


def _options_text(s: SearchEntry) -> str:
    """``; tuned with flush_l2=False, single_run_timeout_sec=30``, or nothing for cuda.tile.tune's defaults."""
    from tileprobe.record.search_options import SearchOptions
    text = SearchOptions.of(s.options).text()
    return f"; tuned with {text} (as the program searched)" if text else ""


def _program_text(s: SearchEntry) -> str:
    if s.program_pick is None:
        return f"the program's search gave no pick ({s.error or 'not seen'})"
    t = s.program_search_s
    label = f"C{s.program_pick}"
    text = next((c.text for c in s.configs if c.label == label and c.text), label)
    return f"the program picked {text}" + (f" in {t:.1f} s" if t is not None else "")


def _summary(rec_dir: str) -> list[SearchEntry]:
    """The searches of the recording in ``rec_dir`` (its ``record.json``), as records.

    Raises:
        TileprobeError: no readable recording there, or one whose searches do not fit (:func:`searches_of`)."""
    path = os.path.join(rec_dir, "record.json")
    from tileprobe.record.hook import load_capture
    try:
        doc = load_capture().read_json_file(path)
    except (OSError, ValueError) as e:
        raise TileprobeError(f"{path}: no recording to tune ({e}); run `tileprobe tune --export TABLE -- COMMAND` "
                             "first") from None
    if not isinstance(doc, dict):
        raise TileprobeError(f"{path}: not a tileprobe recording (a JSON {type(doc).__name__}, not an object); run "
                             "`tileprobe tune --export TABLE -- COMMAND` again")
    return searches_of(doc.get("searches", []), path)


def _kind(v) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(v), "number")


def check_table_shape(doc: dict, path: str) -> None:
    """Refuse a tune table whose ``kernels`` is not ``{name: [row object, …]}`` or whose rows' ``search`` is not
    an object with a string ``key``.

    Raises:
        TileprobeError: naming ``path`` and the field (``kernels.NAME[i].search.key``).
    """
    kernels = doc.get("kernels") or {}
    if not isinstance(kernels, dict):
        raise TileprobeError(f"{path}: \"kernels\" is a JSON {_kind(kernels)}, not an object of rows; give the "
                             "table `tileprobe tune --export` wrote")
    for name, rows in kernels.items():
        if not isinstance(rows, list):
            raise TileprobeError(f"{path}: kernels.{name} is a JSON {_kind(rows)}, not a list of rows")
        for i, row in enumerate(rows):
            where = f"kernels.{name}[{i}]"
            if not isinstance(row, dict):
                raise TileprobeError(f"{path}: {where} is a JSON {_kind(row)}, not a row object")
            search = row.get("search")
            if search is not None and not isinstance(search, dict):
                raise TileprobeError(f"{path}: {where}.search is a JSON {_kind(search)}, not an object")
            key = search.get("key") if search is not None else ""
            if not isinstance(key, str):
                raise TileprobeError(f"{path}: {where}.search.key is a JSON {_kind(key)}, not a string")


def _tune_searches(args, err, table: str, rec_dir: str, searches: list[SearchEntry],
                   old: dict[str, Any] | None = None) -> int:
    from tileprobe.tune.export import annotate_searches
    run_tune, report = args.tune_fns
    args.probes = [os.path.join(rec_dir, s.file) for s in searches]
    args.warm_first = _warm_start(err, table, searches)
    result = run_tune(args, err)
    relabel(result, searches)
    rc = report(args, result, err)
    if result.dry_run or not os.path.exists(table):
        return rc
    n = annotate_searches(table, [s.raw for s in searches], os.path.join(rec_dir, "probes"))
    filled = _drop_filled_misses(table, {s.key for s in searches})
    for line in comparison_lines(result, searches, old or {}):
        say(err, line)
    say(err, f"table: {table} ({n} search row(s) written{f', {filled} noted miss(es) filled' if filled else ''}); "
             f"run the program with it: tileprobe use {table} -- COMMAND")
    return rc


def _warm_start(err, table: str, searches: list[SearchEntry]) -> dict[str, list[str]]:
    """Probe label → the configurations each search races first: the picks of the table's nearest rows of the same
    kernel for other problems (:mod:`tileprobe.tune.warm`), each said on stderr; {} when there is no table yet."""
    from tileprobe.tune.export import read_table
    from tileprobe.tune.warm import config_text, known_picks, warm_labels
    if not os.path.exists(table):
        return {}
    try:
        doc = read_table(table)
    except TileprobeError:          # not a table: write_export refuses it with the reason later
        return {}
    out = {}
    for s in searches:
        picks = known_picks(doc, s.name, s.key)
        labels = {config_text(c.config, c.hints): c.label for c in s.configs if c.label is not None}
        first = warm_labels(picks, s.dims or [], labels) if picks else []
        if first:
            out[f"{s.name}@{s.short}"] = [label for label, _ in first]
            say(err, f"warm start: {s.name} ({s.short}) races first "
                     + ", ".join(f"{label} (the pick of {where})" for label, where in first))
    return out


def _case_config(row: CandidateRow) -> Any:
    """The probe label of the program's configuration a candidate row compiled (its case's ``config``; None for
    the constraint's row, which has no configuration)."""
    return (row.config or {}).get("case", {}).get("config")


def _search_of(problem: ProblemResult, by_key: dict[str, SearchEntry]) -> SearchEntry | None:
    """The recorded search a problem of the tune is (its problem's ``search`` key), or None."""
    key = (problem.problem or {}).get("search")
    return by_key.get(key) if isinstance(key, str) else None


def relabel(result, searches: list[SearchEntry]) -> None:
    """Name each candidate of a recorded search by the program's own configuration (``TILE=128 occupancy=1``,
    ``record.json``'s ``text`` of each configuration, :func:`tileprobe.record.searches.program_labels`) instead of
    the probe's ``config=C0 occupancy=1``, in the rows' ``label``, ``same_launch_as`` and ``group``: what the tables
    and ``--json`` show. A recording without the texts (an older tileprobe's) keeps the C labels."""
    by_key = {s.key: s for s in searches if s.key}
    for p in result.problems:
        s = _search_of(p, by_key)
        texts = {c.label: c.text for c in (s.configs if s is not None else []) if c.text}
        names = {r.label: texts[_case_config(r)] for r in p.candidates if r.config and _case_config(r) in texts}
        if not names:
            continue
        for r in p.candidates:
            r.label = names.get(r.label, r.label)
            r.same_launch_as = names.get(r.same_launch_as, r.same_launch_as) if r.same_launch_as else None
            r.group = [names.get(g, g) for g in r.group]


def comparison_lines(result, searches: list[SearchEntry], old: dict[str, Any]) -> list[str]:
    """Per tuned search: the table's pick against the program's own pick (and against the row it replaces, with
    what keeping the old configuration would cost), from this tune's medians. ``old``: search key → the replaced
    row's configuration index."""
    by_key = {s.key: s for s in searches}
    out = []
    for p in result.problems:
        s = _search_of(p, by_key)
        if s is None or p.pick is None:
            continue
        med = {_case_config(r): r for r in p.candidates if r.config}
        pick = _case_config(p.pick)
        texts = s.texts()   # the program's names
        best = p.pick.median_us
        shown = texts.get(pick, pick)
        text = f"{s.name} ({s.short}): pick {shown} {best:,.1f} µs" if best else f"{s.name}: pick {shown}"
        prog = s.program_pick
        if prog is not None:
            text += "; " + _versus(f"the program's pick {texts.get(f'C{prog}', f'C{prog}')}", med.get(f"C{prog}"), p,
                                   pick == f"C{prog}")
        before = old.get(s.key)
        if before is not None:
            text += "; " + _versus(f"the old row's {texts.get(f'C{before}', f'C{before}')}", med.get(f"C{before}"), p,
                                   pick == f"C{before}", changed=True)
        out.append(text)
    return out


def _versus(what: str, row: CandidateRow | None, problem, same: bool, changed: bool = False) -> str:
    """``what`` against the pick: its time and what keeping it costs (:meth:`ProblemResult.vs_pick`: the
    steady-state final's ratio when the final timed it)."""
    if same:
        return f"{what}: same" + (" winner (unchanged)" if changed else "")
    prefix = f"winner changed from {what.removeprefix('the old row' + chr(39) + 's ')}: " if changed else ""
    ratio = problem.vs_pick(row) if row is not None else None
    if row is None or row.median_us is None or ratio is None:
        return f"{prefix}{what} not timed here ({row.status if row is not None else 'no candidate'})"
    us = f"{row.final_us:,.1f} µs in the steady-state final" if row.final_us is not None else f"{row.median_us:,.1f} µs"
    return f"{prefix}{what} {us} ({row.status}): keeping it costs {100.0 * (ratio - 1.0):+.1f} %"


def _drop_filled_misses(table: str, keys: set) -> int:
    from tileprobe.record.hook import load_capture
    from tileprobe.record.log import MISSES_LIMIT_BYTES
    from tileprobe.record.use import misses_path
    path = misses_path(table)
    if not os.path.lexists(path):
        return 0
    try:      # a regular file, bounded, opened without blocking (a FIFO there is left alone: read_misses says so)
        lines = load_capture().read_regular(path, MISSES_LIMIT_BYTES).decode("utf-8", "replace").splitlines(True)
    except (OSError, ValueError):
        return 0
    keep = [ln for ln in lines if _key_of(ln) not in keys]
    if len(keep) < len(lines):
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(keep)
        os.replace(tmp, path)
    return len(lines) - len(keep)


def _key_of(line: str):
    try:
        return json.loads(line).get("key")
    except (ValueError, AttributeError):
        return None


# --- --refresh ------------------------------------------------------------------------------------------------

@dataclass
class HostFacts:
    """What this machine can say without a CUDA context about the provenance of a table row
    (:func:`host_facts`); None where it cannot tell. ``num_sms`` is not read here (it needs a CUDA context)."""
    tileiras: str | None = None
    cuda_tile: str | None = None
    gpu: str | None = None
    num_sms: int | None = None

    def provenance(self) -> dict[str, Any]:
        """The facts known, as the capture's provenance check takes them (``{"tileiras": …, "gpu": …}``)."""
        return {name: value for name, value in asdict(self).items() if value is not None}


def picked_compiler() -> str:
    """The tileiras cuTile would compile with, found as its ``_find_compiler_bin`` looks, in its order: the pip
    packages (:func:`tileprobe.toolchain.pip_toolchain`, cuTile's own test of them), then ``tileiras`` on PATH;
    only when neither answers is cuTile asked (:func:`tileprobe._cutile.current_compiler`: its CUDA_HOME and
    /usr/local folders). The first two import nothing of cuTile: importing ``cuda.tile._compile`` imports torch,
    2–4 s of CPU on an idle 2-core machine and past 100 s under a load of 25 (docs/LOG.md), for one path.

    Raises:
        ToolchainError: no tileiras anywhere cuTile looks.
    """
    import shutil

    from tileprobe import _cutile
    from tileprobe import toolchain as tcm
    pip = tcm.pip_toolchain()
    if pip is not None:
        return pip.tileiras
    return shutil.which("tileiras") or _cutile.current_compiler()


def host_facts() -> HostFacts:
    """What this machine can say without a CUDA context about the provenance of a row: the tileiras build cuTile
    would compile with, cuda-tile's version, and the GPU name when NVML answers."""
    out = HostFacts()
    try:
        from tileprobe import _cutile
        out.tileiras = _cutile.tileiras_build(picked_compiler())
    except Exception:     # no tileiras here: the build is not a reason
        pass
    from tileprobe.schema import cutile_version
    try:
        out.cuda_tile = cutile_version()
    except TileprobeError:
        pass
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(h)
        out.gpu = name.decode() if isinstance(name, bytes) else name
    except Exception:
        pass
    return out


@dataclass
class RowSearch:
    """A table row's ``search`` object (what :func:`tileprobe.tune.export.annotate_searches` wrote): the search's
    key, its call site and the index of the configuration the row picked (types as the table has them)."""
    key: str | None = None
    site: Any = None
    config_index: Any = None


@dataclass
class StaleRow:
    """A search row of a table that does not hold here: its ``search`` object and the reasons, in words."""
    search: RowSearch
    reasons: list[str]


def stale_rows(table: dict, searches: list[SearchEntry], facts: HostFacts) -> dict[str, StaleRow]:
    """``{search key: StaleRow}`` for the table's search rows that do not hold here: the capture's own check
    (``stale_reasons``) over the facts known here, the kernel file's hash recomputed. ``table``: the table's JSON,
    checked by :func:`check_table_shape`."""
    from tileprobe.record.hook import load_capture
    cap = load_capture()
    files = {s.key: s.kernel_file for s in searches}
    known = facts.provenance()
    out = {}
    for rows in (table.get("kernels") or {}).values():
        for row in rows:
            search = from_dict(RowSearch, row.get("search") or {}, where="table row")
            if not search.key:
                continue
            kernel_file = files.get(search.key)
            here = {**known, "source_sha256": cap.source_sha256(kernel_file) if kernel_file else
                    row.get("source_sha256")}
            why = cap.stale_reasons(row, here, fields=[f for f, _ in cap.PROVENANCE if here.get(f) is not None])
            if why:
                out[search.key] = StaleRow(search, why)
    return out


def _with_probe_files(searches: list[SearchEntry], rec_dir: str, table: str, err) -> list[SearchEntry]:
    """The stale searches whose probe file is still in the recording; each one whose file is gone is said, with
    the fix, and left out before any child is started (a loader would only say "no such file")."""
    kept = []
    for s in searches:
        path = os.path.join(rec_dir, s.file)
        if os.path.isfile(path):
            kept.append(s)
        else:
            say(err, f"cannot refresh {s.key[:8]} ({s.name}): its probe {path} is gone from the recording; record "
                     f"the program again: tileprobe tune --export {table} -- COMMAND")
    return kept


def _refresh(args, err) -> int:
    from tileprobe.record.log import read_misses
    from tileprobe.record.searches import search_summary, write_search_probes
    from tileprobe.record.session import now
    from tileprobe.record.use import misses_path
    from tileprobe.record.write import Origin
    from tileprobe.tune.export import read_table
    table = args.refresh
    doc = read_table(table)
    check_table_shape(doc, table)
    rec_dir = record_dir_of(table, args.record_dir)
    recorded = _summary(rec_dir)
    facts = host_facts()
    stale = stale_rows(doc, recorded, facts)
    unchecked = [what for value, what in ((facts.gpu, "GPU name"), (facts.num_sms, "SM count")) if value is None]
    if unchecked:
        say(err, f"cannot check {'/'.join(unchecked)} here (no GPU answered NVML): rows are checked for the rest "
                 "of their provenance only, as `tileprobe use` treats them")
    for key, row in stale.items():
        say(err, f"stale: {key[:8]} ({row.search.site}): {'; '.join(row.reasons)}")
    todo = _with_probe_files([s for s in recorded if s.key in stale], rec_dir, table, err)
    gone = len([s for s in recorded if s.key in stale]) - len(todo)
    try:
        noted = read_misses(misses_path(table))
    except TileprobeError as e:
        say(err, f"note: {e}; the noted misses are not refreshed")
        noted = []
    misses = [m for m in noted if m.key not in {s.key for s in todo}]
    if misses:
        written, notes = write_search_probes(misses, rec_dir, Origin("record", now(), command=["tileprobe use"]))
        for note in notes:
            say(err, f"note: {note}")
        todo += searches_of(search_summary(written, rec_dir), rec_dir)
        say(err, f"{len(written)} noted miss(es) of `tileprobe use` to tune")
    from tileprobe.errors import EXIT_INCOMPLETE
    if not todo and gone:
        say(err, f"nothing refreshed: {gone} stale search row(s) of {table} whose probe is gone (said above)")
        return EXIT_INCOMPLETE
    if not todo:
        held = f"holds for what can be checked here (not {'/'.join(unchecked)})" if unchecked else "holds here"
        say(err, f"nothing to refresh: every search row of {table} {held} and no miss is noted")
        return 0
    old = {k: row.search.config_index for k, row in stale.items()}
    args.export = table
    rc = _tune_searches(args, err, table, rec_dir, todo, old)
    return rc or (EXIT_INCOMPLETE if gone else 0)
