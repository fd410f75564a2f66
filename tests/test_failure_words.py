"""The compiler's own words, everywhere: each failure class with its message, fix and repeat command in
the terminal, in Markdown and in HTML; signals by name; the CUDA_HOME trap named; failures kept in the store."""
import json
import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

from tileprobe._cutile import execution_error, which_tool
from tileprobe.cli import main
from tileprobe.compile.failure import classify
from tileprobe.compile.job import Variant
from tileprobe.compile.pool import compile_variants
from tileprobe.report.html import render_html
from tileprobe.report.markdown import audit_markdown
from tileprobe.schema import VariantRecord, derive_failure

DATA = os.path.join(os.path.dirname(__file__), "data")
KERNELS = os.path.join(DATA, "simple_kernels.py")
REAL = which_tool("tileiras")


def _probe(tmp_path, name="one.py", args="(arrays.randn((4096,), 'float32'), arrays.randn((4096,), 'float32'), "
                                          "arrays.empty((4096,), 'float32'), 256)", extra=""):
    """A probe file with one variant of simple_kernels.vadd (one compile per arch)."""
    p = tmp_path / name
    p.write_text(f"from tileprobe import Probe\n{extra}\n"
                 f"probe = Probe(kernel={KERNELS + ':vadd'!r}, name='vadd',\n"
                 f"              args=lambda case, arrays: {args})\n")
    return str(p)


def _fake_tileiras(tmp_path, body, help_filter=""):
    """A tileiras that is the real one for --version, --help (filtered through ``help_filter``) and cuTile's bytecode
    probe, and runs ``body`` for a kernel compile (each counted in ``compiles.txt``). It sits in a toolkit-shaped
    folder whose lib/ is the real one's, so its CUDA root is sound."""
    script = tmp_path / "fake-toolkit" / "bin" / "tileiras"
    script.parent.mkdir(parents=True, exist_ok=True)
    lib = os.path.join(os.path.dirname(os.path.dirname(REAL)), "lib")
    if not (tmp_path / "fake-toolkit" / "lib").exists():
        os.symlink(lib, tmp_path / "fake-toolkit" / "lib")
    counter = tmp_path / "compiles.txt"
    help_cmd = f'{REAL} "$@" | {help_filter}' if help_filter else f'exec {REAL} "$@"'
    script.write_text(f"""#!/bin/bash
case "$*" in
  *--version*|*/probe1[0-9]*) exec {REAL} "$@";;
  *--help*) {help_cmd}; exit 0;;
esac
echo compile >> {counter}
{body}
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), counter


def _audit(capsys, *argv):
    rc = main(["audit", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _records(path):
    with open(path) as f:
        return [VariantRecord.from_dict(v) for v in json.load(f)["variants"]]


# --- a compiler crash: SIGSEGV by name ---------------------------------------------------------------------------

def test_segfault_shows_signal_class_fix_and_repeat_in_terminal_markdown_html(tmp_path, capsys):
    fake, counter = _fake_tileiras(tmp_path, "echo 'tileiras: about to fail' >&2; kill -SEGV $$")
    js = tmp_path / "out.json"
    rc, out, err = _audit(capsys, _probe(tmp_path), "--arch", "sm_90", "--tileiras", fake, "--no-store", "-j", "1",
                          "--json", str(js))
    assert rc == 0
    assert "compiler_crash" in out
    assert "    tileiras was killed by SIGSEGV (signal 11)\n    tileiras: about to fail\n" in out
    assert "Return code -11" not in out
    assert "    fix: a compiler bug: report it to NVIDIA" in out
    assert f"    repeat: env -u CUDA_HOME -u CUDA_PATH PATH={os.path.dirname(fake)}:$PATH " in out
    assert f" {fake} " in out.split("repeat:")[1] and "--gpu-name sm_90" in out.split("repeat:")[1]
    assert "1 failed to compile (1 compiler_crash)" in err
    (rec,) = _records(js)
    assert (rec.status, rec.failure) == ("compiler_crash", "compiler_crash")
    assert rec.message == "tileiras was killed by SIGSEGV (signal 11)\ntileiras: about to fail"
    md = audit_markdown([rec], {})
    assert ": compiler_crash** in 1 variant(s): declared hints\n  ```\n  tileiras was killed by SIGSEGV (signal 11)\n" in md
    assert "  fix: a compiler bug" in md and "  repeat:\n  ```\n  env -u CUDA_HOME -u CUDA_PATH PATH=" in md
    html = render_html([rec])
    assert "tileiras was killed by SIGSEGV (signal 11)" in html and "compiler_crash" in html and "repeat:" in html


# --- unsupported_target: from the compiler's own target list, nothing compiled -----------------------------------

def test_target_the_compiler_does_not_list_is_not_compiled(tmp_path, capsys):
    fake, counter = _fake_tileiras(tmp_path, f'exec {REAL} "$@"', help_filter="grep -v '=sm_90 '")
    rc, out, err = _audit(capsys, _probe(tmp_path), "--arch", "sm_90,sm_120", "--tileiras", fake, "--no-store",
                          "-j", "1")
    assert rc == 0
    assert counter.read_text().count("compile") == 1     # sm_120 only: sm_90 was refused from --help
    assert "declared hints: unsupported_target\n    tileiras 13.4.92 does not list sm_90: its --help offers " \
           "--gpu-name sm_80 sm_86 sm_87 sm_88 sm_89 sm_100" in out
    assert "    fix: audit sm_90 with a tileiras release that lists it" in out
    assert f"    repeat: env -u CUDA_HOME -u CUDA_PATH {fake} --help | grep -- '=sm_'" in out
    assert "2 variants, 1 failed to compile (1 unsupported_target)" in err


def test_refusals_read_from_the_compilers_output(tmp_path):
    """When --help cannot tell (it lists nothing), a target refusal is read from the compiler's output; and
    tileiras 13.4's bare 'failed to compile Tile IR program' (it says only that for real errors too: cutile-python
    #94 on sm_120) with a sound CUDA root stays a compile_error whose fix says the environment was checked."""
    fake, _ = _fake_tileiras(tmp_path, """case "$*" in
  *sm_90*) echo "tileiras: for the --gpu-name option: Cannot find option named 'sm_90'!" >&2; exit 1;;
  *) echo 'error: failed to compile Tile IR program' >&2; exit 5;;
esac""", help_filter="grep -v '=sm_'")
    probe = _probe(tmp_path)
    results = {r.variant.arch: r for r in compile_variants([Variant(probe, 0, "vadd", (), (), "sm_90"),
                                                            Variant(probe, 0, "vadd", (), (), "sm_120")],
                                                           tileiras=fake, jobs=1)}
    assert (results["sm_90"].status, results["sm_90"].failure) == ("compile_error", "unsupported_target")
    assert results["sm_90"].message == "tileiras: for the --gpu-name option: Cannot find option named 'sm_90'!"
    r = results["sm_120"]
    assert (r.failure, r.message) == ("compile_error", "error: failed to compile Tile IR program")
    assert "its CUDA root is sound (not the CUDA_HOME trap)" in r.fix


# --- unsupported_feature: cuTile refuses before tileiras runs ------------------------------------------------------

def test_feature_refused_by_cutile_is_unsupported_feature(tmp_path, capsys):
    js = tmp_path / "o.json"
    _audit(capsys, os.path.join(DATA, "probe_failures.py"), "--arch", "sm_90", "--no-store", "-j", "1",
           "--json", str(js))
    (rec,) = _records(js)
    assert (rec.status, rec.failure) == ("compile_error", "unsupported_feature")
    # the class is cuTile's: TileUnsupportedFeatureError in cuda-tile 1.5.0, UnsupportedFeatureError from 1.6.0
    assert re.fullmatch(r"(Tile)?UnsupportedFeatureError: float4_e2m1fn is not supported on sm_90",
                        rec.message.splitlines()[0])
    assert "Probe(archs=" in rec.fix and rec.repro == ""      # tileiras never ran: nothing to repeat


# --- a typo in the kernel: cuTile's front end refuses it, tileiras never runs --------------------------------------

def test_a_typo_in_the_kernel_says_fix_the_kernel_at_its_line(tmp_path, capsys):
    """``ct.lod`` for ``ct.load`` (the README's probe with a typo, a new user 2026-12-02): the fix said "run the
    repeat command … report it to NVIDIA" with no repeat command anywhere. cuTile's TypeCheckingError is the
    kernel's error: the fix names the file:line, mentions no repeat command and no report; status and class stay."""
    kernels = tmp_path / "typo_kernels.py"
    kernels.write_text("import cuda.tile as ct\n\n\n@ct.kernel\ndef vadd(X, Y, Z, TILE: ct.Constant[int]):\n"
                       "    b = ct.bid(0)\n    x = ct.lod(X, index=(b,), shape=(TILE,))\n"
                       "    ct.store(Z, index=(b,), tile=x)\n")
    probe = tmp_path / "typo.py"
    probe.write_text(f"from tileprobe import Probe\nprobe = Probe(kernel={str(kernels) + ':vadd'!r}, name='vadd', "
                     "args=lambda case, arrays: (arrays.randn((4096,), 'float32'), arrays.randn((4096,), 'float32'), "
                     "arrays.empty((4096,), 'float32'), 256))\n")
    js = tmp_path / "o.json"
    rc, out, err = _audit(capsys, str(probe), "--arch", "sm_90", "--no-store", "-j", "1", "--json", str(js))
    (rec,) = _records(js)
    assert rc == 0 and (rec.status, rec.failure, rec.repro) == ("compile_error", "compile_error", "")
    assert rec.message.splitlines()[0] in ("TypeCheckingError: Module 'cuda.tile' has no attribute 'lod'",
                                           "TileTypeError: Module 'cuda.tile' has no attribute 'lod'")   # 1.5.0
    assert rec.fix == (f"fix the kernel at {kernels}:7, the line cuTile names: cuTile refused its source while "
                       "checking it in Python, before tileiras ran (an error in the kernel, not the compiler's)")
    assert f"    fix: {rec.fix}" in out
    assert "repeat" not in out and "NVIDIA" not in out


def test_front_end_errors_are_told_from_the_compilers_by_class():
    """cuTile's front-end errors (TileError subclasses) are the kernel's; its
    InternalError and the tileiras errors under it are not; a front-end error without a location says where to
    look; any other error raised before tileiras ran mentions no repeat command."""
    import cuda.tile._exception as cte

    from tileprobe.compile.failure import BEFORE_TILEIRAS_FIX, front_end, kernel_fix
    type_checking = getattr(cte, "TypeCheckingError", cte.TileTypeError)   # cuda-tile 1.5.0: TileTypeError
    assert front_end(type_checking("x", cte.Loc(3, 1, "/k.py")))
    assert front_end(cte.TileSyntaxError("x", cte.Loc(3, 1, "/k.py")))
    assert front_end(cte.TileStaticAssertionError("x"))
    assert not front_end(cte.TileInternalError("x", cte.Loc(3, 1, "/k.py")))
    assert not front_end(ct_exec := execution_error(1, "boom", [], None))
    assert classify(ct_exec, tileiras=REAL).fix != BEFORE_TILEIRAS_FIX
    assert not front_end(RuntimeError("x"))
    assert kernel_fix(type_checking("x", cte.Loc(12, 5, "/src/k.py"))).startswith(
        "fix the kernel at /src/k.py:12, the line cuTile names: ")
    assert kernel_fix(ValueError('bad\n  "/src/k.py", line 9, col 2, in f:')).startswith("fix the kernel at /src/k.py:9,")
    assert kernel_fix(cte.TileTypeError("no place")).startswith("fix the kernel where cuTile's message points: ")
    f = classify(RuntimeError("cuTile broke"))
    assert (f.failure, f.fix) == ("compile_error", BEFORE_TILEIRAS_FIX) and "repeat" not in f.fix


def test_a_kernel_whose_source_cannot_be_read_is_told_to_live_in_a_file():
    """A kernel made by exec() (hostile test 6): inspect cannot read its source, so cuTile cannot parse it; the fix
    says so rather than suggesting a report to NVIDIA."""
    from tileprobe.compile.failure import NO_SOURCE_FIX
    for text in ("source code not available", "could not get source code"):
        f = classify(OSError(text))
        assert (f.failure, f.fix) == ("compile_error", NO_SOURCE_FIX) and "NVIDIA" not in f.fix
    assert classify(OSError("disk on fire")).fix != NO_SOURCE_FIX


# --- broken_environment: the CUDA_HOME trap ------------------------------------------------------------------------

def _old_toolkit(tmp_path):
    """A fake CUDA 13.0 toolkit holding the real tileiras 13.4 (a hard link: tileiras takes the folder above its own
    bin/ as its CUDA root, so it loads no libnvvm from there, exactly as with CUDA_HOME pointing at it)."""
    root = tmp_path / "cuda-13.0"
    (root / "bin").mkdir(parents=True)
    (root / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "13.0.88"}}')
    try:
        os.link(REAL, root / "bin" / "tileiras")
    except OSError:
        shutil.copy2(REAL, root / "bin" / "tileiras")
    return root


def test_cuda_root_trap_is_broken_environment_with_the_cause(tmp_path, capsys):
    root = _old_toolkit(tmp_path)
    js = tmp_path / "o.json"
    rc, md, err = _audit(capsys, _probe(tmp_path), "--arch", "sm_90", "--tileiras", str(root / "bin" / "tileiras"),
                         "--no-store", "-j", "1", "--json", str(js), "--format", "markdown")
    assert rc == 0 and "1 failed to compile (1 broken_environment)" in err
    cause = (f"tileiras 13.4.92 took a broken CUDA root: its CUDA root {root} (the folder above its bin/) is CUDA "
             "13.0.88 (from version.json), older than tileiras 13.4.92 (the CUDA_HOME trap")
    assert (": broken_environment** in 1 variant(s): declared hints\n  ```\n  error: failed to compile Tile IR program\n  "
            + cause) in md
    assert "  fix: run a tileiras that sits in its complete toolkit" in md and "  repeat:\n  ```\n  env -u" in md
    (rec,) = _records(js)
    assert rec.failure == "broken_environment" and rec.status == "compile_error"
    from rich.console import Console

    from tileprobe.report.terminal import render_audit
    con = Console(record=True, width=400)
    render_audit([rec], con)
    text = con.export_text()
    assert "declared hints: broken_environment\n    error: failed to compile Tile IR program\n    " + cause in text


def test_cuda_home_pointing_at_an_older_toolkit_is_named(tmp_path, capsys):
    """The trap itself: the real tileiras 13.4.92 run with CUDA_HOME at a fake CUDA 13.0 toolkit, the way cuTile runs
    a compiler it passes CUDA_HOME to (a CompilerExecutionError raised from the CalledProcessError)."""
    import cuda.tile as ct
    from rich.console import Console

    from tileprobe.audit.pipeline import record_from
    from tileprobe.compile.job import CompileResult
    from tileprobe.report.terminal import print_failures
    fake_home = tmp_path / "cuda-13.0"
    fake_home.mkdir()
    (fake_home / "version.json").write_text('{"cuda": {"version": "13.0.88"}}')
    bytecode = tmp_path / "k.bytecode"
    subprocess.run([sys.executable, "-c", _BYTECODE.format(kernels=KERNELS, out=str(bytecode))], check=True,
                   env={**os.environ, "PYTHONPATH": os.path.dirname(DATA) + "/.."})
    argv = [REAL, str(bytecode), "-o", str(tmp_path / "k.cubin"), "--gpu-name", "sm_90", "-O3"]
    ok = subprocess.run(argv, capture_output=True, env={k: v for k, v in os.environ.items() if k != "CUDA_HOME"})
    assert ok.returncode == 0, ok.stderr            # the bytecode compiles without the trap
    proc = subprocess.run(argv, capture_output=True, env={**os.environ, "CUDA_HOME": str(fake_home)})
    assert proc.returncode == 5 and proc.stderr.decode().strip() == "error: failed to compile Tile IR program"
    try:
        try:
            proc.check_returncode()
        except subprocess.CalledProcessError as e:
            raise execution_error(e.returncode, e.stderr.decode(), [], None) from e
    except ct.TileCompilerExecutionError as exc:
        f = classify(exc, tileiras=REAL, build="Cuda compilation tools, release 13.4, V13.4.92",
                     compiler_env={"CUDA_HOME": str(fake_home)})
    assert f.failure == "broken_environment"
    assert f.message.splitlines() == [
        "error: failed to compile Tile IR program",
        f"tileiras 13.4.92 took a broken CUDA root: its CUDA root $CUDA_HOME={fake_home} is CUDA 13.0.88 (from "
        "version.json), older than tileiras 13.4.92 (the CUDA_HOME trap: tileiras loads libnvvm and ptxas from its "
        "CUDA root)"]
    assert f.fix.startswith("unset CUDA_HOME (tileiras finds its own toolkit without it)")
    # the same words reach the terminal and Markdown
    res = CompileResult(Variant("p.py", 0, "vadd", (), (), "sm_90"), "ok", tileiras="V13.4.92").fail(f)
    rec = record_from(res)
    con = Console(record=True, width=300)
    print_failures(con, [rec])
    text = con.export_text()
    assert "declared hints: broken_environment" in text and f"$CUDA_HOME={fake_home} is CUDA 13.0.88" in text
    assert "fix: unset CUDA_HOME" in text
    md = audit_markdown([rec], {})
    assert f"$CUDA_HOME={fake_home} is CUDA 13.0.88" in md and "fix: unset CUDA_HOME" in md


_BYTECODE = """
import sys
sys.path.insert(0, {kernels!r}.rsplit('/', 1)[0])
from tileprobe import _cutile
_cutile.install_fake_driver()
from tileprobe.probe.define import SpecArrays
from tileprobe.probe.signature import jit_signature
from cuda.tile.compilation import export_kernel
import simple_kernels as k
a = SpecArrays()
sig = jit_signature(k.vadd, (a.randn((4096,), "float32"), a.randn((4096,), "float32"), a.empty((4096,), "float32"), 256))
export_kernel(k.vadd, [sig], {out!r}, gpu_code="sm_90", output_format="tileir_bytecode")
"""


# --- a probe that ends the worker is the probe's failure, not the compiler's --------------------------------------

def test_os_exit_in_args_is_a_probe_error_not_a_compiler_crash(tmp_path):
    probe = _probe(tmp_path, args="__import__('os')._exit(5)")
    [res] = list(compile_variants([Variant(probe, 0, "vadd", (), (), "sm_90")], jobs=1))
    assert (res.status, res.failure) == ("probe_error", "probe_error")
    assert res.message.endswith("one.py:4: args() called os._exit(5)")        # caught in the worker: the line and code
    assert res.fix.startswith(f"fix args() in {probe}")


# --- timeouts in words ----------------------------------------------------------------------------------------------

def test_timeout_says_the_limit(tmp_path):
    fake, _ = _fake_tileiras(tmp_path, "sleep 30")
    [res] = list(compile_variants([Variant(_probe(tmp_path), 0, "vadd", (), (), "sm_90")], tileiras=fake, jobs=1,
                                  timeout_s=1.0))
    assert (res.failure, res.message) == ("timeout", "tileiras did not finish within 1 s (raise it: --timeout S or "
                                          "Probe(timeout_s=S), then --retry-failed)")
    assert "--timeout" in res.fix and "--retry-failed" in res.fix


# --- a failed variant is stored and not compiled again unless --retry-failed ------------------------------------

def test_failed_variant_is_not_compiled_again_unless_retry_failed(tmp_path, capsys):
    fake, counter = _fake_tileiras(tmp_path, "kill -SEGV $$")
    probe, store = _probe(tmp_path), str(tmp_path / "s.sqlite")
    common = [probe, "--arch", "sm_90", "--tileiras", fake, "--store", store, "-j", "1"]
    _audit(capsys, *common)
    assert counter.read_text().count("compile") == 1
    rc, out, err = _audit(capsys, *common)
    assert counter.read_text().count("compile") == 1            # taken from the store
    assert "tileiras was killed by SIGSEGV (signal 11)" in out  # with its words
    assert "1 variant(s) that failed by compiler_crash taken from the store, not compiled again (tileiras " \
           "13.4.92); --retry-failed compiles them again" in err
    _audit(capsys, *common, "--retry-failed")
    assert counter.read_text().count("compile") == 2


# --- records written before failure classes --------------------------------------------------------------------------

@pytest.mark.parametrize("status, error, failure, message", [
    ("compile_error", "CompilerExecutionError: Return code 1\ntileiras: for the --gpu-name option: Cannot find option "
                      "named 'sm_90'!\nUnknown location", "unsupported_target",
     "tileiras: for the --gpu-name option: Cannot find option named 'sm_90'!"),
    ("compiler_crash", "Return code -11\n\nUnknown location", "compiler_crash",
     "tileiras was killed by SIGSEGV (signal 11)"),
    ("compile_error", "TileUnsupportedFeatureError: float4_e2m1fn is not supported on sm_90\n  File ...",
     "unsupported_feature", "TileUnsupportedFeatureError: float4_e2m1fn is not supported on sm_90\n  File ..."),
    ("timeout", "CompilerTimeoutError: `tileiras` compiler exceeded timeout 5s.", "timeout",
     "CompilerTimeoutError: `tileiras` compiler exceeded timeout 5s."),
    ("probe_error", "p.py:3: args failed", "probe_error", "p.py:3: args failed"),
    ("ok", "", None, ""),
])
def test_old_records_get_their_failure_class_on_load(status, error, failure, message):
    assert derive_failure(status, error) == (failure, message)
    rec = VariantRecord.from_dict({"kernel": "k", "probe": "p", "case": {}, "hints": {}, "arch": "sm_90",
                                   "tileiras": "t", "status": status, "error": error})
    assert (rec.status, rec.failure, rec.message) == (status, failure, message)
    assert bool(rec.fix) == (status != "ok")


# --- nvdisasm: a damaged cubin is not "upgrade nvdisasm" --------------------------------------------------------------

def test_nvdisasm_on_a_damaged_cubin_blames_the_cubin_not_nvdisasm(tmp_path):
    from tileprobe.errors import CubinError, ToolchainError
    from tileprobe.model.sass import nvdisasm_failure, sass_traits
    sys.path.insert(0, os.path.join(os.path.dirname(DATA), "..", "benchmarks", "audit"))
    import bench_fuzz_cubin as fz
    data = bytearray(open(os.path.join(DATA, "cubins", "vec_add_sm_90.cubin"), "rb").read())
    text = next(s for s in fz.sections(bytes(data)) if s["name"].startswith(".text."))
    data[text["offset"]:text["offset"] + text["size"]] = b"\xff" * text["size"]
    with pytest.raises(CubinError, match=r"nvdisasm could not decode the cubin \(exit 1\): nvdisasm error"
                                         r"   : Unrecognized operation .*either the cubin is damaged .*recompile it\) "
                                         r"or this nvdisasm cannot decode an instruction the compiler emitted") as e:
        sass_traits(bytes(data))
    assert "upgrade" not in str(e.value) and "pip install" not in str(e.value) and "<bytes>" not in str(e.value)
    assert "ELF facts (threads, registers, shared memory, stack) do not depend on nvdisasm" in str(e.value)
    from tileprobe.model.sass import sass_summary
    tool = str(e.value).split(" could not decode")[0]
    assert sass_summary(bytes(data), "vec_add")["error"].startswith(f"{tool} could not decode the cubin (exit 1)")
    err = nvdisasm_failure("nvdisasm", "x.cubin", 1, "nvdisasm fatal   : Cannot decode architecture 'SM250a'\n")
    assert isinstance(err, ToolchainError) and "pip install -U nvidia-cuda-nvdisasm" in str(err)


# --- bad hint values: refused with the probe's file:line and the allowed values; the other probes go on ----------

def test_bad_hint_values_are_refused_and_other_probes_audited(tmp_path, capsys):
    bad = {"occ_two": '{"occupancy": ["two"]}', "occ_zero": '{"occupancy": [0]}', "occ_neg": '{"occupancy": [-1]}',
           "occ_1000": '{"occupancy": [1000]}', "ctas3": '{"num_ctas": [3]}', "unknown": '{"occupanc": [2]}'}
    paths = []
    for name, hints in bad.items():
        p = tmp_path / f"{name}.py"
        p.write_text(f"from tileprobe import Probe\n\nprobe = Probe(kernel={KERNELS + ':vadd'!r}, name='vadd',\n"
                     f"              args=lambda case, arrays: (), hints={hints})\n")
        paths.append(str(p))
    js = tmp_path / "o.json"
    _, out, err = _audit(capsys, *paths, _probe(tmp_path, name="good.py"), "--arch", "sm_90", "--no-store", "-j", "1",
                         "--json", str(js))
    for name, want in {"occ_two": "hints['occupancy'] holds 'two': occupancy takes an int in 1 … 32",
                       "occ_zero": "hints['occupancy'] holds 0: occupancy takes an int in 1 … 32",
                       "occ_neg": "hints['occupancy'] holds -1: occupancy takes an int in 1 … 32",
                       "occ_1000": "hints['occupancy'] holds 1000: occupancy takes an int in 1 … 32",
                       "ctas3": "hints['num_ctas'] holds 3: num_ctas takes a power of two in 1 … 16 (1, 2, 4, 8, 16)",
                       "unknown": "unknown hint 'occupanc' (did you mean 'occupancy'?)"}.items():
        assert f"{tmp_path}/{name}.py:3: invalid probe: {want}" in " ".join(err.split()), name
    assert "TypeError" not in err
    (rec,) = _records(js)
    assert rec.ok and rec.kernel == "vadd"     # the good probe was audited


@pytest.mark.parametrize("rc, message, failure, first", [
    (-11, "", "compiler_crash", "tileiras was killed by SIGSEGV (signal 11)"),
    (-6, "LLVM ERROR: out of memory", "compiler_crash", "tileiras was killed by SIGABRT (signal 6)"),
    (1, "tileiras: for the --gpu-name option: Cannot find option named 'sm_90'!", "unsupported_target",
     "tileiras: for the --gpu-name option: Cannot find option named 'sm_90'!"),
    (5, "failed to compile Tile IR program", "compile_error", "failed to compile Tile IR program"),
    (2, "", "compile_error", "tileiras failed with exit code 2 and printed nothing"),
])
def test_classify_without_the_raw_output(rc, message, failure, first):
    """A runner that raises cuTile's CompilerExecutionError without the CalledProcessError behind it (cuTile's
    'Return code N' + its parse of stderr) is classified from the message: the signal by name, the class."""
    import cuda.tile as ct
    try:
        raise execution_error(rc, message, [], None)   # as the installed cuda-tile builds it
    except ct.TileCompilerExecutionError as exc:
        f = classify(exc, tileiras=REAL, build="Cuda compilation tools, release 13.4, V13.4.92")
    assert (f.failure, f.message.splitlines()[0]) == (failure, first)


def test_a_stored_answer_of_the_compiler_is_not_offered_a_retry(tmp_path, capsys):
    """unsupported_feature or compile_error is the compiler's answer: the second run did suggest --retry-failed for
    the README's 12 intended unsupported_feature failures (a new user, 2026-12-01)."""
    fake, counter = _fake_tileiras(tmp_path, "echo 'error: bad IR' >&2; exit 1")
    probe, store = _probe(tmp_path), str(tmp_path / "s.sqlite")
    common = [probe, "--arch", "sm_90", "--tileiras", fake, "--store", store, "-j", "1"]
    _audit(capsys, *common)
    rc, out, err = _audit(capsys, *common)
    assert counter.read_text().count("compile") == 1 and "compile_error" in out
    assert "--retry-failed" not in err
