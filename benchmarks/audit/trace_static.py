"""A timeline of one audit's static stage (where the time above the slowest compile goes), printed as
seconds since this script started: the zygote's start and readiness, the processes it starts, the probe loading,
and each compile result as it lands (its status, the worker's whole time, tileiras' own time and cuTile's export
time). It wraps tileprobe's internals (zygote, contained loading, the compile pool) for the measurement only.

    python benchmarks/audit/trace_static.py PROBE.py [PROBE.py …]       # sm_90, no store
"""
import os
import sys
import time

T0 = time.perf_counter()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def log(*a):
    print(f"{time.perf_counter() - T0:7.2f}", *a, flush=True)


def main() -> None:
    from tileprobe.probe import zygote, contained
    from tileprobe.compile import pool
    from tileprobe.audit import pipeline
    rz, rs, rr = zygote.Zygote.__init__, zygote.Zygote.start, zygote.Zygote.wait_ready

    def zi(self, *a, **k):
        log("zygote spawn")
        rz(self, *a, **k)

    def zs(self, entry, *a, **k):
        log("start", entry, "torch_free", self.torch_free)
        r = rs(self, entry, *a, **k)
        log("started", entry)
        return r

    def zr(self, *a, **k):
        r = rr(self, *a, **k)
        log("zygote ready", r)
        return r
    zygote.Zygote.__init__, zygote.Zygote.start, zygote.Zygote.wait_ready = zi, zs, zr
    rl = contained.load_probe_files

    def lp(*a, **k):
        log("load begin")
        r = rl(*a, **k)
        log("load end", [x.uses_torch for x in r])
        return r
    contained.load_probe_files = lp
    pipeline.load_probe_files = lp
    rc = pool.compile_variants

    def cv(*a, **k):
        log("compile_variants begin")
        for res in rc(*a, **k):
            log("result", res.status, f"worker {res.total_s or 0:.2f} s", f"tileiras {res.compile_s or 0:.2f} s",
                f"export {res.export_s or 0:.2f} s")
            yield res
        log("compile_variants end")
    pool.compile_variants = cv
    pipeline.compile_variants = cv
    from tileprobe.audit import audit
    res = audit(sys.argv[1:], ["sm_90"], store=None)
    log("audit done", len(res.records))


if __name__ == "__main__":
    main()
