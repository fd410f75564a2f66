"""Run HERE (tileiras machine, no GPU): bundles for the register-pool check's GPU test.

    python benchmarks/audit/hang_bundles.py [OUT_DIR]      # default .gpu/hang-bundles (ignored by git, carried by the lead)

For sm_90 under tileiras 13.3.36 and 13.4.92 (managed toolchains: `tileprobe toolchain list`), audits with SASS
every probe of examples/*.py and benchmarks/probes/*.py (the results store is reused: TILEPROBE_STORE or the user
data dir) and writes one bundle per (probe, compiler) to OUT_DIR/<probe>-<version>/ (audit.json + cubins/):

* examples/rms_norm.py and examples/rms_norm_large.py: every variant (TMA on and off, occupancy 1–16);
* every other probe: only the variants whose SASS has USETMAXREG (register-pool verdict other than ``none``).

Order: the two seed probes under both compilers, then the other probes under 13.4.92, then under 13.3.36 (a bundle is
written as soon as its probe is audited, so an interrupted run keeps what it made; run it again to go on: the store
keeps every compile).

Then prints each kept variant's prediction (hang_risk / pool_ok / unknown / none) and the bundles' total size.
`benchmarks/audit/run.sh OUT hangs` runs the bundles on the H200 with --run-hang-risk and prints prediction vs outcome.
"""
from __future__ import annotations

import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

VERSIONS = ("13.3.36", "13.4.92")
ALL_VARIANTS = ("rms_norm.py", "rms_norm_large.py")


def main(out_dir: str) -> int:
    from tileprobe.audit import audit
    from tileprobe.audit.pipeline import AuditResult, write_bundle
    from tileprobe.store import Store
    from tileprobe.toolchain import resolve_toolchains
    probes = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py"))) + \
        sorted(glob.glob(os.path.join(ROOT, "benchmarks", "probes", "*.py")))
    store = Store.open(os.environ.get("TILEPROBE_STORE") or None)
    rows, total = [], 0
    seeds = [p for p in probes if os.path.basename(p) in ALL_VARIANTS]
    others = [p for p in probes if p not in seeds]
    # the seed kernels under both compilers first, then the others (13.4.92's are usually stored already)
    order = [(v, p) for v in VERSIONS for p in seeds] + [(v, p) for v in reversed(VERSIONS) for p in others]
    for version, probe in order:
        tcs = resolve_toolchains([version])
        name = os.path.splitext(os.path.basename(probe))[0]
        res = audit([probe], ["sm_90"], toolchains=tcs, with_sass=True, store=store)
        keep = [r for r in res.records if r.ok and (os.path.basename(probe) in ALL_VARIANTS
                                                      or r.pool_verdict not in (None, "none"))]
        for e in res.probe_errors:
            print(f"{name} {version}: probe error: {e.splitlines()[0][:160]}", file=sys.stderr)
        if not keep:
            print(f"{name} {version}: no variant with USETMAXREG ({len(res.records)} audited)", file=sys.stderr)
            continue
        folder = os.path.join(out_dir, f"{name}-{version}")
        shas = {r.cubin_sha256 for r in keep}
        cubins = {s: (res.cubins.get(s) or store.cubin(s)) for s in shas}
        write_bundle(folder, AuditResult(records=keep, environment=res.environment,
                                         cubins={s: c for s, c in cubins.items() if c is not None}))
        size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(folder, "**"), recursive=True)
                   if os.path.isfile(p))
        total += size
        for r in keep:
            rows.append((name, version, " ".join(f"{k}={v}" for k, v in {**r.case, **r.hints}.items()),
                         r.registers, r.threads, r.pool_verdict or "-"))
        print(f"{folder}: {len(keep)} variants, {size / 2**20:.1f} MiB", file=sys.stderr)
    print(f"{'probe':<24} {'tileiras':<9} {'variant':<60} {'regs':>4} {'thr':>4} prediction")
    for row in rows:
        print(f"{row[0]:<24} {row[1]:<9} {row[2][:60]:<60} {row[3]:>4} {row[4]:>4} {row[5]}")
    counts: dict = {}
    for row in rows:
        counts[row[5]] = counts.get(row[5], 0) + 1
    print(f"{len(rows)} variants in bundles ({', '.join(f'{n} {v}' for v, n in sorted(counts.items()))}); "
          f"total {total / 2**20:.1f} MiB under {out_dir}")
    import tarfile
    packed = out_dir.rstrip("/") + ".tar.xz"
    with tarfile.open(packed, "w:xz") as tar:
        tar.add(out_dir, arcname=os.path.basename(out_dir.rstrip("/")))
    print(f"packed: {packed} {os.path.getsize(packed) / 2**20:.1f} MiB (`benchmarks/audit/run.sh OUT hangs` takes it as BUNDLES)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".gpu", "hang-bundles")))
