"""Every listed GPU at once: one watchdog'd worker per GPU, a shared queue, shared GPUs flagged.

``--gpus all|0,2|0,0`` lists device indexes (:func:`parse_gpus`). Each entry gets its own worker slot — a local
:class:`~tileprobe.run.watchdog.Watchdog` with ``CUDA_VISIBLE_DEVICES`` set to that device
(:class:`tileprobe.exec.local.LocalExecutor`), or a one-GPU Ray actor (:class:`tileprobe.exec.ray_exec.RayGpuSlot`).
The slots start together (a worker's start-up is ~4 s on the H200: torch, a CUDA context); then each slot's thread
takes the next variant from one queue when it is free, so a slow or hung variant on one GPU never holds the others
(each slot has its own timeout and replaces its own worker).

**Same results, other timings.** Statuses, checks and occupancy do not depend on which GPU ran a variant; each run
dict carries its GPU (``gpu``: index, name, uuid, PCI bus id).

**Shared GPUs are never ranked.** Slots on one physical GPU (an index listed twice, or two indexes with one UUID)
time kernels while another kernel runs beside them: their runs get ``shared_gpu: true`` and a warning, and
:func:`ranked` keeps them out of the best-hint lines, advice and tune's race.
"""
from __future__ import annotations

import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from tileprobe.errors import UsageError
from tileprobe.run.taskdata import GpuInfo
from tileprobe.run.watchdog import INIT_CUDA, Watchdog, WorkerStartError
from tileprobe.schema import VariantRun

SHARED_WARNING = ("timed on a GPU shared with another busy worker (--gpus lists it twice): the timing is flagged "
                  "shared_gpu and never ranked")


def parse_gpus(text: str | None, count: Callable[[], int] | None = None) -> list[int]:
    """``"all"`` → every device (``count()``), ``"0,2"`` → ``[0, 2]``, ``"0,0"`` → two workers on device 0.

    Raises:
        UsageError: not ``all`` nor comma-separated indexes ≥ 0 (the message shows the forms).
    """
    if text is None or text == "":
        return [0]
    if text.strip() == "all":
        n = count() if count else 0
        if n < 1:
            raise UsageError("--gpus all: no GPU is visible here (nvidia-smi -L lists them)")
        return list(range(n))
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        out = [-1]
    if not out or min(out) < 0:
        raise UsageError(f"--gpus {text}: give all, or device indexes such as 0,2 (0,0: two workers share GPU 0)")
    return out


def visible_gpu_count() -> int:
    """GPUs this machine shows (``nvidia-smi -L``; 0 when there is none or no nvidia-smi)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=15).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


class SlotWorker(Protocol):
    """What a slot's worker does here: a :class:`~tileprobe.run.watchdog.Watchdog` or a Ray slot
    (:mod:`tileprobe.exec.ray_exec`)."""

    def start(self) -> dict:
        """Start the worker (a no-op when it runs); its facts: ``sm`` (the arch), the GPU's name, its SM count."""
        ...

    def close(self) -> None:
        """End the worker and whatever it started."""
        ...


@dataclass
class Slot:
    """One worker of a multi-GPU sweep: its device index, its watchdog (or Ray slot), its GPU once started."""
    device: int
    worker: SlotWorker
    info: dict = field(default_factory=dict)
    shared: bool = False
    error: str | None = None
    ran: int = 0
    start_s: float = 0.0
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def gpu(self) -> GpuInfo:
        """The GPU of the worker's hello (:attr:`info`; empty before it started)."""
        return GpuInfo.from_wire(self.info)

    def gpu_ref(self) -> dict:
        """What each run records of its GPU."""
        return self.gpu.ref(self.device)


def start_slots(slots: Sequence[Slot]) -> None:
    """Start every slot's worker at once; mark slots sharing one GPU (same index, or same UUID / bus id). A slot
    that cannot start keeps ``error``; the others go on.

    Each worker is started by a thread that then stays alive until :func:`close_slots`: a worker dies with the
    thread that started it (its parent-death signal, PR_SET_PDEATHSIG, follows the creating thread).
    """
    started = []
    for s in slots:
        if s.info or s.error:
            continue
        ready = threading.Event()
        t = threading.Thread(target=_hold, args=(s, ready), name=f"tileprobe-gpu-{s.device}", daemon=True)
        t.start()
        started.append(ready)
    for ready in started:
        ready.wait()
    mark_shared(slots)


def _hold(s: Slot, ready: threading.Event) -> None:
    t = time.perf_counter()
    try:
        s.info = dict(s.worker.start())
    except WorkerStartError as e:
        s.error = str(e)
    s.start_s = time.perf_counter() - t
    ready.set()
    s.release.wait()


def close_slots(slots: Sequence[Slot]) -> None:
    """Stop every slot's worker and let its holding thread end."""
    for s in slots:
        s.worker.close()
        s.release.set()


def mark_shared(slots: Sequence[Slot]) -> None:
    """``shared`` on every started slot whose physical GPU (UUID, else PCI bus id, else device index) another
    started slot also uses."""
    def ident(s: Slot):
        gpu = s.gpu
        return gpu.uuid or gpu.pci_bus_id or ("index", s.device)
    live = [s for s in slots if s.error is None]
    for s in live:
        s.shared = sum(1 for o in live if ident(o) == ident(s)) > 1


T = TypeVar("T")


def dispatch(slots: Sequence[Slot], items: Sequence[T], run_one: Callable[[Slot, int, T], VariantRun],
             progress: Callable[[int, int, T], None] | None = None) -> str | None:
    """Run ``items`` on the started slots: each slot's thread takes the next item from one queue when it is free and
    sets ``item.run = run_one(slot, position, item)`` (plus ``gpu`` and, on a shared GPU, ``shared_gpu``).

    A slot whose worker cannot be restarted (:class:`WorkerStartError`) stops; the item it held is put back for
    the others. Returns None, or why items were left unrun (every slot stopped).
    """
    q: queue.Queue = queue.Queue()
    for pos, item in enumerate(items):
        q.put((pos, item))
    lock, done = threading.Lock(), [0]

    def serve(s: Slot) -> None:
        while True:
            try:
                pos, item = q.get_nowait()
            except queue.Empty:
                return
            try:
                run = run_one(s, pos, item)
            except WorkerStartError as e:
                s.error = str(e)
                q.put((pos, item))
                return
            run.gpu = s.gpu_ref()
            if s.shared:
                run.shared_gpu = True
                run.warnings = list(run.warnings or []) + [SHARED_WARNING]
            item.run = run
            s.ran += 1
            with lock:
                done[0] += 1
                if progress:
                    progress(done[0], len(items), item)

    threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in slots if s.error is None]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if q.empty():
        return None
    errors = "; ".join(f"GPU {s.device}: {s.error}" for s in slots if s.error)
    return f"{q.qsize()} variant(s) not run: no GPU worker left ({errors})"


def ranked(run: VariantRun | None) -> bool:
    """A run whose timing may be ranked: ``ok``, timed, and not on a shared GPU."""
    return run is not None and run.status == "ok" and bool(run.median_us) and not run.shared_gpu


def local_slots(gpus: Sequence[int], timeout_s: float, init: str | None = None) -> list[Slot]:
    """One local :class:`~tileprobe.run.watchdog.Watchdog` per entry of ``gpus``, each seeing only its device
    (``CUDA_VISIBLE_DEVICES``), as :class:`Slot` s."""
    return [Slot(g, Watchdog(timeout_s=timeout_s, init=init or INIT_CUDA, env={"CUDA_VISIBLE_DEVICES": str(g)}))
            for g in gpus]


def check_same_arch(slots: Sequence[Slot]) -> None:
    """Raises UsageError when the started slots' GPUs are of different architectures (one sweep runs one
    arch's cubins)."""
    archs = {sm for s in slots if s.error is None and (sm := s.gpu.sm)}
    if len(archs) > 1:
        raise UsageError(f"--gpus lists GPUs of different architectures ({', '.join(sorted(archs))}): run each "
                         "architecture in its own `tileprobe run --gpus …`")


def environment(slots: Sequence[Slot]) -> list[dict]:
    """Per slot: its GPU, whether it was shared, its worker start-up (s, apart from timing), variants run, error."""
    return [{**s.gpu_ref(), "shared_gpu": s.shared, "worker_start_s": round(s.start_s, 3), "ran": s.ran,
             "clocks": s.gpu.clocks, "error": s.error} for s in slots]
