"""Recorded launch arguments → the Python expressions a probe's ``args`` returns (``arrays.randn(...)``, ``4096``).

One text serves both the written probe file and the signature check (:mod:`.signatures` evaluates these very
expressions with :class:`~tileprobe.probe.define.SpecArrays`), so what is checked is what is written.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from tileprobe.probe.signature import DLPACK_DTYPES, contiguous_strides, itemsize
from tileprobe.record.argdesc import ArgDesc, arg_desc

#: ``__cuda_array_interface__`` typestr (without byte order) → dtype name (NumPy array-interface protocol).
TYPESTR = {"f2": "float16", "f4": "float32", "f8": "float64", "i1": "int8", "i2": "int16", "i4": "int32",
           "i8": "int64", "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64", "b1": "bool"}
_DLPACK_NAMES = {f"{code}:{bits}": name for name, (code, bits) in DLPACK_DTYPES.items()}
#: Arrays are given at least this base alignment by ``arrays.*`` (and PyTorch's allocator): only smaller
#: recorded alignments need an ``offset=``.
DEFAULT_ALIGN = 256


def dtype_from(raw: str) -> str | None:
    """A recorded dtype (``torch.bfloat16``, ``dlpack:4:16``, ``cai:<f2``) → our dtype name, or None if tileprobe
    cannot describe it (e.g. ``torch.float4_e2m1fn_x2``)."""
    name: str | None
    if raw.startswith("torch."):
        name = raw[len("torch."):]
    elif raw.startswith("dlpack:"):
        name = _DLPACK_NAMES.get(raw[len("dlpack:"):])
    elif raw.startswith("cai:"):
        name = TYPESTR.get(raw[len("cai:") + 1:])
    else:
        name = raw
    return name if name in DLPACK_DTYPES else None


@dataclass
class ArgsText:
    """The expressions of one launch's arguments, a comment per argument (or ""), the imports they need, and
    TODOs (arguments tileprobe could not reproduce)."""
    exprs: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    imports: set[str] = field(default_factory=set)
    todos: list[str] = field(default_factory=list)

    def tuple_text(self, indent: str) -> str:
        """``(\\n    expr,  # comment\\n    ...)``: the body of a case's lambda (comments made inert: one line)."""
        lines = ["("]
        for e, c in zip(self.exprs, self.comments):
            lines.append(f"{indent}    {e},{'  # ' + inert(c) if c else ''}")
        lines.append(f"{indent})")
        return "\n".join(lines)


def args_text(args: list) -> ArgsText:
    """Expressions for a launch's argument descriptions (see :func:`tileprobe.record.capture.to_json`: JSON
    objects, or their :class:`~tileprobe.record.argdesc.ArgDesc` records)."""
    out = ArgsText()
    for i, d in enumerate(args):
        expr, comment = _expr(d, out, i)
        out.exprs.append(expr)
        out.comments.append(comment)
    return out


def _expr(d: object, out: ArgsText, index: int) -> tuple[str, str]:
    a = arg_desc(d) or ArgDesc()       # no object: an argument of unknown type
    kind = a.kind
    if kind == "array":
        return array_expr(a, out, index)
    if kind == "scalar":
        return scalar_expr(a.value), ""
    if kind == "sequence":
        items = [_expr(x, out, index)[0] for x in a.items or []]
        if a.type == "list":
            return "[" + ", ".join(items) + "]", ""
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")", ""
    if kind == "dtype":
        name = a.name
        if not isinstance(name, str) or not _DTYPE_NAME.match(name):   # a log is data: never pasted in as code
            out.todos.append(f"argument {index} was a dtype whose recorded name {name!r} is not a dtype name")
            return "None", "TODO: a dtype was passed here"
        if a.origin == "torch":
            out.imports.add("import torch")
            return f"torch.{name.removeprefix('torch.')}", ""
        out.imports.add("import cuda.tile as ct")
        return f"ct.{name}", ""
    what = a.type if a.type is not None else "object"
    out.todos.append(f"argument {index} was a {what}; only its type is recorded: build it in args()")
    return "None", f"TODO: a {what} was passed here"


#: A dtype name as it may be written into a probe (``float16``, ``torch.bfloat16``): letters, digits, _ and one dot.
_DTYPE_NAME = re.compile(r"^(torch\.)?[A-Za-z_][A-Za-z0-9_]*$")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def inert(text) -> str:
    """``text`` as one line of a comment or docstring in a written probe: control characters and line breaks
    (ASCII and Unicode) become spaces, so text read from a launch log can never start a line of code."""
    return _CONTROL.sub(" ", str(text))


def scalar_expr(v) -> str:
    """A scalar or constant as Python source (``float("nan")`` for NaN)."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return f'float("{v}")'
    if v == "nan":
        return 'float("nan")'
    return repr(v)


def array_expr(d: ArgDesc, out: ArgsText, index: int) -> tuple[str, str]:
    """``arrays.randn(shape, dtype[, strides=…][, offset=…])``: floating inputs random, integer and bool arrays
    zeros (in-bounds indices); values are not recorded. An alignment under 256 B becomes ``offset=`` (the
    ``arrays`` factories align the base to 256 B, plus ``offset``). ``d``: the array's description. Raises TypeError
    when it lacks its shape or strides (a log no tileprobe wrote)."""
    shape, strides, align = tuple(d.shape), tuple(d.strides), int(d.align or DEFAULT_ALIGN)
    name = dtype_from(d.dtype)
    if name is None:
        out.todos.append(f"argument {index} has dtype {d.dtype}, which tileprobe cannot describe: pass its "
                         "bytes as uint8 (and unpack in the kernel) or change the dtype")
        return f"arrays.empty({shape!r}, {d.dtype!r})", f"TODO: dtype {d.dtype} unsupported"
    fn = "randn" if name.startswith(("float1", "float3", "float6", "bfloat")) else (
        "rand" if name.startswith("float8") else "zeros")
    if d.output:     # written by the program (a recorded search's output): poisoned, then checked
        fn = "empty"
    parts = [repr(shape), repr(name)]
    if strides != contiguous_strides(shape):
        parts.append(f"strides={strides!r}")
    notes = []
    if align < DEFAULT_ALIGN:
        parts.append(f"offset={max(align, itemsize(name))}")
        notes.append(f"base address {align}-byte aligned, as launched")
    if any(s < 0 for s in strides):
        notes.append("negative strides: audited as launched; tileprobe run cannot make this view")
    return f"arrays.{fn}({', '.join(parts)})", "; ".join(notes)
