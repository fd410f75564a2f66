"""What crosses from a process that ran probe code into the tileprobe process: data only, never pickles.

A probe loader, a compile worker and a Ray compile task run the probe's code; what they send back (plans, case and
hint values, compile results) is encoded here as JSON text, and the tileprobe process only ever parses JSON. An
object from the probe file (an ``Enum`` member, an instance of its own class, an object whose ``__reduce__`` runs
a command) cannot be sent at all: the sending side raises :class:`NotData` naming the value and where it sits, and
the probe gets an error with a fix; nothing of it runs in the tileprobe process.

Data is: ``None``, ``bool``, ``int`` (at most :data:`MAX_INT_DIGITS` digits), ``float``, ``str``, ``bytes``, and
``list``, ``tuple``, ``dict``, ``frozenset`` of data, nested at most :data:`MAX_DEPTH` deep — exact types, not
subclasses (an ``IntEnum`` member is an ``int`` subclass and is refused). Tuples, dicts, frozensets and bytes are
tagged (``{"$t": [...]}``, ``{"$d": [[key, value], ...]}``, ``{"$f": [...]}``, ``{"$b": "<base64>"}``), so they come
back as what they were (a tile ``(128, 128, 32)`` stays a tuple). A message is at most :data:`MAX_MESSAGE_BYTES`.
"""
from __future__ import annotations

import base64
import enum
import json
import re
from typing import Any

#: Deepest nesting of lists, tuples and dicts in one value (a case value, a record field).
MAX_DEPTH = 64
#: Most decimal digits of one int (Python's own default limit for int/str conversion is 4,300).
MAX_INT_DIGITS = 4300
#: Largest message, in bytes of JSON text: a compile result carries its cubin (at most
#: :data:`tileprobe.compile.job.MAX_CUBIN_BYTES`, 64 MiB) as base64, a third larger.
MAX_MESSAGE_BYTES = 96 << 20

_SCALARS = (type(None), bool, int, float, str)
#: 10 ** MAX_INT_DIGITS, made once: computed per int it cost ~0.1 ms each, most of a reply's encoding (a launch-facts
#: reply of 16 candidates, 3,600 values: 0.14-0.31 s on the loaded 2-core machine, cProfile, 2026-12-05).
_INT_LIMIT = 10 ** MAX_INT_DIGITS


class NotData(ValueError):
    """A value that is not data (module doc). ``where``: its place in the value sent (``cases['MODE'][1]``);
    ``value_text``: a short ``repr`` of it; ``fix``: what to write instead."""

    def __init__(self, where: str, value_text: str, reason: str, fix: str):
        self.where, self.value_text, self.reason, self.fix = where, value_text, reason, fix
        super().__init__(f"{where} is {value_text}: {reason}; {fix}")


class WireError(ValueError):
    """A message that is not what the sending side may send (too large, too deep, not JSON, a wrong shape)."""


def _short_repr(v: Any) -> str:
    try:
        text = repr(v)
    except Exception:
        text = f"<{type(v).__name__} object>"
    text = re.sub(r"\btileprobe_probe_\d+\.", "", text)      # a probe file's module name (probe/define.py)
    return text if len(text) <= 80 else text[:77] + "..."


def _not_data(v: Any, where: str) -> NotData:
    t = type(v)
    module = str(getattr(t, "__module__", ""))
    own = module in ("builtins", "__main__") or module.startswith("tileprobe_probe_")   # the probe file's own class
    kind = t.__qualname__ if own else f"{module}.{t.__qualname__}"
    if isinstance(v, enum.Enum):
        try:
            inner = _short_repr(v.value)
        except Exception:
            inner = "its value"
        return NotData(where, _short_repr(v), f"a member of the Enum {kind}, not data: case and hint values cross "
                       "to tileprobe as data only", f"use its .value ({inner}) and turn it back in args() "
                       f"({t.__name__}(case[...]))")
    return NotData(where, _short_repr(v), f"an object of class {kind}, not data: case and hint values cross to tileprobe as data only "
                   "(an object of a class is never unpickled there)",
                   "use a number, a string, True/False, None, or a tuple or list of those (and build the object "
                   "in args())")


def encode(value: Any, where: str = "value") -> Any:
    """``value`` as JSON-ready data (tags in the module doc). Raises :class:`NotData` naming the first value that
    is not data and its place (``where`` is the name of the whole value, e.g. ``cases['TILE']``)."""
    return _enc(value, where, set(), 0)


def _enc(v: Any, where: str, seen: set, depth: int) -> Any:
    t = type(v)
    if t in _SCALARS:
        if t is int and (v >= _INT_LIMIT or v <= -_INT_LIMIT):
            raise NotData(where, f"an int of more than {MAX_INT_DIGITS:,} digits", "too large to send",
                          "use a smaller number")
        return v
    if t is bytes:
        return {"$b": base64.b64encode(v).decode("ascii")}
    if t not in (list, tuple, dict, frozenset):
        raise _not_data(v, where)
    if id(v) in seen:
        raise NotData(where, f"a {t.__name__} that contains itself", "a self-containing value cannot be sent",
                      "give a value without a reference to itself")
    if depth >= MAX_DEPTH:
        raise NotData(where, f"nested more than {MAX_DEPTH} deep", "too deep to send", "flatten the value")
    seen.add(id(v))
    try:
        if t is dict:
            return {"$d": [[_enc(k, f"{where} key {_short_repr(k)}", seen, depth + 1),
                            _enc(x, f"{where}[{_short_repr(k)}]", seen, depth + 1)] for k, x in v.items()]}
        items = [_enc(x, f"{where}[{i}]", seen, depth + 1) for i, x in enumerate(v)]
        return items if t is list else {"$t": items} if t is tuple else {"$f": items}
    finally:
        seen.discard(id(v))


def decode(data: Any) -> Any:
    """The value :func:`encode` made ``data`` of. Raises :class:`WireError` for anything it cannot have made."""
    return _dec(data, 0)


def _dec(d: Any, depth: int) -> Any:
    if depth > MAX_DEPTH + 8:
        raise WireError(f"nested more than {MAX_DEPTH} deep")
    t = type(d)
    if t in _SCALARS:
        return d
    if t is list:
        return [_dec(x, depth + 1) for x in d]
    if t is dict and len(d) == 1:
        (tag, body), = d.items()
        if tag == "$b" and type(body) is str:
            return base64.b64decode(body.encode("ascii"), validate=True)
        if type(body) is list:
            if tag == "$t":
                return tuple(_dec(x, depth + 1) for x in body)
            if tag == "$f":
                return frozenset(_dec(x, depth + 1) for x in body)
            if tag == "$d" and all(type(p) is list and len(p) == 2 for p in body):
                return {_dec(k, depth + 1): _dec(x, depth + 1) for k, x in body}
    raise WireError(f"not a value tileprobe sends: {_short_repr(d)}")


def dumps(value: Any, where: str = "value") -> bytes:
    """``value`` as one message (UTF-8 JSON). Raises :class:`NotData` (see :func:`encode`) or :class:`WireError`
    when the message would exceed :data:`MAX_MESSAGE_BYTES`."""
    text = json.dumps(encode(value, where), separators=(",", ":")).encode()
    if len(text) > MAX_MESSAGE_BYTES:
        raise WireError(f"{where}: a message of {len(text):,} bytes, more than the limit of {MAX_MESSAGE_BYTES:,}")
    return text


def loads(message: bytes) -> Any:
    """Parse one message of :func:`dumps`. Raises :class:`WireError` for one that is too large, too deep, not JSON
    or not of :func:`encode`'s shape: nothing in it is executed, whatever the other side sent."""
    if len(message) > MAX_MESSAGE_BYTES:
        raise WireError(f"a message of {len(message):,} bytes, more than the limit of {MAX_MESSAGE_BYTES:,}")
    try:
        return decode(json.loads(message))
    except (ValueError, RecursionError, TypeError) as e:   # JSONDecodeError, int digits, depth, base64
        raise WireError(f"not a message tileprobe sends: {type(e).__name__}: {str(e)[:200]}") from None


def to_data(value: Any, depth: int = 0) -> Any:
    """``value`` made data for :func:`send` by the side that built it (a GPU worker's results): numpy/torch scalars
    (anything with ``item()``) become Python numbers, ``int``/``float``/``str`` subclasses their base type, sets
    lists, and anything else its ``repr`` text, so a result never fails to send and nothing but data crosses."""
    if depth > MAX_DEPTH:
        return "<nested too deep>"
    if type(value) in _SCALARS or type(value) is bytes:
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            k = to_data(k, depth + 1)
            out[k if isinstance(k, (*_SCALARS, tuple)) else str(k)] = to_data(v, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        items = [to_data(v, depth + 1) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, (set, frozenset)):
        return [to_data(v, depth + 1) for v in value]
    for base in (bool, int, float, str):
        if isinstance(value, base):
            return base(value)
    item = getattr(value, "item", None)
    if callable(item):
        try:
            got = item()
            if type(got) in _SCALARS:
                return got
        except Exception:
            pass
    return _short_repr(value)


def send(conn, value: Any, where: str = "value") -> None:
    """Send ``value`` on a :class:`multiprocessing.connection.Connection` as one :func:`dumps` message."""
    conn.send_bytes(dumps(value, where))


def recv(conn) -> Any:
    """Receive one :func:`send` message. Raises EOFError/OSError as ``recv_bytes`` does, :class:`WireError` for a
    message that is not one (too large: refused before it is read whole)."""
    return loads(conn.recv_bytes(MAX_MESSAGE_BYTES))
