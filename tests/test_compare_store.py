"""``compare --probe`` reads the results store (nothing stored is compiled again) and fills it, so an
audit after it compiles nothing either; and it reads spills from the SASS (LDL/STL), not from the stack frame.

Two compilers without a download: the environment's tileiras, and a fake one — a shell script that answers
``--version`` with another build string (13.4.93) and hands every other call to the real tileiras, logging it
(except ``--help``, the target list the audit reads once per toolchain: not a compile).
Compiles are counted twice: the audit's compile workers (``compile_variants``) and the fake's invocations.
"""
from __future__ import annotations

import stat
import textwrap
from pathlib import Path

import pytest
from support import write_vec_probe

from tileprobe.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def two_compilers(tmp_path_factory):
    from tileprobe import _cutile
    d = tmp_path_factory.mktemp("compilers")
    real = _cutile.current_compiler()
    log = d / "fake_calls.log"
    fake = d / "bin" / "tileiras"
    fake.parent.mkdir()
    fake.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "--version" ]; then
          echo "tileiras: NVIDIA (R) Cuda Tile IR optimizing assembler (a test double)"
          echo "Cuda compilation tools, release 13.4, V13.4.93"
          exit 0
        fi
        if [ "$1" = "--help" ]; then   # the target list (asked once per toolchain): not a compile
          exec {real} "$@"
        fi
        echo "$@" >> {log}
        exec {real} "$@"
        """))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    probe = write_vec_probe(d / "probe_vec.py", tiles=(1024, 2048))
    return {"real": real, "fake": str(fake), "log": log, "probe": str(probe), "store": str(d / "s.sqlite")}


def _fake_calls(tc) -> int:
    return len(tc["log"].read_text().splitlines()) if tc["log"].exists() else 0


def test_compare_after_an_audit_compiles_nothing(two_compilers, compile_count, capsys):
    tc = two_compilers
    versions = f"{tc['real']},{tc['fake']}"
    counter = compile_count
    assert main(["audit", tc["probe"], "--arch", "sm_90", "--tileiras", versions, "--store", tc["store"],
                 "--jobs", "2", "--format", "none"]) == 0
    assert counter.n == 8                                  # 2 cases × 2 hints × 2 compilers
    calls_after_audit = _fake_calls(tc)
    assert calls_after_audit >= 4                          # the fake compiled its 4 variants (tileiras ran)
    capsys.readouterr()

    for _ in range(2):                                     # and a second compare is no different
        assert main(["compare", "--probe", tc["probe"], "--arch", "sm_90", "--tileiras", versions,
                     "--store", tc["store"], "--jobs", "2"]) == 0
        out, err = capsys.readouterr()
        assert counter.n == 8 and _fake_calls(tc) == calls_after_audit, "compare compiled a stored variant"
        assert "nothing to compile: all 4 variants from the store" in err
        assert "0 regression(s), 0 improvement(s), 0 changed, 4 same" in " ".join(out.split())
        assert "tileiras 13.4.93" in out and "tileiras 13.4.92" in out

    assert main(["audit", tc["probe"], "--arch", "sm_90", "--tileiras", versions, "--store", tc["store"],
                 "--format", "none"]) == 0
    assert counter.n == 8 and _fake_calls(tc) == calls_after_audit


def test_compare_with_no_store_compiles_and_regressions_filter(two_compilers, compile_count, capsys):
    tc = two_compilers
    counter = compile_count
    assert main(["compare", "--probe", tc["probe"], "--arch", "sm_90", "--tileiras", f"{tc['real']},{tc['fake']}",
                 "--no-store", "--jobs", "2", "--regressions", "--where", "TILE=1024"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert counter.n == 4                                  # TILE=1024 only, both compilers, nothing stored
    assert "no regression among the 2 variant(s) compared" in out      # said, not an empty table
