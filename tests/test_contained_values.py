"""What probe code makes crosses into the tileprobe process as data only (tileprobe/probe/wire.py).

An Enum member or an object of the probe's own class used as a case value, an object whose ``__reduce__`` is
``os.system`` or sleeps, a value that contains itself: each is that probe's error, naming the value, the probe's
line and a fix, and the other probes are audited. Nothing of it is unpickled (or run) in the tileprobe process."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tileprobe.probe import wire

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "data", "kernels.py")


def _probe_file(tmp_path) -> tuple[str, str]:
    marker = tmp_path / "PWNED"
    path = tmp_path / "values.py"
    path.write_text(textwrap.dedent(f"""
        import enum, os, time
        from tileprobe import Probe
        N = 1 << 16
        class Mode(enum.Enum):
            FAST = 1
        class RunsCommand:
            def __reduce__(self):
                return (os.system, ("touch {marker}",))
        class Sleeps:
            def __reduce__(self):
                return (time.sleep, (600,))
        loop = []
        loop.append(loop)
        def args(case, arrays):
            return (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"), arrays.empty((N,), "float32"), 1024)
        K = {KERNELS + ':vec_add'!r}
        probes = [
            Probe(kernel=K, args=args, cases={{"MODE": [Mode.FAST]}}, name="enum"),
            Probe(kernel=K, args=args, cases={{"E": [1, RunsCommand()]}}, name="command"),
            Probe(kernel=K, args=args, cases={{"S": [Sleeps()]}}, name="sleeps"),
            Probe(kernel=K, args=args, cases={{"L": [loop]}}, name="loop"),
            Probe(kernel=K, args=args, cases={{"T": [(1, 2)]}}, name="good"),
        ]
        """))
    return str(path), str(marker)


def test_objects_of_the_probe_are_its_errors_and_never_unpickled(tmp_path):
    path, marker = _probe_file(tmp_path)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "tileprobe", "audit", path, "--arch", "sm_90", "--no-store",
                           "--json", str(tmp_path / "out.json"), "--probe-timeout", "60"],
                          capture_output=True, text=True, timeout=400, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert not os.path.exists(marker), "the probe's __reduce__ ran a command in the tileprobe process"
    # each names the place (file:line of its Probe(...)), the value and the fix
    assert f"{path}:19: probe 'enum': cases['MODE'][0] is <Mode.FAST: 1>: a member of the Enum Mode" in out
    assert "use its .value (1)" in out
    assert f"{path}:20: probe 'command': cases['E'][1] is <RunsCommand object at" in out
    assert "an object of class RunsCommand, not data" in out
    assert f"{path}:21: probe 'sleeps': cases['S'][0] is <Sleeps object at" in out
    assert f"{path}:22: probe 'loop': cases['L'][0][0] is a list that contains itself" in out
    assert "4 probe error(s) listed above" in out
    import json
    records = json.loads((tmp_path / "out.json").read_text())["variants"]
    assert [(r["kernel"], r["case"], r["status"]) for r in records] == [("good", {"T": [1, 2]}, "ok")]


def test_the_wire_keeps_tuples_and_refuses_what_is_not_data():
    import enum
    value = {"TILE": [(128, 128, 32), None, True, 1.5, "x", b"\x00\x01"], 7: frozenset({(1, None)})}
    assert wire.loads(wire.dumps(value)) == value
    assert type(wire.loads(wire.dumps((1, 2)))) is tuple

    class Kind(enum.IntEnum):     # an int subclass: refused like any other object of a class
        A = 1
    with pytest.raises(wire.NotData, match=r"cases\[0\] is <Kind.A: 1>: a member of the Enum .*use its .value \(1\)"):
        wire.encode([Kind.A], "cases")
    with pytest.raises(wire.NotData, match="more than 4,300 digits"):
        wire.encode(10 ** 5000)
    for big in (10 ** 4300, -10 ** 4300):          # the limit, made once (wire._INT_LIMIT), on both sides
        with pytest.raises(wire.NotData, match="more than 4,300 digits"):
            wire.encode([1, big])
    assert wire.loads(wire.dumps([10 ** 4300 - 1, 1 - 10 ** 4300])) == [10 ** 4300 - 1, 1 - 10 ** 4300]
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(wire.NotData, match="nested more than 64 deep"):
        wire.encode(deep)


@pytest.mark.parametrize("message, why", [
    (b"[" * 200_000 + b"]" * 200_000, "not a message tileprobe sends"),
    (b"1" * 5000, "not a message tileprobe sends"),
    (b'{"py/object": "os.system"}', "not a value tileprobe sends"),
    (b"\xff\xfe", "not a message tileprobe sends"),
    (b"x" * (wire.MAX_MESSAGE_BYTES + 1), "more than the limit"),
])
def test_a_message_that_is_not_one_is_refused_as_text(message, why):
    with pytest.raises(wire.WireError, match=why):
        wire.loads(message)


def test_a_worker_result_of_the_wrong_shape_is_refused():
    from tileprobe.compile.job import CompileResult, Variant, result_data, result_from_data
    v = Variant("p.py", 0, "k", (("TILE", 128),), (), "sm_90")
    data = result_data(CompileResult(v, "ok", cubin=b"\x7fELF"))
    assert result_from_data(wire.loads(wire.dumps(data)), v).cubin == b"\x7fELF"
    with pytest.raises(ValueError, match="whose status is a int"):
        result_from_data({**data, "status": 3}, v)
    with pytest.raises(ValueError, match="fields"):
        result_from_data({**data, "extra": 1}, v)
