"""The adapter for cuTile's private parts (tileprobe/_cutile.py) and the cuda-tile releases it is tested with.

One test per tested release reads that release's private functions (when it is the one installed) and fails if the
adapter's expectation of them (``EXPECTED_APIS``) is wrong; CI runs this file once per release
(.ci/cuda_tile_matrix.sh). The others check the adapter against each release's shape without installing it, and that
a failure in tileprobe's own call into cuTile is said to be tileprobe's."""
from __future__ import annotations

import inspect
import os
import re

import pytest

from tileprobe import _cutile
from tileprobe.compile.failure import BEFORE_TILEIRAS_FIX, classify, own_call
from tileprobe.errors import TileprobeError
from tileprobe.schema import cutile_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("release", _cutile.TESTED_RELEASES)
def test_the_adapter_expects_what_the_installed_release_has(release):
    """The installed release's compile_cubin parameters, TileCompilerExecutionError's and whether it asks for
    remarks, read from its own functions, are what EXPECTED_APIS says of its series."""
    installed = cutile_version()
    if _cutile.series(installed) != _cutile.series(release):
        pytest.skip(f"cuda-tile {installed} is installed, not {release} (.ci/cuda_tile_matrix.sh installs each)")
    from cuda.tile import _compile
    params = tuple(inspect.signature(_compile.compile_cubin).parameters)
    error = tuple(inspect.signature(_compile.TileCompilerExecutionError.__init__).parameters)[1:]
    expected = _cutile.EXPECTED_APIS[_cutile.series(release)]
    assert params == expected.compile_cubin
    assert ("stderr" in error) == expected.error_takes_stderr
    assert hasattr(_compile, "_tileiras_supports_remarks") == expected.remarks
    assert hasattr(_compile, "_parse_tileir_stderr") == (not expected.error_takes_stderr)
    assert _cutile.installed_api() == expected
    _cutile.check_cutile()
    assert _cutile.feature_notes() == ([] if expected.remarks else [
        f"compiler remarks: off: cuda-tile {installed} does not ask tileiras for them (its compile_cubin takes no "
        "remarks file; cuda-tile 1.6 and later do)"])


def test_the_installed_release_is_one_tileprobe_expects():
    """A cuda-tile series without an entry in EXPECTED_APIS is untested: this fails until its entry is added."""
    assert _cutile.series(cutile_version()) in _cutile.EXPECTED_APIS, (
        f"cuda-tile {cutile_version()} is installed; add its private API to _cutile.EXPECTED_APIS")


def test_a_tileiras_error_is_built_as_the_installed_release_builds_it():
    """execution_error gives cuTile's own TileCompilerExecutionError (1.5: it parses stderr itself; 1.6, 1.7: parsed
    first), which failure.classify reads back to its class and the compiler's line."""
    import cuda.tile as ct
    stderr = "tileiras: for the --gpu-name option: Cannot find option named 'sm_90'!"
    exc = _cutile.execution_error(1, stderr, ["--gpu-name", "sm_90"], None)
    assert isinstance(exc, ct.TileCompilerExecutionError)
    assert str(exc).startswith("Return code 1\n")
    f = classify(exc, build="Cuda compilation tools, release 13.4, V13.4.92")
    assert (f.failure, f.message) == ("unsupported_target", stderr)


# --- each release's shape, without installing it ----------------------------------------------------------------

def cubin_15(fname_bytecode, compiler_options, sm_arch, timeout_sec):
    return ("1.5", fname_bytecode, sm_arch, timeout_sec)


def cubin_16(fname_bytecode, compiler_options, sm_arch, timeout_sec, remarks_output_file=None):
    return ("1.6", fname_bytecode, sm_arch, timeout_sec, remarks_output_file)


def cubin_17(fname_bytecode, compiler_options, sm_arch, timeout_sec, remarks_output_file=None,
             preview_features=(), linker_inputs=()):
    return ("1.7", fname_bytecode, sm_arch, timeout_sec, remarks_output_file, tuple(preview_features),
            tuple(linker_inputs))


class _Binary:
    path, bin_path, ld_path, pass_cuda_home_var = "/tc/bin/tileiras", "/tc/bin", "/tc/lib", False


@pytest.fixture
def fake_compile(monkeypatch):
    """cuTile's _compile with the compiler lookup, opt level and remarks probe answered here (no tileiras runs)."""
    from cuda.tile import _compile
    monkeypatch.setattr(_compile, "_find_compiler_bin", lambda: _Binary())
    monkeypatch.setattr(_compile, "_tileiras_effective_opt_and_device_debug", lambda options, arch: (3, False))
    monkeypatch.setattr(_compile, "_tileiras_supports_remarks", lambda temp_dir: True, raising=False)
    monkeypatch.setattr(_compile, "compile_cubin", _compile.compile_cubin)   # restored after the test
    _cutile.take_compiler_calls()
    return _compile


@pytest.mark.parametrize("release, stub, call, expected, remarks", [
    ("1.5", cubin_15, {}, ("1.5", "/t/k.bytecode", "sm_90", 5), False),
    ("1.6", cubin_16, {"remarks_output_file": None},
     ("1.6", "/t/k.bytecode", "sm_90", 5, "/t/k.remarks.yaml"), True),
    ("1.7", cubin_17, {"remarks_output_file": None, "preview_features": ("fp4",), "linker_inputs": ("/t/lib.o",)},
     ("1.7", "/t/k.bytecode", "sm_90", 5, "/t/k.remarks.yaml", ("fp4",), ("/t/lib.o",)), True),
])
def test_the_compile_hook_passes_on_what_each_release_takes(fake_compile, release, stub, call, expected, remarks):
    """The hook wraps compile_cubin of 4 (1.5.0), 5 (1.6.0) or 7 (1.7.0) parameters, called as that release's
    compile_tile calls it, passes every argument on, asks for remarks only where the release can, and records the
    tileiras command that release runs."""
    assert tuple(inspect.signature(stub).parameters) == _cutile.EXPECTED_APIS[release].compile_cubin
    fake_compile.compile_cubin = stub
    _cutile.install_compile_hook()
    got = fake_compile.compile_cubin("/t/k.bytecode", object(), "sm_90", timeout_sec=5, **call)
    assert got == expected
    (c,) = _cutile.take_compiler_calls()
    flags = ["--gpu-name", "sm_90", "-O3"]
    if release == "1.7":
        flags += ["--preview=fp4", "-l", "/t/lib.o"]
    flags.append("--lineinfo")
    if remarks:
        flags += ["--remark-format=yaml", "--remarks=all", "--remarks-output-file=/t/k.remarks.yaml"]
    assert c.argv == ["/tc/bin/tileiras", "/t/k.bytecode", "-o", "/t/k.cubin", *flags]
    assert c.remarks_path == ("/t/k.remarks.yaml" if remarks else None)


def test_a_release_with_another_compile_cubin_is_refused_with_the_tested_ones(fake_compile, monkeypatch):
    """A cuda-tile whose compile_cubin or compiler lookup tileprobe does not know is refused before anything
    compiles, naming what differs, the releases really tested and the command that installs one."""
    def other(path, options, arch):
        return None

    fake_compile.compile_cubin = other
    with pytest.raises(TileprobeError) as e:
        _cutile.check_cutile()
    text = str(e.value)
    assert f"cuda-tile {cutile_version()} has compile_cubin(path, options, arch)" in text
    assert "tested with cuda-tile 1.5.0, 1.6.0 and 1.7.0: pip install 'cuda-tile==1.7.0'" in text
    monkeypatch.delattr(fake_compile, "_find_compiler_bin")
    with pytest.raises(TileprobeError, match=re.escape(f"cuda-tile {cutile_version()} lacks "
                                                       "cuda.tile._compile._find_compiler_bin, which tileprobe")):
        _cutile.check_cutile()


# --- blame -------------------------------------------------------------------------------------------------------

def _raised(stub, *args):
    """What the hooked compile_cubin (over ``stub``) raised, called with ``args``."""
    from cuda.tile import _compile
    _compile.compile_cubin = stub
    _cutile.install_compile_hook()
    with pytest.raises(Exception) as e:
        _compile.compile_cubin(*args)
    return e.value


def test_a_call_error_in_tileprobes_call_into_cutile_is_tileprobes_fault(fake_compile):
    """cuda-tile 1.6.0 under a tileprobe that called 1.7.0's signature said "compile_cubin() takes from 4 to 5
    positional arguments but 7 were given" and told the user to report the kernel to NVIDIA. Such an error
    (a call error raised where the adapter calls cuTile) is tileprobe's: its message names the place, the versions,
    where to report and the tested releases; nothing blames the kernel or NVIDIA."""
    exc = _raised(cubin_15, "/t/k.bytecode", object(), "sm_90", 5, None, (), ())   # 7 arguments for 4 parameters
    assert isinstance(exc, TypeError)
    where = own_call(exc)
    assert re.fullmatch(r"tileprobe/_cutile\.py:\d+", where)
    f = classify(exc, build="Cuda compilation tools, release 13.4, V13.4.92")
    assert f.failure == "compile_error" and f.fix != BEFORE_TILEIRAS_FIX
    assert f.message.splitlines()[0] == (f"tileprobe's own call into cuda-tile failed at {where} (a tileprobe bug: "
                                         f"not the kernel's, not the compiler's): {type(exc).__name__}: {exc}")
    versions = f"cuda-tile {cutile_version()}, tileiras 13.4.92"
    assert versions in f.message and versions in f.fix
    assert f.fix.startswith("report it to tileprobe") and "pip install 'cuda-tile==1.7.0'" in f.fix
    assert "NVIDIA" not in f.message + f.fix and "fix the kernel" not in f.fix

    def moved(fname_bytecode, compiler_options, sm_arch, timeout_sec):
        return fake_compile._a_name_that_moved

    exc = _raised(moved, "/t/k.bytecode", object(), "sm_90", 5)
    assert isinstance(exc, AttributeError) and classify(exc).message.startswith("tileprobe's own call into cuda-tile")


def test_cutiles_own_errors_keep_their_blame(fake_compile):
    """Not every exception under the hook is tileprobe's: cuTile's own RuntimeError keeps the before-tileiras fix,
    and an error of cuTile's front end stays the kernel's."""
    import cuda.tile._exception as cte

    def broken(fname_bytecode, compiler_options, sm_arch, timeout_sec):
        raise RuntimeError("cuTile broke")

    exc = _raised(broken, "/t/k.bytecode", object(), "sm_90", 5)
    assert own_call(exc) is None and classify(exc).fix == BEFORE_TILEIRAS_FIX

    def refused(fname_bytecode, compiler_options, sm_arch, timeout_sec):
        raise cte.TileTypeError("no place")

    exc = _raised(refused, "/t/k.bytecode", object(), "sm_90", 5)
    assert own_call(exc) is None and classify(exc).fix.startswith("fix the kernel")


_INIT = """
import sys
from cuda.tile import _compile
from tileprobe.compile import job
_compile._get_max_supported_bytecode_version = None   # a private name whose shape moved: not callable any more
try:
    job._init_worker(None, None, 60.0, sys.argv[1])
except Exception as e:
    print(type(e).__name__)
    print(e)
"""


def test_a_compile_worker_whose_cutile_set_up_fails_in_tileprobes_code_says_it_is_tileprobes(tmp_path):
    """The compile worker's set-up of cuTile (fake driver, compiler, hook, the compiler's facts) failing in
    tileprobe's code is a TileprobeError saying it is tileprobe's, with the place and the versions (the audit prints
    it as "not audited: ..."), not a bare TypeError."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", _INIT, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    lines = proc.stdout.splitlines()
    assert lines[0] == "TileprobeError", proc.stdout + proc.stderr
    assert re.fullmatch(r"tileprobe's own call into cuda-tile failed at tileprobe/_cutile\.py:\d+ \(a tileprobe bug: "
                        r"not the kernel's, not the compiler's\): TypeError: 'NoneType' object is not callable",
                        lines[1])
    assert lines[2] == f"versions: tileprobe 0.1.0, cuda-tile {cutile_version()}, tileiras ?"
    assert lines[3].startswith("fix: report it to tileprobe (its issue tracker)")


def test_the_jit_compile_hook_passes_on_what_each_release_takes(monkeypatch):
    """cuda-tile 1.5.0's kernel._compile takes (self, signature, context), 1.6.0 and 1.7.0 add compute_capability:
    the hook calls the release's own with what it was given (run/jitcheck.py's hook called 1.7.0's shape, a
    TypeError on 1.5.0), reports each compile, and puts the original back."""
    from cuda.tile import _execution
    calls, seen = [], []

    def compile_15(self, signature, context):
        calls.append((signature, context))
        return (b"cubin", "meta")

    monkeypatch.setattr(_execution.kernel, "_compile", compile_15)
    with _cutile.jit_compile_hook(lambda sig, result: seen.append((sig, result[0]))):
        assert _execution.kernel._compile(object(), "sig", "ctx") == (b"cubin", "meta")
        with pytest.raises(TypeError, match="positional argument"):
            _execution.kernel._compile(object(), "sig", "ctx", (9, 0))   # 1.7.0's arity on 1.5.0's function
    assert calls == [("sig", "ctx")] and seen == [("sig", b"cubin")]
    assert _execution.kernel._compile is compile_15


def test_the_kernel_class_is_the_public_decorator():
    import cuda.tile as ct
    from cuda.tile import _execution
    assert _cutile.kernel_type() is ct.kernel is _execution.kernel
