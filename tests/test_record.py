"""tileprobe record: launches captured from real programs, grouped, written as probes that audit.

No GPU: the programs run with ``tests/data/record/fake_launch`` on PYTHONPATH, a test double that replaces
``cuda.tile._cext.launch`` (and ``cuda.tile.launch``) by a function that accepts the call and returns. The kernels
are real ``@ct.kernel`` functions and the arguments ``ArraySpec`` fake device arrays (DLPack, device CUDA), so the
probes written from the recording are audited (compiled) for real and their signature compared with cuTile's
``KernelSignature.from_kernel_args`` on the same arguments.
"""
import json
import os
import signal
import subprocess
import sys

import pytest

from tileprobe.record import hook
from tileprobe.record.log import read_log
from tileprobe.record.session import probes_from_log, record

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "record")
PROGRAM = os.path.join(DATA, "program.py")
FAKE = os.path.join(DATA, "fake_launch")


def _env(**extra):
    return dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, ROOT]), **extra)


@pytest.fixture(scope="module")
def basic(tmp_path_factory):
    """One recording of ``program.py basic`` (launches in the main process and in a child process)."""
    out = str(tmp_path_factory.mktemp("rec") / "out")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([FAKE, ROOT]))
        result = record([sys.executable, PROGRAM, "basic"], out)
    return out, result


def _probe_text(result, name):
    path = next(p for p, plan in result.written if plan.kernel.name == name)
    with open(path) as f:
        return path, f.read()


def test_recording_keeps_the_programs_output_and_exit_code(tmp_path):
    plain = subprocess.run([sys.executable, PROGRAM, "basic"], capture_output=True, text=True, env=_env())
    recorded = subprocess.run([sys.executable, "-m", "tileprobe.cli", "record", "-o", str(tmp_path / "r"), "--by",
                               "launch", "--", sys.executable, PROGRAM, "basic"],
                              capture_output=True, text=True, env=_env(), cwd=str(tmp_path))
    assert plain.returncode == recorded.returncode == 0
    assert plain.stdout == recorded.stdout == "result: 45 child=0\n"
    assert "recorded 13 launches in 2 process(es)" in recorded.stderr


def test_every_launch_is_counted_across_processes(basic):
    out, result = basic
    rec = result.recording
    assert len(rec.processes) == 2 and {p.argv[-1] for p in rec.processes} == {"basic", "child"}
    assert rec.total_launches == 13 and not rec.errors
    by_name = {plan.kernel.name: plan for _, plan in result.written}
    assert set(by_name) == {"vadd", "scale_rows", "copy_fn"}
    # `from cuda.tile import launch` taken at import (5 launches + 1 + 1 + the child's 3) and ct.launch (1)
    assert by_name["vadd"].total == 11


def test_launches_group_by_jit_signature_with_their_hints(basic):
    _, result = basic
    plan = next(p for _, p in result.written if p.kernel.name == "vadd")
    cases = {c.label: c for c in plan.cases}
    # 4096 and 8192 elements: one signature (divisible by 16); the replace_hints copy joins it with its hints
    assert cases["L1"].count == 7 and len(cases["L1"].launches) == 3
    assert cases["L1"].symbol == "vadd_Kt1_A1f32_1i16t1_p16_A1f32_1i16t1_p16_A1f32_1i16t1_p16_I256"
    assert cases["L1"].hint_sets() == [({}, 6), ({"occupancy": 4}, 1)]
    assert cases["L2"].count == 3 and cases["L2"].symbol.endswith("_I128")   # the child process's launches
    assert cases["L3"].symbol == "vadd_Kt1_A1f32_1t1_A1f32_1t1_p16_A1f32_1t1_p16_I256"   # 4100 elements, 8-B base
    assert plan.hints == {"occupancy": [None, 2, 4, 8]}   # declared, its neighbour, the launched 4 and its neighbour


def test_probe_reproduces_shapes_strides_alignment_scalars_and_sites(basic):
    _, result = basic
    _, vadd = _probe_text(result, "vadd")
    assert "arrays.randn((4100,), 'float32', offset=8),  # base address 8-byte aligned, as launched" in vadd
    assert "'L1': {'count': 7, 'hints': [{}, {'occupancy': 4}], 'grid': (16,)}," in vadd
    assert "program.py:29 (5)" in vadd
    assert "kernels.py:vadd" in vadd
    _, scale = _probe_text(result, "scale_rows")
    assert "arrays.randn((512, 64), 'float16', strides=(128, 1))," in scale and "        2.0,\n" in scale
    assert "Declared hints: num_ctas=None occupancy=ByTarget(sm_100=16) opt_level=3" in scale
    _, copy = _probe_text(result, "copy_fn")
    assert "KERNEL = ct.kernel(import_object(" in copy and "'hints': [{'occupancy': 2}]" in copy


def test_written_probes_load_and_audit_with_the_jit_signature(basic):
    """The probes audit unchanged, and each launched variant's signature is the one cuTile's
    KernelSignature.from_kernel_args gives for the very arguments the program launched."""
    from tileprobe.audit import audit
    from tileprobe.probe.define import load_probes
    _, result = basic
    paths = [p for p, plan in result.written if plan.kernel.name in ("vadd", "copy_fn")]
    for p in paths:
        assert load_probes(p)[0].case_grid()
    launched = {("vadd", "L1", None), ("vadd", "L3", None), ("copy_fn", "L1", 2)}
    res = audit(paths, ["sm_90"], jobs=2,
                select=lambda v: (v.probe_name, v.case_dict["launch"], v.hints_dict.get("occupancy")) in launched)
    assert not res.probe_errors and len(res.records) == 3 and all(r.ok for r in res.records)
    audited = {(r.kernel, r.case["launch"]): (r.symbol, r.signature) for r in res.records}
    code = f"""
import json, sys
sys.path.insert(0, {DATA!r})
from tileprobe import _cutile
_cutile.install_fake_driver()
import cuda.tile as ct
from cuda.tile.compilation import CallingConvention, KernelSignature
from tileprobe.probe.signature import describe_signature
import kernels as k
cc = CallingConvention.cutile_python_v1()
out = {{}}
for name, kernel, args in (("L1", k.vadd, k.vadd_args(4096)), ("L3", k.vadd, k.vadd_args(4100, align_offset=8)),
                           ("copy", ct.kernel(k.copy_fn), k.vadd_args(2048)[:2] + (256,))):
    sig = KernelSignature.from_kernel_args(kernel, args, cc)
    out[name] = [sig.symbol, describe_signature(sig)]
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    jit = json.loads(proc.stdout)
    assert list(audited[("vadd", "L1")]) == jit["L1"]
    assert list(audited[("vadd", "L3")]) == jit["L3"]
    assert list(audited[("copy_fn", "L1")]) == jit["copy"]


def test_crashing_program_keeps_its_lines_and_exit_code(tmp_path):
    for mode, rc, count in (("crash-exc", 1, 4), ("crash-kill", 128 + signal.SIGKILL, 4)):
        out = str(tmp_path / mode)
        proc = subprocess.run([sys.executable, "-m", "tileprobe.cli", "record", "-o", out, "--by", "launch", "--",
                               sys.executable, PROGRAM, mode], capture_output=True, text=True, env=_env())
        assert proc.returncode == rc, proc.stderr
        rec = read_log(hook.launch_dir(out))
        # SIGKILL skips atexit: counts written when they reached a power of two (4) survive
        assert [la.count for la in rec.launches] == [count]
        with open(os.path.join(out, "record.json")) as f:
            assert json.load(f)["exit_code"] == rc


def test_recording_failure_is_reported_once_and_the_program_runs_on(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the log folder should be")
    env = hook.recording_env(str(tmp_path / "rec"), _env())
    env["TILEPROBE_RECORD_DIR"] = str(blocker / "launches")
    proc = subprocess.run([sys.executable, PROGRAM, "basic"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stdout == "result: 45 child=0\n"
    # one line per process (the main program and its child), each said once
    assert proc.stderr.count("tileprobe record: recording stopped in process") == 2, proc.stderr


def test_thousands_of_shapes_give_one_probe_with_the_most_frequent(tmp_path):
    out = str(tmp_path / "many")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([FAKE, ROOT]))
        result = record([sys.executable, PROGRAM, "many"], out, top=5, by="launch")
    assert len(result.written) == 1
    path, plan = result.written[0]
    assert [c.count for c in plan.cases] == [40, 39, 38, 37, 36]
    assert len(plan.omitted) == 35 and plan.total == sum(range(1, 41))
    with open(path) as f:
        text = f.read()
    assert "820 launches, 40 distinct, 40 case(s)" in text and "Left out: 35 case(s), 630 launches" in text
    # the same launches by JIT signature: extents divisible by 16 (13 of them) and not (27: cuTile 1.7 keeps no
    # finer shape divisibility for them, so odd and even extents share a signature)
    again = probes_from_log(out, top=5)
    cases = again.written[0][1].cases
    assert [len(c.launches) for c in cases] == [27, 13] and len({c.symbol for c in cases}) == 2


def test_from_cuda_tile_import_launch_taken_before_recording_is_rebound(tmp_path):
    """In-process recording (the pytest option's way) rebinds a `launch` a module took before it began."""
    code = f"""
import sys
sys.path.insert(0, {DATA!r})
import cuda.tile._cext as cext
cext.launch = lambda stream, grid, kernel, args: None   # no GPU: accept and return
import cuda.tile as ct
ct.launch = cext.launch
from cuda.tile import launch as early                    # taken before recording starts
import kernels as k
from tileprobe.record.hook import load_capture
capture = load_capture()
capture.install({str(tmp_path)!r})
early(None, (4,), k.vadd, k.vadd_args(1024))
capture.uninstall()
early(None, (4,), k.vadd, k.vadd_args(1024))             # not recorded any more
print(early is cext.launch)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
    rec = read_log(str(tmp_path))
    assert [la.count for la in rec.launches] == [1]


def test_forked_child_writes_its_own_log(tmp_path):
    code = f"""
import os, sys
sys.path.insert(0, {DATA!r})
from cuda.tile import launch
import kernels as k
launch(None, (4,), k.vadd, k.vadd_args(1024))
pid = os.fork()
if pid == 0:
    launch(None, (4,), k.vadd, k.vadd_args(2048))
    os._exit(0)
os.waitpid(pid, 0)
"""
    env = hook.recording_env(str(tmp_path), _env())
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rec = read_log(hook.launch_dir(str(tmp_path)))
    assert len(rec.processes) == 2
    assert sorted(la.args[0]["shape"][0] for la in rec.launches) == [1024, 2048]
    assert all(la.count == 1 for la in rec.launches)


def test_pytest_option_records_a_test_session(tmp_path):
    test_file = tmp_path / "test_kernels.py"
    test_file.write_text(f"""
import sys
sys.path.insert(0, {DATA!r})
import cuda.tile as ct
import kernels as k

def test_launches():
    for _ in range(3):
        ct.launch(None, (16,), k.vadd, k.vadd_args(4096))
""")
    out = tmp_path / "rec"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", str(test_file),
                           "--tileprobe-record", str(out), "-p", "no:cacheprovider"],
                          capture_output=True, text=True, env=_env(), cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tileprobe record: 3 launches" in proc.stdout
    with open(out / "record.json") as f:
        data = json.load(f)
    assert [p["name"] for p in data["probes"]] == ["vadd"] and data["probes"][0]["launches"] == 3


def test_arguments_are_described_abstractly():
    """Tensors by dtype, shape, strides in elements and base alignment; DLPack and __cuda_array_interface__ objects
    alike; scalars and constants by value; anything else by type only."""
    import torch

    from tileprobe.probe.signature import ArraySpec
    capture = hook.load_capture()
    d = lambda a: capture.to_json(capture.describe(a))
    base = torch.empty((64, 128), dtype=torch.bfloat16)
    assert capture.align_of(base.data_ptr()) >= 64
    view = base[:, 3:].t()
    assert d(view) == {"kind": "array", "dtype": "torch.bfloat16", "shape": [125, 64], "strides": [1, 128],
                       "align": capture.align_of(base.data_ptr() + 6), "protocol": "torch"}
    assert d(view)["align"] == 2
    spec = ArraySpec((16, 32), "float16", strides=(64, 1), address=0x7F00_0000_0010)
    assert d(spec) == {"kind": "array", "dtype": "dlpack:2:16", "shape": [16, 32], "strides": [64, 1], "align": 16,
                       "protocol": "dlpack"}

    class CAI:
        __cuda_array_interface__ = {"shape": (8, 4), "typestr": "<f4", "strides": (32, 4), "data": (0x1000, False),
                                    "version": 3}
    assert d(CAI()) == {"kind": "array", "dtype": "cai:<f4", "shape": [8, 4], "strides": [8, 1], "align": 256,
                        "protocol": "cuda_array_interface"}
    assert [d(v) for v in (3, 1e-6, True)] == [{"kind": "scalar", "type": "int", "value": 3},
                                              {"kind": "scalar", "type": "float", "value": 1e-6},
                                              {"kind": "scalar", "type": "bool", "value": True}]
    assert d((1, 2)) == {"kind": "sequence", "type": "tuple", "items": [d(1), d(2)]}
    assert d(object()) == {"kind": "object", "type": "builtins.object"}
    assert capture.align_of(0x7F00_0000_0300) == 256 and capture.align_of(0x7F00_0000_0008) == 8


def test_argument_expressions_and_the_default_hint_grid():
    from tileprobe.record.args import args_text
    from tileprobe.record.group import Case, hint_grid
    from tileprobe.record.model import KernelRef, Launch
    arr = lambda dtype, align=256, strides=(4, 1): {"kind": "array", "dtype": dtype, "shape": [2, 4],
                                                   "strides": list(strides), "align": align}
    text = args_text([arr("torch.float8_e4m3fn"), arr("torch.int32", 4), arr("torch.bool"), arr("cai:<f2"),
                      arr("torch.float4_e2m1fn_x2"), {"kind": "scalar", "value": float("nan")},
                      {"kind": "dtype", "origin": "cuda.tile", "name": "float16"}, {"kind": "object", "type": "x.Y"}])
    assert text.exprs == ["arrays.rand((2, 4), 'float8_e4m3fn')", "arrays.zeros((2, 4), 'int32', offset=4)",
                          "arrays.zeros((2, 4), 'bool')", "arrays.randn((2, 4), 'float16')",
                          "arrays.empty((2, 4), 'torch.float4_e2m1fn_x2')", 'float("nan")', "ct.float16", "None"]
    assert len(text.todos) == 2 and text.imports == {"import cuda.tile as ct"}
    k = KernelRef("k", declared_json='{"occupancy": 4}')
    case = lambda *hints: Case("L1", [Launch(k, {**k.declared, **h}, (1,), []) for h in hints])
    assert hint_grid([case({"occupancy": 9})], k.declared) == {"occupancy": [8, 9, 16]}
    assert hint_grid([case({})], k.declared) == {"occupancy": [None, 2, 8]}      # None is the declared 4
    assert hint_grid([case({}, {"occupancy": 1, "num_ctas": 2})], k.declared, mode="launched") == {
        "occupancy": [None, 1], "num_ctas": [None, 2]}


def test_probes_name_kernels_independently_of_this_sys_path(tmp_path):
    from tileprobe.record.model import KernelRef
    pkg = KernelRef("k", module="mypkg.sub.kern", file=str(tmp_path / "mypkg" / "sub" / "kern.py"), attr="k")
    assert (pkg.spec(), pkg.import_root()) == ("mypkg.sub.kern:k", str(tmp_path))
    site = KernelRef("k", module="tilegym.ops.cutile.rope", attr="_rope_kernel",
                     file="/venv/lib/python3.12/site-packages/tilegym/ops/cutile/rope.py")
    assert (site.spec(), site.import_root()) == ("tilegym.ops.cutile.rope:_rope_kernel", None)
    top = KernelRef("k", module="kernels", file=str(tmp_path / "kernels.py"), attr="vadd")
    assert top.spec(str(tmp_path / "out" / "probes")) == "../../kernels.py:vadd"
    script = KernelRef("k", module="__main__", file="/far/away/app.py", attr="k")
    assert script.in_script and script.spec("/elsewhere/deep/down/probes") == "/far/away/app.py:k"
    assert KernelRef("k", module="m", qualname="f.<locals>.k", file="/x.py").spec() is None


def test_a_launch_log_is_data_never_code(basic, tmp_path):
    """Text read from a launch log (kernel name, call sites, dtype names) is written into probes as inert data: a
    name that tries to end the docstring, a site with a newline and a dtype name that is an expression do not run."""
    import glob
    import json
    import shutil
    out, _ = basic
    evil = tmp_path / "evil"
    shutil.copytree(out, evil, ignore=shutil.ignore_patterns("probes", "record.json"))
    marker = tmp_path / "PWNED"
    code = f'open({str(marker)!r}, "w")'
    for log in glob.glob(str(evil / "launches" / "*.jsonl")):
        lines = []
        for line in open(log):
            d = json.loads(line)
            if d.get("t") == "kernel":
                d["name"] = d["qualname"] = f'vadd"""\n{code}\n"""'
            text = json.dumps(d)
            text = text.replace('"origin": "torch", "name": "', f'"origin": "torch", "name": "{code}; ')
            lines.append(text.replace('"site": "', '"site": "\\n' + code.replace('"', '\\"') + '\\n'))
        with open(log, "w") as f:
            f.write("\n".join(lines) + "\n")
    result = probes_from_log(str(evil))
    assert result.written
    for path, _plan in result.written:
        text = open(path).read()
        compile(text, path, "exec")
        assert f"\n{code}\n" not in text and not any(ln.strip() == code for ln in text.splitlines())
        runpy_globals = {"__file__": path, "__name__": "probe_under_test"}
        try:
            exec(compile(text, path, "exec"), runpy_globals)
        except Exception:
            pass
    assert not marker.exists()


def test_dtype_names_that_are_not_names_become_todos():
    from tileprobe.record.args import args_text
    t = args_text([{"kind": "dtype", "origin": "torch", "name": "float16, __import__('os').system('x')"},
                   {"kind": "dtype", "origin": "torch", "name": "torch.bfloat16"},
                   {"kind": "dtype", "name": "float32"}])
    assert t.exprs == ["None", "torch.bfloat16", "ct.float32"]
    assert "is not a dtype name" in t.todos[0]


def test_a_compile_past_the_programs_compiler_timeout_is_flagged(tmp_path):
    """The program launches vadd under ct.compiler_timeout(0.05) while its (simulated) JIT compile takes
    0.3 s: cuTile raises TileCompilerTimeoutError, the program catches it. record logs the timeout in force and the
    first call's time of each distinct launch, and flags that launch with the kernel, the time and the timeout;
    scale_rows (timeout 30 s) and the vadd launch without a timeout are not flagged."""
    out = str(tmp_path / "out")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join([FAKE, ROOT]))
        mp.setenv("FAKE_COMPILE_S", "0.3")
        result = record([sys.executable, PROGRAM, "timeout"], out)
    assert result.exit_code == 0
    by = {(la.kernel.name, la.grid): la for la in result.recording.launches}
    timed_out = by[("vadd", (16,))]
    error = timed_out.first_error.split(":", 1)[0]    # cuTile's class: TileCompilerTimeoutError in cuda-tile 1.5.0
    assert timed_out.compiler_timeout_s == 0.05 and error in ("CompilerTimeoutError", "TileCompilerTimeoutError")
    assert 0.05 <= timed_out.first_call_s < 0.3
    assert by[("scale_rows", (32,))].compiler_timeout_s == 30.0 and by[("scale_rows", (32,))].first_call_s >= 0.3
    assert by[("vadd", (8,))].compiler_timeout_s is None
    assert len(result.timeouts) == 1 and result.timeouts[0] in result.notes
    line = result.timeouts[0]
    assert line.startswith("compiler timeout: vadd grid [16] ran under ct.compiler_timeout(0.05 s): the compile "
                           f"timed out ({error}: `tileiras` compiler exceeded timeout 0.05s. (fake))")
    assert "--compiler-timeout 0.05" in line
