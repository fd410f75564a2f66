"""The tune table's JSON objects as records (:class:`~tileprobe.records.KeyedRecord`): the document
(:class:`TuneTable`), its rows (:class:`TuneRow`) with their ties, default and recorded-search blocks, the
provenance, and what the writer reads from (a tune's environment, a candidate's configuration, ``record.json``'s
searches). The layout is :mod:`tileprobe.tune.export`'s module doc; these records only name its keys.

Each keeps its object's key order and unknown keys (a newer tileprobe's), so a table read and written back keeps
every byte of the rows it did not change. ``from_dict``/``to_dict`` are the JSON edge (:func:`table_of`,
:func:`tileprobe.tune.export.read_table`); values are not checked on reading (a hand-edited table's odd value reads
as it is, and the readers check what they use).
"""
from __future__ import annotations

from typing import Any

from tileprobe.records import Key, KeyedRecord

__all__ = ["DefaultBlock", "GpuInfo", "PickConfig", "Provenance", "RecordedSearch", "RowSearch", "SearchConfig",
           "TieEntry", "TimingSettingsData", "TuneEnvironment", "TuneRow", "TuneTable", "table_of"]


class PickConfig(KeyedRecord):
    """A candidate's configuration (``CandidateRow.config``): the tuned case values and hints."""
    __slots__ = ()
    case = Key[dict | None]()     # tunable name -> value (a recorded search's: {"config": "C3"})
    hints = Key[dict | None]()    # hint -> value; null: as the kernel declares


class TieEntry(KeyedRecord):
    """A row's ``tie`` item: another candidate within noise of the pick (µs)."""
    __slots__ = ()
    case = Key[dict | None]()
    hints = Key[dict | None]()
    median_us = Key[float | None]()
    ci_us = Key[list | None]()          # [low, high]
    final_us = Key[float | None]()      # only after a steady-state final


class DefaultBlock(KeyedRecord):
    """A recorded search's row's ``default``: the program's first configuration (``C0``) as timed in the tune
    (µs), and, once annotated, its index and the program's own configuration objects."""
    __slots__ = ()
    case = Key[dict | None]()
    hints = Key[Any]()
    median_us = Key[float | None]()
    ci_us = Key[list | None]()
    status = Key[str | None]()          # the candidate's fate in the race
    final_us = Key[float | None]()
    config_index = Key[int | None]()
    config = Key[Any]()


class RowSearch(KeyedRecord):
    """A recorded search's row's ``search``: the program's configuration the row picked and where it came from."""
    __slots__ = ()
    key = Key[str | None]()             # the search's key (16 hex digits)
    config_index = Key[int | None]()
    label = Key[str | None]()
    config = Key[Any]()                 # the program's configuration object, as recorded
    hints = Key[Any]()
    program_pick = Key[Any]()           # the configuration the program itself picked
    site = Key[str | None]()            # file:line of the call
    probe = Key[str | None]()           # the search's probe file
    problem_args = Key[list | None]()   # [[position, argument JSON], …]
    options = Key[dict | None]()        # flush_l2, single_run_timeout_sec as the program passed them
    dims = Key[list | None]()           # the problem's dimensions (tune/warm.py)


class TuneRow(KeyedRecord):
    """One row of a kernel in the table: the problem, the pick, its figures (µs) and its provenance."""
    __slots__ = ()
    _nested = {"tie": TieEntry}
    _objects = {"default": DefaultBlock, "search": RowSearch}
    problem = Key[Any]()                # the problem's case values; a recorded search's: {"search": KEY}
    case = Key[dict | None]()
    hints = Key[Any]()
    verdict = Key[str | None]()         # winner | tie
    median_us = Key[float | None]()
    ci_us = Key[list | None]()
    samples = Key[int | None]()
    final_us = Key[float | None]()
    checks = Key[list | None]()
    default = Key[Any]()                # DefaultBlock (a recorded search's)
    tie = Key[list | None]()            # [TieEntry]
    arch = Key[str | None]()
    gpu = Key[str | None]()
    num_sms = Key[int | None]()
    tileiras = Key[str | None]()
    cuda_tile = Key[str | None]()
    timing = Key[str | None]()
    source_sha256 = Key[str | None]()
    search = Key[Any]()                 # RowSearch (a recorded search's)

    def identity(self) -> tuple:
        """(problem, arch, GPU name): the rows of one table that replace each other (module doc of export)."""
        return self.problem, self.arch, self.gpu

    def search_key(self) -> Any:
        """The recorded search's key of the row's problem (``{"search": KEY}``), or None."""
        return self.problem.get("search") if isinstance(self.problem, dict) else None

    def search_block(self) -> RowSearch | None:
        """The row's ``search`` block (a recorded search's, once annotated), or None."""
        return self.search if isinstance(self.search, RowSearch) else None

    def provenance_values(self) -> tuple:
        """The row's provenance, in the order of :data:`tileprobe.tune.table_store.IDENTITY`: arch, GPU name, SM
        count, tileiras build, cuda-tile version, timing mode, kernel source hash."""
        return (self.arch, self.gpu, self.num_sms, self.tileiras, self.cuda_tile, self.timing, self.source_sha256)


class Provenance(KeyedRecord):
    """The table's ``provenance`` block (a merged table's: ``{"merged": [each distinct one]}``)."""
    __slots__ = ()
    gpu = Key[str | None]()
    arch = Key[str | None]()
    num_sms = Key[int | None]()
    driver = Key[str | None]()
    clocks = Key[dict | None]()
    tileiras = Key[str | None]()
    cuda_tile = Key[str | None]()
    timing = Key[str | None]()
    merged = Key[list | None]()


class TuneTable(KeyedRecord):
    """The table document. ``kernels``: kernel label -> its rows (:class:`TuneRow`; an item that is no object is
    kept as it is)."""
    __slots__ = ()
    _objects = {"provenance": Provenance}
    schema_version = Key[Any]()
    kind = Key[Any]()
    tool = Key[str | None]()
    created = Key[str | None]()         # UTC, ISO 8601
    provenance = Key[Any]()
    kernels = Key[Any]()

    @classmethod
    def from_dict(cls, d: dict) -> TuneTable:
        """The document's records (:class:`KeyedRecord.from_dict`), each kernel's row objects as :class:`TuneRow`."""
        doc = super().from_dict(d)
        if isinstance(doc.kernels, dict):
            doc.kernels = {k: [TuneRow.from_dict(r) if isinstance(r, dict) else r for r in rows]
                           if isinstance(rows, list) else rows for k, rows in doc.kernels.items()}
        return doc

    def to_dict(self) -> dict:
        """The document as its JSON object (rows converted back, every key in its order)."""
        if not isinstance(self.kernels, dict):
            return super().to_dict()
        plain = {k: [r.to_dict() if isinstance(r, KeyedRecord) else r for r in rows]
                 if isinstance(rows, list) else rows for k, rows in self.kernels.items()}
        return KeyedRecord.to_dict(self.replace(kernels=plain))

    def rows(self) -> dict[str, list]:
        """``kernels`` when it is an object, else {} (a hand-edited table's other value)."""
        return self.kernels if isinstance(self.kernels, dict) else {}


def table_of(doc: dict | None) -> TuneTable | None:
    """The :class:`TuneTable` of a document read from JSON, or None for None."""
    return None if doc is None else TuneTable.from_dict(doc)


class GpuInfo(KeyedRecord):
    """The ``gpu`` block of a tune's environment: the GPU the worker reported."""
    __slots__ = ()
    name = Key[str | None]()
    driver = Key[str | None]()
    num_sms = Key[int | None]()
    sm = Key[Any]()                     # compute capability


class TuneEnvironment(KeyedRecord):
    """A tune's environment (``TuneResult.environment``) as the table writer reads it."""
    __slots__ = ()
    _objects = {"gpu": GpuInfo}
    gpu = Key[Any]()                    # GpuInfo, or None (a dry run)
    arch = Key[str | None]()
    num_sms = Key[int | None]()
    clocks = Key[dict | None]()
    tileiras = Key[str | None]()
    cuda_tile = Key[str | None]()
    timing = Key[str | None]()
    timing_settings = Key[dict | None]()    # TimingSettings.to_dict() (tileprobe/tune/gpu.py)

    def gpu_info(self) -> GpuInfo:
        """The GPU block (an empty one when the tune had none: its fields read None)."""
        return self.gpu if isinstance(self.gpu, GpuInfo) else GpuInfo()


class TimingSettingsData(KeyedRecord):
    """A tune environment's ``timing_settings`` (:meth:`tileprobe.tune.gpu.TimingSettings.to_dict`) as the time
    split reads it: ``graph_launches``, launches per graph replay (``graph`` timing only; 1 when absent)."""
    __slots__ = ()
    graph_launches = Key[int | None]()

    @classmethod
    def from_dict(cls, d: dict) -> TimingSettingsData:
        """The settings, ``graph_launches`` 1 when the object lacks it (settings of the other modes)."""
        rec = super().from_dict(d)
        if "graph_launches" not in rec:
            rec.graph_launches = 1
        return rec


class SearchConfig(KeyedRecord):
    """One configuration of a recorded search (``record.json``'s ``searches[i].configs``)."""
    __slots__ = ()
    label = Key[str | None]()           # C0, C1, … in the program's order
    text = Key[str | None]()            # the program's own text of it
    config = Key[Any]()
    hints = Key[Any]()
    args = Key[list | None]()           # its call's arguments as JSON


class RecordedSearch(KeyedRecord):
    """One of ``record.json``'s ``searches`` (:mod:`tileprobe.record.searches` writes them), as the table's
    annotation reads it."""
    __slots__ = ()
    _nested = {"configs": SearchConfig}
    key = Key[str | None]()
    name = Key[str | None]()            # the kernel's name
    configs = Key[list | None]()        # [SearchConfig]
    source_sha256 = Key[str | None]()
    program_pick = Key[Any]()
    sites = Key[Any]()                  # file:line -> calls
    file = Key[str | None]()            # its probe file
    options = Key[dict | None]()
    dims = Key[Any]()
    problem = Key[list | None]()        # positions of the problem's arguments
    problem_args = Key[list | None]()
