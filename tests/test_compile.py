"""Compiles are results: errors, compiler crashes and timeouts are recorded per variant, never an abort."""
import os

from support import fake_tileiras

from tileprobe.audit.pipeline import audit
from tileprobe.compile.job import Variant
from tileprobe.compile.pool import compile_variants

DATA = os.path.join(os.path.dirname(__file__), "data")
VADD = os.path.join(DATA, "probe_vadd.py")


def _variant(arch="sm_90", tile=256, occ=1):
    return Variant(VADD, 0, "vadd", (("TILE", tile),), (("occupancy", occ),), arch)


def test_ok_compile_records_compiler_and_symbol():
    [res] = list(compile_variants([_variant()], jobs=1))
    assert res.status == "ok", res.error
    assert res.cubin[:4] == b"\x7fELF"
    assert "V13." in res.tileiras
    assert res.symbol.startswith("vadd_Kt1_")
    assert res.compile_s > 0 and res.total_s >= res.compile_s
    assert "--gpu-name sm_90" in res.repro and "-O3" in res.repro


def test_compile_error_is_a_result_with_message():
    result = audit([os.path.join(DATA, "probe_failures.py")], ["sm_90", "sm_120"], jobs=2)
    by_arch = {r.arch: r for r in result.records}
    assert by_arch["sm_90"].status == "compile_error"
    assert "float4_e2m1fn is not supported on sm_90" in by_arch["sm_90"].error
    assert by_arch["sm_120"].status == "ok" and by_arch["sm_120"].threads > 0


def test_compiler_crash_is_a_result_with_repro(tmp_path):
    fake = fake_tileiras(tmp_path, "kill -SEGV $$")
    [res] = list(compile_variants([_variant()], tileiras=fake, jobs=1))
    assert res.status == "compiler_crash", (res.status, res.error)
    assert res.repro.split()[-1].startswith("--") and fake in res.repro
    assert res.artifact_dir and any(f.endswith(".bytecode") for f in os.listdir(res.artifact_dir))


def test_compiler_timeout_is_a_result(tmp_path):
    fake = fake_tileiras(tmp_path, "sleep 30")
    [res] = list(compile_variants([_variant()], tileiras=fake, jobs=1, timeout_s=1.0))
    assert res.status == "timeout", (res.status, res.error)
    assert "timeout" in res.error.lower()


def test_compiles_still_running_at_the_cut_are_killed_and_give_no_result(tmp_path):
    """A budgeted tune's end (``cut_at``): a 3-s compile is killed at the cut and yields nothing — no ``timeout``
    record that the store would keep — its worker is gone, and the variants not started never start; the first
    ``cut_spare`` started (a budgeted tune's first wave) finish."""
    import time
    fake = fake_tileiras(tmp_path, "sleep 3")
    t0 = time.monotonic()
    gen = compile_variants([_variant(tile=t) for t in (256, 1024, 4096)], tileiras=fake, jobs=2, timeout_s=60.0,
                           cut_at=t0 + 1.0, cut_spare=1)
    got = list(gen)
    assert time.monotonic() - t0 < 20.0
    # two started at once; the one spared finished (status: the fake's), the other was killed at 1 s, the third
    # never started
    assert [r.variant.case_dict["TILE"] for r in got] == [256]


def test_the_first_wave_is_spared_at_the_cut_only_until_a_compile_lands_ok(tmp_path):
    """A budgeted tune's first wave (``cut_spare``) finishes past the cut only while nothing compiled: once one of
    them lands ``ok`` there is something to race, and the others, still running, are cut (a slow first wave ran past
    ``--budget`` before, session 8's note). The fake runs the real tileiras, then the second compile sleeps 20 s."""
    import time
    fake = fake_tileiras(tmp_path, '[ "$n" -ge 1 ] && sleep 20; exit 0', logged=True)
    t0 = time.monotonic()
    got = list(compile_variants([_variant(tile=t) for t in (256, 1024)], tileiras=fake, jobs=2, timeout_s=120.0,
                                cut_at=t0 + 0.5, cut_spare=2))
    assert time.monotonic() - t0 < 18.0                      # the sleeping one was cut, not waited for
    assert [r.status for r in got] == ["ok"], [(r.status, r.error) for r in got]


def test_what_landed_is_yielded_before_the_variants_iterator_s_error(tmp_path):
    """A budgeted tune's variants come from its chooser (the search order, the race's leaders, the store): when that
    raises after a compile finished, the finished result still reaches the caller, then the error (session 9's
    hostile test: the ok compile was lost)."""
    import pytest

    def chosen():
        yield _variant(tile=256)
        raise RuntimeError("chooser broke")
    got = []
    with pytest.raises(RuntimeError, match="chooser broke"):
        for r in compile_variants(chosen(), jobs=1, timeout_s=120.0):
            got.append(r)
    assert [(r.variant.case_dict["TILE"], r.status) for r in got] == [(256, "ok")]


def test_sweep_goes_on_after_failures(tmp_path):
    fake = fake_tileiras(tmp_path, "echo 'error: synthetic failure' >&2; exit 5")
    results = list(compile_variants([_variant(tile=t) for t in (256, 1024)], tileiras=fake, jobs=2))
    assert sorted(r.status for r in results) == ["compile_error", "compile_error"]
    assert all("synthetic failure" in r.error or "Return code 5" in r.error for r in results)


def test_repeat_records_code_hashes_and_determinism():
    result = audit([VADD], ["sm_90"], jobs=2, repeat=2)
    assert len(result.records) == 4          # repeats do not add rows
    for r in result.records:
        assert r.deterministic is True and r.code_hashes == [r.code_sha256]


def test_same_code_uses_any_shared_hash():
    from tileprobe.schema import VariantRecord
    a = VariantRecord("k", "p", {}, {}, "sm_90", "b", "ok", code_sha256="x", code_hashes=["x", "y"])
    b = VariantRecord("k", "p", {}, {}, "sm_90", "b", "ok", code_sha256="y")
    c = VariantRecord("k", "p", {}, {}, "sm_90", "b", "ok", code_sha256="z")
    assert a.same_code(b) and b.same_code(a) and not a.same_code(c)


def test_ctrl_c_stops_the_sweep_at_once_and_keeps_finished_variants(tmp_path):
    """SIGINT to the whole process group (a terminal's Ctrl-C): exit 130 within seconds, queued variants are not
    compiled, finished ones stay stored, no worker is left behind."""
    import signal
    import sqlite3
    import subprocess
    import sys
    import time
    db = tmp_path / "store.sqlite"
    root = os.path.dirname(os.path.dirname(__file__))
    p = subprocess.Popen([sys.executable, "-m", "tileprobe.cli", "audit", "examples/rms_norm.py", "--arch",
                          "sm_90,sm_120", "--store", str(db), "--format", "none", "--no-sass", "-j", "2"], cwd=root,
                         start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             preexec_fn=_ctrl_c_default)

    def stored():
        try:
            return sqlite3.connect(db).execute("select count(*) from compiles").fetchone()[0]
        except sqlite3.Error:
            return 0

    deadline = time.time() + 120
    while stored() < 2 and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
    assert p.poll() is None, "the sweep ended before it could be interrupted"
    os.killpg(p.pid, signal.SIGINT)
    t0 = time.time()
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 130, out
    assert time.time() - t0 < 10
    kept = stored()
    assert 2 <= kept < 20
    assert f"interrupted; {kept} compiles finished before it are kept in the results store" in out
    time.sleep(0.5)
    rows = subprocess.run(["ps", "-o", "pid=,stat=,cmd=", "-s", str(p.pid)], capture_output=True,
                          text=True).stdout.splitlines()
    # dead children handed to PID 1 may linger as zombies in a container whose init does not reap; none may run
    assert [r for r in rows if r.split()[1][0] != "Z"] == []


def test_the_repeat_command_points_beside_the_store_given(tmp_path, monkeypatch):
    """Failed variants' bytecode (and their repeat command) went to ~/.cache/tileprobe/failed whatever
    store the audit was given; now beside that store, and without a store in the temp folder ($TMPDIR)."""
    from tileprobe.store import Store
    monkeypatch.delenv("TILEPROBE_ARTIFACTS", raising=False)
    fake = fake_tileiras(tmp_path, "kill -SEGV $$")
    store = Store.open(str(tmp_path / "mine" / "results.sqlite"))
    [rec] = audit([VADD], ["sm_90"], toolchains=[{"tileiras": fake}], store=store, jobs=1,
                  cases={"TILE": [256]}, hints={"occupancy": [1]}).records
    assert rec.status == "compiler_crash"
    assert f"{tmp_path}/mine/failed/" in rec.repro and ".cache/tileprobe" not in rec.repro
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)        # gettempdir() reads TMPDIR again
    [rec] = audit([VADD], ["sm_90"], toolchains=[{"tileiras": fake}], jobs=1,
                  cases={"TILE": [256]}, hints={"occupancy": [1]}).records
    assert f"{tmp_path}/tmp/tileprobe-failed/" in rec.repro


def _ctrl_c_default() -> None:
    """In the child before exec: SIGINT as a terminal's foreground job has it (default), whatever this process
    inherited or a test left (conftest's ``_sigint_as_it_was``): the test is of Ctrl-C, not of an ignored SIGINT."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)

