"""The results store: every compile, cubin, GPU run and audit in one local SQLite file.

Where: ``--store PATH``, else ``$TILEPROBE_STORE``, else ``platformdirs.user_data_dir("tileprobe")/results.sqlite``.

One class, :class:`Store` (open with :meth:`Store.open`), made of one part per job over one connection, each part a
module (its docstring says how that part works):

- :mod:`tileprobe.store.connection`: opening the file (created, migrated, or refused and left untouched), the tables
  and store schema (:data:`SCHEMA_VERSION`), transactions (safe to interrupt, safe to share) and their errors,
  :func:`now`, :func:`default_path`, and what this process saved (:func:`saved_by_this_process`);
- :mod:`tileprobe.store.compiles`: the compile key (:func:`compile_key`), what a lookup reuses and for which
  compiler, saving compiles and their cubins, importing a bundle's, reading records back;
- :mod:`tileprobe.store.runs`: audits, GPU runs and tunes;
- :mod:`tileprobe.store.claims`: one compile of a variant at a time among the processes sharing a store;
- :mod:`tileprobe.store.prune`: what the store takes, and deleting old compiles.

The parts import only :mod:`tileprobe.store.connection` from this package, never each other.
"""
from __future__ import annotations

from tileprobe.store.claims import ClaimsMixin
from tileprobe.store.compiles import KEY_VERSION, RETRIED_FAILURES, REUSED_STATUSES, CompilesMixin, compile_key
from tileprobe.store.connection import (
    BUSY_TIMEOUT_S,
    SCHEMA_VERSION,
    STORE_ENV,
    begin_command,
    default_path,
    now,
    saved_by_this_process,
    store_opened_by_this_process,
)
from tileprobe.store.prune import PruneMixin
from tileprobe.store.runs import RunsMixin

__all__ = [
    "BUSY_TIMEOUT_S",
    "KEY_VERSION",
    "RETRIED_FAILURES",
    "REUSED_STATUSES",
    "SCHEMA_VERSION",
    "STORE_ENV",
    "Store",
    "begin_command",
    "compile_key",
    "default_path",
    "now",
    "saved_by_this_process",
    "store_opened_by_this_process",
]


class Store(CompilesMixin, RunsMixin, ClaimsMixin, PruneMixin):
    """A tileprobe results store (see module doc). Open with :meth:`Store.open`; usable as a context manager."""
