"""Tune tables written by many processes at once, and tables of several GPUs merged (tileprobe.tune.table_store,
``tileprobe table merge``)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tileprobe.cli import main
from tileprobe.tune.export import merged_document, read_table
from tileprobe.tune.table_store import merge_tables, update_table

ROOT = Path(__file__).resolve().parents[1]


def _row(problem: dict, tile: int, gpu: str = "NVIDIA H200", sms: int = 132, **extra) -> dict:
    return {"problem": problem, "case": {"TILE": tile}, "hints": {"occupancy": None}, "verdict": "winner",
            "median_us": 10.0 + tile / 1000, "ci_us": [9.9, 10.1], "samples": 40, "tie": [], "arch": "sm_90",
            "gpu": gpu, "num_sms": sms, "tileiras": "Cuda compilation tools, release 13.4, V13.4.92",
            "cuda_tile": "1.7.0", "timing": "sustained", **extra}


def _table(path: Path, rows: dict, gpu: str = "NVIDIA H200") -> Path:
    doc = {"schema_version": 1, "kind": "tileprobe.tune", "tool": "tileprobe test", "created": "2026-12-05T00:00:00Z",
           "provenance": {"gpu": gpu, "arch": "sm_90"}, "kernels": rows}
    path.write_text(json.dumps(doc))
    return path


# --- merge ------------------------------------------------------------------------------------------------------

def test_a_merge_of_two_gpus_tables_keeps_both_rows_of_one_problem(tmp_path, capsys):
    a = _table(tmp_path / "h200.json", {"vadd": [_row({"N": 4096}, 512), _row({"N": 1000}, 256)]})
    b = _table(tmp_path / "h100.json", {"vadd": [_row({"N": 4096}, 1024, gpu="NVIDIA H100 80GB HBM3", sms=132)],
                                        "rms": [_row({"M": 8}, 128, gpu="NVIDIA H100 80GB HBM3")]},
               gpu="NVIDIA H100 80GB HBM3")
    out = tmp_path / "both.json"
    assert main(["table", "merge", str(a), str(b), "-o", str(out)]) == 0
    doc = read_table(str(out))
    picks = sorted((r["gpu"], r["problem"]["N"], r["case"]["TILE"]) for r in doc["kernels"]["vadd"])
    assert picks == [("NVIDIA H100 80GB HBM3", 4096, 1024), ("NVIDIA H200", 1000, 256), ("NVIDIA H200", 4096, 512)]
    assert [r["case"] for r in doc["kernels"]["rms"]] == [{"TILE": 128}]
    assert [p["gpu"] for p in doc["provenance"]["merged"]] == ["NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    assert f"{out}: 4 row(s) from {a}: 2, {b}: 2" in capsys.readouterr().out


def test_an_exact_duplicate_is_kept_once_and_rows_of_another_compiler_are_kept(tmp_path):
    a = _table(tmp_path / "a.json", {"vadd": [_row({"N": 4096}, 512)]})
    b = _table(tmp_path / "b.json", {"vadd": [_row({"N": 4096}, 512),
                                              _row({"N": 4096}, 256, tileiras="Cuda compilation tools, release 13.5, "
                                                                              "V13.5.37")]})
    result = merge_tables([(str(a), read_table(str(a))), (str(b), read_table(str(b)))], merged_document)
    assert result.duplicates == 1 and not result.conflicts and result.rows_from == {str(a): 1, str(b): 2}
    assert [(r["tileiras"][-8:], r["case"]["TILE"]) for r in result.doc["kernels"]["vadd"]] == \
        [("V13.4.92", 512), ("V13.5.37", 256)]
    assert result.doc["provenance"] == {"gpu": "NVIDIA H200", "arch": "sm_90"}     # one source provenance: kept


def test_a_conflicting_row_is_refused_with_the_reason_and_nothing_is_written(tmp_path, capsys):
    a = _table(tmp_path / "a.json", {"vadd": [_row({"N": 4096}, 512)]})
    b = _table(tmp_path / "b.json", {"vadd": [_row({"N": 1}, 64), _row({"N": 4096}, 1024)]})
    out = tmp_path / "c.json"
    out.write_text("keep me")
    assert main(["table", "merge", str(a), str(b), "-o", str(out)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"{a}: kernels.vadd[0] picks" in err and f"{b}: kernels.vadd[1] picks" in err, err
    assert '"TILE":512' in err and '"TILE":1024' in err and "gpu=NVIDIA H200" in err and "nothing written" in err
    assert out.read_text() == "keep me"


def test_merge_refuses_a_file_that_is_not_a_table(tmp_path, capsys):
    a = _table(tmp_path / "a.json", {"vadd": [_row({"N": 4096}, 512)]})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "something"}))
    assert main(["table", "merge", str(a), str(bad), "-o", str(tmp_path / "c.json")]) == 1
    assert "bad.json: not a schema-1 tileprobe tune table" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()


# --- concurrent writers -----------------------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from tileprobe.tune.export import read_table
    from tileprobe.tune.table_store import update_table
    path, me, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    base = {"schema_version": 1, "kind": "tileprobe.tune", "provenance": {}, "kernels": {}}
    for i in range(n):
        def change(doc):
            doc = doc or dict(base, kernels={})
            rows = doc["kernels"].setdefault(f"k{me % 3}", [])
            rows.append({"problem": {"writer": me, "i": i}, "case": {"T": i}, "pad": "x" * 2000})
            return doc
        update_table(path, change, read_table)
    """)

READER = textwrap.dedent("""
    import json, sys, time
    path, seconds = sys.argv[1], float(sys.argv[2])
    end, reads = time.time() + seconds, 0
    while time.time() < end:
        try:
            text = open(path).read()
        except FileNotFoundError:
            continue
        json.loads(text)          # a torn file raises here
        reads += 1
    print(reads)
    """)


@pytest.mark.parametrize("writers, each", [(8, 15)])
def test_many_writers_lose_no_row_and_a_reader_never_sees_a_torn_table(tmp_path, writers, each):
    path = tmp_path / "shared.json"
    env_py = [sys.executable, "-c"]
    reader = subprocess.Popen([*env_py, READER, str(path), "6"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    procs = [subprocess.Popen([*env_py, WRITER, str(path), str(w), str(each)], cwd=ROOT) for w in range(writers)]
    assert [p.wait(timeout=300) for p in procs] == [0] * writers
    out, _ = reader.communicate(timeout=60)
    assert reader.returncode == 0 and int(out) > 0
    doc = read_table(str(path))
    seen = sorted((r["problem"]["writer"], r["problem"]["i"]) for rows in doc["kernels"].values() for r in rows)
    assert seen == [(w, i) for w in range(writers) for i in range(each)]
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]     # no temporary file left behind


def test_a_failed_change_writes_nothing(tmp_path):
    path = _table(tmp_path / "t.json", {"vadd": [_row({"N": 1}, 64)]})
    before = path.read_text()

    def change(doc):
        raise RuntimeError("no")
    with pytest.raises(RuntimeError):
        update_table(str(path), change, read_table)
    assert path.read_text() == before and not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_exporting_into_a_merged_table_replaces_only_this_gpus_row(tmp_path):
    """A tune on the H100 writing into a table that also holds the H200's row of the same problem and arch."""
    from types import SimpleNamespace

    from tileprobe.tune.export import write_export
    path = _table(tmp_path / "both.json", {"vadd": [_row({"N": 4096}, 512), _row({"N": 4096}, 256,
                                                                                gpu="NVIDIA H100 80GB HBM3")]})
    pick = SimpleNamespace(config={"case": {"TILE": 1024}, "hints": {"occupancy": None}}, median_us=9.0,
                           ci_lo_us=8.9, ci_hi_us=9.1, n=40, final_us=None, label="TILE=1024", check=None)
    problem = SimpleNamespace(kernel="vadd", problem={"N": 4096}, pick=pick, verdict="winner", tie=[], arch="sm_90",
                              candidates=[pick],
                              tileiras="Cuda compilation tools, release 13.4, V13.4.92", cuda_tile="1.7.0")
    env = {"gpu": {"name": "NVIDIA H100 80GB HBM3"}, "num_sms": 132, "arch": "sm_90", "timing": "sustained"}
    write_export(SimpleNamespace(problems=[problem], environment=env), str(path))
    rows = read_table(str(path))["kernels"]["vadd"]
    assert sorted((r["gpu"], r["case"]["TILE"]) for r in rows) == [("NVIDIA H100 80GB HBM3", 1024), ("NVIDIA H200", 512)]


def test_the_readme_reader_takes_this_gpus_row_of_a_merged_table_and_refuses_when_none_holds(tmp_path):
    import re
    readme = (ROOT / "README.md").read_text()
    snippet = re.search(r"<!-- tune-reader -->\s*```python\n(.*?)```", readme, re.S).group(1)
    scope: dict = {}
    exec(compile(snippet, "README.md", "exec"), scope)
    path = _table(tmp_path / "both.json", {"vadd": [_row({"N": 4096}, 512), _row({"N": 4096}, 256,
                                                                                gpu="NVIDIA H100 80GB HBM3")]})
    reader = scope["tuned_config"]
    assert reader(str(path), "vadd", here={"gpu": "NVIDIA H100 80GB HBM3"}, N=4096)[0] == {"TILE": 256}
    assert reader(str(path), "vadd", here={"gpu": "NVIDIA H200"}, N=4096)[0] == {"TILE": 512}
    with pytest.raises(ValueError, match="gpu NVIDIA B200 here, NVIDIA H200 in .* \\| gpu NVIDIA B200 here, NVIDIA H100"):
        reader(str(path), "vadd", here={"gpu": "NVIDIA B200"}, N=4096)
    assert reader(str(path), "vadd", N=1) is None


def test_merging_one_table_is_a_usage_error(tmp_path, capsys):
    """``table merge A -o C``: a usage error (exit 2, as the README's exit codes say), nothing written."""
    from tileprobe.cli import main
    a = _table(tmp_path / "a.json", {"vadd": [_row({"N": 4096}, 512)]})
    assert main(["table", "merge", str(a), "-o", str(tmp_path / "c.json")]) == 2
    assert "give two tables or more" in capsys.readouterr().err and not (tmp_path / "c.json").exists()
