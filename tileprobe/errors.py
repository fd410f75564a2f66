"""One error family for everything a user can fix.

The CLI catches :class:`TileprobeError` once (``cli.main``), prints its message and exits with the error's
``exit_code`` (1; :class:`UsageError` 2; :class:`IncompleteError` 3); any other exception is a tileprobe bug and
keeps its traceback (the asv ``UserError`` habit). Every message says what failed, why, and what to do about it.
"""
from __future__ import annotations

#: Exit codes of the ``tileprobe`` command (README, "Exit codes").
EXIT_OK = 0
EXIT_ERROR = 1            # a TileprobeError stopped the command
EXIT_USAGE = 2            # bad command line (argparse's code too)
EXIT_INCOMPLETE = 3       # a probe could not be loaded, or a requested arch or compiler could not be used
EXIT_COMPILE_FAILED = 4   # --strict: some variant failed to compile (compile_error, compiler_crash, timeout)
EXIT_INTERRUPTED = 130    # Ctrl-C; SIGTERM / SIGHUP give 128 + the signal's number


#: Characters of a user's value echoed in a message (:func:`shown`); a longer one is cut and its length given.
SHOWN_CHARS = 120
#: Characters of a path echoed in a message (``shown(path, limit=PATH_SHOWN_CHARS)``): Linux's ``PATH_MAX``, so a
#: real path is only escaped, never cut.
PATH_SHOWN_CHARS = 4096


def shown(value, quote: bool = False, limit: int = SHOWN_CHARS) -> str:
    """``value`` (a user's text: an ``--arch``, a ``--where``) as a message echoes it: control characters escaped
    as Python writes them (a newline is ``\\n``: it cannot forge a line of output), ``quote``: in quotes as
    ``repr`` gives it; longer than ``limit`` characters: cut, with its length (a 120 KB ``--where`` was echoed whole,
    2026-12-04)."""
    text = value if isinstance(value, str) else str(value)
    out = repr(text)[1:-1] if not text.isprintable() else text
    if quote:
        out = repr(text)
    if len(out) > limit:
        out = f"{out[:limit]}… ({len(text):,} characters)"
    return out


class TileprobeError(Exception):
    """A problem the user can fix: bad input, a missing tool, an unknown architecture.

    The message must name the problem and the fix. ``exit_code``: what the CLI exits with.
    """

    exit_code = EXIT_ERROR


class UsageError(TileprobeError):
    """The command line must change: a value out of range (a timeout of 0, nan or inf), a grid above the
    variant limit (``--max-variants``)."""

    exit_code = EXIT_USAGE


class IncompleteError(TileprobeError):
    """Nothing could be audited: no probe loaded, no arch or compiler usable. The other causes of an incomplete
    audit are listed in its result (and give the same exit code, :data:`EXIT_INCOMPLETE`)."""

    exit_code = EXIT_INCOMPLETE


class ProbeError(TileprobeError):
    """A probe file could not be loaded or describes an impossible launch.

    ``path`` and ``lineno`` point at the offending line when known.
    """

    def __init__(self, message: str, path: str | None = None, lineno: int | None = None):
        self.path = path
        self.lineno = lineno
        where = f"{path}:{lineno}: " if path and lineno else (f"{path}: " if path else "")
        super().__init__(where + message)


class ToolchainError(TileprobeError):
    """tileiras (or its ptxas / libnvvm) is missing, mismatched or unusable."""


class CubinError(TileprobeError):
    """A file is not a cubin tileprobe can read (not ELF, not CUDA, truncated)."""


class StoreError(TileprobeError):
    """The results store is unreadable, newer than this tileprobe, or locked."""


#: The words every :class:`CompilerWroteNothing` message holds (``tileprobe reduce`` tells it from a property).
NO_OUTPUT = "exited 0 but produced no output"


class CompilerWroteNothing(Exception):
    """tileiras exited 0 but wrote no output file where it was told to (``-o FILE``): a broken or wrong compiler,
    not the kernel's fault (raised by tileprobe/_cutile.py, classified ``compiler_crash``). ``tileiras``: its path;
    ``output``: the file it was to write; ``printed``: its stdout and stderr, shown cut to 300 characters with the
    full length, quoted as untrusted text."""

    def __init__(self, tileiras: str, output: str, printed: str):
        shown = printed.strip()
        said = (repr(shown[:300]) + (f" … ({len(shown)} characters)" if len(shown) > 300 else "")) if shown \
            else "nothing"
        super().__init__(f"the compiler {NO_OUTPUT}, printing {said}: {tileiras} was to write {output}")
        self.tileiras, self.output, self.printed = tileiras, output, printed
