"""The audit's result format: one record per variant, versioned JSON.

JSON layout (``schema_version`` 2)::

    {"schema_version": 2, "tool": "tileprobe 0.1.0", "created": "2026-11-29T20:00:00Z",
     "environment": {...},                      # host, python, cuda-tile, tileiras versions used, GPU (runs)
     "variants": [VariantRecord, ...]}

Each variant record (fields of :class:`VariantRecord`):

============== ======================================================================================
kernel         probe label (kernel function name unless the probe names it)
probe          probe file path
case           {constant: value} of this case
hints          {hint: value} set for this variant (absent: the kernel's declared value)
effective_hints the hints in force for this arch after ByTarget resolution
arch           target, e.g. "sm_90"
tileiras       the compiler's build string, e.g. "Cuda compilation tools, release 13.4, V13.4.92"
cuda_tile      cuda-tile version that produced the bytecode
bytecode, bytecode_sha256  the Tile IR bytecode version cuTile wrote ("13.3") and the hash of that bytecode file as
               tileiras read it ("" when not known: a failure before tileiras ran, a record made before them)
status         ok | compile_error | compiler_crash | timeout | probe_error (unchanged since schema 1; the finer
               ``failure`` class says what kind of compile_error it was)
failure        null when ok, else the failure class a user can act on (:data:`FAILURE_CLASSES`):
               unsupported_target | unsupported_feature | compile_error | compiler_crash | timeout |
               broken_environment | probe_error; :data:`FAILURE_STATUS` maps each to its ``status``
message        the compiler's own words: the meaningful lines of tileiras' stderr/stdout (or of cuTile's
               refusal), signals by name ("tileiras was killed by SIGSEGV (signal 11)")
fix            what to do about this failure (one line)
threads        threads per CTA (EIATTR_REQNTID)
registers      registers per thread (EIATTR_REGCOUNT)
max_regs       register cap given to ptxas, or null
shared_bytes   static shared memory per CTA in bytes as in the cubin (= cuobjdump SHARED)
driver_shared_bytes  static shared memory the driver reports (shared_bytes minus any reserve it includes)
stack_bytes    stack frame per thread in bytes (EIATTR_FRAME_SIZE; > 0 usually means spills)
cluster_dims   [x, y, z] or null
ctas_per_sm    theoretical CTAs per SM (cuda_occupancy.h rules)
warps_per_sm, occupancy_pct, limiter (threads | registers | shared_memory | cta_slots)
cubin_sha256   hash of the whole cubin file
code_sha256    hash of the machine code and resources only (stable across hint values the compiler ignores)
verdicts       {hint: {"status": S, "reason": str}}; S is honoured|met|unverified|partial|ignored|infeasible for hints
               with a goal (occupancy, num_ctas, allow_tma) and changed|unchanged|baseline for the others
               (opt_level, num_worker_warps, latency …); see tileprobe/judge/verdict.py. In memory each is a
               :class:`Verdict` (``v.status``, ``v.reason``); ``to_dict``/``from_dict`` and the store convert
error, repro   the whole error text (cuTile's exception) and a command that repeats the compile (failures)
compile_s      tileiras wall time (s)
symbol, signature  the mangled kernel symbol and the JIT signature's constraints
knobs          {per-load hint: case constant} (e.g. {"allow_tma": "ALLOW_TMA"}) from the probe
code_hashes, deterministic  with ``audit --repeat N``: the distinct code_sha256 over N compiles of the variant,
               and whether there was only one (null without --repeat); tileiras is not always deterministic
sass, remarks, ptx  SASS traits, compiler remarks, embedded-PTX directives (when collected)
register_pool  the register-pool check of setmaxnreg (:mod:`tileprobe.model.regpool`): {"verdict":
               hang_risk | pool_ok | unknown | none, "reason", "registers_per_thread", "threads", "pool_registers",
               "demand_registers", "warpgroup_counts", "instructions": [{address, action, target, text, guard,
               retry_loop, warps}]}, or null when the SASS was not read
compile_timeout  with ``audit --compiler-timeout S`` (a program's ct.compiler_timeout): {"timeout_s",
               "compile_s", "margin_s" (timeout − compile time, < 0 when it exceeds), "exceeds", "source"}, else null
run            GPU run result (status ok|wrong|hang|crash, median_us, …) when the variant was run
============== ======================================================================================

Readers refuse a newer ``schema_version`` and say which tileprobe to install; they migrate an older one in memory
(the file is left as it is) and say so with a :class:`SchemaMigrationWarning` and
``environment["migrated_from_schema"]`` (asv's ``update_json`` habit; :data:`MIGRATIONS`).

Version history:

1. (tileprobe 0.1.0, until 2026-12-01) verdict statuses honoured | partial | ignored | infeasible for every hint.
2. (2026-12-01) ``honoured`` only when the hint changed the machine code; ``met`` when the goal was met without it;
   hints without a goal get changed | unchanged | baseline. Migration 1 → 2: the verdicts are judged again from
   the records (every field they need is in schema 1), since a schema-1 ``honoured`` cannot be split without the
   other variants of its group. Nothing else changed.

   Added within schema 2 (2026-12-01), no version bump: ``failure``, ``message`` and ``fix``. They are
   optional (older tileprobe ignores them; ``status`` keeps its values, so old readers still see compile_error /
   compiler_crash / timeout / probe_error). A record written before them (a file, or a stored compile) gets them on
   load from ``status`` and ``error`` (:func:`derive_failure`): "Cannot find option named 'sm_NN'" →
   unsupported_target, cuTile's UnsupportedFeatureError → unsupported_feature, otherwise the status itself.
   broken_environment is never derived: it needs the environment the compiler ran in.

   Added within schema 2 (2026-12-05), no version bump: ``bytecode`` and ``bytecode_sha256``, written only when
   known (:data:`OPTIONAL_FIELDS`; older tileprobe ignores them, a record without them reads back with ``""``).

   Added within schema 2 (2026-12-02), no version bump: ``register_pool`` (optional; older tileprobe
   ignores it). A record written before it gets it on load from its ``sass`` (:func:`derive_register_pool`):
   ``none`` when the SASS traits list no setmaxnreg, ``unknown`` ("not checked") when they list some (the store
   checks those again from the cubin when it is asked for SASS), null when the SASS was not read.

   Added within schema 2 (2026-12-02), no version bump: the goal status ``unverified`` (the goal is met
   under one reading of a rule no driver has checked and not under the other). Older tileprobe shows it as an
   unknown status; files written before keep the verdicts they were written with (an audit judges afresh).
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import stat
import sys
import warnings
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from tileprobe._version import __version__
from tileprobe.errors import TileprobeError
from tileprobe.outcomes import *  # noqa: F403  (re-exported: the result format names its statuses and classes)
from tileprobe.outcomes import (
    FAILURE_FIXES,
    derive_failure,
)
from tileprobe.records import CompileTimeout, Key, KeyedRecord, PtxFacts, RegisterPool, SassFacts, keyed_from_dict

SCHEMA_VERSION = 2

def canonical(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), so fresh and stored records compare equal."""
    return json.loads(json.dumps(value, default=str))


def short_build(tileiras: str) -> str:
    """``Cuda compilation tools, release 13.4, V13.4.92`` (a record's ``tileiras``) → ``tileiras 13.4.92``;
    ``tileiras ?`` when empty."""
    m = re.search(r"V(\d+\.\d+\.\d+)", tileiras or "")
    return f"tileiras {m.group(1)}" if m else (tileiras or "tileiras ?")


def build_order(build: str) -> tuple:
    """Sort key of a record's ``tileiras`` build string: its version as numbers (``V13.4.92`` → ``(13, 4, 92)``),
    then the text; a build without a version sorts first."""
    m = re.search(r"V(\d+(?:\.\d+)+)", build or "")
    return (tuple(int(x) for x in m.group(1).split(".")) if m else (), build or "")


def cutile_version() -> str:
    """The installed cuda-tile version string (a record's ``cuda_tile``), e.g. ``"1.7.0"``.

    Raises:
        TileprobeError: cuda-tile is not installed (the message says how to install it).
    """
    try:
        return version("cuda-tile")
    except PackageNotFoundError as e:
        raise TileprobeError("cuda-tile is not installed: pip install 'cuda-tile[tileiras]'") from e


def value_key(value: Any) -> str:
    """A stable text key for a case or hint value/dict: JSON with sorted keys (tuples and lists alike)."""
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class Verdict:
    """One hint's verdict (``VariantRecord.verdicts[hint]``): ``status`` is one of :data:`GOAL_STATUSES` or
    :data:`EFFECT_STATUSES` (None only in a damaged file that has none), ``reason`` says why in words
    (:mod:`tileprobe.judge.verdict` writes both). In JSON and the store: ``{"status": S, "reason": text}``."""
    status: str | None
    reason: str = ""

    def extended(self, clause: str) -> Verdict:
        """This verdict with ``clause`` appended to its reason (``"; …"`` included by the caller)."""
        return Verdict(self.status, self.reason + clause)

    def to_dict(self) -> dict:
        """``{"status": S, "reason": text}``, as JSON files and the store hold it."""
        return {"status": self.status, "reason": self.reason}

    @classmethod
    def from_dict(cls, d: dict) -> Verdict:
        """A verdict from its JSON object (``check_fields`` made sure it is one); a missing or null reason (a
        damaged file) is ``""``, any other value its text."""
        reason = d.get("reason")
        return cls(d.get("status"), "" if reason is None else str(reason))


def verdicts_to_dict(verdicts: dict[str, Verdict]) -> dict[str, dict]:
    """``{hint: Verdict}`` as JSON objects (``{hint: {"status": S, "reason": text}}``), for the store's rows."""
    return {hint: v.to_dict() for hint, v in verdicts.items()}


def verdicts_from_dict(d: dict | None) -> dict[str, Verdict]:
    """``{hint: {"status": S, "reason": text}}`` (a file's or the store's; None: none) as ``{hint: Verdict}``."""
    return {hint: Verdict.from_dict(v) for hint, v in (d or {}).items()}


class VariantRun(KeyedRecord):
    """A GPU run's result (``VariantRecord.run``): what :func:`tileprobe.run.worker.run_variant` measured and
    checked, and what the parent added (``gpu``, ``shared_gpu``). Read and set as attributes (``run.median_us``);
    a key the result lacks reads None. Times in µs, durations in s.

    The results are kept in the order and with the keys their JSON had, unknown keys included (:attr:`extra`):
    files of every tileprobe read and write back byte for byte (a run's keys grew over time, and ``gpu`` was a
    name before it was an object). ``to_dict``/``from_dict`` are the JSON/SQLite edge
    (:class:`~tileprobe.records.KeyedRecord`). Setting a name that is no field raises AttributeError
    (``__slots__``)."""
    __slots__ = ()
    status = Key[str | None]()              # ok | wrong | hang | crash | error | skipped (run/worker.py)
    median_us = Key[float | None]()         # median of the timed launches (µs)
    p25_us = Key[float | None]()            # 25th percentile (µs)
    p75_us = Key[float | None]()            # 75th percentile (µs)
    min_us = Key[float | None]()
    mean_us = Key[float | None]()
    stdev_us = Key[float | None]()          # sample standard deviation (µs)
    samples_us = Key[list | None]()         # every timed launch (µs)
    spread_pct = Key[float | None]()        # IQR as a percentage of the median
    reps = Key[int | None]()                # timed launches
    rel_err = Key[float | None]()           # relative error against the reference (check)
    tolerance = Key[float | None]()
    max_abs_err = Key[float | None]()
    nan_count = Key[int | None]()
    unwritten_count = Key[int | None]()
    checked = Key[bool | None]()
    warnings = Key[list | None]()           # lines the reports show beside the time
    driver_ctas_per_sm = Key[int | None]()  # cuOccupancyMaxActiveBlocksPerMultiprocessor
    driver_ctas_per_sm_block1 = Key[int | None]()
    static_ctas_per_sm = Key[int | None]()  # the record's theoretical CTAs/SM
    occupancy_agrees = Key[bool | None]()   # driver == static (None: no static figure)
    driver_registers = Key[int | None]()
    driver_shared_bytes = Key[int | None]()
    driver_local_bytes = Key[int | None]()
    threads = Key[int | None]()
    grid = Key[list | None]()
    block = Key[list | None]()
    seed = Key[int | None]()
    cubin_sha256 = Key[str | None]()
    error = Key[str | None]()               # why it did not run or check (traceback, watchdog's words)
    cuda_error = Key[int | None]()          # the CUDA error code (700: illegal address)
    fatal = Key[bool | None]()
    setup_s = Key[float | None]()
    check_s = Key[float | None]()
    time_s = Key[float | None]()
    wall_s = Key[float | None]()
    timing_mode = Key[str | None]()
    clocks_before = Key[Any]()
    clocks_after = Key[Any]()
    clocks_during = Key[Any]()
    clocks_moved = Key[Any]()
    register_pool = Key[str | None]()       # the static prediction beside what happened
    gpu = Key[Any]()                        # {"index", "name", "uuid", …}, or a name in older files
    shared_gpu = Key[bool | None]()         # timed beside another worker on one GPU
    worker_pid = Key[int | None]()
    roundtrip_s = Key[float | None]()
    rounds = Key[int | None]()              # rounds pooled into this result (bisect --property time)

    @property
    def gpu_name(self) -> str | None:
        """The GPU's name: ``gpu["name"]``, or ``gpu`` itself where older files stored the name alone."""
        return self.gpu.get("name") if isinstance(self.gpu, dict) else self.gpu

    def __repr__(self) -> str:
        return f"VariantRun({', '.join(f'{k}={v!r}' for k, v in self._items.items() if k != 'samples_us')})"


def run_from_dict(d: dict | None) -> VariantRun | None:
    """``VariantRecord.run`` from its JSON object (None: not run)."""
    return None if d is None else VariantRun.from_dict(d)


@dataclass
class VariantRecord:
    """One compiled (or failed) variant with its resources, occupancy and verdicts. Units: see module doc."""
    kernel: str
    probe: str
    case: dict
    hints: dict
    arch: str
    tileiras: str
    status: str
    cuda_tile: str = ""
    bytecode: str = ""
    bytecode_sha256: str = ""
    effective_hints: dict = field(default_factory=dict)
    threads: int | None = None
    registers: int | None = None
    max_regs: int | None = None
    shared_bytes: int | None = None
    driver_shared_bytes: int | None = None
    stack_bytes: int | None = None
    cluster_dims: list | None = None
    ctas_per_sm: int | None = None
    warps_per_sm: int | None = None
    occupancy_pct: float | None = None
    limiter: str | None = None
    cubin_sha256: str | None = None
    code_sha256: str | None = None
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    error: str = ""
    repro: str = ""
    compile_s: float = 0.0
    symbol: str = ""
    signature: list = field(default_factory=list)
    knobs: dict = field(default_factory=dict)
    code_hashes: list = field(default_factory=list)
    deterministic: bool | None = None
    sass: SassFacts | None = None
    remarks: list = field(default_factory=list)
    ptx: PtxFacts | None = None
    run: VariantRun | None = None
    failure: str | None = None
    message: str = ""
    fix: str = ""
    register_pool: RegisterPool | None = None
    compile_timeout: CompileTimeout | None = None

    @property
    def ok(self) -> bool:
        """Whether the variant compiled (``status == "ok"``)."""
        return self.status == "ok"

    def same_code(self, other: VariantRecord) -> bool:
        """Whether two variants can have the same machine code: equal ``code_sha256``, or — when repeated
        compiles showed tileiras' output varies — any code hash in common."""
        mine = set(self.code_hashes) | {self.code_sha256}
        theirs = set(other.code_hashes) | {other.code_sha256}
        return bool(mine & theirs)

    def hint(self, name: str):
        """The value of hint ``name`` for this variant: set explicitly, else the effective (declared) one; for a
        per-load knob, the value of the case constant that carries it."""
        if name in self.knobs:
            return self.case.get(self.knobs[name])
        if name in self.hints and self.hints[name] is not None:
            return self.hints[name]
        return self.effective_hints.get(name)

    def verdict_status(self, hint: str, default: str | None = None) -> str | None:
        """The status of ``hint``'s verdict (``"honoured"`` …), or ``default`` when it has none."""
        v = self.verdicts.get(hint)
        return default if v is None or v.status is None else v.status

    def hintless(self, name: str) -> bool:
        """Whether this is the build without hint ``name``: the probe leaves it unset or sets it to None (the
        kernel's declared value, ``ByTarget`` resolved for the arch, or none). Never for a per-load knob (its value
        is a case constant). Verdicts and advice compare the other values with this build."""
        return name not in self.knobs and self.hints.get(name) is None

    def group_key(self, without: str) -> tuple:
        """Key of the variants that differ from this one only in hint ``without`` (same kernel/case/arch/compiler)."""
        skip_const = self.knobs.get(without)
        others = tuple(sorted((k, value_key(v)) for k, v in self.hints.items() if k != without))
        case = tuple(sorted((k, value_key(v)) for k, v in self.case.items() if k != skip_const))
        return (self.kernel, self.probe, case, others, self.arch, self.tileiras)

    def to_dict(self) -> dict:
        """The record as a JSON-ready dict (the ``variants`` items of the result document)."""
        keyed = {name: getattr(self, name) for name in KEYED_FIELDS}   # no dataclasses: converted alone
        blank: dict[str, Any] = dict.fromkeys(KEYED_FIELDS)
        d = dataclasses.asdict(dataclasses.replace(self, **blank))
        d.update({name: None if value is None else value.to_dict() for name, value in keyed.items()})
        for name in OPTIONAL_FIELDS:   # written only when known: a file of before them reads and writes back the same
            if not d[name]:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> VariantRecord:
        """A record from a ``variants`` item; keys this version does not know are ignored, missing ones default."""
        names = {f.name for f in dataclasses.fields(cls)}
        rec = cls(**{k: v for k, v in d.items() if k in names})
        rec.verdicts = verdicts_from_dict(d.get("verdicts"))
        for name, kind in KEYED_FIELDS.items():
            setattr(rec, name, keyed_from_dict(kind, d.get(name)))
        if rec.status != "ok" and not rec.failure:   # written before failure classes (see the version history)
            rec.failure, message = derive_failure(rec.status, rec.error)
            rec.message = rec.message or message
            rec.fix = rec.fix or FAILURE_FIXES.get(rec.failure or "", "")
        if "register_pool" not in d:   # written before the register-pool check (see the version history)
            rec.register_pool = derive_register_pool(rec.sass)
        return rec

    @property
    def exceeds_compile_timeout(self) -> bool:
        """Whether this variant's compile took longer than the compiler timeout it was checked against."""
        return self.compile_timeout is not None and bool(self.compile_timeout.exceeds)

    @property
    def pool_verdict(self) -> str | None:
        """The register-pool verdict (``hang_risk`` | ``pool_ok`` | ``unknown`` | ``none``), or None when the SASS
        was not read."""
        return self.register_pool.verdict if self.register_pool is not None else None

    @property
    def pool_reason(self) -> str:
        """The register-pool check's reason in words (``""`` when there is none)."""
        return (self.register_pool.reason if self.register_pool is not None else None) or ""

    @property
    def hang_risk(self) -> bool:
        """Whether the register-pool check predicts a hang (``register_pool.verdict == "hang_risk"``)."""
        return self.pool_verdict == HANG_RISK


#: Record fields written only when they hold a value (added within schema 2 on 2026-12-05; older tileprobe ignores
#: them, and a record without them reads back with ``""``).
OPTIONAL_FIELDS = ("bytecode", "bytecode_sha256")

#: The record fields held as :class:`~tileprobe.records.KeyedRecord`\ s and their classes: ``to_dict``/``from_dict``
#: convert them (key order and unknown keys kept).
KEYED_FIELDS: dict[str, type[KeyedRecord]] = {"sass": SassFacts, "ptx": PtxFacts, "run": VariantRun,
                                              "register_pool": RegisterPool, "compile_timeout": CompileTimeout}

#: Register-pool verdicts (``VariantRecord.register_pool.verdict``; :mod:`tileprobe.model.regpool`).
HANG_RISK, POOL_OK, POOL_UNKNOWN, POOL_NONE = "hang_risk", "pool_ok", "unknown", "none"
#: The reason of a record written before the check whose SASS has setmaxnreg.
POOL_NOT_CHECKED = ("not checked: the record was written before the register-pool check (by an older "
                    "tileprobe); audit again with the store (it checks the stored cubin) or with --no-store")


def derive_register_pool(sass: SassFacts | None) -> RegisterPool | None:
    """``register_pool`` for a record written before it existed, from its ``sass`` summary (see the version
    history): None without SASS traits (or with their ``error``), ``none`` when no setmaxnreg was listed, else
    ``unknown`` with :data:`POOL_NOT_CHECKED`; ``{verdict, reason}`` only, as such records are written back."""
    if not isinstance(sass, SassFacts) or "error" in sass or "setmaxnreg" not in sass:
        return None
    if not sass.setmaxnreg:
        return RegisterPool(verdict=POOL_NONE, reason="no USETMAXREG (setmaxnreg) in the SASS")
    return RegisterPool(verdict=POOL_UNKNOWN, reason=POOL_NOT_CHECKED)


def dump(records: list[VariantRecord], environment: dict) -> dict:
    """The JSON document for ``records`` (see module doc)."""
    return {"schema_version": SCHEMA_VERSION, "tool": f"tileprobe {__version__}",
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "environment": environment, "variants": [r.to_dict() for r in records]}


def json_text(doc: Any, indent: int | None = 1) -> str:
    """``doc`` as strict JSON text (RFC 8259), ending in a newline: NaN and ±infinity, which ``json.dumps`` writes as
    bare ``NaN``/``Infinity`` that most JSON readers (``jq``, JavaScript, Go) refuse, become ``null``, as
    JavaScript's ``JSON.stringify`` writes them; values JSON has no type for are written as ``str()`` of them."""
    loose = json.dumps(doc, default=str)
    return json.dumps(json.loads(loose, parse_constant=lambda _: None), indent=indent, allow_nan=False) + "\n"


def write_json(records: list[VariantRecord], environment: dict, dest: str) -> None:
    """Write the JSON document of ``records`` (:func:`json_text`) to file ``dest`` (``"-"``: standard output)."""
    write_text(dest, json_text(dump(records, environment)))


def write_text(dest: str, text: str) -> None:
    """Write ``text`` to the file ``dest``, or to standard output when ``dest`` is ``"-"``."""
    if dest == "-":
        sys.stdout.write(text)
    else:
        try:
            with open(dest, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:        # a full disk: the message names the file (the CLI says what was kept)
            if e.filename is None:
                e.filename = dest
            raise


#: Record fields and the JSON types each may have (None: null allowed). A result file or a bundle is checked against
#: them before any of it is used, so a damaged or hand-edited file is an error naming the field, not a traceback.
RECORD_FIELD_TYPES: dict[str, tuple] = {
    "kernel": (str,), "probe": (str,), "case": (dict,), "hints": (dict,), "arch": (str,), "status": (str,),
    "tileiras": (str,), "effective_hints": (dict, None), "symbol": (str, None), "signature": (list, None),
    "threads": (int, None), "registers": (int, None), "driver_shared_bytes": (int, None),
    "shared_bytes": (int, None), "ctas_per_sm": (int, None), "cubin_sha256": (str, None), "verdicts": (dict, None),
    "knobs": (dict, None), "run": (dict, None), "occupancy_pct": (int, float, None), "stack_bytes": (int, None),
    "register_pool": (dict, None), "compile_s": (int, float, None), "sass": (dict, None), "ptx": (dict, None),
    "compile_timeout": (dict, None)}
_TYPE_NAMES = {str: "a string", dict: "an object", list: "a list", int: "an integer", float: "a number",
               None: "null"}


def _type_ok(value: Any, kinds: tuple) -> bool:
    if value is None:
        return None in kinds
    if isinstance(value, bool):
        return bool in kinds
    return any(k is not None and isinstance(value, k) for k in kinds)


def check_fields(i: int, v: Any, doc: str, fix: str = "", required: bool = True) -> None:
    """Check variant ``i`` of result document ``doc`` against :data:`RECORD_FIELD_TYPES`.

    ``required``: a missing field that may not be null is an error (bundles); otherwise only present fields are
    checked (result files of every schema version).

    Raises:
        TileprobeError: ``doc: variants[i].case is [1], not an object`` (and ``fix``).
    """
    where = f"{doc}: variants[{i}]"
    tail = f"; {fix}" if fix else ""
    if not isinstance(v, dict):
        raise TileprobeError(f"{where} is {type(v).__name__}, not an object{tail}")
    for name, kinds in RECORD_FIELD_TYPES.items():
        if name not in v:
            if None in kinds or not required:
                continue
            raise TileprobeError(f"{where}.{name} is missing{tail}")
        if not _type_ok(v[name], kinds):
            want = " or ".join(_TYPE_NAMES[k] for k in kinds)
            raise TileprobeError(f"{where}.{name} is {json.dumps(v[name], default=str)[:80]}, not {want}{tail}")
    for hint, verdict in (v.get("verdicts") or {}).items():   # each verdict is an object: {"status": …, "reason": …}
        if not isinstance(verdict, dict):
            raise TileprobeError(f"{where}.verdicts.{hint} is {json.dumps(verdict, default=str)[:80]}, not an "
                                 f"object{tail}")


#: Largest result JSON file a command reads, in bytes: a 20,000-variant audit with SASS traits is about
#: 60 MB; a larger file is refused with its size before it is parsed.
MAX_RESULT_JSON_BYTES = 1 << 30


def read_json_file(path: str, what: str = "results", limit_bytes: int = MAX_RESULT_JSON_BYTES,
                   make: str | None = None) -> Any:
    """Parse the JSON file ``path`` as tileprobe reads every result file: at most ``limit_bytes``, UTF-8, integers
    of at most 4,300 digits (Python's limit), nested at most as deep as Python's recursion limit lets the parser go
    (about 1,000 levels; tileprobe writes 6). ``make``: the fix said after a parse error (default: the audit/run
    files). Raises :class:`TileprobeError` naming the file and the place (line and
    column, or byte) for anything else; OSError when it cannot be opened."""
    size = os.stat(path).st_size
    if size > limit_bytes:
        raise TileprobeError(f"{path}: {size:,} bytes, more than the {limit_bytes:,} bytes tileprobe reads as "
                             f"{what}; is it a tileprobe file?")
    with open(path, "rb") as f:
        raw = f.read(limit_bytes + 1)
    make = make or "give a file written by `tileprobe audit --json` or `tileprobe run --json`"
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TileprobeError(f"{path}: not UTF-8 text (byte {e.start:,}); {make}") from None
    except json.JSONDecodeError as e:
        raise TileprobeError(f"{path}: not JSON (line {e.lineno}, column {e.colno}: {e.msg}); {make}") from None
    except RecursionError:
        raise TileprobeError(f"{path}: nested deeper than the JSON reader goes (about "
                             f"{sys.getrecursionlimit():,} levels; tileprobe writes 6); {make}") from None
    except ValueError:               # an integer of more than 4,300 digits
        raise TileprobeError(f"{path}: holds a number of more than 4,300 digits (Python's limit for reading an "
                             f"integer): not a tileprobe {what} file; {make}") from None


def load(doc_or_path: Any, judge=None, source: str | None = None) -> tuple[list[VariantRecord], dict]:
    """Read an audit/run JSON document (dict or file path) into records and its environment.

    ``judge``: the verdict function (``tileprobe.judge.verdict.judge_records``) that a migration from schema 1
    needs to judge the verdicts again with the schema-2 statuses; without it the old verdicts are dropped (this
    module is below the audit pipeline, so the callers, which are above it, pass it in). ``source``: how messages
    name a dict (default: the path, or "results").

    Raises:
        TileprobeError: not JSON, not a tileprobe result, or written by a newer tileprobe.
    """
    doc = doc_or_path
    name = source or (doc_or_path if not isinstance(doc_or_path, dict) else "results")
    if not isinstance(doc, dict):
        try:
            if not stat.S_ISREG(os.stat(doc_or_path).st_mode):   # a FIFO or a device would block or never end
                raise TileprobeError(f"cannot read results {doc_or_path}: not a regular file (a folder, a FIFO or a "
                                     "device); give a file written by `tileprobe audit --json` or `run --json`")
            doc = read_json_file(doc_or_path, "results")
        except OSError as e:
            raise TileprobeError(f"cannot read results {doc_or_path}: {e}. Give a file written by "
                                 "`tileprobe audit --json` or `tileprobe run --json`.") from e
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if not isinstance(version, int) or "variants" not in doc:
        raise TileprobeError(f"{name}: not a tileprobe result (no schema_version/variants)")
    if version > SCHEMA_VERSION:
        raise TileprobeError(f"{name}: written with result schema {version}, this tileprobe reads up to "
                             f"{SCHEMA_VERSION}: upgrade tileprobe (pip install -U tileprobe)")
    if not isinstance(doc["variants"], list):
        raise TileprobeError(f"{name}: variants is {type(doc['variants']).__name__}, not a list")
    for i, v in enumerate(doc["variants"]):
        check_fields(i, v, str(name), "the file is damaged or was not written by tileprobe", required=False)
    records = [VariantRecord.from_dict(v) for v in doc["variants"]]
    environment = doc.get("environment", {})
    if not isinstance(environment, dict):
        raise TileprobeError(f"{name}: environment is {type(environment).__name__}, not an object (the file is "
                             "damaged or was not written by tileprobe: give one from `tileprobe audit --json`)")
    environment = dict(environment)
    if version < SCHEMA_VERSION:
        migrate(records, version, environment, source=name, judge=judge)
    return records, environment


class SchemaMigrationWarning(UserWarning):
    """An older result file was read and migrated in memory to the current schema."""


def update_to_2(records: list[VariantRecord], judge=None) -> str:
    """Schema 1 → 2: judge the verdicts again with the schema-2 statuses (``judge(records)``; without a judge the
    schema-1 verdicts are dropped); returns what was done."""
    if judge is None:
        for r in records:
            r.verdicts = {}
        return "schema-1 verdicts dropped (no judge given to load)"
    judge(records)
    return ("verdicts judged again (honoured → honoured or met; opt_level/num_worker_warps/knobs → "
            "changed/unchanged/baseline)")


#: Migrations: ``MIGRATIONS[n]`` brings records of schema n to n + 1.
MIGRATIONS = {1: update_to_2}


def migrate(records: list[VariantRecord], version: int, environment: dict, source: str = "results",
            judge=None) -> None:
    """Bring ``records`` of schema ``version`` to :data:`SCHEMA_VERSION` in place, record it in ``environment``
    (``migrated_from_schema``) and warn (:class:`SchemaMigrationWarning`). Raises TileprobeError for a version
    with no migration (below 1)."""
    done = []
    for v in range(version, SCHEMA_VERSION):
        if v not in MIGRATIONS:
            raise TileprobeError(f"{source}: result schema {version} cannot be read (no migration from {v}); "
                                 "audit again with this tileprobe")
        done.append(f"{v}→{v + 1}: {MIGRATIONS[v](records, judge)}")
    environment["migrated_from_schema"] = version
    warnings.warn(SchemaMigrationWarning(
        f"{source}: result schema {version} read and migrated to {SCHEMA_VERSION} in memory ({'; '.join(done)}); "
        "the file is unchanged: write it again (--json) to keep schema 2"), stacklevel=3)
