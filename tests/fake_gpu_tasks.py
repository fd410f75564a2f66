"""Stand-ins for the GPU worker's task and init, for multi-GPU and Ray tests on a machine without a GPU.

``fake_run`` answers like :func:`tileprobe.run.worker.run_variant`: ``ok`` with a median that depends only on the
variant's hints (so two sweeps agree on everything but which worker ran what), and hangs for a kernel named
``hang``. ``fake_init`` reports a GPU named after ``CUDA_VISIBLE_DEVICES`` (or Ray's GPU ids)."""
from __future__ import annotations

import os
import time


def fake_init() -> dict:
    dev = os.environ.get("CUDA_VISIBLE_DEVICES", "?")
    return {"name": "Fake GPU", "sm": "sm_90", "uuid": f"GPU-fake-{dev}", "pci_bus_id": f"0000:0{dev}:00.0",
            "pid": os.getpid(), "clocks": {"sm_mhz": 1980.0}}


def fake_run(record: dict, cubin: bytes, probe_path: str, seed: int = 0, **timing) -> dict:
    from tileprobe.run.worker import run_dict
    if record["kernel"] == "hang":
        time.sleep(300)
    time.sleep(0.2)
    occ = dict(record["hints"]).get("occupancy", 1)
    return run_dict(status="ok", median_us=10.0 + occ, seed=seed, worker_pid=os.getpid(),
                    visible=os.environ.get("CUDA_VISIBLE_DEVICES"))


def forged_result() -> None:
    """Probe code that writes a well-formed result for another task id (424242) on the worker's pipe."""
    import sys
    from multiprocessing.connection import Connection

    from tileprobe.probe import wire
    wire.send(Connection(int(sys.argv[1]), readable=False), ("result", 424242, True, "forged"))
    time.sleep(60)
