"""tileiras compiler remarks (YAML, tileiras >= 13.4) parsed into short, de-duplicated records.

tileiras writes LLVM-style remark documents (``--- !Passed`` / ``!Failure`` / ``!Missed`` / ``!Analysis``) with
``Pass``, ``Name``, ``DebugLoc`` and ``Args``. Its files repeat whole documents and reasons (seen with 13.4.92,
FIELD_NOTES 2026-11-29); :func:`parse_remarks` keeps each distinct remark once, in first-seen order.
"""
from __future__ import annotations

import re

import yaml

try:                       # libyaml's loader when PyYAML was built with it (faster), else the pure-Python one
    from yaml import CSafeLoader as _SafeLoader
except ImportError:
    from yaml import SafeLoader as _SafeLoader


class _RemarkLoader(_SafeLoader):
    """SafeLoader (libyaml's when PyYAML has it) that keeps a document's tag (``!Passed`` …) as its ``Kind``."""


def _tagged(loader, tag_suffix, node):
    data = loader.construct_mapping(node, deep=True)
    data["Kind"] = tag_suffix
    return data


_RemarkLoader.add_multi_constructor("!", _tagged)


def parse_remarks(text: str) -> list[dict]:
    """Remarks as ``{"kind", "pass", "name", "line", "column", "function", "message", "details"}`` dicts.

    ``details`` holds the other Args (Instruction, Shape, Reason …) as ``"Key: value"`` strings, repeats removed.
    Unparseable text yields one remark of kind ``unparsed`` holding its first line (never raises).
    """
    out, seen = [], set()
    try:
        docs = [d for d in yaml.load_all(_dedupe_text(text), Loader=_RemarkLoader) if isinstance(d, dict)]
    except yaml.YAMLError as e:
        return [{"kind": "unparsed", "pass": "", "name": "", "line": None, "column": None, "function": "",
                 "message": f"could not parse remarks: {str(e).splitlines()[0]}", "details": []}]
    for d in docs:
        loc = d.get("DebugLoc") or {}
        message, details = "", []
        for arg in d.get("Args") or []:
            if not isinstance(arg, dict):
                continue
            for k, v in arg.items():
                if k == "Remark":
                    message = str(v)
                elif k != "RemarkId":
                    item = f"{k}: {v}"
                    if item not in details:
                        details.append(item)
        rec = {"kind": d.get("Kind", ""), "pass": d.get("Pass", ""), "name": d.get("Name", ""),
               "line": loc.get("Line"), "column": loc.get("Column"), "function": d.get("Function", ""),
               "message": message, "details": details}
        key = repr(rec)
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out


def _dedupe_text(text: str) -> str:
    """Drop repeated documents and immediately repeated lines before parsing (tileiras 13.4 writes each remark
    document several times, and a reason line up to dozens of times); parsing is then ~5× faster."""
    starts = [m.start() for m in re.finditer(r"(?m)^---", text)]
    if not starts:
        return text
    docs = [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
    kept = list(dict.fromkeys(docs))
    out: list[str] = []
    for line in "".join(kept).splitlines(keepends=True):
        if not (out and line == out[-1] and line.lstrip().startswith("- ")):
            out.append(line)
    return text[:starts[0]] + "".join(out)
