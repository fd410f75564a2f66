"""``tileprobe tune --export FILE``: the tuned configurations as a JSON table that host code reads without tileprobe.

Layout (``schema_version`` :data:`EXPORT_SCHEMA_VERSION`; README "Tuning" shows a 10-line reader)::

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
          "arch": "sm_90", "gpu": "NVIDIA H200", "num_sms": 132, "tileiras": "…", "cuda_tile": "1.7.0",
          "timing": "sustained",
          # rows of a recorded search (`tileprobe tune -- COMMAND`, problem {"search": KEY}) also carry:
          "source_sha256": "…",                     # the kernel's source file when recorded
          "search": {"key": KEY, "config_index": 3, "config": {...}, "hints": {...},   # the program's own
                     "program_pick": 5, "site": "app.py:12", "probe": "…/search_k_KEY.py"}}]}}

Rows are keyed by (kernel, problem, arch): writing to an existing table of this schema replaces those rows and
keeps the others, so one file can hold every kernel of a package (and several GPUs' archs). Problems with no
correct candidate are left out. A table of another ``schema_version`` or ``kind`` is refused, not overwritten.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import stat

from tileprobe._version import __version__
from tileprobe.errors import TileprobeError
from tileprobe.schema import json_text, read_json_file

EXPORT_SCHEMA_VERSION = 1
KIND = "tileprobe.tune"


def _row(p, env: dict) -> dict | None:
    if p.pick is None or p.verdict not in ("winner", "tie"):
        return None
    pick = p.pick
    final = {"final_us": pick.final_us} if pick.final_us is not None else {}
    return {"problem": p.problem, "case": pick.config["case"], "hints": pick.config["hints"],
            "verdict": p.verdict, "median_us": pick.median_us,
            "ci_us": [pick.ci_lo_us, pick.ci_hi_us], "samples": pick.n, **final,
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
        rows = [r for r in kernels.get(p.kernel, []) if (r.get("problem"), r.get("arch")) != (row["problem"], p.arch)]
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
    doc = read_table(path)
    by_key = {s["key"]: s for s in searches if s.get("key")}
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
            row["search"] = {"key": s["key"], "config_index": i, "config": c.get("config"), "hints": c.get("hints"),
                             "program_pick": s.get("program_pick"), "site": next(iter(s.get("sites") or {}), None),
                             "probe": os.path.join(probe_dir, os.path.basename(s["file"])) if probe_dir and
                             s.get("file") else s.get("file")}
            n += 1
    _under_kernel_names(doc, by_key)
    _write(doc, path)
    return n


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
            same = (row.get("problem"), row.get("arch"))
            kernels[name] = [r for r in kernels.get(name, []) if (r.get("problem"), r.get("arch")) != same] + [row]
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


#: The table's index (read by the start-up hook: tileprobe/record/capture.py ``INDEX_SUFFIX``, ``INDEX_SCHEMA``).
_INDEX_SUFFIX = ".index"
_INDEX_SCHEMA = 1
_INDEX_KEY = re.compile(r"[0-9a-f]{16}")


def _write_index(table: str, doc: dict) -> None:
    """Write the index of ``doc``, just written to ``table``, in place of any older one (a new folder, renamed into
    place): ``TABLE.index/meta.json`` (the table's size and mtime) and ``XY.json`` per first two hex digits of the
    search key's SHA-256, each ``[[kernel, row], …]``. Its reader is the start-up hook's (tileprobe/record/capture.py,
    ``index_rows``, where the format is described; tests/test_table_index.py holds the two together). Raises
    OSError when it cannot (the table stays; the hook then reads it whole)."""
    import shutil
    import tempfile
    buckets: dict = {}
    for kernel, rows in (doc.get("kernels") or {}).items():
        for row in rows if isinstance(rows, list) else ():
            key = (row.get("search") or {}).get("key") if isinstance(row, dict) else None
            if isinstance(key, str) and _INDEX_KEY.fullmatch(key):
                buckets.setdefault(hashlib.sha256(key.encode()).hexdigest()[:2], []).append([kernel, row])
    folder = table + _INDEX_SUFFIX
    tmp = tempfile.mkdtemp(prefix=os.path.basename(folder) + ".tmp-", dir=os.path.dirname(os.path.abspath(table)))
    try:
        for name, pairs in buckets.items():
            with open(os.path.join(tmp, name + ".json"), "w", encoding="utf-8") as f:
                f.write(json_text(pairs, indent=None))     # as the table writes its rows
        st = os.stat(table)
        with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
            json.dump({"schema": _INDEX_SCHEMA, "size": st.st_size, "mtime_ns": st.st_mtime_ns}, f)
        old = f"{folder}.old-{os.getpid()}"
        if os.path.lexists(folder):
            os.rename(folder, old)     # a file or a link there is moved aside too, never written through
        os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if os.path.isdir(old) and not os.path.islink(old):
        shutil.rmtree(old, ignore_errors=True)
    elif os.path.lexists(old):
        os.remove(old)


def _write(doc: dict, path: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json_text(doc))
    os.replace(tmp, path)
    try:       # the index beside it (TABLE.index): a searching process reads one bucket, not the whole table
        _write_index(path, doc)
    except OSError:
        pass   # the hook reads the table whole, as without an index


def write_export(result, path: str) -> dict:
    """Write (or merge into) the export table at ``path``; return the document written.

    Raises:
        TileprobeError: ``path`` holds something else (not JSON, another kind, another schema version).
    """
    existing = None
    if os.path.exists(path):
        try:
            existing = _read_json(path)
        except (OSError, TileprobeError) as e:
            raise TileprobeError(f"--export {path}: the file exists and is not a tune table ({e}); give another "
                                 "path or remove it") from e
        if not isinstance(existing, dict) or existing.get("kind") != KIND or \
                existing.get("schema_version") != EXPORT_SCHEMA_VERSION:
            raise TileprobeError(f"--export {path}: the file exists and is not a schema-{EXPORT_SCHEMA_VERSION} "
                                 f"tileprobe tune table; it was left untouched: give another path")
    doc = table(result, existing)
    _write(doc, path)
    return doc
