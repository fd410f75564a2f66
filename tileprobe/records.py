"""The facts a variant record carries besides its scalars, as records: ``VariantRecord.register_pool``
(:class:`RegisterPool`), ``.ptx`` (:class:`PtxFacts`), ``.compile_timeout`` (:class:`CompileTimeout`) and ``.sass``
(:class:`SassFacts`), and the machinery they share with ``VariantRecord.run`` (:class:`tileprobe.schema.VariantRun`).

Each is a :class:`KeyedRecord`: read and set as attributes (``pool.verdict``); a key the stored object lacks reads
None (a file written before the key existed: a ``register_pool`` of ``{verdict, reason}`` only). The objects are
kept in the order and with the keys their JSON had, unknown keys included (:attr:`KeyedRecord.extra`), so result
files and store rows of every tileprobe read and write back byte for byte. ``from_dict``/``to_dict`` are the
JSON/SQLite/pipe edge; :mod:`tileprobe.model` builds them (``PoolCheck.record()``, ``sass_facts``), the readers
use attributes.

This module sits below :mod:`tileprobe.schema` (pyproject.toml's layers): it imports nothing of tileprobe.
"""
from __future__ import annotations

import copy
from typing import Any, ClassVar, Generic, TypeVar, cast, overload

V = TypeVar("V")
R = TypeVar("R", bound="KeyedRecord")

__all__ = [
    "CompileTimeout",
    "Key",
    "KeyedRecord",
    "PoolInstruction",
    "PtxFacts",
    "RegisterPool",
    "SassFacts",
    "keyed_from_dict",
]


class Key(Generic[V]):
    """One named key of a :class:`KeyedRecord` as an attribute of type ``V`` (declared ``name = Key[int | None]()``):
    it reads None when the object has no such key, and writing it sets the key (a new key goes last, as in the
    JSON). The type is what the type checker holds readers and writers to; the JSON is not checked on reading."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Key[V]: ...

    @overload
    def __get__(self, obj: KeyedRecord, owner: type | None = None) -> V: ...

    def __get__(self, obj: KeyedRecord | None, owner: type | None = None) -> Key[V] | V:
        if obj is None:
            return self
        return cast(V, obj._items.get(self.name))    # a key never written reads None: V is declared Optional

    def __set__(self, obj: KeyedRecord, value: V) -> None:
        obj._items[self.name] = value




class KeyedRecord:
    """A JSON object's keys as attributes (:class:`Key` class attributes name them), the object's key order and
    unknown keys kept. ``_nested`` maps a key whose value is a list of objects to the record class of its items,
    ``_objects`` a key whose value is one object to its record class (both converted by ``from_dict``/``to_dict``;
    a value of another JSON type stays as it is). Setting a name that is no key raises AttributeError (``__slots__``);
    constructing with one raises TypeError."""
    __slots__ = ("_items",)
    _nested: ClassVar[dict[str, type[KeyedRecord]]] = {}
    _objects: ClassVar[dict[str, type[KeyedRecord]]] = {}

    def __init__(self, **items: Any) -> None:
        """A record with these keys, in this order (names of the class's :class:`Key` attributes; TypeError for
        any other name)."""
        self._check(items)
        self._items: dict[str, Any] = dict(items)

    @classmethod
    def _check(cls, items: dict) -> None:
        unknown = [k for k in items if not isinstance(getattr(cls, k, None), Key)]
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}")

    def replace(self: R, **items: Any) -> R:
        """A copy (shallow) with ``items`` set; a key it lacked goes last. TypeError for a name that is no key."""
        self._check(items)
        out = type(self).__new__(type(self))
        out._items = {**self._items, **items}
        return out

    @classmethod
    def from_dict(cls: type[R], d: dict) -> R:
        """A record from its JSON object (a file's, the store's or a worker's), every key kept in order; the items
        of a ``_nested`` key's list become records of their class (items that are no objects stay as they are)."""
        rec = cls.__new__(cls)
        rec._items = dict(d)
        for key, kind in cls._nested.items():
            value = rec._items.get(key)
            if isinstance(value, list):
                rec._items[key] = [kind.from_dict(x) if isinstance(x, dict) else x for x in value]
        for key, kind in cls._objects.items():
            value = rec._items.get(key)
            if isinstance(value, dict):
                rec._items[key] = kind.from_dict(value)
        return rec

    def to_dict(self) -> dict:
        """The record as its JSON object: the keys it was read with, in order, then those set since (a copy)."""
        return {k: [x.to_dict() if isinstance(x, KeyedRecord) else copy.deepcopy(x) for x in v]
                if k in self._nested and isinstance(v, (list, tuple))
                else v.to_dict() if isinstance(v, KeyedRecord) else copy.deepcopy(v)
                for k, v in self._items.items()}

    @property
    def extra(self) -> dict:
        """The keys this version has no attribute for (a newer tileprobe's), kept for writing back."""
        return {k: v for k, v in self._items.items() if not isinstance(getattr(type(self), k, None), Key)}

    def __contains__(self, key: str) -> bool:
        """Whether the object has key ``key`` (a key set to null counts; one never written does not)."""
        return key in self._items

    def __bool__(self) -> bool:
        return bool(self._items)      # a file's empty {} is no fact, as it was when these were dicts

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyedRecord) and type(other) is type(self) and self._items == other._items

    # no __hash__: a class that defines __eq__ alone is unhashable (mutable, as the dicts it replaced)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._items.items())})"


def keyed_from_dict(kind: type[KeyedRecord], d: dict | None) -> Any:
    """``kind.from_dict(d)``, or None for None (a fact not collected)."""
    return None if d is None else kind.from_dict(d)


class PoolInstruction(KeyedRecord):
    """One USETMAXREG of a register-pool check (``RegisterPool.instructions``;
    :class:`tileprobe.model.regpool.SetMaxNReg` builds it)."""
    __slots__ = ()
    address = Key[int | None]()       # byte offset in the kernel
    action = Key[str | None]()        # TRY_ALLOC (grow) | DEALLOC (shrink)
    target = Key[int | None]()        # registers per thread asked for; None for a register operand
    text = Key[str | None]()          # the instruction as nvdisasm wrote it
    guard = Key[str | None]()         # its predicate (@P0) or ""
    retry_loop = Key[bool | None]()   # a TRY_ALLOC whose next branch jumps back to it
    warps = Key[list | None]()        # warp indices that reach it (over-approximated)


class RegisterPool(KeyedRecord):
    """``VariantRecord.register_pool``: the register-pool check of setmaxnreg (
    :mod:`tileprobe.model.regpool` computes it, ``PoolCheck.record()`` builds this). Registers per CTA unless named
    per thread. Records written before the check have ``{verdict, reason}`` only (derived from their SASS); the
    other keys then read None."""
    __slots__ = ()
    _nested = {"instructions": PoolInstruction}
    verdict = Key[str | None]()                   # hang_risk | pool_ok | unknown | none
    reason = Key[str | None]()                    # the instructions, numbers and reasoning in words
    model_version = Key[int | None]()             # regpool.MODEL_VERSION of the check (None: derived, not checked)
    registers_per_thread = Key[int | None]()      # the launch count (EIATTR_REGCOUNT)
    threads = Key[int | None]()                   # threads per CTA
    pool_registers = Key[int | None]()            # the CTA's pool (per-warp allocation × warps)
    demand_registers = Key[int | None]()          # Σ over warpgroups of final count × 128
    warpgroup_counts = Key[list | None]()         # final registers per thread of each warpgroup
    instructions = Key[list | None]()             # [PoolInstruction], in address order
    gate_version = Key[int | None]()              # model.sass.GATE_VERSION of a verdict read without the SASS


class PtxFacts(KeyedRecord):
    """``VariantRecord.ptx``: the embedded PTX's performance directives of the kernel
    (:class:`tileprobe.model.cubin.PtxDirectives` builds it with ``record()``)."""
    __slots__ = ()
    maxnreg = Key[int | None]()        # .maxnreg N
    reqntid = Key[list | None]()       # .reqntid x[, y, z]
    minnctapersm = Key[int | None]()   # .minnctapersm N


class CompileTimeout(KeyedRecord):
    """``VariantRecord.compile_timeout``: the compile time against the program's compiler timeout
    (``audit --compiler-timeout S``; :func:`tileprobe.audit.pipeline.check_compile_timeout`). Seconds."""
    __slots__ = ()
    timeout_s = Key[float | None]()    # the compiler timeout checked against
    compile_s = Key[float | None]()    # the variant's compile time
    margin_s = Key[float | None]()     # timeout − compile time (< 0 when the compile exceeds it)
    exceeds = Key[bool | None]()       # compile time > timeout
    source = Key[str | None]()         # where the timeout came from (in words)


class SassFacts(KeyedRecord):
    """``VariantRecord.sass``: what a record keeps of the kernel's SASS (:func:`tileprobe.model.sass.sass_facts`
    builds it from :class:`~tileprobe.model.sass.KernelSassTraits`), or ``{"error": …}`` when nvdisasm is missing
    or failed. Counts are static instructions. Older records hold fewer keys (``{tma, spill_loads, spill_stores}``,
    or none): a missing one reads None, ``"key" in sass`` says whether it is there."""
    __slots__ = ()
    target = Key[str | None]()             # nvdisasm's .target (sm_90a)
    instructions = Key[int | None]()       # instructions, NOPs excluded
    spill_loads = Key[int | None]()        # LDL instructions
    spill_stores = Key[int | None]()       # STL instructions
    setmaxnreg = Key[list | None]()        # [[action, registers per thread]] of each USETMAXREG
    tma = Key[dict | None]()               # UTMA* / UBLK* opcode → count
    has_tma = Key[bool | None]()           # any TMA data opcode
    matrix = Key[dict | None]()            # matrix opcode → count
    matrix_families = Key[list | None]()   # matrix opcodes present, sorted
    opcodes = Key[dict | None]()           # base opcode → count, NOPs excluded (instruction families)
    error = Key[str | None]()              # why the SASS was not read (nvdisasm missing or failing)
    kernels = Key[Any]()                   # per-kernel traits, in files of another shape (gate reads their spills)

    def spills(self) -> dict | None:
        """The spill counts as the object holds them (``{"spill_loads": N, "spill_stores": N}``, its keys and
        order), or None when it has none (the tune rows' ``spills``)."""
        return {k: v for k, v in self._items.items() if "spill" in k} or None
