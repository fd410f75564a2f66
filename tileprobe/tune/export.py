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

from tileprobe._version import __version__
from tileprobe.errors import TileprobeError
from tileprobe.schema import json_text, read_json_file
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
    check = row.check or {}
    if check.get("checks"):
        return list(check["checks"])
    if check.get("status") == "ok":
        return ["tolerance"]
    return ["default"] if is_default else []


def default_block(p) -> dict | None:
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
    out = {"case": {"config": SEARCH_DEFAULT}, "hints": (first.config or {}).get("hints"),
           "median_us": row.median_us, "ci_us": [row.ci_lo_us, row.ci_hi_us], "status": row.status}
    if row.final_us is not None:
        out["final_us"] = row.final_us
    return out


def _config_label(row) -> str | None:
    """A recorded search's candidate as the program's configuration label (``C0``, …)."""
    return ((row.config or {}).get("case") or {}).get("config")


def _row(p, env: dict) -> dict | None:
    if p.pick is None or p.verdict not in ("winner", "tie"):
        return None
    pick = p.pick
    final = {"final_us": pick.final_us} if pick.final_us is not None else {}
    default = default_block(p)
    return {"problem": p.problem, "case": pick.config["case"], "hints": pick.config["hints"],
            "verdict": p.verdict, "median_us": pick.median_us,
            "ci_us": [pick.ci_lo_us, pick.ci_hi_us], "samples": pick.n, **final,
            "checks": checks_of(pick, default is not None and _config_label(pick) == SEARCH_DEFAULT),
            **({"default": default} if default is not None else {}),
            "tie": [{"case": t.config["case"], "hints": t.config["hints"], "median_us": t.median_us,
                     "ci_us": [t.ci_lo_us, t.ci_hi_us], **({"final_us": t.final_us} if t.final_us is not None else {})}
                    for t in p.tie if t.label != pick.label],
            "arch": p.arch, "gpu": (env.get("gpu") or {}).get("name"), "num_sms": env.get("num_sms"),
            "tileiras": p.tileiras, "cuda_tile": p.cuda_tile, "timing": env.get("timing")}


def provenance(env: dict) -> dict:
    """The export's provenance block from a tune's environment."""
    gpu = env.get("gpu") or {}
    return {"gpu": gpu.get("name"), "arch": env.get("arch"), "num_sms": env.get("num_sms"),
            "driver": gpu.get("driver"), "clocks": env.get("clocks"), "tileiras": env.get("tileiras"),
            "cuda_tile": env.get("cuda_tile"), "timing": env.get("timing")}


def table(result, existing: dict | None = None) -> dict:
    """The export document of a :class:`~tileprobe.tune.result.TuneResult`, merged into ``existing`` (a table
    read back from the same file) when given."""
    kernels: dict = {k: list(v) for k, v in ((existing or {}).get("kernels") or {}).items()}
    for p in result.problems:
        row = _row(p, result.environment)
        if row is None:
            continue
        same = (row["problem"], p.arch, row["gpu"])    # another GPU's row of the problem (a merged table) is kept
        rows = [r for r in kernels.get(p.kernel, []) if (r.get("problem"), r.get("arch"), r.get("gpu")) != same]
        kernels[p.kernel] = rows + [row]
    return {"schema_version": EXPORT_SCHEMA_VERSION, "kind": KIND, "tool": f"tileprobe {__version__}",
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "provenance": provenance(result.environment), "kernels": kernels}


def annotate_searches(path: str, searches: list[dict], probe_dir: str | None = None) -> int:
    """Give each row of a recorded search (problem ``{"search": key}``) the program's configuration it picked (as
    the program made it: ``config``, ``hints``, its index), the program's own pick, the call site and the kernel
    file's hash, from ``searches`` (``record.json``'s ``searches`` entries). Returns the rows annotated.

    Raises:
        TileprobeError: ``path`` is not a tune table.
    """
    by_key = {s["key"]: s for s in searches if s.get("key")}
    count = [0]

    def change(doc: dict | None) -> dict:
        if doc is None:
            raise TileprobeError(f"{path}: not a readable tune table (no file); make it with `tileprobe tune --export`")
        count[0] = _annotate(doc, by_key, probe_dir)
        return doc

    update_table(path, change, read_table)     # under the table's lock: a concurrent writer's rows are kept
    return count[0]


def _annotate(doc: dict, by_key: dict, probe_dir: str | None) -> int:
    n = 0
    for rows in (doc.get("kernels") or {}).values():
        for row in rows:
            s = by_key.get((row.get("problem") or {}).get("search"))
            label = (row.get("case") or {}).get("config")
            configs = {c["label"]: (i, c) for i, c in enumerate((s or {}).get("configs") or [])}
            if s is None or label not in configs:
                continue
            i, c = configs[label]
            row["source_sha256"] = s.get("source_sha256")
            row["search"] = {"key": s["key"], "config_index": i, "label": c.get("text") or label,
                             "config": c.get("config"), "hints": c.get("hints"),
                             "program_pick": s.get("program_pick"), "site": next(iter(s.get("sites") or {}), None),
                             "probe": os.path.join(probe_dir, os.path.basename(s["file"])) if probe_dir and
                             s.get("file") else s.get("file"),
                             "problem_args": _problem_args(s)}
            if s.get("options"):            # flush_l2, single_run_timeout_sec as the program passed them
                row["search"]["options"] = s["options"]
            if isinstance(s.get("dims"), list):  # the problem's dimensions: a new shape's nearest rows (tune/warm.py)
                row["search"]["dims"] = s["dims"]
            first = (s.get("configs") or [None])[0]
            if isinstance(row.get("default"), dict) and isinstance(first, dict):    # the program's own objects
                row["default"].update(config_index=0, config=first.get("config"), hints=first.get("hints"))
            n += 1
    _under_kernel_names(doc, by_key)
    return n


def _problem_args(s: dict) -> list:
    """A recorded search's problem: ``[[position, argument JSON], …]`` of its first configuration's arguments
    (``tileprobe use --coverage`` finds a miss's nearest row by it)."""
    if s.get("problem_args"):
        return s["problem_args"]
    args = ((s.get("configs") or [{}])[0] or {}).get("args") or []
    return [[i, args[i]] for i in s.get("problem") or [] if isinstance(i, int) and i < len(args)]


def _under_kernel_names(doc: dict, by_key: dict) -> None:
    """Move each search row from its probe's label (``vadd@1a2b3c4d``: one probe per search,
    :func:`tileprobe.record.searches.probe_name`) to its kernel's name, replacing a row there of the same search
    and arch: a program's searches of one kernel are rows of one kernel, as ``tileprobe use`` looks them up."""
    kernels = doc.get("kernels") or {}
    for label in list(kernels):
        for row in list(kernels[label]):
            s = by_key.get((row.get("problem") or {}).get("search"))
            name = (s or {}).get("name")
            if not name or name == label:
                continue
            kernels[label].remove(row)
            same = (row.get("problem"), row.get("arch"), row.get("gpu"))
            kernels[name] = [r for r in kernels.get(name, []) if
                             (r.get("problem"), r.get("arch"), r.get("gpu")) != same] + [row]
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
    if not isinstance(doc, dict) or doc.get("kind") != KIND or doc.get("schema_version") != EXPORT_SCHEMA_VERSION:
        raise TileprobeError(f"{path}: not a schema-{EXPORT_SCHEMA_VERSION} tileprobe tune table")
    return doc


def merged_document(kernels: dict, provenances: list[dict]) -> dict:
    """A table document around merged ``kernels`` (:func:`tileprobe.tune.table_store.merge_tables`): the sources'
    provenance blocks, one when they all agree, else ``{"merged": [each distinct one]}`` (each row keeps its own)."""
    distinct = list({json_text(p): p for p in provenances}.values())
    return {"schema_version": EXPORT_SCHEMA_VERSION, "kind": KIND, "tool": f"tileprobe {__version__}",
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "provenance": distinct[0] if len(distinct) == 1 else {"merged": distinct}, "kernels": kernels}


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
        if not isinstance(existing, dict) or existing.get("kind") != KIND or \
                existing.get("schema_version") != EXPORT_SCHEMA_VERSION:
            raise TileprobeError(f"--export {path}: the file exists and is not a schema-{EXPORT_SCHEMA_VERSION} "
                                 f"tileprobe tune table; it was left untouched: give another path")
        return existing

    # read, merge and write under the table's lock (tileprobe.tune.table_store): tunes that export into one table
    # side by side keep each other's rows
    return update_table(path, lambda existing: table(result, existing), read_existing)
