"""What the commands share: consoles, the ``--json``/``--format`` options, comma lists, ``--tileiras`` specs, the
results store option, the output-path check, the compile progress bar and error printing."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tileprobe.errors import PATH_SHOWN_CHARS, TileprobeError, ToolchainError, shown

# Imports inside functions here are lazy on purpose: at the module head they would add 0.57 s to its import
# (python -X importtime, the 2-core machine, 2026-12-02), paid by every command that imports it.

if TYPE_CHECKING:
    from tileprobe.toolchain import Toolchain

DEFAULT_ARCHS = "sm_90,sm_120"


def seconds(text: str) -> float:
    """argparse type of a timeout: a finite number of seconds > 0 and ≤ 10^7 (:func:`tileprobe.schema.timeout_seconds`;
    ``0``, ``-1``, ``nan``, ``inf`` and ``1e308`` are refused with a usage error, exit 2)."""
    from tileprobe.schema import timeout_seconds
    try:
        return timeout_seconds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a timeout: {e}") from None


def arch_target(text: str) -> str:
    """argparse type of a single ``--arch`` (``tune``, ``run``): a compile target as
    :func:`tileprobe.model.arch.check_target` takes it (``sm_90``, ``90``, ``9.0``), returned as tileiras spells it.
    A comma list (``audit``'s habit), an arch-specific or family name (``sm_90a``, ``sm_100f``, refused as ``audit``
    refuses them) or an unknown one is a usage error (exit 2) that says why and lists the targets."""
    from tileprobe.errors import TileprobeError
    from tileprobe.model.arch import check_target
    if "," in text:
        raise argparse.ArgumentTypeError(f"{text!r}: give one target (e.g. sm_90): a GPU run is for one arch; "
                                          "`tileprobe audit --arch A,B` compares several")
    try:
        return check_target(text)
    except TileprobeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def budget_seconds(text: str) -> float:
    """argparse type of a time budget (``tune --budget``): the rule of :func:`seconds`, named a budget in the usage
    error (session 8's new user read "'0' is not a timeout" for ``--budget 0``)."""
    from tileprobe.schema import MAX_TIMEOUT_S
    try:
        return seconds(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a budget: give the command's wall time in seconds, a finite "
                                         f"number > 0 and ≤ {MAX_TIMEOUT_S:,.0f} (e.g. 30)") from None


def count(text: str) -> int:
    """argparse type of a count (``--jobs``, ``--max-variants``): a whole number ≥ 1 (usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or value > 2 ** 62:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, 1 or more (at most 2^62)")
    return value


def percent(text: str) -> float:
    """argparse type of a percentage (``--tie-pct``): a finite number in 0 … 100 (``nan``, ``inf``, ``1e400`` and
    ``-5`` are a usage error, exit 2)."""
    import math
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0.0 <= value <= 100.0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a percentage, a number from 0 to 100")
    return value


def count_or_zero(text: str) -> int:
    """argparse type of a count where 0 has a meaning (``--limit 0``: all, ``--warmup 0``): a whole number ≥ 0."""
    if text.strip() == "0":
        return 0
    try:
        return count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, 0 or more (at most 2^62)") from None


class Terminated(BaseException):
    """SIGTERM or SIGHUP reached the command: it unwinds like Ctrl-C (workers stopped, temp folders removed,
    finished variants kept) and exits with 128 + the signal's number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum, self.name = signum, signal.Signals(signum).name


@contextlib.contextmanager
def signals_as_exceptions():
    """While the command runs (in the main thread), SIGTERM and SIGHUP raise :class:`Terminated` once (one this
    process inherited as ignored, as under ``nohup``, stays ignored); a second one during the clean-up is ignored (SIGKILL still ends everything: the workers die with their parent)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []

    def handler(signum, frame):
        if not caught:
            caught.append(signum)
            raise Terminated(signum)
    wanted = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    # an inherited ignore stays (`nohup tileprobe audit … &` ignores SIGHUP)
    previous = {s: signal.signal(s, handler) for s in wanted if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def console(stderr: bool = False):
    """A rich console: a terminal's own width; when output is not a terminal (a file, a pipe, a CI log), the width
    ``$COLUMNS`` gives (a positive whole number; ``COLUMNS=100 tileprobe audit … | less``), else 200 columns, not
    rich's 80."""
    from rich.console import Console
    stream = sys.stderr if stderr else sys.stdout
    for name in ("COLUMNS", "LINES"):     # rich reads both with str.isdigit(): "²" passes it, then int() raises
        text = os.environ.get(name, "").strip()
        if name in os.environ and not (text.isascii() and text.isdigit() and int(text) > 0):
            del os.environ[name]
    given = int(os.environ.get("COLUMNS", "0").strip())
    width = None if stream.isatty() else given if given > 0 else 200
    return Console(stderr=stderr, highlight=False, width=width)


def compiling_line(n_compile: int, n_stored: int, compiler: str = "") -> str:
    """``compiling 4 variants (12 from the store) …`` / ``nothing to compile: all 16 variants from the store``;
    with ``compiler`` (``"tileiras 13.4.92"``) the line starts with it, so that an audit over several releases
    says which one each line is for."""
    def n(k):
        return f"{k} variant" + ("" if k == 1 else "s")
    head = f"{compiler}: " if compiler else ""
    if n_compile == 0:
        return head + (f"nothing to compile: {'all ' if n_stored > 1 else ''}{n(n_stored)} from the store"
                       if n_stored else "nothing to compile")
    return f"{head}compiling {n(n_compile)}" + (f" ({n_stored} from the store)" if n_stored else "") + " …"


def compiled_line(done: int, total: int, failed: int, elapsed_s: float, compiler: str = "",
                  noun: str = "variants") -> str:
    """The plain progress line of a compile stage on a standard error that is not a terminal:
    ``tileiras 13.4.92: compiled 120/274 variants (3 failed), 170 s``; ``failed`` counts compile_error,
    compiler_crash and timeout (as the audit's last line does), left out when 0; ``elapsed_s``: seconds since the
    stage's compiles started, printed whole."""
    head = f"{compiler}: " if compiler else ""
    return (f"{head}compiled {done}/{total} {noun}" + (f" ({failed} failed)" if failed else "")
            + f", {elapsed_s:.0f} s")


class CompileTicker:
    """Plain progress lines for a compile stage when standard error is not a terminal (a pipe, ``tee``, a CI log),
    where no live bar is drawn: :func:`compiled_line` on ``con`` at a finished compile once ``first_s`` seconds
    (10) have passed since :meth:`start`, then at most every ``every_s`` seconds (15), so that a compile stage
    shorter than ``first_s`` prints nothing more. Lines come only as compiles finish (no timer thread).
    ``clock``: seconds, monotonic (:func:`time.monotonic`; tests give a fake one)."""

    def __init__(self, con, noun: str = "variants", clock: Callable[[], float] | None = None,
                 first_s: float = 10.0, every_s: float = 15.0):
        import time
        self.con, self.noun, self.clock = con, noun, clock or time.monotonic
        self.first_s, self.every_s = first_s, every_s
        self.start(0)

    def start(self, total: int, compiler: str = "") -> None:
        """A new stage of ``total`` compiles (one compiler's, named ``compiler``) starts now; counts start at 0."""
        self.total, self.compiler, self.done, self.failed = total, compiler, 0, 0
        self.t0 = self.clock()
        self.due = self.t0 + self.first_s

    def fail(self, n: int = 1) -> None:
        """``n`` of the compiles about to be counted by :meth:`advance` failed."""
        self.failed += n

    def advance(self, n: int = 1) -> None:
        """``n`` more compiles finished; prints a line when one is due."""
        self.done += n
        now = self.clock()
        if self.total and now >= self.due:
            from tileprobe.report.text import say
            say(self.con, compiled_line(self.done, self.total, self.failed, now - self.t0, self.compiler,
                                        self.noun))
            self.due = now + self.every_s


def progress_bar(con, ticker: CompileTicker | None = None):
    """A rich progress bar fed by audit's ``progress(kind, n)`` callback, and the context that owns it. The bar
    counts only what is compiled; a line says how many variants came from the store. When ``con`` is not a
    terminal there is no bar: a :class:`CompileTicker` (``ticker``, else one with its 10 s / 15 s intervals)
    prints plain progress lines instead."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tileprobe.report.text import say
    # Not a terminal (a pipe, a CI log): lines only; a live display would leave a blank line behind when it stops.
    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=con, transient=True) if con.is_terminal else contextlib.nullcontext()
    plain = None if con.is_terminal else ticker or CompileTicker(con)
    state = _BarState()

    def cb(kind, n):
        if kind == "stored":
            state.stored = n
        elif kind == "compiler":
            state.compiler = n
        elif kind == "total":
            if not con.is_terminal or not n:
                say(con, compiling_line(n, state.stored, state.compiler))
            label = f"{state.compiler}: compiling" if state.compiler else "compiling"
            state.task = prog.add_task(label, total=n) if n and con.is_terminal else None
            if plain is not None:
                plain.start(n, state.compiler)
        elif kind == "failed" and plain is not None:
            plain.fail(n)
        elif kind == "advance":
            if state.task is not None:
                prog.advance(state.task, n)
            elif plain is not None:
                plain.advance(n)
    return prog, cb


@dataclasses.dataclass
class _BarState:
    """What :func:`progress_bar`'s callback has been told: variants from the store, the compiler's name, and the
    bar's task (None: no bar)."""
    task: Any = None
    stored: int = 0
    compiler: str = ""


def split(s: str | None) -> list[str]:
    """``"sm_90, sm_120,"`` → ``["sm_90", "sm_120"]`` (empty items dropped; None → [])."""
    return [x.strip() for x in (s or "").split(",") if x.strip()]


def resolve_tileiras(spec: str | None, install: bool = False) -> tuple[list[Toolchain] | None, list[str]]:
    """``--tileiras 13.3.36,13.4.92`` resolved, the same way for every command: each entry on its own
    (:func:`resolve_one`: a release not installed here is installed only with ``install``, ``--install``, or after
    a yes at a terminal prompt; otherwise nothing is downloaded), and an entry that cannot be used does
    not stop the others from being resolved.

    Returns (the usable Toolchains, each compiler once, in the order named; one ``"--tileiras ENTRY: why"`` per
    entry that cannot be used), ``(None, [])`` when ``spec`` is not given. Raises :class:`UsageError` (exit 2) for
    a ``spec`` that names nothing (``""``, ``","``). ``audit`` audits with the usable ones
    and lists the others as not audited (exit 3); a command that needs every compiler it names stops with them all
    (:func:`toolchains`).
    """
    if spec is None:
        return None, []
    if not split(spec):
        from tileprobe.errors import UsageError
        raise UsageError(f"--tileiras {spec!r} names no compiler: give versions or paths, e.g. --tileiras "
                         "13.4.92,13.3.36, or leave --tileiras out for cuTile's default compiler")
    tcs: list[Toolchain] = []
    errors = []
    for one in split(spec):
        try:
            tcs += [t for t in resolve_one(one, install) if t.tileiras not in {x.tileiras for x in tcs}]
        except ToolchainError as e:
            errors.append(f"--tileiras {shown(one)}: {e}")
    return tcs, errors


def toolchains(spec: str | None, install: bool = False) -> list[Toolchain] | None:
    """:func:`resolve_tileiras` for a command that needs every compiler it names (``compare``, ``gate``, ``sass``):
    the Toolchains, None when ``spec`` is not given.

    Raises:
        ToolchainError: an entry cannot be used (a malformed or unpublished version, a release not installed and
            not asked for, a failed install); the message lists every such entry, each as ``audit`` names it
            (``--tileiras 13.5: tileiras 13.5.37 is not installed; …``).
    """
    tcs, errors = resolve_tileiras(spec, install)
    if errors:
        raise ToolchainError(errors[0] if len(errors) == 1 else
                             "\n  ".join([f"{len(errors)} requested compilers cannot be used:", *errors]))
    return tcs


def add_install_option(p) -> None:
    """``--install``: install a ``--tileiras`` release that is not installed here (else nothing is downloaded)."""
    p.add_argument("--install", action="store_true", help="install a --tileiras release that is not installed "
                   "here (about 200 MB each); without it nothing is downloaded")


def resolve_one(spec: str, install: bool = False) -> list[Toolchain]:
    """One ``--tileiras`` entry as Toolchains; a release not installed is installed with ``install``, or after a
    yes at a prompt when standard input and standard error are both a terminal (the prompt names the release and
    its size); else :class:`~tileprobe.toolchain.ReleaseNotInstalled` propagates."""
    from tileprobe.toolchain import ReleaseNotInstalled, resolve_toolchains
    try:
        return resolve_toolchains([spec], auto_install=install)
    except ReleaseNotInstalled as e:
        size = f" (about {e.size_bytes / 1e6:,.0f} MB)" if e.size_bytes else ""
        if not confirmed(f"tileiras {e.version} is not installed. Download and install it{size}?"):
            raise
        return resolve_toolchains([e.version], auto_install=True)


def confirmed(question: str) -> bool:
    """Ask ``question`` with ``[y/N]`` on standard error when standard input and error are both a terminal; True
    for a yes. False without asking anywhere else (a pipe, CI): nothing is downloaded unasked."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def open_store(args):
    """The results store of ``--store PATH`` (default: the user data dir), or None with ``--no-store``.

    Raises:
        StoreError: the store cannot be opened (see :meth:`tileprobe.store.Store.open`).
    """
    if getattr(args, "no_store", False):
        return None
    from tileprobe.store import Store
    return Store.open(args.store)


def check_output_path(path: str | None, what: str) -> None:
    """Fail before any work when an output file cannot be written (its folder is missing or read-only).

    Raises:
        TileprobeError: naming the option ``what``, the path and the fix.
    """
    if path is None or path == "-":
        return
    if not path.strip():
        raise TileprobeError(f"{what} {path!r}: an empty path; give a file name, or - for standard output")
    where = shown(path, limit=PATH_SHOWN_CHARS)     # echoed escaped: a newline in it cannot forge a line
    if os.path.isdir(path):
        raise TileprobeError(f"{what} {where}: is a folder; give a file path such as "
                             f"{shown(os.path.join(path, 'out'), limit=PATH_SHOWN_CHARS)}")
    if os.path.exists(path) and not os.path.isfile(path):
        raise TileprobeError(f"{what} {where}: not a regular file (a FIFO or a device); give a file path")
    if os.path.islink(path) and not os.path.exists(path):    # the check below would make its target, then
        raise TileprobeError(f"{what} {where}: a symbolic link to "   # remove the link (a hostile tester, 2026-12-05)
                             f"{shown(os.readlink(path), limit=PATH_SHOWN_CHARS)}, which does not exist; give a "
                             "file path, not a dangling link")
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise TileprobeError(f"{what} {where}: folder {shown(folder, limit=PATH_SHOWN_CHARS)} does not "
                             "exist; create it or give another path")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise TileprobeError(f"{what} {where}: not writable; give another path")
    existed = os.path.exists(path)
    try:                  # root passes os.access on /sys and /proc, where opening still fails: try it (nothing lost:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666))   # no truncation; a file made here
    except OSError as e:                                                        # is removed again)
        raise TileprobeError(f"{what} {where}: cannot be written ({e.strerror}); give another path") from e
    if not existed:
        try:
            os.unlink(path)
        except OSError:
            pass


class QuietStream:
    """A text stream (stderr) that drops what it cannot write: progress and summary lines are information, and a
    stderr that is full (``2>/dev/full``), closed by its reader (``2>&1 | head -1``) or absent (``2>&-``) must not
    stop the work or lose stdout's results. Writes after the first failure are dropped; everything else is the
    wrapped stream's (``isatty``, ``fileno``, ``encoding`` …)."""

    def __init__(self, stream):
        self._stream, self.broken = stream, stream is None

    def write(self, text: str) -> int:
        """Write ``text``; its length, also when it was dropped."""
        if not self.broken:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self.broken = True
        return len(text)

    def flush(self) -> None:
        """Flush, dropping a failure."""
        if not self.broken:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.broken = True

    def isatty(self) -> bool:
        """Whether the wrapped stream is a terminal (False when it is gone)."""
        try:
            return not self.broken and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def __getattr__(self, name):
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)


#: Arguments that name a file a command writes (``report``'s ``--json`` is an input: it takes a list).
OUTPUT_OPTIONS = {"json": "--json", "csv": "--csv", "output": "-o", "export": "--export"}
#: Arguments that name files a command reads.
INPUT_OPTIONS = ("store", "baseline", "probe", "probes", "runs", "results")


def check_outputs(args) -> None:
    """Check every output file of a parsed command line before any work (:func:`check_output_path`; ``main`` calls
    this for every command, so no command checks its own outputs), and refuse an
    output that is one of its inputs (the store, a baseline, a probe file, a result file): writing would destroy it.

    Raises:
        TileprobeError: naming both options and the path.
    """
    outputs = {opt: getattr(args, name) for name, opt in OUTPUT_OPTIONS.items()
               if isinstance(getattr(args, name, None), str)}
    inputs = []
    for name in INPUT_OPTIONS:
        value = getattr(args, name, None)
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            if isinstance(v, str) and v and v != "-":
                inputs.append((f"--{name}" if name in ("store", "baseline", "runs") else name, v))
    if "store" in vars(args) and not getattr(args, "store", None) and not getattr(args, "no_store", False):
        from tileprobe.store import default_path
        inputs.append(("the results store", default_path()))
    for opt, path in outputs.items():
        check_output_path(path, opt)
        for what, src in inputs:
            if path != "-" and _same_file(path, src):
                raise TileprobeError(f"{opt} {path} is also {what}: writing it would destroy it; give another path")


def _same_file(a: str, b: str) -> bool:
    if os.path.exists(a) and os.path.exists(b):
        try:
            return os.path.samefile(a, b)
        except OSError:
            return False
    return os.path.realpath(a) == os.path.realpath(b)


def add_where_option(p, what: str = "variants") -> None:
    """Add ``--where NAME=VALUE,…`` (the same syntax on every command: :mod:`tileprobe.select`)."""
    p.add_argument("--where", metavar="NAME=VALUE,...", help=f"only the {what} whose case constants and hint values "
                   "match, e.g. \"GATHER=True,TILE=128×128,occupancy=2\" (values as the tables print them, or as "
                   "Python: TILE=(128,128))")


def add_override_options(p) -> None:
    """Add ``--case NAME=V1,V2`` and ``--hint NAME=V1,V2`` (repeatable): values that replace the probe's."""
    p.add_argument("--case", action="append", metavar="NAME=V1,V2", help="replace the probe's values of a case "
                   "constant, e.g. --case TILE=128×128,256×256 (repeatable)")
    p.add_argument("--hint", action="append", metavar="NAME=V1,V2", help="replace (or add) the values of a hint, "
                   "e.g. --hint occupancy=1,2 (repeatable)")


def where_of(args) -> dict:
    """The parsed ``--where`` of ``args`` (``{}`` when not given).

    Raises:
        WhereError: an item that is not NAME=VALUE.
    """
    from tileprobe.select import parse_where
    return parse_where(getattr(args, "where", None))


def overrides_of(args) -> dict:
    """``{"cases": {...}, "hints": {...}}`` from ``--case`` / ``--hint`` (for :func:`tileprobe.audit.audit`).

    Raises:
        WhereError: an item that is not NAME=V1,V2,….
    """
    from tileprobe.select import parse_overrides
    return {"cases": parse_overrides(getattr(args, "case", None), "--case"),
            "hints": parse_overrides(getattr(args, "hint", None), "--hint")}


def add_output_options(p) -> None:
    """Add ``--json FILE`` and ``--format table|markdown|none`` to the subparser ``p``."""
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON (schema in tileprobe/schema.py); - for stdout")
    p.add_argument("--format", choices=["table", "markdown", "none"], default="table",
                   help="what to print: terminal tables (default), Markdown for a bug report, or nothing")


#: The arguments of the command :func:`tileprobe.cli.main` runs now (``main(argv)`` in a test, a notebook or a
#: pytest-xdist worker is not ``sys.argv``).
COMMAND_ARGV: list[str] = []


def command_line() -> str:
    """The running command as typed: ``tileprobe`` and its arguments (for "Reproduce:" blocks), each quoted for a
    shell where it needs it; the arguments :func:`tileprobe.cli.main` was given, else ``sys.argv``'s."""
    import shlex
    return " ".join(["tileprobe", *(shlex.quote(a) for a in (COMMAND_ARGV or sys.argv[1:]))])


def write_json_doc(path: str, doc) -> None:
    """Write ``doc`` as indented strict JSON (:func:`tileprobe.schema.json_text`) to the file ``path`` (``-``:
    standard output; was a file named "-")."""
    from tileprobe.schema import json_text, write_text
    write_text(path, json_text(doc))


def print_error(e: TileprobeError) -> None:
    """Print a command's :class:`TileprobeError` to stderr as ``tileprobe: MESSAGE`` (the message is text)."""
    from tileprobe.report.text import escape
    console(stderr=True).print(f"[bold red]tileprobe:[/] {escape(e)}", markup=True, highlight=False, soft_wrap=True)


def print_interrupted(what: str = "interrupted") -> None:
    """Tell the user, on stderr, that Ctrl-C (or ``what``, e.g. "terminated by SIGTERM") stopped the command and
    what was kept: the compiles and runs this process committed to the results store
    (:func:`tileprobe.store.saved_by_this_process`)."""
    from tileprobe.store import saved_by_this_process, store_opened_by_this_process
    saved = saved_by_this_process()
    parts = [f"{n} {kind[:-1] if n == 1 else kind}" for kind, n in saved.items() if n]
    kept = (f"{' and '.join(parts)} finished before it {'is' if sum(saved.values()) == 1 else 'are'} kept in the "
            "results store" if parts else "nothing had been saved to the results store yet"
            if store_opened_by_this_process() else "nothing is kept: no results store was used (--no-store)"
            if _gave_no_store() else "nothing is kept: no results store was used")
    console(stderr=True).print(f"{what}; {kept}", highlight=False, markup=False)


def _gave_no_store() -> bool:
    """Whether this command's own options (before a ``--`` and the program's) hold ``--no-store``."""
    argv = list(COMMAND_ARGV or sys.argv[1:])
    return "--no-store" in (argv[:argv.index("--")] if "--" in argv else argv)


def add_executor_options(p, gpus: bool = False) -> None:
    """``--executor local|ray`` and ``--address ADDR``; with ``gpus``, also ``--gpus all|0,2|0,0``."""
    p.add_argument("--executor", choices=["local", "ray"], default="local", help="where compiles (and GPU runs) "
                   "go: local processes (default) or a Ray cluster (pip install \"tileprobe[ray]\"; docs/SCALE.md)")
    p.add_argument("--address", metavar="ADDR", help="with --executor ray: the cluster to join (as `ray start --head` "
                   "prints it, or auto); default: start Ray here")
    if gpus:
        p.add_argument("--gpus", metavar="all|0,2|0,0", default=None, help="GPUs to use, one worker each (default 0; "
                       "all: every GPU; 0,0: two workers share GPU 0 and their timings are flagged shared_gpu and "
                       "never ranked)")


@contextlib.contextmanager
def executor_of(args):
    """The executor ``--executor``/``--address`` ask for (None for the plain local default), closed at the end."""
    if getattr(args, "executor", "local") == "local" and not getattr(args, "address", None):
        yield None
        return
    from tileprobe.exec import make_executor
    ex = make_executor(args.executor, address=args.address, jobs=getattr(args, "jobs", None))
    try:
        yield ex
    finally:
        ex.close()


def gpus_of(args) -> list[int] | None:
    """``--gpus`` as device indexes (None when not given: today's one worker on GPU 0)."""
    if getattr(args, "gpus", None) is None:
        return None
    from tileprobe.run.multi import parse_gpus, visible_gpu_count
    return parse_gpus(args.gpus, visible_gpu_count)


def command_after_dashes(args) -> list[str]:
    """The program's command line as typed after the first ``--`` of ``tileprobe use|record … -- COMMAND``.

    argparse's ``nargs="*"`` positional drops every further ``--`` inside COMMAND (``printf '[%s]' x -- y`` lost its
    ``--``; a nested ``tileprobe use T -- …`` inside COMMAND was refused), so the words are taken from the raw
    argv that :func:`tileprobe.cli.main` keeps (``args.raw_argv``); without it, from the parsed positional."""
    raw = list(getattr(args, "raw_argv", None) or [])
    if "--" in raw:
        return raw[raw.index("--") + 1:]
    command = list(getattr(args, "command", None) or [])
    return command[1:] if command[:1] == ["--"] else command
