"""The run worker's task records: a task's record read once (a field of another type named), the replies with the
keys, in the order, that the tune's GPU stage and the stored runs read."""
import pytest

from tileprobe.jsonrecord import FieldError
from tileprobe.run import worker
from tileprobe.run.taskdata import BatchTiming, CandidateCheck, Failure, GpuInfo, LaunchTarget

TIME_KEYS = ["status", "samples_us", "clocks_before", "clocks_after", "grid", "error", "cuda_error", "fatal",
             "warmup_launches", "n", "wall_s"]


def test_a_task_record_is_read_once_and_a_field_of_another_type_is_named():
    rec = {"kernel": "vec", "case": {"N": 1024}, "hints": {"occupancy": None}, "effective_hints": {"occupancy": 2},
           "arch": "sm_90", "symbol": "vec_N1024", "signature": [], "threads": 128, "status": "ok", "compile_s": 1.0}
    target = LaunchTarget.from_wire(rec)
    assert (target.kernel, target.threads, target.case) == ("vec", 128, {"N": 1024})
    assert target.grid_hints() == {"occupancy": 2} and LaunchTarget.from_wire(target) is target
    assert worker.launch_context(rec, 132) == {"arch": "sm_90", "hints": {"occupancy": 2}, "num_sms": 132}
    with pytest.raises(FieldError, match=r"the worker task's record: LaunchTarget.threads holds '128' \(str\)"):
        LaunchTarget.from_wire(dict(rec, threads="128"))
    with pytest.raises(FieldError, match=r"LaunchTarget.case holds \[1024\] \(list\), not an object"):
        worker.grid_hints(dict(rec, case=[1024]))


def test_a_batch_reply_keeps_its_keys_and_the_timing_modes_figures_last():
    out = BatchTiming(grid=[64, 1, 1])
    out.take_info({"warmup_launches": 3, "n": 10, "graph_launches": 20, "estimate_us": 4.5})
    out.status, out.samples_us, out.driver_ctas_per_sm = "ok", [1.0, 2.0], 8
    wire = out.to_wire()
    assert list(wire) == TIME_KEYS + ["driver_ctas_per_sm", "graph_launches", "estimate_us"]
    assert (wire["warmup_launches"], wire["n"], wire["graph_launches"]) == (3, 10, 20)
    failed = BatchTiming()
    failed.fail(Failure("crash", "CUDA error 700", 700, True))
    assert list(failed.to_wire()) == TIME_KEYS and failed.to_wire()["fatal"] is True


def test_a_check_reply_has_checks_only_when_a_check_ran():
    unchecked = CandidateCheck(status="unchecked", message="no reference")
    keys = list(unchecked.to_wire())
    assert keys == TIME_KEYS + ["against", "rel_err", "tolerance", "max_abs_err", "nan_count", "unwritten_count",
                                "message"]
    ran = CandidateCheck(status="ok", against="default", checks=["tolerance", "bit-exact"]).to_wire()
    assert list(ran)[-1] == "checks" and ran["checks"] == ["tolerance", "bit-exact"]
    crashed = CandidateCheck()
    crashed.fail(Failure("error", "ProbeError: args() failed"))
    assert crashed.to_wire()["message"] == crashed.to_wire()["error"] == "ProbeError: args() failed"


def test_the_gpu_of_a_hello():
    gpu = GpuInfo.from_wire({"name": "H100", "sm": "sm_90", "num_sms": 132, "uuid": "GPU-1", "pid": 7})
    assert gpu.ref(2) == {"index": 2, "name": "H100", "uuid": "GPU-1", "pci_bus_id": None} and gpu.num_sms == 132
    with pytest.raises(FieldError, match="GpuInfo.num_sms holds '132'"):
        GpuInfo.from_wire({"num_sms": "132"})
