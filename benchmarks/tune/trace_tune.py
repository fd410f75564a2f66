"""A timeline of one ``tileprobe tune`` (where a tune's wall time goes after the last compile lands),
printed to stderr as seconds since this script started: each record that lands (stored or compiled), the GPU
worker's readiness, each batch and check on the GPU (candidate, round, seconds), candidates joining the race, the
launch-facts calls, the race's end, the store and export writes, and the process's exit. The command's own output
goes to stdout as usual. It wraps tileprobe's internals for the measurement only.

    python benchmarks/tune/trace_tune.py tune PROBE.py --store S --json J    # the arguments of ``tileprobe``
"""
import atexit
import os
import sys
import time

T0 = time.perf_counter()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def log(*a) -> None:
    """One line of the timeline on stderr: seconds since the start, then ``a``."""
    print(f"[trace {time.perf_counter() - T0:7.2f}]", *a, file=sys.stderr, flush=True)


def wrap(owner, name: str, before=None, after=None) -> None:
    """Replace ``owner.name`` by a function that logs ``before(*args)`` and ``after(result, seconds)``."""
    real = getattr(owner, name)

    def traced(*a, **k):
        if before:
            log(*before(*a, **k))
        t = time.perf_counter()
        out = real(*a, **k)
        if after:
            log(*after(out, time.perf_counter() - t, *a, **k))
        return out
    setattr(owner, name, traced)


def install() -> None:
    """Wrap the functions the timeline names."""
    from tileprobe.tune import overlap, gpu, race, pipeline, static
    wrap(overlap.Overlap, "on_record", before=lambda self, rec, cubin: (
        "landed", rec.hints, rec.status, "cubin" if cubin else "stored/none"))
    wrap(overlap.Overlap, "compiled", before=lambda self: ("compiles all landed",))
    wrap(gpu.WorkerBench, "measure", after=lambda b, s, self, cid, rnd: (
        f"batch r{rnd} {s:.3f} s n={len(b.samples_us)} {b.status}", cid))
    wrap(gpu.WorkerBench, "check", after=lambda c, s, self, cid: (f"check {s:.3f} s {c.status}", cid))
    wrap(race.Race, "_admit", after=lambda _, s, self, block: (
        f"admit(block={block}) {s:.3f} s; racing {len(self._racing())}",) if s > 0.01 or block else ("admit",))
    wrap(race.Race, "run", before=lambda self: ("race begins",), after=lambda o, s, self: (
        f"race ends after {s:.2f} s: {o.stop}, {len(o.rounds)} rounds",))
    wrap(pipeline, "_gpu", after=lambda g, s, *a, **k: (f"GPU info after waiting {s:.2f} s",))
    wrap(pipeline, "_finish", before=lambda *a, **k: ("finish (store, export) begins",),
         after=lambda _, s, *a, **k: (f"finish took {s:.2f} s",))
    wrap(static, "launch_facts", after=lambda f, s, plans, *a, **k: (
        f"launch_facts {s:.3f} s for {sum(len(p.candidates) for p in plans)} candidates",))
    wrap(pipeline, "tune", after=lambda r, s, *a, **k: (f"pipeline.tune returned after {s:.2f} s",))
    wrap(pipeline, "load_space", before=lambda *a, **k: ("load_space (the plan) begins",),
         after=lambda r, s, *a, **k: (f"load_space took {s:.2f} s",))
    from tileprobe.audit import pipeline as audit_pipeline
    from tileprobe.compile import pool
    real = pool.compile_variants

    def compile_variants(*a, **k):
        log("compile_variants begins")
        for res in real(*a, **k):
            log("compiled", res.status, f"worker {res.total_s or 0:.2f} s", f"export {res.export_s or 0:.2f} s",
                f"tileiras {res.compile_s or 0:.2f} s", dict(res.variant.hints), dict(res.variant.case))
            yield res
        log("compile_variants ends")
    from tileprobe.exec import local
    pool.compile_variants = audit_pipeline.compile_variants = local.compile_variants = compile_variants
    from tileprobe.probe import zygote
    wrap(zygote.Zygote, "start", before=lambda self, entry, *a, **k: (
        f"zygote fork of {entry} (torch_free={self.torch_free}, heavy={k.get('heavy', False)}) asked",),
        after=lambda r, s, self, entry, *a, **k: (f"zygote fork of {entry} took {s:.3f} s",))
    from tileprobe.compile import toolcache
    wrap(toolcache, "cached_default", after=lambda r, s: (f"toolcache default compiler: {'hit' if r else 'miss'}",))
    wrap(audit_pipeline, "load_probe_files", before=lambda *a, **k: ("audit's load_probe_files begins",),
         after=lambda r, s, *a, **k: (f"audit's load_probe_files took {s:.2f} s",))


def main() -> int:
    """Run the ``tileprobe`` command with the timeline installed."""
    log("python up; importing tileprobe")
    if len(sys.argv) > 1 and sys.argv[1] in ("tune", "audit"):   # as the console entry point (tileprobe/_entry.py)
        from tileprobe.probe.zygote import start_early
        log(f"zygote started early: {start_early()}")
    install()
    from tileprobe.cli import main as cli_main
    atexit.register(lambda: log("exit"))
    log("cli begins")
    code = cli_main(sys.argv[1:])
    log(f"cli returned {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
