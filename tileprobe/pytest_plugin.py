"""pytest plugin: the ``tileprobe_audit`` fixture, so a kernel repository writes its gate as tests.

Registered through the ``pytest11`` entry point ``tileprobe`` (pyproject.toml); without installing tileprobe, load it
with ``pytest -p tileprobe.pytest_plugin``. Example::

    def test_w4a16_occupancy(tileprobe_audit):
        (tileprobe_audit("probes/w4a16.py", arch="sm_120")
            .where(GATHER=True, LOOP=True, occupancy=2)
            .expect("occupancy honoured", "no spills", "ctas_per_sm>=2"))

``--tileprobe-record DIR`` records every ``cuda.tile.launch`` of the session (this process, and the Python processes it
starts, xdist workers included) and writes one probe per kernel under ``DIR/probes`` when it ends, as
``tileprobe record`` does for a program (docs/RECORD.md).

A failed expectation fails the test with the gate's reasons (which variant, expected vs got, the verdict's
reason). Probe paths are taken relative to the test file, then the rootdir. The audit reuses the results store
(``--tileprobe-store PATH``, else ``$TILEPROBE_STORE``, else the user's default; ``--tileprobe-no-store`` to
compile everything) and is shared by the tests of one session. No GPU is needed.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest


def pytest_addoption(parser) -> None:
    """pytest hook: ``--tileprobe-store PATH``, ``--tileprobe-no-store`` and ``--tileprobe-jobs N``."""
    group = parser.getgroup("tileprobe", "tileprobe audits (tileprobe_audit fixture)")
    group.addoption("--tileprobe-store", metavar="PATH", default=None,
                    help="results store for tileprobe_audit (default: $TILEPROBE_STORE or the user data dir)")
    group.addoption("--tileprobe-no-store", action="store_true", default=False,
                    help="tileprobe_audit compiles every variant and stores nothing")
    group.addoption("--tileprobe-jobs", type=int, default=None, help="parallel compiles (default: all CPUs)")
    group.addoption("--tileprobe-record", metavar="DIR", default=None,
                    help="record the session's cuda.tile launches and write probes for them under DIR/probes")


# --- --tileprobe-record DIR ------------------------------------------------------------------------------------

def pytest_configure(config) -> None:
    """With ``--tileprobe-record DIR``: record every cuTile launch of this session (and its child processes)."""
    out = config.getoption("tileprobe_record", None)
    if not out:
        return
    from tileprobe.record import hook
    if not hasattr(config, "workerinput"):        # the xdist controller (or a plain session) owns DIR
        from tileprobe.errors import TileprobeError
        from tileprobe.record.session import prepare_dir
        try:
            prepare_dir(out, force=True)
        except TileprobeError as e:
            raise pytest.UsageError(f"--tileprobe-record: {e}") from e
        config._tileprobe_record_env = {k: os.environ.get(k) for k in ("PYTHONPATH", "TILEPROBE_RECORD_DIR")}
        os.environ.update(hook.recording_env(out))   # child processes (xdist workers too) record themselves
    hook.load_capture().install(hook.launch_dir(out))


def pytest_unconfigure(config) -> None:
    """With ``--tileprobe-record DIR``: stop recording and restore the environment."""
    out = config.getoption("tileprobe_record", None)
    if not out:
        return
    from tileprobe.record import hook
    hook.load_capture().uninstall()
    saved = getattr(config, "_tileprobe_record_env", None)
    if saved is None:
        return
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def pytest_terminal_summary(terminalreporter, config) -> None:
    """Write the probes (in a fresh process: this one may hold the real CUDA driver) and say what was written."""
    out = config.getoption("tileprobe_record", None)
    if not out or hasattr(config, "workerinput"):
        return
    import subprocess
    import sys

    from tileprobe.record import hook
    hook.load_capture().uninstall()                   # flush this process's counts first
    from tileprobe.procs import importable_env
    env = importable_env(hook.clean_env(os.environ))
    proc = subprocess.run([sys.executable, "-m", "tileprobe.cli", "record", "--from-log", out], env=env,
                          capture_output=True, text=True)
    summary = os.path.join(out, "record.json")
    if proc.returncode != 0 or not os.path.exists(summary):
        terminalreporter.write_line(f"tileprobe record: writing probes failed: {(proc.stderr or proc.stdout).strip()}")
        return
    import json
    with open(summary) as f:
        data = json.load(f)
    terminalreporter.write_line(f"tileprobe record: {data.get('launches', 0):,} launches, {len(data['probes'])} "
                                f"probe(s) in {os.path.join(out, 'probes')}")


class AuditCheck:
    """The audit of one probe for one arch (and compiler), narrowed with :meth:`where`, checked with :meth:`expect`.

    The audit runs on first use (``records`` or ``expect``) and is cached for the session.
    """

    def __init__(self, session: _Session, probe: str, arch: str, tileiras: str | None = None,
                 where: dict | None = None, baseline: str | None = None):
        self._session, self.probe, self.arch, self.tileiras = session, probe, arch, tileiras
        self._where, self.baseline = dict(where or {}), baseline

    def where(self, **selection: Any) -> AuditCheck:
        """A narrower check: case constants and hint values, e.g. ``where(GATHER=True, occupancy=2)``."""
        return AuditCheck(self._session, self.probe, self.arch, self.tileiras, {**self._where, **selection},
                          self.baseline)

    @property
    def records(self) -> list:
        """The selected :class:`~tileprobe.schema.VariantRecord` s (after the audit)."""
        from tileprobe.analyses.gate import select
        return select(self._session.audit(self.probe, self.arch, self.tileiras, self._where), self._where)

    def check(self, *expectations: str) -> list:
        """The :class:`~tileprobe.analyses.gate.Failure` s of these expectations (``[]``: all hold)."""
        from tileprobe.analyses.gate import check, load_baseline, parse_expectation
        exps = [parse_expectation(e) for e in expectations]   # malformed: GateError before any compile
        base = load_baseline(self.baseline, arch=self.arch) if self.baseline else None
        return check(self.records, exps, base)

    def expect(self, *expectations: str) -> AuditCheck:
        """Fail the test with the gate's reasons unless every expectation holds; returns self for chaining."""
        failures = self.check(*expectations)
        if failures:
            lines = [f"tileprobe: {len({f.expectation for f in failures})} expectation(s) failed for "
                     f"{self.probe} on {self.arch}" + (f" where {self._where}" if self._where else "")]
            lines += [f"  {f.expectation}: {f}" for f in failures]
            pytest.fail("\n".join(lines), pytrace=False)
        return self


class _Session:
    """Per pytest session: one store, audits cached by (probe, arch, compiler, case selection)."""

    def __init__(self, config):
        self.config = config
        self._store = None
        self._audits: dict[tuple, list] = {}

    def store(self):
        if self.config.getoption("tileprobe_no_store"):
            return None
        if self._store is None:
            from tileprobe.store import Store
            self._store = Store.open(self.config.getoption("tileprobe_store"))
        return self._store

    def audit(self, probe: str, arch: str, tileiras: str | None, where: dict) -> list:
        from tileprobe.audit.selected import audit_selected
        key = (probe, arch, tileiras, repr(sorted(where.items(), key=lambda kv: kv[0])))
        if key not in self._audits:
            toolchains = None
            if tileiras:
                from tileprobe.toolchain import resolve_toolchains
                toolchains = resolve_toolchains([tileiras])
            result = audit_selected(probe, arch, where=where, toolchains=toolchains, store=self.store(),
                                    jobs=self.config.getoption("tileprobe_jobs"),
                                    command_line=f"pytest tileprobe_audit {probe} --arch {arch}")
            self._audits[key] = result.records
        return self._audits[key]

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


@pytest.fixture(scope="session")
def _tileprobe_session(pytestconfig):
    session = _Session(pytestconfig)
    yield session
    session.close()


@pytest.fixture
def tileprobe_audit(request, _tileprobe_session) -> Callable[..., AuditCheck]:
    """``tileprobe_audit(probe, arch="sm_90", tileiras=None, baseline=None) -> AuditCheck`` (see module doc)."""
    def make(probe: str, arch: str = "sm_90", *, tileiras: str | None = None,
             baseline: str | None = None) -> AuditCheck:
        return AuditCheck(_tileprobe_session, _resolve(probe, request), arch, tileiras, baseline=baseline)
    return make


def _resolve(probe: str, request) -> str:
    if os.path.isabs(probe):
        return probe
    for base in (os.path.dirname(str(request.path)), str(request.config.rootpath)):
        cand = os.path.join(base, probe)
        if os.path.exists(cand):
            return cand
    return os.path.abspath(probe)


__all__: Sequence[str] = ["AuditCheck", "tileprobe_audit"]
