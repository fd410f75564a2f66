"""Data read once at an edge into records: a loader job and a zygote fork request (the child side checks what
crosses), record.json's searches (``tileprobe tune -- COMMAND``), the store's history rows, the tune's previous
comparison, compiler remarks and best hints. Each record reads what its JSON holds and refuses, naming the field,
what does not fit."""
from __future__ import annotations

import pytest

from tileprobe.analyses.results import History, StoredCompile
from tileprobe.cli.tune_program import HostFacts, searches_of
from tileprobe.errors import TileprobeError
from tileprobe.jsonrecord import FieldError
from tileprobe.probe import wire
from tileprobe.probe.loader_job import LoaderJob
from tileprobe.probe.zygote_side import ForkRequest
from tileprobe.report.common import Remark, best_lines, remark_lines
from tileprobe.report.tune import previous_line, time_line
from tileprobe.schema import VariantRecord


def test_a_loader_job_keeps_its_wire_keys_and_the_child_refuses_a_wrong_field():
    job = LoaderJob("/p/probe.py", ["sm_90"], 10, 77, None, {"occupancy": [1]}, None, ["/p"], "/tmp/x")
    assert list(job.to_wire()) == ["path", "targets", "max_variants", "parent", "cases", "hints", "num_sms",
                                   "sys_path", "tmp"]                   # no stay, no task: as the dict had it
    job.stay, job.task, job.task_args = True, "tileprobe.mod:fn", "/tmp/x/task.json"
    wire_form = job.to_wire()
    assert wire_form["stay"] is True and wire_form["task_args"] == "/tmp/x/task.json"
    assert LoaderJob.from_wire(wire_form) == job
    # what the zygote's test jobs send (no parent, no num_sms): the defaults
    assert LoaderJob.from_wire({"path": "a.py", "targets": ["sm_90"], "max_variants": 3}).num_sms is None
    with pytest.raises(FieldError, match=r"the loader's job: LoaderJob\.max_variants holds '10' \(str\)"):
        LoaderJob.from_wire(dict(wire_form, max_variants="10"))
    with pytest.raises(FieldError, match=r"lacks its field 'path'"):
        LoaderJob.from_wire({"targets": []})


def test_a_fork_request_is_read_checked_and_anything_else_is_answered_as_not_one():
    req = ForkRequest.from_wire(wire.dumps({"entry": "_loader_entry", "args": [{"path": "a.py"}], "env": {"A": "1"},
                                            "cwd": "/", "sys_path": ["/x"], "nfds": 1, "stdout": True,
                                            "heavy": False, "torch_free": False, "preload": [], "preload_s": 5}))
    assert isinstance(req, ForkRequest)
    assert (req.entry, req.args, req.env, req.nfds, req.stdout, req.preload_s) == \
        ("_loader_entry", [{"path": "a.py"}], {"A": "1"}, 1, True, 5.0)
    prefetch = ForkRequest.from_wire(wire.dumps({"prefetch": True, "torch_free": True}))
    assert isinstance(prefetch, ForkRequest) and prefetch.prefetch and prefetch.torch_free and not prefetch.heavy
    assert ForkRequest.from_wire(wire.dumps([1, 2])) == "a request that is not one"
    assert ForkRequest.from_wire(b"not json") == "a request that is not one"
    bad = ForkRequest.from_wire(wire.dumps({"entry": "_loader_entry", "nfds": "2"}))
    assert isinstance(bad, str) and bad.startswith("a request that is not one (") and "ForkRequest.nfds" in bad


def _search(**over):
    return {"key": "abcdef0123456789", "file": "probes/s0.py", "name": "matmul", "sites": {"app.py:12": 3},
            "configs": [{"label": "C0", "config": {"TILE": 64}, "hints": {}, "text": "TILE=64"},
                        {"label": "C1", "config": {"TILE": 128}, "hints": {}}],
            "program_pick": 1, "program_search_s": 2, "extra_field_of_a_newer_tileprobe": [1], **over}


def test_recorded_searches_are_read_into_records_and_a_bad_field_is_named():
    (s,) = searches_of([_search()], "rec/record.json")
    assert (s.name, s.short, s.program_pick, s.program_search_s, s.kernel_file) == \
        ("matmul", "abcdef01", 1, 2.0, None)
    assert s.texts() == {"C0": "TILE=64", "C1": "C1"}           # the program's name, else the probe's label
    assert s.raw["extra_field_of_a_newer_tileprobe"] == [1]     # the table annotation gets the object whole
    with pytest.raises(TileprobeError, match=r"rec/record.json: searches\[0\]\.configs is a JSON object, not a list"):
        searches_of([_search(configs={})], "rec/record.json")
    with pytest.raises(TileprobeError, match=r"rec/record.json: searches\[1\]: SearchEntry\.program_pick holds 'C1' "
                                             r"\(str\), not an integer.*record again"):
        searches_of([_search(), _search(program_pick="C1")], "rec/record.json")
    with pytest.raises(TileprobeError, match=r"SearchEntry\.configs\[0\] holds 'C0' \(str\), not an object"):
        searches_of([_search(configs=["C0"])], "rec/record.json")
    with pytest.raises(TileprobeError, match=r"\"searches\" is a JSON object, not a list"):
        searches_of({}, "rec/record.json")


def test_host_facts_give_the_provenance_check_only_what_is_known():
    assert HostFacts(tileiras="13.4.92", gpu="NVIDIA H100").provenance() == {"tileiras": "13.4.92",
                                                                            "gpu": "NVIDIA H100"}
    assert HostFacts().provenance() == {}


def test_history_rows_read_as_records_write_back_as_the_store_gave_them():
    row = {"key": "k1", "created": "2026-12-05T10:00:00", "kernel": "vec", "case": {"N": 4}, "hints": {},
           "status": "ok", "registers": 32, "reg_pool": None, "median_us": 1.5, "newer_column": "x"}
    c = StoredCompile.from_dict(row)
    assert (c.kernel, c.case, c.registers, c.median_us, c.compile_s) == ("vec", {"N": 4}, 32, 1.5, None)
    assert History("s.sqlite", compiles=[c]).to_dict() == {"store": "s.sqlite", "audits": [], "compiles": [row],
                                                           "runs": [], "pruned": []}


def test_the_previous_tune_line_reads_its_record():
    prev = {"tileiras_before": "13.3.36", "changed": True, "median_us_before": 10.0,
            "pick_before": {"case": {"TILE": 64}, "hints": {"occupancy": 2}},
            "old_pick_now": {"status": "eliminated", "median_us": 12.5}, "loss_pct": 25.0,
            "old_pick_change_pct": 25.0}
    line = previous_line(prev)
    assert line.startswith("since the tune with 13.3.36") and "was TILE=64 occupancy=2" in line
    assert "now 12.5 µs (eliminated): keeping it would lose 25.0 % against the new winner" in line
    assert line.endswith("; it took 10.0 µs with 13.3.36 (+25.0 %))")
    assert previous_line({"tileiras_before": "13.3.36", "changed": False}) == \
        "since the tune with 13.3.36: same winner"
    with pytest.raises(FieldError, match=r"PreviousTune\.loss_pct holds 'a lot'"):
        previous_line(dict(prev, loss_pct="a lot"))
    with pytest.raises(FieldError, match=r"TuneTimes\.race_s holds '3 s'"):
        time_line({"race_s": "3 s"})


def _record(remarks):
    return VariantRecord(kernel="k", probe="p", case={}, hints={}, arch="sm_90", tileiras="13.4", status="ok",
                         remarks=remarks)


def test_remarks_and_best_hints_read_into_records():
    rec = _record([{"kind": "Missed", "pass": "tile-vectorize", "name": "NotVectorized", "line": 12,
                    "message": "loop not vectorized", "details": ["a (x): first", "second", "third"]},
                   {"kind": "Passed", "name": "Inlined", "message": "inlined"},
                   "not an object"])
    assert Remark.of({"pass": "p1", "kind": "Analysis"}) == Remark(kind="Analysis", pass_name="p1")
    assert Remark.of(["x"]) is None
    assert remark_lines(rec) == ["line 12: loop not vectorized (first; second)"]
    best = [{"kernel": "vec", "case": {"N": 4}, "arch": "sm_90", "tileiras": "13.4.92", "best_hints": {"occupancy": 2},
             "best_us": 10.0, "default_hints": {}, "default_us": 15.0, "speedup": 1.5}]
    assert best_lines(best) == ["vec sm_90 13.4.92 N=4: best occupancy=2 10.0 µs, 1.50× vs default declared hints "
                                "15.0 µs"]


def test_a_bisect_bundles_block_is_read_into_a_record_and_a_bad_one_named():
    from tileprobe.analyses.bisect_time import BundleBisect
    info = BundleBisect.of({"bisect": {"good": "13.3.36", "bad": "13.5.37", "arch": "sm_90",
                                       "releases": ["13.3.36", "13.5.37"], "skipped": {"13.2.86": "no sm_90"}}}, "b")
    assert (info.releases, info.skipped, info.where) == (["13.3.36", "13.5.37"], {"13.2.86": "no sm_90"}, None)
    assert BundleBisect.of({"cuda_tile": "1.7.0"}, "b") == BundleBisect()     # an audit's bundle: none
    with pytest.raises(TileprobeError, match=r"b: environment: BundleBisect\.releases holds '13\.3\.36' \(str\), "
                                             r"not an array; make the bundle again"):
        BundleBisect.of({"bisect": {"releases": "13.3.36"}}, "b")
