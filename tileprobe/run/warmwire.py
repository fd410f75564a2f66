"""The kept-warm server's messages (:mod:`tileprobe.run.warmserver` ↔ :mod:`tileprobe.run.keepwarm`), one dataclass
per kind, and their JSON objects (``{"op": …, …}``, sent as :func:`tileprobe.probe.wire.dumps` text: data only).

* client → server: :class:`ClientHello` ``{"op": "hello", "provenance"}``; then :class:`TaskRequest` ``{"op":
  "task", "fn", "kwargs", "timeout_s"}`` or ``{"op": "stop"}`` (:data:`STOP`);
* server → client: :class:`ServerHello` ``{"op": "hello", "ok", "why", "pid", "idle_s", "provenance", "info",
  "worker_pid"}``, then one :class:`Outcome` ``{"op": "outcome", "status", "value", "error", "wall_s",
  "worker_pid", "exit_status", "restarts", "info"}`` per task.

``from_wire`` is where a side reads the other's message, once: a message of another kind reads None; a task that
cannot be run names its problem (:meth:`TaskRequest.from_wire`); a server's message whose fields do not fit
raises :class:`~tileprobe.jsonrecord.FieldError` (the client then uses a worker of its own).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from tileprobe.jsonrecord import from_dict

__all__ = ["STOP", "ClientHello", "Outcome", "ServerHello", "TaskRequest", "op_of"]

#: The client's message that ends the server.
STOP = {"op": "stop"}


def op_of(msg: Any) -> str | None:
    """The ``op`` of a message (None: no object, or no text ``op``)."""
    op = msg.get("op") if isinstance(msg, Mapping) else None
    return op if isinstance(op, str) else None


def _with_op(op: str, record: Any) -> dict:
    """The record's JSON object after its ``op`` (values as they are: a tuple stays a tuple for the wire)."""
    return {"op": op, **asdict(record)}


@dataclass
class ClientHello:
    """A client's first message: the provenance of the worker it wants (:func:`tileprobe.run.keepwarm.provenance`:
    Python, tileprobe's code fingerprint, the init, the GPU selection, the environment's paths)."""
    provenance: dict

    @classmethod
    def from_wire(cls, msg: Any) -> ClientHello | None:
        """The hello in ``msg``, or None when it is no hello (a provenance that is no object reads as empty)."""
        if op_of(msg) != "hello":
            return None
        got = msg.get("provenance")
        return cls(dict(got) if isinstance(got, Mapping) else {})

    def to_wire(self) -> dict:
        """The JSON object sent for this message: its fields plus ``"op": "hello"``."""
        return _with_op("hello", self)


@dataclass
class ServerHello:
    """The server's answer to a hello: whether its worker serves this client (``ok``), why not (``why``), the
    server's pid, its idle time before it exits (s), its provenance, its worker's hello info and pid."""
    ok: bool
    why: str = ""
    pid: int = 0
    idle_s: float = 0.0
    provenance: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    worker_pid: int | None = None

    @classmethod
    def from_wire(cls, msg: Any) -> ServerHello | None:
        """The hello in ``msg``, or None when it is no hello.

        Raises:
            tileprobe.jsonrecord.FieldError: a hello whose fields do not fit (the message names the field)."""
        if op_of(msg) != "hello":
            return None
        return from_dict(cls, msg, where="the kept-warm server's hello")

    def to_wire(self) -> dict:
        """The JSON object sent for this message: its fields plus ``"op": "hello"``."""
        return _with_op("hello", self)


@dataclass
class TaskRequest:
    """Run ``fn`` (``"module:function"``) with ``kwargs`` in the server's worker, within ``timeout_s`` seconds."""
    fn: str
    kwargs: dict
    timeout_s: float

    @classmethod
    def from_wire(cls, msg: Mapping) -> TaskRequest | str:
        """The task in a ``task`` message, or why it cannot be run: ``fn`` a non-empty string, ``kwargs`` an object
        (or absent), ``timeout_s`` a finite number > 0."""
        fn, kwargs, t = msg.get("fn"), msg.get("kwargs"), msg.get("timeout_s")
        if not isinstance(fn, str) or not fn:
            return "'fn' is not a function name"
        if kwargs is not None and not isinstance(kwargs, dict):
            return "'kwargs' is not an object"
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            return "'timeout_s' is not a finite number of seconds > 0"
        return cls(fn, dict(kwargs or {}), float(t))

    def to_wire(self) -> dict:
        """The JSON object sent for this message: its fields plus ``"op": "task"``."""
        return _with_op("task", self)


@dataclass
class Outcome:
    """What became of one task in the server's worker (:class:`tileprobe.run.watchdog.TaskOutcome`'s fields), with
    the server's worker restarts so far and its worker's hello info."""
    status: str
    value: Any = None
    error: str = ""
    wall_s: float | None = 0.0
    worker_pid: int | None = None
    exit_status: str | None = None
    restarts: int | None = 0
    info: dict | None = None

    @classmethod
    def from_wire(cls, msg: Any) -> Outcome:
        """The outcome in the server's ``msg``.

        Raises:
            tileprobe.jsonrecord.FieldError: no object, or its fields do not fit (the message names the field)."""
        return from_dict(cls, msg, where="the kept-warm server's outcome")

    def to_wire(self) -> dict:
        """The JSON object sent for this message: its fields plus ``"op": "outcome"``."""
        return _with_op("outcome", self)
