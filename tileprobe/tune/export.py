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
          "verdict": "winner",                      # or "tie": candidates within noise, this one has the lowest median
          "median_us": 288.5, "ci_us": [287.9, 289.0], "samples": 412,
          "tie": [{"case": {...}, "hints": {...}, "median_us": 289.1, "ci_us": [288.2, 290.3]}],  # the others
          "arch": "sm_90", "gpu": "NVIDIA H200", "tileiras": "…", "cuda_tile": "1.7.0", "timing": "sustained"}]}}

Rows are keyed by (kernel, problem, arch): writing to an existing table of this schema replaces those rows and
keeps the others, so one file can hold every kernel of a package (and several GPUs' archs). Problems with no
correct candidate are left out. A table of another ``schema_version`` or ``kind`` is refused, not overwritten.
"""
from __future__ import annotations

import datetime
import json
import os

from ..errors import TileprobeError
from ..schema import json_text

EXPORT_SCHEMA_VERSION = 1
KIND = "tileprobe.tune"


def _row(p, env: dict) -> dict | None:
    if p.pick is None or p.verdict not in ("winner", "tie"):
        return None
    pick = p.pick
    return {"problem": p.problem, "case": pick["config"]["case"], "hints": pick["config"]["hints"],
            "verdict": p.verdict, "median_us": pick.get("median_us"),
            "ci_us": [pick.get("ci_lo_us"), pick.get("ci_hi_us")], "samples": pick.get("n"),
            "tie": [{"case": t["config"]["case"], "hints": t["config"]["hints"], "median_us": t.get("median_us"),
                     "ci_us": [t.get("ci_lo_us"), t.get("ci_hi_us")]} for t in p.tie if t["label"] != pick["label"]],
            "arch": p.arch, "gpu": (env.get("gpu") or {}).get("name"), "tileiras": p.tileiras,
            "cuda_tile": p.cuda_tile, "timing": env.get("timing")}


def provenance(env: dict) -> dict:
    """The export's provenance block from a tune's environment."""
    gpu = env.get("gpu") or {}
    return {"gpu": gpu.get("name"), "arch": env.get("arch"), "num_sms": env.get("num_sms"),
            "driver": gpu.get("driver"), "clocks": env.get("clocks"), "tileiras": env.get("tileiras"),
            "cuda_tile": env.get("cuda_tile"), "timing": env.get("timing")}


def table(result, existing: dict | None = None) -> dict:
    """The export document of a :class:`~tileprobe.tune.result.TuneResult`, merged into ``existing`` (a table
    read back from the same file) when given."""
    from .._version import __version__
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


def write_export(result, path: str) -> dict:
    """Write (or merge into) the export table at ``path``; return the document written.

    Raises:
        TileprobeError: ``path`` holds something else (not JSON, another kind, another schema version).
    """
    existing = None
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                existing = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise TileprobeError(f"--export {path}: the file exists and is not a tune table ({e}); give another "
                                 "path or remove it") from e
        if not isinstance(existing, dict) or existing.get("kind") != KIND or \
                existing.get("schema_version") != EXPORT_SCHEMA_VERSION:
            raise TileprobeError(f"--export {path}: the file exists and is not a schema-{EXPORT_SCHEMA_VERSION} "
                                 f"tileprobe tune table; it was left untouched: give another path")
    doc = table(result, existing)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json_text(doc))
    os.replace(tmp, path)
    return doc
