"""``tileprobe reduce`` on the command line: bad input is a clear error before any reduction."""
import os

from tests.test_reduce_run import TINY
from tileprobe.cli import main


def write_tiny(tmp_path):
    p = tmp_path / "tiny.py"
    p.write_text(TINY)
    return str(p)


def test_good_without_bad_is_a_usage_error(tmp_path, capsys):
    rc = main(["reduce", write_tiny(tmp_path), "--arch", "sm_90", "--property", "compiles", "--good", "13.3.36",
               "-o", str(tmp_path / "out"), "--no-store"])
    assert rc == 2 and "--good V1 and --bad V2" in capsys.readouterr().err


def test_an_unknown_property_lists_the_forms(tmp_path, capsys):
    rc = main(["reduce", write_tiny(tmp_path), "--arch", "sm_90", "--property", "occupancy sometimes",
               "-o", str(tmp_path / "out"), "--no-store"])
    err = capsys.readouterr().err
    assert rc == 2 and "compiler crash" in err and "no spills" in err


def test_an_unknown_release_is_refused_before_any_compile(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", str(tmp_path / "tc"))
    rc = main(["reduce", write_tiny(tmp_path), "--arch", "sm_90", "--property", "compiles", "--tileiras", "13.9.99",
               "-o", str(tmp_path / "out"), "--no-store"])
    err = capsys.readouterr().err
    assert rc != 0 and "13.9.99" in err
    assert not os.path.exists(tmp_path / "out" / "reduce-state.json")


def test_a_probe_whose_kernel_lives_elsewhere_is_refused_with_the_fix(tmp_path, capsys):
    p = tmp_path / "p.py"
    p.write_text('from tileprobe import Probe\nprobe = Probe(kernel="k.py:vec_add", args=lambda c, a: ())\n')
    rc = main(["reduce", str(p), "--arch", "sm_90", "--property", "compiles", "-o", str(tmp_path / "out"),
               "--no-store"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{p}:2" in err and "copy the kernel into the probe file" in err


def test_a_property_not_held_is_an_error_with_the_audit_line(tmp_path, capsys):
    rc = main(["reduce", write_tiny(tmp_path), "--arch", "sm_90", "--where", "SCALE=True,occupancy=2",
               "--property", "registers>=255", "-o", str(tmp_path / "out"), "--no-store", "-j", "2"])
    err = capsys.readouterr().err
    assert rc == 1 and "does not hold to begin with" in err and "registers" in err and "threads" in err
    assert not os.path.exists(tmp_path / "out" / "reduced_kernel.py")


def test_an_unknown_arch_is_a_usage_error(tmp_path, capsys):
    import pytest
    with pytest.raises(SystemExit) as e:
        main(["reduce", write_tiny(tmp_path), "--arch", "sm_91x", "--property", "compiles", "--no-store"])
    assert e.value.code == 2 and "sm_91x" in capsys.readouterr().err


def test_the_written_probe_is_audited_again_and_said_to_keep_the_property(tmp_path, capsys):
    import ast
    import re
    out = tmp_path / "out"
    rc = main(["reduce", write_tiny(tmp_path), "--arch", "sm_90", "--where", "SCALE=True,occupancy=2",
               "--property", "compiles", "-o", str(out), "--no-store", "-j", "2", "--budget", "0.01"])
    err = capsys.readouterr().err
    assert rc == 0 and "smallest so far (the budget ran out)" in err
    # the check of the probe as given is not cut: its time is said, and the budget counted from its end
    checked = re.search(r"\(the probe as given checked in (\d+\.\d) s; the budget starts now\)", err)
    assert checked is not None and float(checked.group(1)) > 0, err
    assert "the written probe keeps the property: 13." in err
    assert "what matters was not checked" in err
    kernel = ast.parse((out / "reduced_kernel.py").read_text())
    assert {a.name for n in ast.walk(kernel) if isinstance(n, ast.Import) for a in n.names} == {"cuda.tile"}
    assert "The budget ran out" in (out / "REPORT.md").read_text()


def test_a_fifo_as_the_probe_is_refused_not_waited_on(tmp_path, capsys):
    """A FIFO as the probe file blocked reduce in open() for ever (a hostile tester, 2026-12-05)."""
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    rc = main(["reduce", str(fifo), "--arch", "sm_90", "--property", "compiles", "-o", str(tmp_path / "out"),
               "--no-store"])
    assert rc == 1 and "not a readable regular file" in capsys.readouterr().err


def test_out_as_an_existing_file_is_an_error_and_links_in_out_are_replaced_not_written_through(tmp_path, capsys):
    from tileprobe.reduce.output import write_file
    (tmp_path / "a_file").write_text("mine")
    rc = main(["reduce", write_tiny(tmp_path), "--arch", "sm_90", "--property", "compiles",
               "-o", str(tmp_path / "a_file"), "--no-store", "-j", "2"])
    assert rc == 1 and "exists and is not a folder" in capsys.readouterr().err
    assert (tmp_path / "a_file").read_text() == "mine"
    precious = tmp_path / "precious.txt"
    precious.write_text("keep")
    (tmp_path / "out").mkdir()
    os.symlink(precious, tmp_path / "out" / "reduced_kernel.py")
    write_file(str(tmp_path / "out" / "reduced_kernel.py"), "kernel")
    assert precious.read_text() == "keep" and not os.path.islink(tmp_path / "out" / "reduced_kernel.py")
    assert (tmp_path / "out" / "reduced_kernel.py").read_text() == "kernel"


def test_a_compiler_that_exits_0_and_writes_no_cubin_is_named_not_the_property(tmp_path, capsys):
    from tests.support import fake_tileiras
    tileiras = fake_tileiras(tmp_path, 'echo "planted: wrote nothing 4711"; exit 0')
    rc = main(["reduce", write_tiny(tmp_path), "--arch", "sm_90", "--property", "no spills", "--tileiras", tileiras,
               "-o", str(tmp_path / "out"), "--no-store"])
    err = capsys.readouterr().err
    assert rc != 0, err
    assert "produced no output" in err and tileiras in err and "planted: wrote nothing 4711" in err, err
    assert "does not hold to begin with" not in err and "FileNotFoundError" not in err, err
