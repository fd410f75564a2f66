"""GPU clocks while samples are taken: SM and memory clocks (MHz) and the driver's reasons for lowering them.

Read through NVML (``pynvml``, package ``nvidia-ml-py``): ``nvmlDeviceGetClockInfo`` (NVML_CLOCK_SM = 1,
NVML_CLOCK_MEM = 2) and ``nvmlDeviceGetCurrentClocksEventReasons`` (called ``…ThrottleReasons`` before NVML 12.5);
a reading costs microseconds and creates no CUDA context. Without pynvml, ``nvidia-smi --query-gpu`` (tens of ms
per reading); without either, readings are ``None``. Bit meanings of the reasons are those of ``nvml.h``
(``nvmlClocksEventReason*``, :data:`CLOCK_EVENT_REASONS`).

Timings taken at different clocks are not one sample (pyperf's ``_CHECKED_METADATA`` habit): the tune reads the
clocks just before and just after each batch and flags a candidate whose SM or memory clock moved by more than
:data:`CLOCK_MOVED_PCT` over its batches (:func:`clocks_moved`); ``tileprobe run`` reads them over each variant's
samples with a :class:`ClockPoller` (after the warm-up, every :data:`POLL_INTERVAL_S` while the samples run, and
after them), keeps their range (:func:`clock_summary`) and warns when they moved (:func:`clock_warning`).
"""
from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
from collections.abc import Iterable
from typing import Any

#: nvml.h ``nvmlClocksEventReason*`` bits (NVML 12.x) → short names.
CLOCK_EVENT_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                       0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                       0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}
#: The reasons that say the GPU's power or temperature limit set the clocks (not the load, nor a setting): a kernel's
#: time then depends on how long the load has lasted (tileprobe.tune.race's steady-state final).
POWER_REASONS = ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                 "hw_power_brake_slowdown")
#: A candidate's SM clock readings spanning more than this (% of the highest) flag it: its samples were not all
#: taken at one clock. H200 SM clocks move in steps of 15 MHz (0.8 % of 1,980 MHz), so one step passes.
CLOCK_MOVED_PCT = 1.0
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
#: Seconds between two readings of a :class:`ClockPoller` (NVML: a reading costs microseconds and no GPU work).
POLL_INTERVAL_S = 0.002
#: Readings a poller keeps at most (the first ones; 2,000 × 2 ms = 4 s of samples).
MAX_POLL_READINGS = 2000


def reason_names(mask: int | None) -> list[str]:
    """The names of the bits set in an NVML clocks-event-reasons mask (unknown bits as hex)."""
    if not mask:
        return []
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_EVENT_REASONS)
    return names + ([hex(rest)] if rest else [])


class ClockReader:
    """Reads one GPU's clocks (module doc). ``pci_bus_id``: the CUDA device's bus id (``0000:19:00.0``); ``index``:
    NVML index used when the bus id is not found. ``source`` is ``"nvml"``, ``"nvidia-smi"`` or None."""

    def __init__(self, pci_bus_id: str | None = None, index: int = 0, *, nvml=None):
        self.bus, self.index = pci_bus_id, index
        self.source: str | None = None
        # pynvml (untyped: ignore_missing_imports) or the stand-in given as ``nvml``, and its opaque device handle
        self._nvml: Any = None
        self._handle: Any = None
        try:
            self._open_nvml(nvml)
        except Exception:   # no pynvml, no driver library, unknown device: fall back
            self._nvml = self._handle = None
        if self.source is None and shutil.which("nvidia-smi"):
            self.source = "nvidia-smi"

    def _open_nvml(self, nvml) -> None:
        if nvml is None:
            import pynvml
            nvml = pynvml
        nvml.nvmlInit()
        handle = None
        for bus in _bus_variants(self.bus):
            try:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(bus)
                break
            except Exception:
                continue
        if handle is None:
            handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
        self._nvml, self._handle, self.source = nvml, handle, "nvml"

    def read(self) -> dict | None:
        """``{"sm_mhz", "mem_mhz", "reasons": [names], "source"}``, or None when no source works."""
        try:
            if self.source == "nvml":
                return self._read_nvml()
            if self.source == "nvidia-smi":
                return self._read_smi()
        except Exception:
            return None
        return None

    def _read_nvml(self) -> dict:
        n, h = self._nvml, self._handle
        reasons_fn = (getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
                      or getattr(n, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        try:
            mask = reasons_fn(h) if reasons_fn else None
        except Exception:
            mask = None
        return {"sm_mhz": float(n.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM)),
                "mem_mhz": float(n.nvmlDeviceGetClockInfo(h, NVML_CLOCK_MEM)), "reasons": reason_names(mask),
                "source": "nvml"}

    def _read_smi(self) -> dict:
        cmd = ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader,nounits"]
        if self.bus:
            cmd += ["-i", self.bus]
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=15, check=True).stdout
        sm, mem = (float(x) for x in text.strip().splitlines()[0].split(",")[:2])
        return {"sm_mhz": sm, "mem_mhz": mem, "reasons": [], "source": "nvidia-smi"}


def _bus_variants(bus: str | None) -> list[str]:
    """CUDA writes ``0000:19:00.0``, NVML ``00000000:19:00.0``: try both."""
    if not bus:
        return []
    out = [bus]
    domain, _, rest = bus.partition(":")
    if rest and len(domain) == 4:
        out.append(f"0000{domain}:{rest}")
    return out


def compute_capability() -> tuple[int, int] | None:
    """The first GPU's compute capability from NVML or nvidia-smi, without a CUDA context; None when unknown.
    (The tune compiles for it while its GPU worker starts.)"""
    try:
        import pynvml
        pynvml.nvmlInit()
        return tuple(pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(0)))
    except Exception:
        pass
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=15, check=True).stdout
        major, minor = text.strip().splitlines()[0].strip().split(".")
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def sm_range(readings: Iterable[dict | None]) -> tuple[float, float] | None:
    """(lowest, highest) SM clock (MHz) over readings; None when there is none."""
    return _range(readings, "sm_mhz")


def _range(readings: Iterable[dict | None], key: str) -> tuple[float, float] | None:
    xs = [r[key] for r in readings if r and r.get(key) is not None]
    return (min(xs), max(xs)) if xs else None


def _moved(rng: tuple[float, float] | None, tolerance_pct: float) -> bool:
    return rng is not None and rng[1] > 0 and (rng[1] - rng[0]) / rng[1] * 100.0 > tolerance_pct


def clocks_moved(readings: Iterable[dict | None], tolerance_pct: float = CLOCK_MOVED_PCT) -> bool | None:
    """Whether the SM or the memory clock readings span more than ``tolerance_pct`` % of their highest; None
    without readings."""
    readings = list(readings)
    sm, mem = _range(readings, "sm_mhz"), _range(readings, "mem_mhz")
    if sm is None and mem is None:
        return None
    return _moved(sm, tolerance_pct) or _moved(mem, tolerance_pct)


def clock_summary(readings: Iterable[dict | None]) -> dict | None:
    """``{"n", "sm_mhz": {"min", "median", "max"}, "mem_mhz": {…}, "reasons": [names seen], "source"}`` over the
    readings (MHz); None when there is none."""
    got = [r for r in readings if r]
    if not got:
        return None
    out: dict = {"n": len(got)}
    for key in ("sm_mhz", "mem_mhz"):
        xs = [r[key] for r in got if r.get(key) is not None]
        out[key] = {"min": min(xs), "median": statistics.median(xs), "max": max(xs)} if xs else None
    out["reasons"] = sorted({name for r in got for name in r.get("reasons") or []})
    out["source"] = got[0].get("source")
    return out


def clock_warning(readings: Iterable[dict | None], tolerance_pct: float = CLOCK_MOVED_PCT) -> str | None:
    """The warning ``tileprobe run`` adds to a variant whose clocks moved over its samples (:func:`clocks_moved`);
    None when they did not or were not read."""
    readings = list(readings)
    if not clocks_moved(readings, tolerance_pct):
        return None
    s = clock_summary(readings)
    assert s is not None       # by construction: clocks moved, so some reading was taken

    def span(d):
        return "not read" if d is None else (f"{d['min']:,.0f} MHz" if d["min"] == d["max"]
                                             else f"{d['min']:,.0f}–{d['max']:,.0f} MHz (median {d['median']:,.0f})")
    why = f"; driver reasons: {', '.join(s['reasons'])}" if s["reasons"] else ""
    return (f"clocks moved during the samples: SM {span(s['sm_mhz'])}, memory {span(s['mem_mhz'])} over "
            f"{s['n']} readings{why}: the median mixes clock states; compare variants timed at the same clocks, or "
            "pin them (nvidia-smi -lgc / -lmc) — docs/TIMING.md")


class ClockPoller:
    """Clock readings over a stretch of GPU work (``tileprobe run``: a variant's samples): one at :meth:`start`,
    then one every ``interval_s`` from a background thread while the work runs, and one at :meth:`stop`.

    The thread runs only with NVML (a reading costs microseconds, no GPU work and no CUDA context); with
    ``nvidia-smi`` (tens of ms, a process per reading) or ``interval_s=None`` only the start and stop readings are
    taken. ``readings`` keeps at most ``max_readings`` (the first ones, the stop reading always).

    Args:
        reader: a :class:`ClockReader` (or anything with ``read() -> dict | None`` and ``source``).
    """

    def __init__(self, reader, interval_s: float | None = POLL_INTERVAL_S, max_readings: int = MAX_POLL_READINGS):
        self.reader, self.interval_s, self.max_readings = reader, interval_s, max(2, int(max_readings))
        self.readings: list[dict] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _take(self) -> None:
        r = self.reader.read()
        if r is not None and len(self.readings) < self.max_readings - 1:
            self.readings.append(r)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def start(self) -> None:
        """Take the first reading and, with NVML and an interval, start polling."""
        self.readings, self._stop = [], threading.Event()
        self._take()
        if self.interval_s and getattr(self.reader, "source", None) == "nvml":
            self._thread = threading.Thread(target=self._loop, name="tileprobe-clocks", daemon=True)
            self._thread.start()

    def stop(self) -> list[dict]:
        """Stop polling, take the last reading; return all readings (oldest first)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        r = self.reader.read()
        if r is not None:
            self.readings.append(r)
        return self.readings
