"""``tileprobe tune --export FILE``: the tuned configurations as a JSON table that host code reads without tileprobe.

Layout (``schema_version`` :data:`EXPORT_SCHEMA_VERSION`; README "Tuning" shows a 12-line reader)::

    {"schema_version": 1,
     "kind": "tileprobe.tune",
     "tool": "tileprobe 0.1.0", "created": "2026-12-01T12:00:00Z",
     "provenance": {"gpu": "NVIDIA H200", "arch": "sm_90", "num_sms": 132, "driver": "580.159.04",
                    "clocks": {"sm_mhz": [1980.0, 1980.0], "mem_mhz": [3201.0, 3201.0]},
                    "tileiras": "Cuda compilation tools, release 13.4, V13.4.92", "cuda_tile": "1.7.0",
                    "timing": "sustained"},
     "kernels": {
       "<kernel label>": [
         {"problem": {"M": 4096},                   # the problem's case values ({} when every case name is tuned)
          "case": {"TILE_M": 128},                  # the tuned case values (tunable names only)
          "hints": {"occupancy": 2},                # the tuned hints (null: as the kernel declares)
          "verdict": "winner",                      # or "tie": candidates within noise, this one the pick (the
                                                    # lowest median, or the lowest steady-state final figure)
          "median_us": 288.5, "ci_us": [287.9, 289.0], "samples": 412,   # the race's samples of it
          "final_us": 301.2,                        # only after a steady-state final (docs/TUNE.md): its figure
          "tie": [{"case": {...}, "hints": {...}, "median_us": 289.1, "ci_us": [288.2, 290.3]}],  # the others
          "checks": ["tolerance"],                  # output checks the pick passed (+ "bit-exact": tune --bit-exact;
                                                    # ["default"]: it is the default, the others checked against it)
          "arch": "sm_90", "gpu": "NVIDIA H200", "num_sms": 132, "tileiras": "…", "cuda_tile": "1.7.0",
          "timing": "sustained",
          # rows of a recorded search (`tileprobe tune -- COMMAND`, problem {"search": KEY}) also carry:
          "source_sha256": "…",                     # the kernel's source file when recorded
          "search": {"key": KEY, "config_index": 3, "config": {...}, "hints": {...},   # the program's own
                     "program_pick": 5, "site": "app.py:12", "probe": "…/search_k_KEY.py",
                     "problem_args": [[0, {"kind": "array", "dtype": "torch.float32", "shape": [4096], …}]]},
          "default": {"case": {"config": "C0"}, "hints": {...}, "median_us": 301.0, "ci_us": [...],   # the program's
                      "status": "eliminated", "final_us": 310.2,       # first configuration, timed in this tune;
                      "config_index": 0, "config": {...}}}]}}          # `use` answers it if the pick is slower

Rows are keyed by (kernel, problem, arch, GPU name): writing to an existing table of this schema replaces those rows
and keeps the others, so one file can hold every kernel of a package, for several GPUs (``tileprobe table merge``
joins tables made apart). Problems with no
correct candidate are left out. A table of another ``schema_version`` or ``kind`` is refused, not overwritten.
"""
from __future__ import annotations

import datetime
import os
import stat
from typing import Any

from tileprobe._version import __version__
from tileprobe.errors import TileprobeError
from tileprobe.records import Key, KeyedRecord
from tileprobe.schema import json_text, read_json_file
from tileprobe.tune.table_doc import (
    DefaultBlock,
    PickConfig,
    Provenance,
    RecordedSearch,
    RowSearch,
    SearchConfig,
    TieEntry,
    TuneEnvironment,
    TuneRow,
    TuneTable,
    table_of,
)
from tileprobe.tune.table_store import update_table

EXPORT_SCHEMA_VERSION = 1
KIND = "tileprobe.tune"


#: The configuration label of a recorded search's default: the program's first configuration
#: (:mod:`tileprobe.record.searches` names them C0, C1, … in the program's order).
SEARCH_DEFAULT = "C0"


def checks_of(row, is_default: bool = False) -> list[str]:
    """The output checks a candidate row passed: ``tolerance`` (within the dtype's tolerance of the reference or
    the default's output), ``bit-exact`` (every bit equal to the default configuration's output: ``tune
    --bit-exact``), or ``["default"]`` for the default configuration itself (the others are checked against it);
    [] when unchecked."""
    check = RowCheck.from_dict(row.check or {})
    if check.checks:
        return list(check.checks)
    if check.status == "ok":
        return ["tolerance"]
    return ["default"] if is_default else []


class RowCheck(KeyedRecord):
    """A candidate row's ``check`` (:class:`~tileprobe.tune.result.CandidateRow`) as the table reads it."""
    __slots__ = ()
    status = Key[str | None]()          # ok | wrong | unchecked | hang | crash | error
    checks = Key[list | None]()         # the checks passed (tolerance, bit-exact)


def _config(row) -> PickConfig:
    """A candidate row's configuration (``{"case": …, "hints": …}``) as a record."""
    return PickConfig.from_dict(row.config or {})


def default_block(p) -> DefaultBlock | None:
    """The program's default configuration of a recorded search's problem ``p`` (``C0``) with its figures from
    this tune (µs: its race median and CI, its steady-state final when it ran one; a candidate timed as the
    duplicate of another takes that one's), or None: not a recorded search, or C0 was not timed."""
    if not isinstance(p.problem, dict) or "search" not in p.problem:
        return None
    by_label = {r.label: r for r in p.candidates if r.config}
    first = next((r for r in by_label.values() if _config_label(r) == SEARCH_DEFAULT), None)
    row = first
    if row is not None and row.median_us is None and row.same_launch_as in by_label:
        row = by_label[row.same_launch_as]
    if first is None or row is None or row.median_us is None:
        return None
    out = DefaultBlock(case={"config": SEARCH_DEFAULT}, hints=_config(first).hints, median_us=row.median_us,
                       ci_us=[row.ci_lo_us, row.ci_hi_us], status=row.status)
    if row.final_us is not None:
        out.final_us = row.final_us
    return out


def _config_label(row) -> str | None:
    """A recorded search's candidate as the program's configuration label (``C0``, …)."""
    return (_config(row).case or {}).get("config")


def _tie_entry(t) -> TieEntry:
    final = {"final_us": t.final_us} if t.final_us is not None else {}
    cfg = _config(t)
    return TieEntry(case=cfg.case, hints=cfg.hints, median_us=t.median_us, ci_us=[t.ci_lo_us, t.ci_hi_us], **final)


def _row(p, env: TuneEnvironment) -> TuneRow | None:
    if p.pick is None or p.verdict not in ("winner", "tie"):
        return None
    pick = p.pick
    cfg = _config(pick)
    final = {"final_us": pick.final_us} if pick.final_us is not None else {}
    default = default_block(p)
    return TuneRow(problem=p.problem, case=cfg.case, hints=cfg.hints, verdict=p.verdict, median_us=pick.median_us,
                   ci_us=[pick.ci_lo_us, pick.ci_hi_us], samples=pick.n, **final,
                   checks=checks_of(pick, default is not None and _config_label(pick) == SEARCH_DEFAULT),
                   **({"default": default} if default is not None else {}),
                   tie=[_tie_entry(t) for t in p.tie if t.label != pick.label],
                   arch=p.arch, gpu=env.gpu_info().name, num_sms=env.num_sms, tileiras=p.tileiras,
                   cuda_tile=p.cuda_tile, timing=env.timing)


def provenance(env: dict) -> dict:
    """The export's provenance block from a tune's environment."""
    return _provenance(TuneEnvironment.from_dict(env)).to_dict()


def _provenance(env: TuneEnvironment) -> Provenance:
    gpu = env.gpu_info()
    return Provenance(gpu=gpu.name, arch=env.arch, num_sms=env.num_sms, driver=gpu.driver, clocks=env.clocks,
                      tileiras=env.tileiras, cuda_tile=env.cuda_tile, timing=env.timing)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(result, existing: dict | None = None) -> dict:
    """The export document of a :class:`~tileprobe.tune.result.TuneResult`, merged into ``existing`` (a table
    read back from the same file) when given."""
    env = TuneEnvironment.from_dict(result.environment)
    old = table_of(existing)
    kernels: dict = {k: list(v) for k, v in (old.rows() if old is not None else {}).items()}
    for p in result.problems:
        row = _row(p, env)
        if row is None:
            continue
        same = row.identity()     # another GPU's row of the problem (a merged table) is kept
        rows = [r for r in kernels.get(p.kernel, []) if not isinstance(r, TuneRow) or r.identity() != same]
        kernels[p.kernel] = rows + [row]
    return TuneTable(schema_version=EXPORT_SCHEMA_VERSION, kind=KIND, tool=f"tileprobe {__version__}",
                     created=_now(), provenance=_provenance(env), kernels=kernels).to_dict()


def annotate_searches(path: str, searches: list[dict], probe_dir: str | None = None) -> int:
    """Give each row of a recorded search (problem ``{"search": key}``) the program's configuration it picked (as
    the program made it: ``config``, ``hints``, its index), the program's own pick, the call site and the kernel
    file's hash, from ``searches`` (``record.json``'s ``searches`` entries). Returns the rows annotated.

    Raises:
        TileprobeError: ``path`` is not a tune table.
    """
    recorded = [RecordedSearch.from_dict(s) for s in searches if isinstance(s, dict)]
    by_key = {s.key: s for s in recorded if s.key}
    count = [0]

    def change(doc: dict | None) -> dict:
        if doc is None:
            raise TileprobeError(f"{path}: not a readable tune table (no file); make it with `tileprobe tune --export`")
        table = TuneTable.from_dict(doc)
        count[0] = _annotate(table, by_key, probe_dir)
        return table.to_dict()

    update_table(path, change, read_table)     # under the table's lock: a concurrent writer's rows are kept
    return count[0]


def _row_search(s: RecordedSearch, i: int, c: SearchConfig, label: str | None, probe_dir: str | None) -> RowSearch:
    """The ``search`` block of a row that picked configuration ``c`` (index ``i``) of recorded search ``s``."""
    probe = os.path.join(probe_dir, os.path.basename(s.file)) if probe_dir and s.file else s.file
    out = RowSearch(key=s.key, config_index=i, label=c.text or label, config=c.config, hints=c.hints,
                    program_pick=s.program_pick, site=next(iter(s.sites or {}), None), probe=probe,
                    problem_args=_problem_args(s))
    if s.options:            # flush_l2, single_run_timeout_sec as the program passed them
        out.options = s.options
    if isinstance(s.dims, list):  # the problem's dimensions: a new shape's nearest rows (tune/warm.py)
        out.dims = s.dims
    return out


def _annotate(doc: TuneTable, by_key: dict[str, RecordedSearch], probe_dir: str | None) -> int:
    n = 0
    for rows in doc.rows().values():
        for row in rows:
            if not isinstance(row, TuneRow):
                continue
            s = by_key.get(row.search_key())
            label = (row.case or {}).get("config")
            configs = {c.label: (i, c) for i, c in enumerate((s.configs if s is not None else None) or [])
                       if isinstance(c, SearchConfig)}
            if s is None or label not in configs:
                continue
            i, c = configs[label]
            row.source_sha256 = s.source_sha256
            row.search = _row_search(s, i, c, label, probe_dir)
            first = (s.configs or [None])[0]
            if isinstance(row.default, DefaultBlock) and isinstance(first, SearchConfig):   # the program's objects
                row.default.config_index, row.default.config, row.default.hints = 0, first.config, first.hints
            n += 1
    _under_kernel_names(doc, by_key)
    return n


def _problem_args(s: RecordedSearch) -> list:
    """A recorded search's problem: ``[[position, argument JSON], …]`` of its first configuration's arguments
    (``tileprobe use --coverage`` finds a miss's nearest row by it)."""
    if s.problem_args:
        return s.problem_args
    first = (s.configs or [None])[0]
    args = (first.args if isinstance(first, SearchConfig) else None) or []
    return [[i, args[i]] for i in s.problem or [] if isinstance(i, int) and i < len(args)]


def _under_kernel_names(doc: TuneTable, by_key: dict[str, RecordedSearch]) -> None:
    """Move each search row from its probe's label (``vadd@1a2b3c4d``: one probe per search,
    :func:`tileprobe.record.searches.probe_name`) to its kernel's name, replacing a row there of the same search
    and arch: a program's searches of one kernel are rows of one kernel, as ``tileprobe use`` looks them up."""
    kernels = doc.rows()
    for label in list(kernels):
        for row in list(kernels[label]):
            if not isinstance(row, TuneRow):
                continue
            s = by_key.get(row.search_key())
            name = s.name if s is not None else None
            if not name or name == label:
                continue
            kernels[label].remove(row)
            same = row.identity()
            kernels[name] = [r for r in kernels.get(name, [])
                             if not isinstance(r, TuneRow) or r.identity() != same] + [row]
        if not kernels[label]:
            del kernels[label]


def _read_json(path: str):
    """The JSON of the regular file ``path`` (at most 1 GiB, nesting bounded: :func:`tileprobe.schema.read_json_file`).

    Raises:
        TileprobeError: not a regular file (a FIFO or device would never end), too large, not JSON, too deep.
        OSError: it cannot be opened.
    """
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise TileprobeError(f"{path}: not a regular file (a FIFO, device or directory); give the tune table "
                             "`tileprobe tune --export` wrote")
    return read_json_file(path, "tune table", make="give the table `tileprobe tune --export` wrote")


def read_table(path: str) -> dict:
    """A tune table read back (schema :data:`EXPORT_SCHEMA_VERSION`, kind :data:`KIND`).

    Raises:
        TileprobeError: the file cannot be read, is not JSON or is another kind or schema.
    """
    try:
        doc = _read_json(path)
    except OSError as e:
        raise TileprobeError(f"{path}: not a readable tune table ({e}); make it with `tileprobe tune --export`") from e
    if not _is_table(doc):
        raise TileprobeError(f"{path}: not a schema-{EXPORT_SCHEMA_VERSION} tileprobe tune table")
    return doc


class _Header(KeyedRecord):
    """What tells a tune table from other JSON (its rows not read)."""
    __slots__ = ()
    kind = Key[Any]()
    schema_version = Key[Any]()


def _is_table(doc) -> bool:
    """Whether JSON ``doc`` is a tune table of this schema (:data:`KIND`, :data:`EXPORT_SCHEMA_VERSION`)."""
    if not isinstance(doc, dict):
        return False
    head = _Header.from_dict(doc)
    return head.kind == KIND and head.schema_version == EXPORT_SCHEMA_VERSION


def merged_document(kernels: dict, provenances: list[dict]) -> dict:
    """A table document around merged ``kernels`` (:func:`tileprobe.tune.table_store.merge_tables`): the sources'
    provenance blocks, one when they all agree, else ``{"merged": [each distinct one]}`` (each row keeps its own)."""
    distinct = list({json_text(p): p for p in provenances}.values())
    return TuneTable(schema_version=EXPORT_SCHEMA_VERSION, kind=KIND, tool=f"tileprobe {__version__}",
                     created=_now(), provenance=distinct[0] if len(distinct) == 1 else Provenance(merged=distinct),
                     kernels=kernels).to_dict()


def write_export(result, path: str) -> dict:
    """Write (or merge into) the export table at ``path``; return the document written.

    Raises:
        TileprobeError: ``path`` holds something else (not JSON, another kind, another schema version).
    """
    def read_existing(path: str) -> dict:
        try:
            existing = _read_json(path)
        except (OSError, TileprobeError) as e:
            raise TileprobeError(f"--export {path}: the file exists and is not a tune table ({e}); give another "
                                 "path or remove it") from e
        if not _is_table(existing):
            raise TileprobeError(f"--export {path}: the file exists and is not a schema-{EXPORT_SCHEMA_VERSION} "
                                 f"tileprobe tune table; it was left untouched: give another path")
        return existing

    # read, merge and write under the table's lock (tileprobe.tune.table_store): tunes that export into one table
    # side by side keep each other's rows
    return update_table(path, lambda existing: table(result, existing), read_existing)
