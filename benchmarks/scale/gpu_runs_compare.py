"""Compare two `tileprobe run --json` results of one bundle: a one-worker run and a multi-worker run
(benchmarks/scale/run.sh). Prints, and writes as Markdown with ``--out``:

* statuses per variant: identical or not (the multi-GPU path must not change a variant's fate),
* which GPU ran each variant, and whether its timing was taken on a shared GPU (``shared_gpu``),
* ranked timings: the best-hint lines of each run (shared timings are never ranked),
* wall times (sweep, worker start-up apart) and the speed-up, clocks per GPU.

    python benchmarks/scale/gpu_runs_compare.py ONE.json MANY.json [--out FILE] [--expect shared|distinct]

Exit code 0 when the statuses match and (``--expect shared``) every timing of MANY is flagged shared and unranked,
(``--expect distinct``) none is; else 1.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tileprobe.run.session import best_hints  # noqa: E402
from tileprobe.schema import load, value_key  # noqa: E402


def _key(r) -> tuple:
    return (r.kernel, value_key(r.case), value_key(r.hints), r.arch)


def _label(r) -> str:
    return f"{r.kernel} {r.arch} {r.case} {r.hints}"


def compare(one_path: str, many_path: str, expect: str | None = None) -> dict:
    """The comparison as a dict: ``rows`` (label, status 1, status many, GPU, shared, µs 1, µs many), ``same_status``,
    ``shared_ok`` (the ``expect`` check), ``ranked`` (best-hint lines per run), ``wall_s`` and ``speedup``."""
    one, env1 = load(one_path)
    many, env2 = load(many_path)
    by_key = {_key(r): r for r in many if r.run}
    rows, same = [], True
    for r in one:
        if not r.run:
            continue
        m = by_key.get(_key(r))
        s1, s2 = r.run.status, (m.run.status if m else "missing")
        same &= s1 == s2
        gpu = (m.run.gpu or {}) if m else {}
        rows.append({"variant": _label(r), "status_one": s1, "status_many": s2,
                     "gpu": gpu.get("index") if isinstance(gpu, dict) else gpu,
                     "shared": bool(m and m.run.shared_gpu), "us_one": r.run.median_us,
                     "us_many": m.run.median_us if m else None})
    same &= len(by_key) == len(rows)
    timed = [x for x in rows if x["us_many"]]
    if expect == "shared":
        shared_ok = bool(timed) and all(x["shared"] for x in timed) and not best_hints(many)
    elif expect == "distinct":
        shared_ok = not any(x["shared"] for x in rows)
    else:
        shared_ok = True
    w1, w2 = _wall(env1), _wall(env2)
    return {"rows": rows, "same_status": same, "shared_ok": shared_ok, "n": len(rows),
            "ranked": {"one": len(best_hints(one)), "many": len(best_hints(many))},
            "wall_s": {"one": w1, "many": w2}, "speedup": (w1 / w2) if w1 and w2 else None,
            "gpus": env2.get("gpus") or [], "gpu_one": (env1.get("gpu") or {}).get("name"),
            "clocks_one": (env1.get("gpu") or {}).get("clocks")}


def _wall(env: dict):
    return (env.get("run") or {}).get("sweep_wall_s")


def markdown(c: dict) -> str:
    """The comparison as Markdown."""
    lines = [f"statuses identical: **{'yes' if c['same_status'] else 'NO'}** ({c['n']} variants); "
             f"shared/unranked check: **{'pass' if c['shared_ok'] else 'FAIL'}**",
             f"best-hint lines: one worker {c['ranked']['one']}, several workers {c['ranked']['many']}",
             f"sweep wall (worker start-up apart): one {c['wall_s']['one']} s, several {c['wall_s']['many']} s"
             + (f", speed-up {c['speedup']:.2f}x" if c["speedup"] else ""), "",
             "| worker GPU | index | shared | start-up s | variants run | clocks |", "|---|---|---|---|---|---|"]
    lines += [f"| {g.get('name')} | {g.get('index')} | {g.get('shared_gpu')} | {g.get('worker_start_s')} | "
              f"{g.get('ran')} | {g.get('clocks')} |" for g in c["gpus"]]
    lines += ["", "| variant | status (1 worker) | status (several) | GPU | shared | µs (1) | µs (several) |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {x['variant']} | {x['status_one']} | {x['status_many']} | {x['gpu']} | {x['shared']} | "
              f"{x['us_one']} | {x['us_many']} |" for x in c["rows"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("one")
    ap.add_argument("many")
    ap.add_argument("--out")
    ap.add_argument("--expect", choices=["shared", "distinct"])
    a = ap.parse_args(argv)
    c = compare(a.one, a.many, a.expect)
    text = markdown(c)
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0 if c["same_status"] and c["shared_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
