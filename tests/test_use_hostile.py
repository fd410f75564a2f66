"""Hardening: ``tileprobe use`` / ``tune --refresh`` given hostile tables and recordings (deep JSON,
wrong shapes, FIFOs and devices) answer with a message naming the file, never a traceback or a hang."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = {"kind": "tileprobe.tune", "schema_version": 1, "kernels": {}}


def _env(tmp_path, **extra):
    return dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "xdg"), **extra)


def _tp(tmp_path, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "tileprobe.cli", *map(str, args)], capture_output=True, text=True,
                          env=_env(tmp_path), cwd=str(tmp_path), timeout=timeout)


def _deep(path: Path, prefix: str = "", suffix: str = "") -> Path:
    path.write_text(prefix + "[" * 200_000 + "]" * 200_000 + suffix)
    return path


def _refused(out, path, words):
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert str(path) in out.stderr and words in out.stderr, out.stderr[-2000:]


def test_a_deep_table_is_refused_naming_the_file(tmp_path):
    deep = _deep(tmp_path / "deep.json")
    inner = _deep(tmp_path / "inner.json", '{"kind": "tileprobe.tune", "schema_version": 1, "kernels": {}, "x": ', "}")
    for path in (deep, inner):
        for args in (("use", path, "--", sys.executable, "-c", "print('ran')"), ("use", path, "--env"),
                     ("tune", "--refresh", path)):
            _refused(_tp(tmp_path, *args), path, "nested deeper than the JSON reader goes")
    table = tmp_path / "t.json"
    table.write_text(json.dumps(TABLE))
    (tmp_path / "t.json.record").mkdir()
    rec = _deep(tmp_path / "t.json.record" / "record.json")
    _refused(_tp(tmp_path, "tune", "--refresh", table), rec, "nested deeper than the JSON reader goes")


def test_a_fifo_or_device_as_the_table_is_refused_not_read_forever(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        for args in (("use", path, "--", "true"), ("use", path, "--env"), ("tune", "--refresh", path)):
            _refused(_tp(tmp_path, *args, timeout=60), path, "not a regular file")
        from tileprobe.record import hook
        env = _env(tmp_path, TILEPROBE_USE_TABLE=str(path))
        env["PYTHONPATH"] = hook.write_hook(str(tmp_path / "h")) + os.pathsep + env["PYTHONPATH"]
        out = subprocess.run([sys.executable, "-c", "import cuda.tile.tune; print('ran')"], capture_output=True,
                             text=True, env=env, timeout=60)
        # a process that never searches does not read the table: not a word
        assert out.returncode == 0 and out.stdout.strip() == "ran" and "tileprobe" not in out.stderr, out.stderr
        env["PYTHONPATH"] += os.pathsep + str(ROOT / "tests" / "data" / "record" / "fake_tune")
        out = subprocess.run([sys.executable, str(ROOT / "tests" / "data" / "record" / "search_program.py"), "256"],
                             capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0 and "check ok" in out.stdout, out.stderr
        lines = [ln for ln in out.stderr.splitlines() if ln.startswith("tileprobe use:")]
        assert len(lines) == 1 and "not a regular file" in lines[0] and str(path) in lines[0], out.stderr


def test_refresh_of_wrong_shaped_data_names_the_file_and_the_field(tmp_path):
    row = {"kernel": "k", "search": {"key": "abc"}}
    cases = [({"kernels": {"k": ["a row"]}}, None, "kernels.k[0] is a JSON string"),
             ({"kernels": [1, 2]}, None, "\"kernels\" is a JSON list"),
             ({"kernels": {"k": [{"search": {"key": ["a"]}}]}}, None, "kernels.k[0].search.key is a JSON list"),
             ({"kernels": {"k": [row]}}, {"searches": "abc"}, "\"searches\" is a JSON string"),
             ({"kernels": {"k": [row]}}, [], "not a tileprobe recording (a JSON list"),
             ({"kernels": {"k": [row]}}, {"searches": [{"key": 3}]}, "searches[0].key is a JSON number")]
    for n, (table, record, words) in enumerate(cases):
        path = tmp_path / f"t{n}.json"
        path.write_text(json.dumps({**TABLE, **table}))
        rec = tmp_path / f"t{n}.json.record"
        rec.mkdir()
        (rec / "record.json").write_text(json.dumps({"searches": []} if record is None else record))
        _refused(_tp(tmp_path, "tune", "--refresh", path), path if record is None else rec / "record.json", words)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _wait_for(pred, timeout_s: float = 60.0) -> bool:
    import time
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _start_use(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(TABLE))
    flag = tmp_path / "child.pid"
    flag.unlink(missing_ok=True)
    code = f"import os, time; open({str(flag)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    proc = subprocess.Popen([sys.executable, "-m", "tileprobe.cli", "use", str(table), "--", sys.executable, "-c",
                             code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path),
                            stdin=subprocess.DEVNULL)
    assert _wait_for(lambda: flag.exists() and flag.read_text().strip()), proc.communicate(timeout=5)
    return proc, int(flag.read_text())


def test_sigterm_to_use_ends_the_command_and_sigkill_too(tmp_path):
    import signal
    proc, child = _start_use(tmp_path)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM and not _alive(child), err
    assert "SIGTERM passed on to the command" in err and "--no-store" not in err and "Traceback" not in err, err
    proc, child = _start_use(tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    assert _wait_for(lambda: not _alive(child), 30.0)


def test_tune_refuses_a_record_dir_it_did_not_make(tmp_path):
    for name, files in (("user", {"launches/mine.txt": "keep me"}), ("rec", {"record.json": "{}",
                                                                            "probes/p.py": "keep me"})):
        d = tmp_path / name
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
        out = _tp(tmp_path, "tune", "--record-dir", d, "--export", tmp_path / "t.json", "--", sys.executable, "-c",
                  "print('ran')")
        assert out.returncode == 1 and "ran" not in out.stdout and "not a recording made by `tileprobe tune`" in \
            out.stderr and str(d) in out.stderr and "--record-dir" in out.stderr, out.stderr
        assert all((d / rel).read_text() == text for rel, text in files.items())


def test_tune_export_says_it_replaces_the_recording_refresh_reads(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(TABLE))
    (tmp_path / "t.json.record").mkdir()
    (tmp_path / "t.json.record" / "record.json").write_text('{"searches": []}')
    out = _tp(tmp_path, "tune", "--export", table, "--", sys.executable, "-c", "print('ran')", timeout=300)
    assert "replacing the recording" in out.stderr and "can no longer be refreshed" in out.stderr, out.stderr


def test_refresh_says_what_it_cannot_check_instead_of_hold(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(TABLE))
    (tmp_path / "t.json.record").mkdir()
    (tmp_path / "t.json.record" / "record.json").write_text('{"searches": []}')
    out = _tp(tmp_path, "tune", "--refresh", table)
    assert out.returncode == 0 and "cannot check GPU name/SM count here" in out.stderr, out.stderr
    assert "holds for what can be checked here (not GPU name/SM count)" in out.stderr, out.stderr


def test_refresh_finds_the_compiler_without_importing_cutiles_compile_side(tmp_path):
    # cuda.tile._compile imports torch: seconds of CPU in tileprobe's own process, past 100 s under load
    code = ("import sys; from tileprobe.cli.tune_program import host_facts, picked_compiler; "
            "from tileprobe import toolchain; f = host_facts(); "
            "print(f.tileiras, picked_compiler(), toolchain.pip_toolchain() is not None, "
            "'cuda.tile._compile' in sys.modules, 'torch' in sys.modules, sep='|')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path),
                         timeout=120)
    build, path, pip, compile_side, torch = out.stdout.strip().split("|")
    assert out.returncode == 0 and (compile_side, torch) == ("False", "False"), out.stdout + out.stderr
    if pip == "True":      # the pip packages: cuTile's first choice, the same file it would name
        from tileprobe import _cutile
        assert path == _cutile.current_compiler() and "release 13." in build, out.stdout


def test_refresh_names_a_stale_row_whose_probe_is_gone_and_starts_no_loader(tmp_path):
    row = {"problem": {"search": "abc"}, "case": {"config": "C0"}, "median_us": 1.0, "arch": "sm_90",
           "search": {"key": "abc", "config_index": 0}}
    table = tmp_path / "t.json"
    table.write_text(json.dumps({**TABLE, "kernels": {"k": [row]}}))
    (tmp_path / "t.json.record").mkdir()
    (tmp_path / "t.json.record" / "record.json").write_text(json.dumps({"searches": [
        {"key": "abc", "file": "probes/gone.py", "name": "k", "configs": [], "sites": {}}]}))
    out = _tp(tmp_path, "tune", "--refresh", table)
    gone = tmp_path / "t.json.record" / "probes" / "gone.py"
    assert out.returncode == 3 and f"cannot refresh abc (k): its probe {gone} is gone" in out.stderr, out.stderr
    assert "nothing refreshed: 1 stale search row(s)" in out.stderr and "holds" not in out.stderr, out.stderr
    assert "no probe could be loaded" not in out.stderr, out.stderr


def test_use_env_refuses_a_table_path_that_would_split_pythonpath(tmp_path):
    d = tmp_path / "a:b"
    d.mkdir()
    (d / "t.json").write_text(json.dumps(TABLE))
    out = _tp(tmp_path, "use", d / "t.json", "--env")
    assert out.returncode == 1 and "PYTHONPATH" not in out.stdout and "splits PYTHONPATH" in out.stderr, out.stderr


def test_usage_errors_exit_2_and_a_dry_run_says_it_writes_no_table(tmp_path):
    table = tmp_path / "t.json"
    table.write_text(json.dumps(TABLE))
    out = _tp(tmp_path, "use", table)
    assert out.returncode == 2 and "no command" in out.stderr, out.stderr
    out = _tp(tmp_path, "tune", ROOT / "examples" / "rms_norm.py", "--", sys.executable, "-c", "print('ran')")
    assert out.returncode == 2 and "ran" not in out.stdout and "rms_norm.py" in out.stderr and "not both" in \
        out.stderr, out.stderr
    before = table.read_text()
    out = _tp(tmp_path, "tune", "--dry-run", "--export", table, "--", sys.executable, "-c", "print('ran')")
    assert f"--dry-run: no table is written ({table} is left as it is)" in out.stderr, out.stderr
    assert table.read_text() == before


def test_the_count_line_of_a_programs_search_counts_the_programs_configurations():
    from types import SimpleNamespace

    from tileprobe.report.tune import summary_line
    from tileprobe.tune.result import CandidateRow
    rows = [CandidateRow({"case": {"config": f"C{i}"}}, f"C{i}", "ok") for i in range(6)]
    p = SimpleNamespace(dropped={"constraint:programs_own": 6}, candidates=rows, notes=[])
    assert summary_line(p).startswith("6 configurations (the program's): 0 rejected by constraints, 0 failed")
