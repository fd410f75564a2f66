"""The run worker's messages, one dataclass per kind, and their wire form (tuples of data).

Between :mod:`tileprobe.run.watchdog` (the parent) and :mod:`tileprobe.run.worker` (docs/FAILURES.md, "the
worker protocol"):

* worker → parent, once: :class:`Hello` ``("hello", ok, info)``; when the start failed, ``info`` is a
  :class:`TaskError`'s wire form (``{"error", "exception", "message"}``);
* parent → worker: :class:`Task` ``("task", task_id, "module:function", kwargs)`` or :data:`STOP` ``("stop",)``;
* worker → parent: :class:`Started` ``("started", task_id)``, then :class:`Result` ``("result", task_id, ok,
  value)``; when the task raised, ``value`` is a :class:`TaskError`'s wire form (``{"error", "exception"}``).

The worker's messages cross as data (:mod:`tileprobe.probe.wire`: a format that cannot run code); ``from_wire``
is where the parent reads them, once, and rejects a message of another shape (:class:`ProtocolError`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["STOP", "Hello", "ProtocolError", "Result", "Started", "Task", "TaskError", "is_fatal"]

#: The parent's last message: the worker returns 0.
STOP = ("stop",)


class ProtocolError(RuntimeError):
    """A worker message of another kind or shape than the protocol allows here (a protocol bug: the worker is not
    trusted any more)."""


def _of_kind(msg: Any, kind: str, size: int) -> bool:
    return isinstance(msg, (tuple, list)) and len(msg) == size and msg[0] == kind


def is_fatal(value: Any) -> bool:
    """Whether a task's return value says its worker's context is broken (``{"fatal": true, …}``, a sticky CUDA
    error: :func:`tileprobe.run.worker.failure_of`); the worker exits after replying."""
    return isinstance(value, Mapping) and bool(value.get("fatal"))


@dataclass(frozen=True)
class TaskError:
    """Why a task raised, or why the worker could not start: the traceback (``error``), the exception's class
    name and, for a start, its message."""
    error: str = ""
    exception: str | None = None
    message: str | None = None

    @classmethod
    def of(cls, exc: BaseException, traceback_text: str, with_message: bool = False) -> TaskError:
        """The error of ``exc`` (``with_message``: its text too, for the hello)."""
        return cls(traceback_text, type(exc).__name__, str(exc) if with_message else None)

    @classmethod
    def from_wire(cls, value: Any) -> TaskError:
        """The error a worker sent (anything that is no object, or keys that are no text, read as absent)."""
        if not isinstance(value, Mapping):
            return cls()
        error, exception, message = value.get("error"), value.get("exception"), value.get("message")
        return cls(error if isinstance(error, str) else "", exception if isinstance(exception, str) else None,
                   message if isinstance(message, str) else None)

    def to_wire(self) -> dict:
        """``{"error", "exception"}``, and ``"message"`` when it has one."""
        out: dict = {"error": self.error, "exception": self.exception}
        return out if self.message is None else {**out, "message": self.message}


@dataclass(frozen=True)
class Hello:
    """The worker's first message: whether its init ran (``ok``) and what the init returned (``info``: e.g. the
    GPU's provenance, :func:`tileprobe.run.worker.gpu_info`), or why it failed (:attr:`failure`)."""
    ok: bool
    info: dict

    @classmethod
    def from_wire(cls, msg: Any) -> Hello:
        """The hello in ``msg``; a message that is no hello, or a hello whose info is no object, is a failed start
        without details."""
        if not _of_kind(msg, "hello", 3):
            return cls(False, {})
        return cls(bool(msg[1]), dict(msg[2]) if isinstance(msg[2], Mapping) else {})

    @property
    def failure(self) -> TaskError:
        """Why the start failed (empty when it did not)."""
        return TaskError() if self.ok else TaskError.from_wire(self.info)

    def to_wire(self) -> tuple:
        """The pipe's tuple for this message: ("hello", …) in the field order :func:`from_wire` reads."""
        return ("hello", self.ok, self.info)


@dataclass(frozen=True)
class Task:
    """Run ``fn`` (``"module:function"``) with ``kwargs`` in the worker; ``task_id`` pairs it with its reply."""
    task_id: int
    fn: str
    kwargs: dict

    @classmethod
    def from_wire(cls, msg: Any) -> Task | None:
        """The task in the parent's ``msg``, or None for :data:`STOP` (or an empty message: the parent is gone).

        Raises:
            ProtocolError: a message that is neither.
        """
        if not msg or msg[0] == "stop":
            return None
        if not _of_kind(msg, "task", 4) or not isinstance(msg[2], str):
            raise ProtocolError(f"the worker got {str(msg)[:200]!r}, not (\"task\", id, \"module:function\", kwargs)")
        return cls(msg[1], msg[2], dict(msg[3] or {}))

    def to_wire(self) -> tuple:
        """The pipe's tuple for this message: ("task", …) in the field order :func:`from_wire` reads."""
        return ("task", self.task_id, self.fn, self.kwargs)


@dataclass(frozen=True)
class Started:
    """The task's function is imported: its timeout starts now."""
    task_id: int

    @classmethod
    def from_wire(cls, msg: Any) -> Started | None:
        """The ``started`` in ``msg``, or None when ``msg`` is another message."""
        return cls(msg[1]) if _of_kind(msg, "started", 2) else None

    def to_wire(self) -> tuple:
        """The pipe's tuple for this message: ("started", …) in the field order :func:`from_wire` reads."""
        return ("started", self.task_id)


@dataclass(frozen=True)
class Result:
    """A task's reply: ``ok`` with the function's return ``value``, or not ok with a :class:`TaskError`'s wire form;
    ``fatal``: the value says the worker's context is broken (:func:`is_fatal`)."""
    task_id: int
    ok: bool
    value: Any

    @classmethod
    def from_wire(cls, msg: Any) -> Result:
        """The result in ``msg``.

        Raises:
            ProtocolError: ``msg`` is no ``("result", task_id, ok, value)``.
        """
        if not _of_kind(msg, "result", 4):
            raise ProtocolError(f"the worker answered {str(msg)[:200]!r}, not (\"result\", id, ok, value)")
        return cls(msg[1], bool(msg[2]), msg[3])

    @property
    def fatal(self) -> bool:
        """True for a successful reply whose value says the worker's context is broken (:func:`is_fatal`)."""
        return self.ok and is_fatal(self.value)

    @property
    def error(self) -> str:
        """The traceback of a task that raised ("" for one that returned)."""
        return "" if self.ok else TaskError.from_wire(self.value).error

    def to_wire(self) -> tuple:
        """The pipe's tuple for this message: ("result", …) in the field order :func:`from_wire` reads."""
        return ("result", self.task_id, self.ok, self.value)
