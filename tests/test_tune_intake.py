"""The race's intake of landed candidates made cheap, the same facts: the probe's ``args`` made once per case and
shared by the candidates of that case (tileprobe/tune/static.py ``launch_task``), an object of the probe's own
(its text names an address) still made per candidate; and inside a loader session the kept launch facts read once
and written by the saver thread (tileprobe/tune/launch_cache.py). No GPU, no compile: records made here."""
from __future__ import annotations

import os

import pytest

from tileprobe.probe import plancache
from tileprobe.probe.contained import loader_sessions
from tileprobe.probe.define import load_probes
from tileprobe.schema import VariantRecord
from tileprobe.tune import launch_cache
from tileprobe.tune.space import Config, Problem
from tileprobe.tune.static import Candidate, launch_task, probe_launch

PROBE = """
import os
from tileprobe import Probe
LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "args.log")

class Opaque:
    pass

def args(case, arrays):
    open(LOG, "a").write(f"{case['TILE']}\\n")
    extra = (Opaque(),) if case.get("OPAQUE") else ()
    return (arrays.randn((case["N"],), "float32"), arrays.empty((case["N"] // case["TILE"],), "float32"),
            case["TILE"], *extra)

probe = Probe(
    kernel="kernels:vec_add", args=args,
    cases={"N": [4096], "OPAQUE": [CASE_OPAQUE], "TILE": [256, 512]}, tunable=("TILE",),
    hints={"occupancy": [1, 2]},
    grid=lambda case, hints, num_sms: (case["N"] // case["TILE"] * hints["occupancy"],),
    name="vec_add_intake",
)
"""


def _probe_file(tmp_path, opaque=False):
    path = tmp_path / "intake_probe.py"
    path.write_text(PROBE.replace("CASE_OPAQUE", repr(opaque)))
    return str(path)


def _items(values: dict) -> list:
    """Four candidates, TILE 256 and 512 × occupancy 1 and 2: two cases."""
    out = []
    for tile in (256, 512):
        for occ in (1, 2):
            case = {**values, "TILE": tile}
            sig = [{"kind": "array"}, {"kind": "array"}, {"kind": "constant", "value": tile}, {"kind": "scalar"}]
            rec = VariantRecord(kernel="vec_add", probe="intake_probe.py", case=case, hints={"occupancy": occ},
                                arch="sm_90", tileiras="t", status="ok", effective_hints={"occupancy": occ},
                                signature=sig)
            out.append([values, [[["TILE", tile]], [["occupancy", occ]]], rec.to_dict()])
    return out


def _calls(tmp_path) -> int:
    return len((tmp_path / "args.log").read_text().splitlines())


def _one_by_one(path: str, items: list) -> list:
    """Each candidate's facts made alone, as before the intake shared a case's args."""
    probe = load_probes(path)[0]
    out = []
    for values, config, rec in items:
        c = Candidate(Problem(probe, values), Config(tuple(map(tuple, config[0])), tuple(map(tuple, config[1]))),
                      VariantRecord.from_dict(rec))
        grid, runtime = probe_launch(c, 132)
        out.append([list(grid), runtime])
    return out


def test_the_candidates_of_one_case_share_its_args_and_get_the_same_facts(tmp_path):
    path = _probe_file(tmp_path)
    values = {"N": 4096, "OPAQUE": False}
    items = _items(values)
    facts, errors = launch_task(path, lambda text: None, 0, 132, items)
    assert errors == [] and _calls(tmp_path) == 2                 # one args() per case, not one per candidate
    assert [f[0] for f in facts] == [[16, 1, 1], [32, 1, 1], [8, 1, 1], [16, 1, 1]]     # N / TILE × occupancy
    assert facts[0][1] == facts[1][1] and facts[0][1] != facts[2][1]     # runtime args: one per case
    assert facts == _one_by_one(path, items)                        # the same facts as one by one
    assert _calls(tmp_path) == 2 + 4


def test_an_object_of_the_probe_s_own_is_still_made_per_candidate(tmp_path):
    path = _probe_file(tmp_path, opaque=True)
    facts, errors = launch_task(path, lambda text: None, 0, 132, _items({"N": 4096, "OPAQUE": True}))
    assert errors == []
    runtimes = [f[1] for f in facts]
    assert all(" at 0x" in str(r[-1]) for r in runtimes)
    assert len({str(r) for r in runtimes}) == 4      # four objects: no two candidates look alike by sharing one


@pytest.fixture
def cache_on(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEPROBE_PLAN_CACHE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def _item(tile):
    return launch_cache.LaunchItem(0, 132, {}, [[["TILE", tile]], [["occupancy", 1]]], "vec_add", "sm_90",
                                   {"occupancy": 1}, {"occupancy": 1}, [{"kind": "array"}])


def test_inside_a_session_the_kept_facts_are_read_once_and_all_written(cache_on, monkeypatch):
    code = cache_on / "kernel.py"
    code.write_text("x = 1\n")
    st = os.stat(code)
    files = [[str(code), st.st_size, st.st_mtime_ns, None]]
    path = str(cache_on / "probe.py")
    reads, saves = [], []
    real_lookup, real_save = plancache.lookup, plancache.save
    monkeypatch.setattr(plancache, "lookup", lambda k: reads.append(k) or real_lookup(k))
    monkeypatch.setattr(plancache, "save", lambda *a: saves.append(a[0]) or real_save(*a))
    items = [_item(t) for t in (256, 512, 1024, 2048)]
    with loader_sessions():
        assert launch_cache.known(path, items) == [None] * 4
        for i, item in enumerate(items):            # four intakes, one candidate each
            assert launch_cache.learn(path, [item], [[[64 >> i, 1, 1], [f"a{i}"]]], files) == 1
            assert launch_cache.known(path, items)[i] == [[64 >> i, 1, 1], [f"a{i}"]]   # from memory
    assert len(reads) == 1                           # the entry was read once in the session
    assert 1 <= len(saves) <= 4                      # written by the saver thread, at most once per intake
    # after the session: read from the file, every fact learnt is there
    assert launch_cache.known(path, items) == [[[64 >> i, 1, 1], [f"a{i}"]] for i in range(4)]
    # an edit of a file the loader ran: nothing kept is answered, in a new session too
    code.write_text("x = 22\n")
    with loader_sessions():
        assert launch_cache.known(path, items) == [None] * 4


def test_owned_temp_folders_sweep_the_leftovers_once_a_while_not_each_time(tmp_path, monkeypatch):
    """Each intake asks its loader through an owned temp folder: the sweep of the temp folder's leftovers (a dead
    owner's) runs at the first, then not again within procs.SWEEP_EVERY_S."""
    import subprocess
    import sys
    import tempfile

    from tileprobe import procs
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(procs, "_SWEPT", {})
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()

    def leftover(name):
        folder = tmp_path / f"{procs.TEMP_PREFIX}{name}"
        folder.mkdir()
        (folder / procs.OWNER_MARKER).write_text(f"{dead.pid} 1\n")
        return folder
    first = leftover("audit-old")
    with procs.owned_tempdir("load"):
        assert not first.exists()                 # swept at the first use here
    second = leftover("audit-older")
    with procs.owned_tempdir("load"):
        assert second.exists()                    # not again at once
    monkeypatch.setattr(procs, "SWEEP_EVERY_S", 0.0)
    with procs.owned_tempdir("load"):
        assert not second.exists()                # and again once the interval has passed
    assert os.listdir(tmp_path) == []
