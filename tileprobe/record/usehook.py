"""The ``tileprobe use`` side of the start-up hook: coverage events, per-kernel off/pin, never worse than the default.

STANDALONE like :mod:`tileprobe.record.capture` (standard library only, no import of the tileprobe package): the
capture loads this file by path from beside itself, under :data:`MODULE_NAME`, at its first search or launch, in
the user's process. Nothing here may slow, block or break the program: every entry point is wrapped by the capture
(a failure is said once and the search runs as the program wrote it), a launch costs two dict operations.

What it does, read from the environment once per process:

* ``TILEPROBE_USE_COVERAGE`` (a folder, set by ``tileprobe use``): one JSON-lines file per process,
  ``cov-<pid>-<ns>.jsonl``: a ``search`` line per search call, at once (``outcome``: ``answered`` | ``default`` |
  ``pinned`` | ``missed`` | ``stale`` | ``off``; ``reason``; the problem's arguments), and ``launches`` lines
  (absolute counts per kernel and per how its configuration was chosen: ``table`` | ``own`` | ``none``) at every
  search and at exit. :mod:`tileprobe.record.coverage` adds them up after the program ended.
* ``TILEPROBE_USE_OFF``: kernel names, comma-separated: the table is not used for them (their own search runs).
* ``TILEPROBE_USE_PIN``: a JSON object, kernel name → the program's configuration (as the table's ``search.config``
  writes it): that kernel's searches answer it, whatever the table says.

Never worse: a row whose own ``default`` block (``tileprobe tune --export``: the program's first configuration and
its time) is faster than the row's pick answers the default configuration instead, said once.
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import time

MODULE_NAME = "_tileprobe_use_hook"
ENV_COVERAGE = "TILEPROBE_USE_COVERAGE"
ENV_OFF = "TILEPROBE_USE_OFF"
ENV_PIN = "TILEPROBE_USE_PIN"
#: How a launch's kernel had its configuration chosen (the last search of that kernel function in the process).
TABLE, OWN, NONE = "table", "own", "none"
#: Search outcomes that ran a configuration tileprobe gave (the others ran the program's own search).
ANSWERED = ("answered", "default", "pinned")


def parse_off(text: str | None) -> set:
    """Kernel names from ``$TILEPROBE_USE_OFF`` (comma-separated, blanks dropped)."""
    return {n.strip() for n in (text or "").split(",") if n.strip()}


def parse_pin(text: str | None) -> dict:
    """Kernel name → configuration (JSON) from ``$TILEPROBE_USE_PIN``.

    Raises:
        ValueError: not a JSON object (the message says what is expected).
    """
    if not text:
        return {}
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError(f"{ENV_PIN} is a JSON {type(doc).__name__}, not an object of kernel name → configuration")
        out = {str(k): v for k, v in doc.items()}
        for v in out.values():
            canon_text(v)           # how it is compared and said later: deep nesting fails here, not there
    except RecursionError:
        raise ValueError(f"{ENV_PIN} is nested deeper than a configuration can be") from None
    return out


def canon_text(obj) -> str:
    """``obj`` as sorted strict JSON text (NaN as null), how configurations compare."""
    loose = json.loads(json.dumps(obj, sort_keys=True, default=repr), parse_constant=lambda _: None)
    return json.dumps(loose, sort_keys=True)


def _us(v) -> float | None:
    """A table figure (µs) when it is a finite positive number, else None."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v > 0 else None


def figures(row, default) -> tuple:
    """(pick µs, default µs, what they are) of a table row (the capture's ``TableRow``) and its ``default`` block
    (a ``RowChoice``, or None): the steady-state finals when both have one, else the race medians; a figure missing
    is None."""
    if _us(row.final_us) is not None and default is not None and _us(default.final_us) is not None:
        return _us(row.final_us), _us(default.final_us), "steady-state final"
    return _us(row.median_us), _us(default.median_us) if default is not None else None, "median"


class UseHook:
    """This process's coverage events and per-kernel control (module doc). Launches are counted by
    :func:`wrap_launch` (never raising into the program); the other methods are called inside the capture's
    guard."""

    def __init__(self, environ=None):
        env = os.environ if environ is None else environ
        self.pid = os.getpid()
        self.dir = env.get(ENV_COVERAGE) or None
        self.off = parse_off(env.get(ENV_OFF))
        self.pin_error = None
        try:
            self.pin = parse_pin(env.get(ENV_PIN))
        except ValueError as e:
            self.pin, self.pin_error = {}, str(e)
        self.state: dict = {}       # kernel function -> TABLE | OWN (the last search of it)
        self.names: dict = {}       # kernel function -> its name
        self.counts: dict = {}      # (kernel function, how) -> launches
        self.path = None
        if self.dir:
            atexit.register(self.flush)

    def after_fork(self) -> None:
        """In a forked child: its own file and counts (the dict is cleared, not replaced: the launch wrapper holds
        it)."""
        self.pid, self.path = os.getpid(), None
        self.counts.clear()

    # --- searches ---------------------------------------------------------------------------------------------
    def control(self, names: set):
        """(``"off"`` | ``"pin"`` | None, the pinned configuration) for a search of a kernel known by ``names``."""
        if names & self.off:
            return "off", None
        for n in names:
            if n in self.pin:
                return "pin", self.pin[n]
        return None, None

    def control_text(self) -> str | None:
        """The one line said per process when per-kernel control is on (None: it is not)."""
        if not (self.off or self.pin or self.pin_error):
            return None
        parts = []
        if self.off:
            parts.append("table off for " + ", ".join(sorted(self.off)))
        if self.pin:
            parts.append("pinned " + "; ".join(f"{k}={canon_text(v)}" for k, v in sorted(self.pin.items())))
        if self.pin_error:
            parts.append(f"{ENV_PIN} ignored ({self.pin_error}; give a JSON object such as "
                         "'{\"rms_norm\": {\"TILE\": 1024}}')")
        return "per-kernel control: " + "; ".join(parts)

    def never_worse(self, row):
        """(configuration JSON to answer, why) for a fresh row (the capture's ``TableRow``): the row's own pick, or
        the program's default configuration when the row's ``default`` block is faster than the pick (``why`` says
        so; else None)."""
        pick = row.search.choice()
        default = row.default
        us_pick, us_default, what = figures(row, default)
        if default is None or us_pick is None or us_default is None or us_default >= us_pick:
            return pick, None
        why = (f"the table's pick {us_pick:,.2f} µs is slower than the program's default configuration "
               f"{us_default:,.2f} µs in the table's own figures ({what}): answering the default")
        return default.choice(), why

    def searched(self, search, name: str, outcome: str, reason: str | None = None) -> None:
        """Note one search call: its kernel's launches from now on count as ``table`` or ``own``; one line in the
        coverage file (when coverage is on) with the problem's arguments, for the nearest row."""
        f = getattr(search.kernel, "_pyfunc", None) or search.kernel
        self.state[f] = TABLE if outcome in ANSWERED else OWN
        self.names[f] = name
        if not self.dir:
            return
        args = search.config_descs[0].args if search.config_descs else []
        self._write({"t": "search", "time": time.time(), "kernel": name, "key": search.key, "outcome": outcome,
                     "reason": reason, "problem": [[i, args[i]] for i in search.problem if i < len(args)]})
        self.flush()

    def undescribed(self, kernel, why: str) -> None:
        """Note a search that could not be described (``why``: the program's functions raised for every
        configuration, or too many configurations): a miss of its kernel (``kernel``: a kernel object, or the
        program's kernel factory) with no key. Never raises."""
        try:
            f = getattr(kernel, "_pyfunc", None) or kernel
            name = str(getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or "kernel")
            self.state[f] = OWN
            self.names[f] = name
            if self.dir:
                self._write({"t": "search", "time": time.time(), "kernel": name, "key": "-", "outcome": "missed",
                             "reason": f"not described: {why}", "problem": []})
                self.flush()
        except Exception:
            pass

    # --- the file ---------------------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write the launch counts (absolute; the last line per process wins). Called at each search and at exit."""
        if not self.dir or not self.counts or os.getpid() != self.pid:
            return
        try:
            rows = [[self.names.get(f) or _name(f), how, n] for (f, how), n in list(self.counts.items())]
            self._write({"t": "launches", "counts": rows})
        except Exception:
            pass

    def _write(self, obj: dict) -> None:
        if self.path is None:
            os.makedirs(self.dir, exist_ok=True)
            self.path = os.path.join(self.dir, f"cov-{os.getpid()}-{time.time_ns()}.jsonl")
        line = (json.dumps(obj, default=repr) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0), 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def _name(f) -> str:
    return str(getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__name__)


def wrap_launch(original, hook: UseHook):
    """``launch`` that counts the call in ``hook`` and then calls ``original`` unchanged (its errors its own)."""
    counts, state = hook.counts, hook.state      # the counting inlined: it runs at every launch

    def launch(*args, **kwargs):
        try:
            kernel = args[2]
            f = getattr(kernel, "_pyfunc", kernel)
            key = (f, state.get(f, NONE))
            counts[key] = counts.get(key, 0) + 1
        except Exception:
            pass
        return original(*args, **kwargs)
    launch.__name__ = getattr(original, "__name__", "launch")
    launch.__qualname__ = getattr(original, "__qualname__", "launch")
    launch.__doc__ = getattr(original, "__doc__", None)
    for attr, value in (("__wrapped__", original), ("_tileprobe_record", True), ("_tileprobe_cov", True)):
        setattr(launch, attr, value)
    return launch


_HOOK = None


def get() -> UseHook:
    """This process's :class:`UseHook` (made at the first call; a forked child gets its own file)."""
    global _HOOK
    if _HOOK is None:
        _HOOK = UseHook()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork)
    return _HOOK


def _after_fork() -> None:
    if _HOOK is not None:
        _HOOK.after_fork()


def coverage_on() -> bool:
    """Whether launches are to be counted in this process (``$TILEPROBE_USE_COVERAGE`` set)."""
    return bool(os.environ.get(ENV_COVERAGE))



# --- what the capture calls (inside its guard: a failure is said once and the search runs as written) ------------

def _names(search, name: str) -> set:
    kn = search.kernel_names
    return {n for n in (kn.name, kn.qualname, name, name.rsplit(".", 1)[-1]) if n}


def steer(answerer, search, name: str) -> list:
    """Per-kernel control of one search: ``[]`` when none applies (the table answers as usual), else
    ``[answer]``: ``[None]`` runs the program's own search (``--off``, or a pinned configuration that is not among
    this search's), ``[TuningResult]`` answers the pinned configuration. Said once per process."""
    hook = get()
    text = hook.control_text()
    if text:
        answerer.say_once("control", text)
    how, pinned = hook.control(_names(search, name))
    if how is None:
        return []
    if how == "off":
        hook.searched(search, name, "off", "the table is turned off for this kernel (--off / " + ENV_OFF + ")")
        return [None]
    want = canon_text(pinned)
    for i, c in enumerate(search.config_descs):
        if want in (canon_text(c.config), canon_text(c.choice())):
            hook.searched(search, name, "pinned")
            return [sys.modules[type(answerer).__module__]._tuning_result(search.configs[i])]
    reason = (f"the pinned configuration {want} is not among this search's {len(search.config_descs)} "
              f"configurations (the first: {canon_text(search.config_descs[0].config)}); pin one of them")
    answerer.say_once(("pin", search.key), f"{name}: {reason}; running the program's own search")
    hook.searched(search, name, "missed", reason)
    return [None]


def never_worse_for(answerer, row, name: str, pick: dict):
    """(configuration to answer, outcome) for a fresh row (:meth:`UseHook.never_worse`): ``pick`` and
    ``"answered"``, or the row's default configuration and ``"default"`` (said once per row)."""
    want, why = get().never_worse(row)
    if why is None:
        return pick, "answered"
    answerer.say_once(("default", row.search.key), f"{name}: {why}")
    return want, "default"


def count_launches(module, rebind) -> None:
    """Under ``$TILEPROBE_USE_COVERAGE``: wrap ``module.launch`` (cuTile's ``_cext``) to count launches per kernel,
    rebinding the references already taken (``rebind(old, new)``)."""
    if not coverage_on():
        return
    current = getattr(module, "launch", None)
    if current is None or getattr(current, "_tileprobe_cov", False):
        return
    module.launch = wrap_launch(current, get())
    rebind(current, module.launch)
