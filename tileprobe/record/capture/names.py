"""Names and limits the capture's modules share: environment variables, the cuTile modules it wraps, the
log's schema, per-process limits. Standard library only (see :mod:`tileprobe.record.capture`).
"""
from __future__ import annotations

MODULE_NAME = "_tileprobe_record_capture"
ENV_DIR = "TILEPROBE_RECORD_DIR"
ENV_SKIP = "TILEPROBE_RECORD_SKIP"
ENV_MAX_DISTINCT = "TILEPROBE_RECORD_MAX_DISTINCT"
ENV_USE = "TILEPROBE_USE_TABLE"
#: The module whose ``exhaustive_search`` is wrapped (cuda-tile 1.7 exposes no other tuning entry point:
#: ``cuda.tile.tune.__all__`` is ``exhaustive_search``, ``TuningResult``, ``Measurement``).
TUNE_MODULE = "cuda.tile.tune._tune"
CEXT_MODULE = "cuda.tile._cext"
SCHEMA = 1
#: Base-address alignment is recorded up to this many bytes (cuTile infers at most 16; 256 is PyTorch's minimum).
ALIGN_CAP = 256
#: Distinct launches described per kernel function and process; more are only counted (a loop whose scalar
#: argument changes every launch would otherwise write a line per launch).
DEFAULT_MAX_DISTINCT = 10000
FLUSH_INTERVAL_S = 1.0
HINT_FIELDS = ("num_ctas", "occupancy", "opt_level", "num_worker_warps")
#: Packages whose frames are never the call site, wherever they are installed (kernel libraries and their hosts).
LIBRARY_PACKAGES = ("tilegym", "torch", "flashinfer")
