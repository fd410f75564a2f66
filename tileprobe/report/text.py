"""Untrusted text is text: the one place that makes names, case values, compiler messages and
probe errors safe for a terminal.

Kernel names, case values, probe errors, compiler output and anything read back from a store or a JSON file come
from outside tileprobe. Before they reach a terminal they are

* stripped of control characters: ANSI/VT escape sequences (CSI such as colours and cursor moves, OSC such as
  ``ESC ] 8 ;; URL`` hyperlinks and window titles, DCS/APC/PM/SOS strings, lone ESC), C0 and C1 controls except
  newline and tab, DEL, and the Unicode bidirectional overrides that can make text read differently than it is
  (U+202A–U+202E, U+2066–U+2069);
* echoed on one line when they are a user's value in a message (an option, a path, an environment variable):
  :func:`shown` escapes every control character as Python writes it (a newline is ``\\n``: it cannot forge a line
  of output) and cuts a long one with its length (:data:`SHOWN_CHARS`; a path at :data:`PATH_SHOWN_CHARS`). It lives
  in :mod:`tileprobe.errors` so the modules below report/ use it too; it is named here as the place to look;
* never parsed as rich markup or emoji codes: tables get :class:`rich.text.Text` cells (:func:`cell`), printed lines
  go through :func:`say`, and a message inside tileprobe's own markup is :func:`escape` d.

ECMA-48 (5th edition, 1991) defines the sequences: CSI ``ESC [`` parameters, intermediates, a final byte 0x40–0x7E;
OSC/DCS/APC/PM/SOS strings end with ST (``ESC \\``) or, for OSC in practice, BEL; one that does not end within the
line (and 4,096 characters) loses only its introducer, so a stray ``ESC P`` in one value cannot swallow the rest of
a table or a report (a hostile tester, 2026-12-02).
"""
from __future__ import annotations

import re
from typing import Any

from rich.markup import escape as _rich_escape
from rich.text import Text

from tileprobe.errors import PATH_SHOWN_CHARS, SHOWN_CHARS, shown

__all__ = ["PATH_SHOWN_CHARS", "SHOWN_CHARS", "cell", "clean", "escape", "say", "shown"]

_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"                      # CSI … final byte
    r"|\x9b[0-?]*[ -/]*[@-~]"                       # 8-bit CSI
    r"|[\x1b][\]PX^_][^\x07\x1b\x9c\n]{0,4096}(?:\x07|\x1b\\|\x9c)"   # OSC, DCS, SOS, PM, APC … BEL or ST
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c\n]{0,4096}(?:\x07|\x1b\\|\x9c)"  # their 8-bit forms
    r"|\x1b[ -/]*[0-~]?")                           # any other ESC sequence (an unterminated string's
#                                                    introducer alone: what follows stays as text), or a lone ESC
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(value: Any) -> str:
    """``value`` as text with escape sequences and control characters removed (newline and tab kept)."""
    text = value if isinstance(value, str) else str(value)
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


def escape(value: Any) -> str:
    """``value`` cleaned and escaped for rich markup, to put inside tileprobe's own markup (``[red]…[/]``)."""
    return _rich_escape(clean(value))


def cell(value: Any, style: str = "") -> Text:
    """A table cell (or title) holding ``value`` as plain text: cleaned, never read as markup or emoji."""
    return value if isinstance(value, Text) else Text(clean(value), style=style)


def say(console, value: Any, style: str = "", **kwargs) -> None:
    """Print ``value`` as plain text on a rich ``console`` (cleaned; no markup, emoji or highlighting)."""
    kwargs.setdefault("soft_wrap", True)
    console.print(cell(value, style), highlight=False, **kwargs)
