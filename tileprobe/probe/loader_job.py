"""One probe loader job as a record (:class:`LoaderJob`), and its wire form: the JSON object the loader child reads
from its argv, from the zygote's fork request or from a ("job", object) message of a staying child
(:mod:`tileprobe.probe.loader` makes it, :mod:`tileprobe.probe.loader_child` serves it; docs/FAILURES.md).

The wire form is unchanged from when the job was a dict: the same keys, ``stay`` only when set, ``task`` and
``task_args`` only with a task. :meth:`LoaderJob.from_wire` checks each field's type (a job is data the child takes
from another process). Standard library only, as the child side's imports are.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tileprobe.jsonrecord import from_dict

__all__ = ["LoaderJob"]


@dataclass
class LoaderJob:
    """What a loader child is asked to do: load the probe file ``path`` and plan its variants for ``targets``
    (arch names) up to ``max_variants``, with the ``--case``/``--hint`` overrides ``cases``/``hints`` (None: none)
    and an SM count ``num_sms`` (None: the arch's reference GPU's); or, with ``task`` (``"tileprobe.mod:name"``),
    run that function with the arguments in the file ``task_args``. ``parent``: the tileprobe process's pid (a
    zygote's child puts its own parent's there); ``sys_path``: the parent's ``sys.path``; ``tmp``: the job's own
    folder (its ``tempfile.tempdir``); ``stay``: the child waits for more jobs after this one."""
    path: str
    targets: list = field(default_factory=list)
    max_variants: int = 0
    parent: int = 0
    cases: Any = None
    hints: Any = None
    num_sms: int | None = None
    sys_path: list[str] = field(default_factory=list)
    tmp: str = ""
    stay: bool = False
    task: str | None = None
    task_args: str | None = None

    def to_wire(self) -> dict:
        """The job's JSON object (module doc: ``stay`` only when set, ``task``/``task_args`` only with a task)."""
        out: dict[str, Any] = {"path": self.path, "targets": list(self.targets), "max_variants": self.max_variants,
                               "parent": self.parent, "cases": self.cases, "hints": self.hints,
                               "num_sms": self.num_sms, "sys_path": list(self.sys_path), "tmp": self.tmp}
        if self.stay:
            out.update(stay=True)
        if self.task is not None:
            out.update(task=self.task, task_args=self.task_args)
        return out

    @classmethod
    def from_wire(cls, d: Any) -> LoaderJob:
        """A job from its JSON object, each field's type checked.

        Raises:
            tileprobe.jsonrecord.FieldError: (a ValueError) ``d`` is no object, lacks ``path`` or holds a value of
            the wrong type, named with its field.
        """
        return from_dict(cls, d, where="the loader's job")
