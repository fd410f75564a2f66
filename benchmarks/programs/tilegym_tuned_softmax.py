"""Host code that reads a `tileprobe tune` table WITHOUT tileprobe and launches TileGym's softmax with the tuned hints.

What a program does with ``tileprobe tune --export tuned.json`` ("one recorded probe is tuned on the H200
and its export is read back by the recorded program"): the README's reader (copied verbatim below, between the
markers; ``tests/test_record_tune.py`` checks it is the README's) finds the row of ``_softmax_kernel`` for this
problem, and the kernel is launched as TileGym's ``_launch_softmax_kernel`` launches it (tilegym 1.5.1
``ops/cutile/softmax.py``: grid ``min(SMs x 4, rows)``, arguments ``(output, input, rows, next_power_of_2(cols),
cols)``), with ``_softmax_kernel.replace_hints(**hints)``. The output is checked against ``torch.softmax``; the tuned
and the declared configuration are timed alike (CUDA events around single launches, median of 50, after 10
warm-up launches; no L2 flush: a program's view, not the tune's figure).

    python benchmarks/programs/tilegym_tuned_softmax.py TUNED.json [--rows 4096 --cols 2048]
    python benchmarks/programs/tilegym_tuned_softmax.py TUNED.json --dry-run [--num-sms 132]    # no GPU: what it would launch

Prints one line; exit 0 when the row was found and (on a GPU) the output matches torch within 1e-4 (max abs).
"""
import argparse
import json
import statistics
import sys

KERNEL = "_softmax_kernel"
TOLERANCE = 1e-4


# --- tune-reader (README.md "Tuning", verbatim) ---
def tuned_config(path, kernel, arch=None, here=None, **problem):
    """(case values, hints) tuned for kernel at this problem (and arch), or None; ValueError if stale here."""
    with open(path) as f:
        table = json.load(f)
    assert table.get("schema_version") == 1, f"{path}: schema {table.get('schema_version')}; this reader knows 1"
    rows = [row for row in table["kernels"].get(kernel, []) if row["problem"] == problem and arch in (None, row["arch"])]
    stale = [[f"{k} {v} here, {row.get(k)} in {path}" for k, v in (here or {}).items() if str(v) not in str(row.get(k)).split(", ")] for row in rows]
    for row, why in zip(rows, stale):
        if not why: return row["case"], row["hints"]   # the first row that holds here (a merged table: one per GPU)
    if stale: raise ValueError(f"stale row for {kernel}: {' | '.join('; '.join(w) for w in stale)}: re-tune (tileprobe tune --refresh)")
# --- end tune-reader ---


def _time_us(launch, torch, reps: int = 50, warmup: int = 10) -> float:
    for _ in range(warmup):
        launch()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(samples)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("table", help="the JSON table `tileprobe tune --export` wrote")
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=2048)
    p.add_argument("--dry-run", action="store_true", help="no GPU: read the table, make the kernel, say the launch")
    p.add_argument("--num-sms", type=int, default=132, help="SM count for the grid in a dry run (H200: 132)")
    a = p.parse_args()
    found = tuned_config(a.table, KERNEL, N_ROWS=a.rows, DIM_COLS=a.cols)
    if found is None:
        print(f"host program: no row for {KERNEL} N_ROWS={a.rows} DIM_COLS={a.cols} in {a.table}")
        return 2
    case, hints = found
    hints = {k: v for k, v in hints.items() if v is not None}     # null: as the kernel declares
    import cuda.tile as ct
    from tilegym.ops.cutile.softmax import _softmax_kernel
    tuned = _softmax_kernel.replace_hints(**hints) if hints else _softmax_kernel
    tile = 1 << (a.cols - 1).bit_length()                          # TileGym's next_power_of_2(n_cols)
    said = " ".join(f"{k}={v}" for k, v in hints.items()) or "as declared"
    if a.dry_run:
        grid = (min(a.num_sms * 4, a.rows), 1, 1)
        assert "tileprobe" not in sys.modules
        print(f"host program (dry run): read {KERNEL} {said} from the table (case {case}); would launch "
              f"grid {grid} with (output, input, {a.rows}, {tile}, {a.cols}); tileprobe not imported")
        return 0
    import torch
    torch.manual_seed(0)
    x = torch.randn(a.rows, a.cols, device="cuda")
    y = torch.empty_like(x)
    grid = (min(torch.cuda.get_device_properties(0).multi_processor_count * 4, a.rows), 1, 1)
    stream = torch.cuda.current_stream()
    ct.launch(stream, grid, tuned, (y, x, a.rows, tile, a.cols))
    torch.cuda.synchronize()
    err = (y - torch.softmax(x, dim=-1)).abs().max().item()
    tuned_us = _time_us(lambda: ct.launch(stream, grid, tuned, (y, x, a.rows, tile, a.cols)), torch)
    declared_us = _time_us(lambda: ct.launch(stream, grid, _softmax_kernel, (y, x, a.rows, tile, a.cols)), torch)
    assert "tileprobe" not in sys.modules
    ok = err <= TOLERANCE
    print(f"host program: {KERNEL} {said} from the table, grid {grid}: max abs error {err:.3g} vs torch.softmax "
          f"({'ok' if ok else 'WRONG'}, tolerance {TOLERANCE}); median {tuned_us:.1f} us tuned vs "
          f"{declared_us:.1f} us as declared (50 launches each); tileprobe not imported")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
