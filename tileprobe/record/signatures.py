"""The JIT signature of each recorded launch, computed the way an audit computes it — in a child process.

Grouping launches by signature needs the kernel imported and cuTile's signature inference run with the fake driver
(:mod:`tileprobe._cutile`). That happens in a fresh ``python -m tileprobe.record.signatures`` process, so importing
user code cannot disturb the caller (a pytest session holding the real driver, a module with side effects), and a
failure only means "group by arguments instead". The arguments are the very expressions the probe file will
contain (:mod:`.args`), evaluated with :class:`~tileprobe.probe.define.SpecArrays`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from tileprobe.jsonrecord import from_dict, to_dict
from tileprobe.record.args import args_text
from tileprobe.record.model import Launch

# Imports inside functions here are lazy on purpose: at the module head they would add 0.07 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

#: Seconds the child may take to import the kernels and infer every signature.
TIMEOUT_S = 300


@dataclass
class SignatureJob:
    """What the child is given per kernel (one object of ``IN.json``): the kernel's import ``spec``
    (``module:qualname``), ``kind`` (``function``: a plain function to wrap with ``ct.kernel``), the folder to put
    first on ``sys.path`` (``root``; None: none) and, per launch, its arguments as probe expressions."""
    spec: str
    kind: str | None = None
    root: str | None = None
    launches: list[list[str]] = field(default_factory=list)


@dataclass
class SignatureAnswer:
    """What the child answers per kernel (one object of ``OUT.json``): a symbol (or None) per launch of its
    :class:`SignatureJob`, in order, and why the kernel could not be imported (None: it could)."""
    symbols: list[Any] = field(default_factory=list)
    error: str | None = None


def compute_symbols(launches: list[Launch], timeout_s: float = TIMEOUT_S) -> list[str]:
    """Set ``symbol`` on each launch whose kernel can be imported; return notes on what could not be done.

    Kernels that live in the recorded script (``__main__``) are skipped: importing the script would run it.
    """
    todo: dict[tuple, SignatureJob] = {}
    owners: dict[tuple, list[Launch]] = {}
    for la in launches:
        k = la.kernel
        spec = k.spec()
        if la.symbol or spec is None or k.in_script:
            continue
        job = todo.setdefault(k.key, SignatureJob(spec, k.ref_kind, k.import_root()))
        job.launches.append(args_text(la.args).exprs)
        owners.setdefault(k.key, []).append(la)
    if not todo:
        return []
    keys = list(todo)
    with tempfile.TemporaryDirectory(prefix="tileprobe-sig-") as tmp:
        src, dst = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        with open(src, "w") as f:
            json.dump([to_dict(todo[k]) for k in keys], f)
        try:
            proc = subprocess.run([sys.executable, "-m", "tileprobe.record.signatures", src, dst], env=_child_env(),
                                  capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return [f"signatures not computed (over {timeout_s:.0f} s): launches grouped by arguments"]
        if proc.returncode != 0 or not os.path.exists(dst):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return [f"signatures not computed ({tail[0]}): launches grouped by arguments"]
        from tileprobe.cachefile import read_cache_bytes  # the child imported user code: regular, bounded
        raw = read_cache_bytes(dst, 256 << 20)
        try:
            doc = json.loads(raw) if raw is not None else None
            result = [from_dict(SignatureAnswer, r, where=dst) for r in doc] if isinstance(doc, list) else None
        except (ValueError, RecursionError):     # FieldError is a ValueError: an answer of another shape
            result = None
        if result is None:
            return ["signatures not computed (their child's answer is not a regular file of JSON): launches "
                    "grouped by arguments"]
    notes = []
    for key, res in zip(keys, result):
        for la, sym in zip(owners[key], res.symbols):
            la.symbol = sym
        if res.error:
            notes.append(f"{todo[key].spec}: signatures not computed ({res.error}); grouped by arguments")
    return notes


def _child_env() -> dict:
    """This environment without a recording hook, with this tileprobe importable."""
    from tileprobe.procs import importable_env
    from tileprobe.record.hook import clean_env
    return importable_env(clean_env(os.environ))


def _kernel(job: SignatureJob):
    import cuda.tile as ct

    from tileprobe.probe.define import import_object
    if job.root:
        sys.path.insert(0, job.root)
    obj = import_object(job.spec)
    return ct.kernel(obj) if job.kind == "function" else obj


def _symbols(job: SignatureJob) -> SignatureAnswer:
    import cuda.tile as ct

    from tileprobe.probe.define import SpecArrays
    from tileprobe.probe.signature import jit_signature
    try:
        kernel = _kernel(job)
    except Exception as e:
        return SignatureAnswer([None] * len(job.launches), f"{type(e).__name__}: {e}")
    namespace = {"arrays": SpecArrays(), "ct": ct}
    out = []
    for exprs in job.launches:
        try:
            if any("torch." in e for e in exprs):
                import torch
                namespace["torch"] = torch
            args = eval("(" + "".join(e + ", " for e in exprs) + ")", namespace)
            out.append(jit_signature(kernel, args).symbol)
        except Exception:
            out.append(None)
    return SignatureAnswer(out)


def main(argv: list[str]) -> int:
    """``python -m tileprobe.record.signatures IN.json OUT.json``."""
    from tileprobe import _cutile
    _cutile.install_fake_driver()
    with open(argv[0]) as f:
        jobs = [from_dict(SignatureJob, e, where=argv[0]) for e in json.load(f)]
    with open(argv[1], "w") as f:
        json.dump([to_dict(_symbols(job)) for job in jobs], f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
