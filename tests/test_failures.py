"""Every failure loud, exact and contained: broken and hostile probes, bad options, unknown targets, markup
in names. Each case is a row of docs/FAILURES.md; the CLI runs as a subprocess, as a CI job runs it.

Most probes are audited together in one run beside a good probe (``batch``): each must give exactly one error line
naming its file (and line), the good probe must still be compiled, and the exit code must be 3."""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "tests", "data", "simple_kernels.py")
ARGS = ('lambda case, arrays: (arrays.randn((4096,), "float32"), arrays.randn((4096,), "float32"), '
        'arrays.empty((4096,), "float32"), 256)')
HEAD = "from tileprobe import Probe\nimport os, sys\n"


def _probe(body: str, **probe) -> str:
    """A probe file: ``body`` (indented code) then ``probe = Probe(...)`` over the vadd test kernel."""
    kw = {"kernel": repr(f"{KERNELS}:vadd"), "args": ARGS, **probe}
    return HEAD + textwrap.dedent(body) + "probe = Probe(" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")\n"


#: name → (probe file text, regex its one error line must match). Line numbers count HEAD's two lines.
HOSTILE = {
    "args_sys_exit": (_probe("def args(case, arrays):\n    sys.exit(7)\n", args="args"),
                      r"args_sys_exit\.py:4: args\(\) called sys\.exit\(7\) \(not compiled\)"),
    "import_sys_exit": (HEAD + "sys.exit(3)\n", r"import_sys_exit\.py:3: importing the probe file called sys\.exit\(3\)"),
    "import_os_exit": (HEAD + "os._exit(5)\n", r"import_os_exit\.py:3: importing the probe file called os\._exit\(5\)"),
    "args_os_exit": (_probe("def args(case, arrays):\n    os._exit(9)\n", args="args"),
                     r"args_os_exit\.py:4: args\(\) called os\._exit\(9\)"),
    "import_loop": (HEAD + "while True:\n    pass\n",
                    r"import_loop\.py: importing the probe file did not return within 10 s and was stopped"),
    "args_loop": (_probe("def args(case, arrays):\n    while True:\n        pass\n", args="args"),
                  r"args_loop\.py: args\(\{\}\) did not return within 10 s and was stopped"),
    "import_keyboard_interrupt": (HEAD + "raise KeyboardInterrupt\n",
                                  r"import_keyboard_interrupt\.py:3: importing the probe file raised KeyboardInterrupt "
                                  r"itself"),
    "args_keyboard_interrupt": (_probe("def args(case, arrays):\n    raise KeyboardInterrupt\n", args="args"),
                                r"args_keyboard_interrupt\.py:4: args\(\) raised KeyboardInterrupt itself"),
    "import_megabytes": (HEAD + "sys.stdout.write('x' * 5_000_000)\n",
                         r"import_megabytes\.py: printed more than 1,048,576 bytes while importing the probe file and "
                         r"was stopped"),
    "args_megabytes": (_probe("def args(case, arrays):\n    print('y' * 5_000_000)\n", args="args"),
                       r"args_megabytes\.py: printed more than 1,048,576 bytes while args\(\{\}\)"),
    "args_kills_itself": (_probe("import signal\ndef args(case, arrays):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
                                 args="args"),
                          r"args_kills_itself\.py: the process loading it ended during args\(\{\}\) \(killed by "
                          r"SIGKILL"),
    "missing_kernel_file": (_probe("", kernel=repr("/nonexistent/kernels.py:vadd")),
                            r"missing_kernel_file\.py:3: probe 'vadd': no such file: /nonexistent/kernels\.py"),
    "misspelled_kernel_name": (_probe("", kernel=repr(f"{KERNELS}:vad")),
                               r"misspelled_kernel_name\.py:3: .*has no attribute 'vad' \(did you mean 'vadd'\?\)"),
    "misspelled_kernel_object": (HEAD + f"import importlib.util as u\ns = u.spec_from_file_location('k', {KERNELS!r})\n"
                                 "m = u.module_from_spec(s); s.loader.exec_module(m); vadd = m.vadd\n"
                                 f"probe = Probe(kernel=vad, args={ARGS})\n",
                                 r"misspelled_kernel_object\.py:6: loading the probe failed: NameError: name 'vad' is "
                                 r"not defined\. Did you mean: 'vadd'\?"),
    "bad_dtype": (_probe("", args=ARGS.replace('randn((4096,), "float32")', 'randn((4096,), "flaot32")', 1)),
                  r"bad_dtype\.py:3: args\(\): unsupported array dtype 'flaot32'; use one of bool, int8"),
    "syntax_error": (HEAD + "probe = Probe(kernel='k.py:f', args=lambda c, a: (\n",
                     r"syntax_error\.py:3: syntax error: '\(' was never closed"),
    "import_error": (HEAD + "import no_such_module_xyz\n",
                     r"import_error\.py:3: loading the probe failed: ModuleNotFoundError: No module named "
                     r"'no_such_module_xyz'"),
    "negative_shape": (_probe("", args=ARGS.replace("randn((4096,)", "randn((-4,)", 1)),
                       r"negative_shape\.py:3: args\(\): array shape \(-4,\) has a negative extent"),
    "wrong_arity": (_probe("", args='lambda case, arrays: (arrays.randn((4096,), "float32"), 256)'),
                    r"wrong_arity\.py:3: args\(\): cuTile rejected the launch arguments: Kernel expects 4 arguments "
                    r"but 2 were given"),
    "args_returns_none": (_probe("", args="lambda case, arrays: None"),
                          r"args_returns_none\.py:3: args\(\): TypeError: 'NoneType' object is not iterable"),
    "args_broken_exception": (_probe("class Odd(Exception):\n    def __str__(self):\n        raise RuntimeError\n"
                                     "def args(case, arrays):\n    raise Odd()\n", args="args"),
                              r"args_broken_exception\.py:7: args\(\): Odd: <exception str\(\) failed>"),
    # hint values are checked when the probe is made (tileprobe/probe/define.py::check_hints), naming the allowed ones
    "occupancy_0": (_probe("", hints="{'occupancy': [0, 1]}"),
                    r"occupancy_0\.py:3: invalid probe: hints\['occupancy'\] holds 0: occupancy takes an int in 1 … 32"),
    "occupancy_minus_1": (_probe("", hints="{'occupancy': [-1]}"), r"hints\['occupancy'\] holds -1: occupancy takes an "
                                                                  r"int in 1 … 32"),
    "occupancy_two": (_probe("", hints="{'occupancy': ['two']}"), r"occupancy_two\.py:3: invalid probe: "
                                                                  r"hints\['occupancy'\] holds 'two'"),
    "occupancy_1000": (_probe("", hints="{'occupancy': [1000]}"), r"holds 1000: occupancy takes an int in 1 … 32"),
    "num_ctas_3": (_probe("", hints="{'num_ctas': [3]}"), r"hints\['num_ctas'\] holds 3: num_ctas takes a power of two "
                                                          r"in 1 … 16"),
    "unknown_hint": (_probe("", hints="{'occupancy_': [1]}"),
                     r"unknown_hint\.py:3: invalid probe: unknown hint 'occupancy_' \(did you mean 'occupancy'\?\)"),
    "cases_not_a_list": (_probe("", cases="{'TILE': 256}"), r"cases\['TILE'\] must be a non-empty list"),
    "probe_timeout_inf": (_probe("", timeout_s="float('inf')"), r"timeout_s=inf: a compiler timeout: give a timeout "
                                                                 r"in seconds, a finite number > 0 and ≤ 10,000,000"),
    "probe_timeout_1e308": (_probe("", timeout_s="1e308"), r"timeout_s=1e\+308: a compiler timeout: give a timeout"),
    "not_a_kernel": (_probe("", kernel=repr(f"{KERNELS}:ct")),
                     r"not_a_kernel\.py:3: probe 'ct': kernel .*is a module, not a @ct\.kernel function"),
    "kernel_module_raises": (_probe("", kernel="'raising_kernels.py:k'"),
                             r"raising_kernels\.py:1: loading the probe failed: RuntimeError: boom at import"),
}


def _cli(*args, env=None, timeout=300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run([sys.executable, "-m", "tileprobe", *args], cwd=ROOT, capture_output=True, text=True,
                          env=full_env, timeout=timeout)


def _good(folder, name="good") -> str:
    path = folder / f"{name}.py"
    path.write_text(_probe("", name=repr(name)))
    return str(path)


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """One audit of every HOSTILE probe beside a good one (and a helper module that is no probe)."""
    d = tmp_path_factory.mktemp("hostile")
    for name, (text, _) in HOSTILE.items():
        (d / f"{name}.py").write_text(text)
    (d / "raising_kernels.py").write_text("raise RuntimeError('boom at import')\n")
    paths = [str(d / f"{n}.py") for n in HOSTILE] + [_good(d)]
    proc = _cli("audit", *paths, "--arch", "sm_90", "--no-store", "--no-sass", "-j", "2", "--probe-timeout", "10",
                "--json", str(d / "out.json"))
    records = json.loads((d / "out.json").read_text())["variants"] if (d / "out.json").exists() else []
    return proc, records


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_probe_is_one_error_and_the_others_go_on(batch, name):
    proc, records = batch
    assert proc.returncode == 3, proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("probe error: ")
             and (f"/{name}.py" in ln or (name == "kernel_module_raises" and "raising_kernels.py" in ln))]
    assert len(lines) == 1, (name, lines, proc.stderr[-3000:])
    assert re.search(HOSTILE[name][1], lines[0]), lines[0]
    assert [r["status"] for r in records if r["kernel"] == "good"] == ["ok"]
    assert not any(r["probe"].endswith(f"/{name}.py") and r["status"] == "probe_error" for r in records)


def test_batch_says_how_many_errors_and_exits_3(batch):
    proc, records = batch
    assert re.search(rf"{len(HOSTILE)} probe error\(s\) listed above", proc.stderr), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_a_file_without_a_probe_named_alone_says_what_to_define(tmp_path):
    path = tmp_path / "helper.py"
    path.write_text("probs = []\n")
    proc = _cli("audit", str(path), "--arch", "sm_90", "--no-store")
    assert proc.returncode == 3, proc.stderr
    assert re.search(r"defines no probe: add `probe = tileprobe\.Probe\(.*did you mean to name 'probs'", proc.stderr)


def test_a_zero_size_array_compiles(tmp_path):
    """Zero extents are a valid launch (nothing to do): the variant is compiled, exit 0."""
    path = tmp_path / "zero.py"
    path.write_text(_probe("", args=ARGS.replace("(4096,)", "(0,)")))
    proc = _cli("audit", str(path), "--arch", "sm_90", "--no-store", "--no-sass", "--json", str(tmp_path / "o.json"))
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in json.loads((tmp_path / "o.json").read_text())["variants"]] == ["ok"]


# --- options ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("option,value", [("--timeout", "0"), ("--timeout", "-1"), ("--timeout", "nan"),
                                          ("--timeout", "inf"), ("--probe-timeout", "0"), ("--probe-timeout", "inf"),
                                          ("--timeout", "1e308"), ("--timeout", "9999999999999999999999"),
                                          ("--probe-timeout", "1e8")])
def test_invalid_timeouts_are_usage_errors(option, value):
    """Huge finite timeouts too: 1e308 passed the old check and crashed the pool's wait (OverflowError)."""
    proc = _cli("audit", "examples/rms_norm.py", option, value, "--no-store")
    assert proc.returncode == 2, proc.stderr
    assert (f"argument {option}: '{value}' is not a timeout: give a timeout in seconds, a finite number > 0 and "
            "≤ 10,000,000") in proc.stderr and "Traceback" not in proc.stderr


def test_a_misspelt_probe_file_gets_the_close_one():
    """Session 11's new user: `tileprobe tune examples/tilegym_matmul_tun.py` said only "no such file"."""
    proc = _cli("tune", "examples/tilegym_matmul_tun.py", "--dry-run", "--arch", "sm_90", "--no-store")
    assert proc.returncode == 3, proc.stderr
    assert re.search(r"no such file: \S*examples/tilegym_matmul_tun\.py \(did you mean \S*examples/"
                     r"tilegym_matmul_tune\.py\?\)", proc.stderr), proc.stderr
    proc = _cli("tune", "examples/zzz_nothing_like_it.py", "--dry-run", "--arch", "sm_90", "--no-store")
    assert "no such file" in proc.stderr and "did you mean" not in proc.stderr


@pytest.mark.parametrize("command", ["tune", "run"])
def test_an_unknown_arch_is_a_usage_error(command):
    """``tune``/``run --arch sm_99`` exited 1 (session 10's hostile test): a value argparse can refuse is a usage
    error, exit 2, with the supported names; a known spelling (9.0) passes the parser."""
    proc = _cli(command, "examples/tilegym_matmul_tune.py", "--arch", "sm_99", "--no-store")
    assert proc.returncode == 2, proc.stderr
    assert (f"tileprobe {command}: error: argument --arch: " in proc.stderr and "sm_99" in proc.stderr
            and "sm_90" in proc.stderr) and "Traceback" not in proc.stderr
    import argparse

    from tileprobe.cli._common import arch_target
    assert arch_target("9.0") == arch_target(" SM_90 ") == arch_target("90") == "sm_90"
    for bad, why in (("sm_90a", "sm_90"), ("sm_90,sm_120", "give one target"), ("", "not a target")):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            arch_target(bad)


@pytest.mark.parametrize("value", ["abc", "nan", "1e308", "0", "-1"])
def test_a_bad_tool_timeout_setting_is_a_usage_error(value):
    """TILEPROBE_TOOL_TIMEOUT_S (the bound on tileiras --version and cuTile's bytecode probe): a bad value was a
    traceback at import (abc, nan, 1e308) or 'did not answer within -1 s' (0, -1)."""
    for argv in (("audit", "examples/rms_norm.py", "--arch", "sm_90", "--no-store"), ("doctor",)):
        proc = _cli(*argv, env={"TILEPROBE_TOOL_TIMEOUT_S": value})
        assert proc.returncode == 2, (argv, proc.stderr)
        assert f"TILEPROBE_TOOL_TIMEOUT_S={value!r}: give a timeout in seconds" in proc.stderr
        assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("option", ["--jobs", "--max-variants", "--repeat"])
def test_counts_below_one_are_usage_errors(option):
    proc = _cli("audit", "examples/rms_norm.py", option, "0", "--no-store")
    assert proc.returncode == 2 and re.search(rf"argument {option}(/-j)?: '0': give a whole number, 1 or more",
                                              proc.stderr), proc.stderr


def test_a_million_variant_grid_is_refused_with_its_count(tmp_path):
    path = tmp_path / "huge.py"
    path.write_text(_probe("", cases="{'A': list(range(1000)), 'B': list(range(1000))}"))
    proc = _cli("audit", str(path), "--arch", "sm_90", "--no-store")
    assert proc.returncode == 2, proc.stderr
    assert ("this audit would compile 1,000,000 variants (vadd: 1,000,000 case(s) × 1 hint combination(s) × 1 "
            "arch(s)), more than the limit of 5,000: pass --max-variants 1000000") in proc.stderr


# --- targets -----------------------------------------------------------------------------------------------------------

def test_bad_archs_fail_alone_and_sm_107_is_audited(tmp_path):
    good = _good(tmp_path)
    proc = _cli("audit", good, "--arch", "sm_75,sm_90a,sm_107,sm_90", "--no-store", "--no-sass",
                "--json", str(tmp_path / "o.json"))
    assert proc.returncode == 3, proc.stderr
    assert "not audited: --arch sm_75: 'sm_75' is not a target tileiras lists; targets: sm_80" in proc.stderr
    assert ("not audited: --arch sm_90a: 'sm_90a': tileiras 13.4.92 lists no arch-specific or family target (it "
            "refuses --gpu-name sm_90a") in proc.stderr
    recs = {r["arch"]: r for r in json.loads((tmp_path / "o.json").read_text())["variants"]}
    assert sorted(recs) == ["sm_107", "sm_90"] and all(r["status"] == "ok" for r in recs.values())
    assert recs["sm_107"]["ctas_per_sm"] is None and recs["sm_107"]["registers"] > 0
    assert recs["sm_90"]["ctas_per_sm"] == 16
    assert "not sourced" in proc.stdout and "CTAs/SM not sourced for sm_107" in proc.stdout


#: Durations no other process on the machine uses, so a leftover ``sleep`` is ours (other test runs may share it).
SLEEP_PROBE, SLEEP_COMPILE = f"300.{os.getpid()}1", f"301.{os.getpid()}2"


def test_an_unusable_compiler_fails_alone(tmp_path):
    good = _good(tmp_path)
    proc = _cli("audit", good, "--arch", "sm_90", "--tileiras", "/nonexistent/tileiras,13.4.92", "--no-store",
                "--no-sass", "--json", str(tmp_path / "o.json"))
    assert proc.returncode == 3, proc.stderr
    assert "not audited: --tileiras /nonexistent/tileiras: /nonexistent/tileiras --version failed" in proc.stderr
    assert [r["status"] for r in json.loads((tmp_path / "o.json").read_text())["variants"]] == ["ok"]


def test_a_compiler_that_hangs_on_its_version_probe_is_stopped(tmp_path):
    """cuTile probes the bytecode version without a timeout; tileprobe bounds it (TILEPROBE_TOOL_TIMEOUT_S here)."""
    from tileprobe._cutile import which_tool
    script = tmp_path / "tileiras"
    script.write_text(f"#!/bin/bash\ncase \"$*\" in\n  *--version*|*--help*) exec {which_tool('tileiras')} \"$@\";;\nesac\n"
                      f"exec sleep {SLEEP_PROBE}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    proc = _cli("audit", _good(tmp_path), "--arch", "sm_90", "--tileiras", str(script), "--no-store", "--no-sass",
                env={"TILEPROBE_TOOL_TIMEOUT_S": "2"})
    assert proc.returncode == 3, proc.stderr
    assert re.search(r"not audited: .*the compile workers cannot start: .*tileiras did not answer within 2 s",
                     proc.stderr), proc.stderr
    assert _running(f"sleep {SLEEP_PROBE}") == []


def _running(cmdline: str) -> list[int]:
    """Live (not zombie) processes whose command line is ``cmdline``."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmd == cmdline and state != "Z":
            out.append(int(pid))
    return out


def test_a_hung_compile_is_a_timeout_and_its_whole_group_dies(tmp_path):
    """tileiras and the child it waits on (a ptxas stand-in) are killed together; without --strict a timeout is a
    result (exit 0), with it the exit code is 4."""
    from tileprobe._cutile import which_tool
    script = tmp_path / "tileiras"
    script.write_text(f"#!/bin/bash\ncase \"$*\" in\n  *--version*|*--help*|*/probe1[0-9]*) exec {which_tool('tileiras')} "
                      f"\"$@\";;\nesac\nsleep {SLEEP_COMPILE}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    good = _good(tmp_path)
    common = [good, "--arch", "sm_90", "--tileiras", str(script), "--no-store", "--no-sass", "--timeout", "2"]
    proc = _cli("audit", *common, "--json", str(tmp_path / "o.json"))
    assert proc.returncode == 0, proc.stderr
    [rec] = json.loads((tmp_path / "o.json").read_text())["variants"]
    assert rec["status"] == "timeout" and "exceeded timeout 2.0s" in rec["error"]
    assert _running(f"sleep {SLEEP_COMPILE}") == []
    strict = _cli("audit", *common, "--strict")
    assert strict.returncode == 4, strict.stderr


# --- untrusted text ----------------------------------------------------------------------------------------------------

EVIL = "[/][link=file:///etc/passwd]evil[/link]\x1b[31mred\x1b]8;;file:///etc/passwd\x07x\u202e"


def test_markup_and_escapes_in_names_are_text_and_history_still_reads(tmp_path):
    path = tmp_path / "evil.py"
    path.write_text(_probe("", name=repr(EVIL), cases=repr({"V": ["[bold]b\x1b[2J", "[/]"]})))
    store = str(tmp_path / "s.sqlite")
    env = {"FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "300"}
    proc = _cli("audit", str(path), "--arch", "sm_90", "--store", store, "--no-sass", env=env)
    assert proc.returncode == 0, proc.stderr
    for out in (proc.stdout, proc.stderr):
        assert "\x1b]8;" not in out and "\x1b[2J" not in out and "\u202e" not in out and "\x07" not in out
    assert "[/][link=file:///etc/passwd]evil[/link]redx" in proc.stdout
    assert "[bold]b" in proc.stdout and "MarkupError" not in proc.stderr
    hist = _cli("history", "--store", store, env=env)
    assert hist.returncode == 0, hist.stderr
    assert "[/][link=file:///etc/passwd]evil" in hist.stdout and "\x1b]8;" not in hist.stdout


def test_clean_strips_every_kind_of_escape():
    from tileprobe.report.text import clean, escape
    assert clean("a\x1b[31mb\x1b[0m") == "ab"                       # CSI colour
    assert clean("x\x1b]8;;file:///etc/passwd\x1b\\l\x1b]8;;\x1b\\y") == "xly"   # OSC 8 link, ST-terminated
    assert clean("t\x1b]0;title\x07u") == "tu"                      # OSC title, BEL-terminated
    assert clean("c\x9b2Jd") == "cd"                                # 8-bit CSI
    assert clean("e\x1bPpayload\x1b\\f") == "ef"                    # DCS
    assert clean("r\rn\x00\x7f\u202eo") == "rno"                    # CR, NUL, DEL, bidi override
    assert clean("tab\tnew\nline") == "tab\tnew\nline"
    assert escape("[/]") == "\\[/]"
    # an unterminated string loses its introducer only: it cannot swallow the lines after it (a hostile tester,
    # 2026-12-02: a probe named "evil\x1bP" erased a Markdown table's heading and first rows)
    assert clean("evil\x1bP\n| one |\n| two\x07 |\n| three |") == "evil\n| one |\n| two |\n| three |"
    assert clean("error: bad thing \x1bP\n```\nfix: …") == "error: bad thing \n```\nfix: …"
    assert clean("k\x1b]0;" + "x" * 5000 + "\x07tail").endswith("tail")


# --- the compile pool ----------------------------------------------------------------------------------------------------

def test_a_dead_worker_fails_its_variant_only_and_is_replaced(tmp_path):
    """A worker killed mid-variant (here by the probe itself, as a crash in cuTile's extension would) fails that
    variant (``compiler_crash``, with the signal); a new worker takes the next variant, so the pool keeps its width."""
    from tileprobe.compile.job import Variant
    from tileprobe.compile.pool import WorkerPool
    from tileprobe.procs import owned_tempdir
    path = tmp_path / "killer.py"
    path.write_text(_probe("import signal\ndef args(case, arrays):\n    if case['TILE'] == 1:\n"
                           "        os.kill(os.getpid(), signal.SIGKILL)\n    return " + ARGS.split(": ", 1)[1] + "\n",
                           args="args", cases="{'TILE': [1, 2, 3]}"))
    variants = [Variant(str(path), 0, "vadd", (("TILE", t),), (), "sm_90") for t in (1, 1, 2, 3)]
    with owned_tempdir("test") as tmp:
        pool = WorkerPool(2, (None, None, 300.0, tmp, False, str(tmp_path / "failed")), 300.0)
        results = list(pool.run(iter(variants)))
    by_tile = sorted((r.variant.case_dict["TILE"], r.status) for r in results)
    # it died in probe code (the phase file says args()), so the probe is blamed, not the compiler
    assert by_tile == [(1, "probe_error"), (1, "probe_error"), (2, "ok"), (3, "ok")], by_tile
    assert all("the compile worker died, killed by SIGKILL (signal 9), while" in r.error and "args" in r.error
               for r in results if r.status != "ok")
    assert pool.started == 4       # both first workers died; two new ones took the two variants left


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "abc"])
def test_an_invalid_budget_is_a_usage_error_that_names_a_budget(value):
    """Session 8's new user: ``--budget 0`` said "'0' is not a timeout"."""
    proc = _cli("tune", "examples/rms_norm.py", "--budget", value, "--no-store")
    assert proc.returncode == 2, proc.stderr
    assert (f"argument --budget: '{value}' is not a budget: give the command's wall time in seconds, a finite "
            "number > 0 and ≤ 10,000,000 (e.g. 30)") in proc.stderr and "Traceback" not in proc.stderr


def test_ctrl_c_while_the_cli_builds_its_parser_is_one_line_and_130(monkeypatch, capsys):
    """Ctrl-C before the command's own handling (the parser's build, 0.6-1.0 s into a run on a loaded machine) gave a
    traceback and exit -2 (session 9's hostile test): now the one line and exit 130 of a Ctrl-C later on."""
    import tileprobe.cli as cli

    def interrupted(only=None):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["audit", "x.py"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_compiler_that_exits_0_without_its_cubin_is_a_compiler_crash_naming_what_it_printed():
    from tileprobe.compile.failure import classify
    from tileprobe.errors import CompilerWroteNothing
    f = classify(CompilerWroteNothing("/opt/x/tileiras", "/tmp/v/k.cubin", "planted 4711\n" + "y" * 500))
    assert f.failure == "compiler_crash"
    assert "/opt/x/tileiras" in f.message and "planted 4711" in f.message and "(513 characters)" in f.message
    assert "y" * 301 not in f.message       # what it printed is cut, with its length
