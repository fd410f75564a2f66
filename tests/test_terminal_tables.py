"""Terminal output: audit tables that keep the numbers that matter at 100 and 120 columns (golden files),
the one-line summary, ``--where`` / ``--case`` / ``--hint`` parsing, and the Markdown bug report.

Golden files: ``tests/data/golden/audit_tables_{100,120}.txt``, the tables of every bundled probe's audit on sm_90,
sm_100 and sm_120 (tileiras 13.4.92, ``tests/data/examples_records_2026-12-01.json``: no compile). After an
intended change, rewrite them with ``TILEPROBE_UPDATE_GOLDEN=1 pytest tests/test_terminal_tables.py`` and read the
diff.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from rich.console import Console

from tileprobe.judge.verdict import judge_records
from tileprobe.records import SassFacts
from tileprobe.report.common import group_tables, variant_label
from tileprobe.report.terminal import render_audit, summary_lines
from tileprobe.schema import VariantRecord, VariantRun, Verdict, load
from tileprobe.select import (
    WhereError,
    apply_overrides,
    format_value,
    parse_overrides,
    parse_where,
    select,
    select_or_explain,
)

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "tests" / "data" / "examples_records_2026-12-01.json"
GOLDEN = ROOT / "tests" / "data" / "golden"
B134 = "Cuda compilation tools, release 13.4, V13.4.92"


@pytest.fixture(scope="module")
def examples():
    recs, _ = load(str(RECORDS), judge=judge_records)
    judge_records(recs)
    return recs


def _render(records, width: int, **kw) -> str:
    con = Console(width=width, record=True, force_terminal=False, color_system=None, highlight=False,
                  file=open(os.devnull, "w"))
    render_audit(records, con, reasons=False, **kw)
    return "\n".join(line.rstrip() for line in con.export_text().splitlines()) + "\n"


@pytest.mark.parametrize("width", [100, 120])
def test_audit_tables_golden(examples, width):
    text = _render(examples, width)
    path = GOLDEN / f"audit_tables_{width}.txt"
    if os.environ.get("TILEPROBE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("width", [100, 120])
def test_the_numbers_that_matter_are_always_whole(examples, width):
    """Every table fits, no cell is truncated, and each row shows its registers, shared memory, CTAs/SM and
    verdict in full."""
    for (kernel, _build, arch), rows in group_tables(examples).items():
        text = _render(rows, width)
        lines = text.splitlines()
        assert max(map(len, lines)) <= width and "…" not in text, (kernel, arch)
        header = " ".join(" ".join(ln.split()) for ln in lines if ln.startswith("┃"))
        for name in ("regs", "smem B", "(cubin)", "CTAs/SM", "verdict"):
            assert name in header, (kernel, arch, name)
        body = [" ".join(w for w in ln.split() if w != "│") for ln in lines if ln.startswith("│")]
        assert len(body) == len(rows)
        for r, row in zip(rows, body):
            if r.ok:
                assert f" {r.registers} {r.shared_bytes:,} " in f" {row} ", (kernel, arch, row)
                assert re.search(rf"\b{r.ctas_per_sm}\b", row)


def test_narrow_tables_abbreviate_drop_and_say_so(examples):
    rows = [r for r in examples if r.kernel == "w4a16_gemm" and r.arch == "sm_120"]
    wide = _render(rows, 100, wide=True)
    narrow = _render(rows, 100)
    assert "not shown" not in wide and "TMA" in wide and "MMA" in wide and "IGNORED" not in wide
    assert "ignored" in wide and max(map(len, wide.splitlines())) > 100          # --wide: every column, any width
    assert "verdicts: hon honoured · IGN ignored" in narrow
    assert "not shown at 100 columns: MMA, TMA, stack B (--wide shows every column)" in narrow
    assert "not shown" not in _render(rows, 200) and "verdicts:" not in _render(rows, 200)


def test_summary_one_line_per_kernel_arch_and_compiler(examples):
    lines = summary_lines(examples)
    assert len(lines) == len(group_tables(examples))
    w4 = next(ln for ln in lines if ln.startswith("w4a16_gemm ") and " sm_120 " in ln)
    assert w4.endswith("sm_120 tileiras 13.4.92: 12 variants, regs 128–255, CTAs/SM 1–2, 6 spilling; "
                       "occupancy 4 met, 3 honoured, 5 IGNORED")
    failed = next(ln for ln in lines if ln.startswith("w4a16_gemm ") and " sm_90 " in ln)
    assert failed.endswith("sm_90  tileiras 13.4.92: 12 variants, 12 failed (12 compile_error)")   # as classified when recorded


# --- --where, --case, --hint ----------------------------------------------------------------------------------------

def _rec(tile, occ) -> VariantRecord:
    return VariantRecord(kernel="k", probe="p.py", case={"TILE": list(tile), "DT": "fp16"}, hints={"occupancy": occ},
                         arch="sm_90", tileiras=B134, status="ok")


def test_where_reads_tuples_as_tables_print_them_and_as_python():
    recs = [_rec(t, o) for t in ((64, 64), (128, 128)) for o in (1, 2)]
    for text in ("TILE=128×128,occupancy=2", "TILE=(128,128),occupancy=2", "TILE=[128, 128], occupancy=2",
                 "TILE=128x128,occupancy=2", "occupancy=2,TILE=(128, 128)"):
        assert [(r.case["TILE"], r.hints["occupancy"]) for r in select(recs, parse_where(text))] == [([128, 128], 2)]
    assert parse_where("DT=fp16,X='a,b',Y=(1,2)") == {"DT": "fp16", "X": "a,b", "Y": [1, 2]}
    assert format_value([128, 128]) == "128×128" and variant_label(recs[0]) == "TILE=64×64 DT=fp16 occupancy=1"
    assert parse_where(variant_label(recs[0]).replace(" ", ",")) == {"TILE": [64, 64], "DT": "fp16", "occupancy": 1}
    with pytest.raises(WhereError, match=r"TILE=32×32 matches none of the 4 variant\(s\); TILE takes 64×64, 128×128"):
        select_or_explain(recs, parse_where("TILE=32×32"))
    with pytest.raises(WhereError, match="'TILE' is not NAME=VALUE"):
        parse_where("TILE")


def test_case_and_hint_overrides():
    from tileprobe.probe.define import Probe
    assert parse_overrides(["TILE=128×128,(256,256)", "occupancy=1,2"], "--case") == {
        "TILE": [[128, 128], [256, 256]], "occupancy": [1, 2]}
    p = Probe(kernel="x.py:k", args=lambda case, arrays: (), cases={"TILE": [(64, 64)], "DT": ["fp16"]},
              hints={"occupancy": [1]})
    p.source, p.index = "/tmp/probe.py", 3
    (q,) = apply_overrides([p], {"TILE": [[128, 128]]}, {"occupancy": [2, 4], "num_ctas": [2]})
    assert q.cases == {"TILE": [(128, 128)], "DT": ["fp16"]} and q.hints == {"occupancy": [2, 4], "num_ctas": [2]}
    assert (q.source, q.index) == ("/tmp/probe.py", 3) and p.hints == {"occupancy": [1]}
    with pytest.raises(WhereError, match=r"--case names 'NOPE', which no probe declares in cases= \(DT, TILE\)"):
        apply_overrides([p], {"NOPE": [1]})
    with pytest.raises(WhereError, match="--hint 'occupancy': write NAME=V1,V2"):
        parse_overrides(["occupancy"], "--hint")
    with pytest.raises(WhereError) as e:
        apply_overrides([p], {"TILES": [1]})
    assert str(e.value) == "--case names 'TILES' (did you mean 'TILE'?), which no probe declares in cases= (DT, TILE)"


def test_a_case_value_of_the_wrong_kind_is_read_or_refused_by_name():
    """A new user (session 17): ``--case ALLOW_TMA=Ture`` reached the kernel as the string 'Ture' and cuTile's
    refusal was reported as the probe's error. A boolean constant now reads true/false in any case and refuses other
    text naming the constant, its values and the near spelling; so does a constant of whole numbers."""
    from tileprobe.probe.define import Probe
    p = Probe(kernel="x.py:k", args=lambda case, arrays: (), cases={"ALLOW_TMA": [True, False], "TILE": [64, 128],
                                                                    "DT": ["fp16"]})
    for check in (True, False):     # the loader child applies them with check=False: the values are checked there too
        (q,) = apply_overrides([p], {"ALLOW_TMA": ["true", "FALSE", True]}, check=check)
        assert q.cases["ALLOW_TMA"] == [True, False, True]
        with pytest.raises(WhereError) as e:
            apply_overrides([p], {"ALLOW_TMA": ["Ture"]}, check=check)
        assert str(e.value) == ("--case ALLOW_TMA=Ture: ALLOW_TMA takes True or False (the probe's values: True, "
                                "False), not the text 'Ture' (did you mean 'True'?)")
        with pytest.raises(WhereError, match=r"TILE takes whole numbers \(the probe's values: 64, 128\)"):
            apply_overrides([p], {"TILE": ["big"]}, check=check)
        for other, shown in ((None, "not None"), (1, "not 1"), ([0, 1], "not [0, 1]")):   # hostile test, session 17
            with pytest.raises(WhereError, match=rf"ALLOW_TMA takes True or False .*{re.escape(shown)}$"):
                apply_overrides([p], {"ALLOW_TMA": [other]}, check=check)
    (q,) = apply_overrides([p], {"DT": ["bf16"], "TILE": [256]})     # text where the probe has text; a new number
    assert q.cases["DT"] == ["bf16"] and q.cases["TILE"] == [256]


def test_close_names_and_targets_say_did_you_mean():
    from tileprobe.errors import TileprobeError
    from tileprobe.model.arch import TILEIRAS_TARGETS, check_target
    from tileprobe.select import check_names
    with pytest.raises(WhereError) as e:
        check_names({"occupncy": 2, "NOPE": 1}, ["TILE"], ["occupancy", "num_ctas"])
    assert str(e.value) == ("--where names 'occupncy' (did you mean 'occupancy'?), 'NOPE', which is neither a case "
                            "constant of the probe (TILE) nor a hint (occupancy, num_ctas)")
    targets = ", ".join(TILEIRAS_TARGETS)
    for typed, near in (("sm90", "sm_90"), ("sm-120", "sm_120")):
        with pytest.raises(TileprobeError) as e:
            check_target(typed)
        assert str(e.value) == f"{typed!r} is not a target tileiras lists (did you mean {near!r}?); targets: {targets}"
    with pytest.raises(TileprobeError) as e:           # a real target tileiras does not list: no look-alike
        check_target("sm_75")
    assert str(e.value) == f"'sm_75' is not a target tileiras lists; targets: {targets}"


# --- Markdown for a compiler bug report -----------------------------------------------------------------------------

def test_markdown_bug_report_has_problems_environment_versions_and_the_probe(tmp_path):
    from tileprobe.report.markdown import audit_markdown
    probe = tmp_path / "probe_w4.py"
    probe.write_text("from tileprobe import Probe\nprobe = Probe(kernel='k.py:w4', args=lambda c, a: ())\n")
    ok = VariantRecord(kernel="w4", probe=str(probe), case={"G": True}, hints={"occupancy": 2}, arch="sm_120",
                       tileiras=B134, status="ok", threads=384, registers=168, shared_bytes=100_484, stack_bytes=0,
                       ctas_per_sm=1, limiter="registers",
                       verdicts={"occupancy": Verdict("ignored", "same machine code as occupancy=1")})
    bad = [VariantRecord(kernel="w4", probe=str(probe), case={"G": g}, hints={"occupancy": 1}, arch="sm_90",
                         tileiras=B134, status="compile_error", error="Traceback\nUnsupportedFeatureError: fp4",
                         repro="tileiras in.bc --gpu-name sm_90 -o out.cubin") for g in (True, False)]
    md = audit_markdown([ok, *bad], {"tileprobe": "0.1.0", "cuda_tile": "1.7.0"}, command="tileprobe audit p.py")
    order = [md.index(s) for s in ("- cuda_tile: 1.7.0", f"- compiler: tileiras 13.4.92 (`{B134}`)",
                                   "Reproduce:", "### What went wrong", "### w4 · sm_120", "### The probe")]
    assert order == sorted(order)
    problems = md[md.index("### What went wrong"):md.index("### w4 ·")]
    assert "**w4 · sm_90 · tileiras 13.4.92: compile_error** in 2 variant(s): G=True occupancy=1; G=False" in problems
    assert problems.count("UnsupportedFeatureError: fp4") == 1
    assert "repeat: `tileiras in.bc --gpu-name sm_90 -o out.cubin`" in problems
    assert "G=True occupancy=2: **occupancy ignored**: same machine code as occupancy=1" in problems
    assert f"`{probe}`:\n\n```python\nfrom tileprobe import Probe\n" in md


# --- the small lines -------------------------------------------------------------------------------------------------

def test_compile_count_line_says_what_comes_from_the_store():
    from tileprobe.cli._common import compiling_line
    assert compiling_line(0, 16) == "nothing to compile: all 16 variants from the store"
    assert compiling_line(4, 12) == "compiling 4 variants (12 from the store) …"
    assert compiling_line(1, 0) == "compiling 1 variant …"
    assert compiling_line(3, 1, "tileiras 13.3.36") == "tileiras 13.3.36: compiling 3 variants (1 from the store) …"
    assert compiling_line(0, 1, "tileiras 13.4.92") == "tileiras 13.4.92: nothing to compile: 1 variant from the store"


class _Clock:
    """A fake :func:`time.monotonic`: the test moves ``t`` (seconds)."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _piped():
    """A console that is not a terminal (as under ``| tee``), writing into a buffer."""
    import io
    buf = io.StringIO()
    return Console(file=buf, width=200, highlight=False), buf


def test_piped_audit_prints_a_plain_progress_line_after_10_s_then_at_most_every_15_s():
    """README's first command under ``| tee`` printed nothing for 6 minutes (a new user, 2026-12-02): without a
    terminal there is no bar, so plain lines, from the first finished compile 10 s in, then ≥ 15 s apart; a second
    compiler's stage starts its own count and clock."""
    from tileprobe.cli._common import CompileTicker, progress_bar
    con, buf = _piped()
    clock = _Clock()
    prog, cb = progress_bar(con, CompileTicker(con, clock=clock))
    with prog:
        cb("compiler", "tileiras 13.4.92"), cb("stored", 2), cb("total", 20)
        for k in range(1, 21):            # a compile lands every 3 s: 3, 6, … 60 s
            clock.t += 3
            if k in (3, 10):
                cb("failed", 1)
            cb("advance", 1)
        cb("compiler", "tileiras 13.3.36"), cb("stored", 0), cb("total", 3)
        for _ in range(3):                # 9 s in all: shorter than the first interval
            clock.t += 3
            cb("advance", 1)
    assert buf.getvalue().splitlines() == [
        "tileiras 13.4.92: compiling 20 variants (2 from the store) …",
        "tileiras 13.4.92: compiled 4/20 variants (1 failed), 12 s",
        "tileiras 13.4.92: compiled 9/20 variants (1 failed), 27 s",
        "tileiras 13.4.92: compiled 14/20 variants (2 failed), 42 s",
        "tileiras 13.4.92: compiled 19/20 variants (2 failed), 57 s",
        "tileiras 13.3.36: compiling 3 variants …"]


def test_a_piped_audit_shorter_than_10_s_prints_no_progress_line():
    from tileprobe.cli._common import CompileTicker, progress_bar
    con, buf = _piped()
    clock = _Clock()
    prog, cb = progress_bar(con, CompileTicker(con, clock=clock))
    with prog:
        cb("compiler", "tileiras 13.4.92"), cb("stored", 0), cb("total", 274)
        for _ in range(274):
            clock.t += 9.9 / 274
            cb("failed", 1), cb("advance", 1)
    assert buf.getvalue() == "tileiras 13.4.92: compiling 274 variants …\n"


def test_piped_tune_prints_plain_compile_progress_lines():
    """``tileprobe tune``'s compile stage goes through the audit's callback (``("compile", (kind, n))``)."""
    from tileprobe.cli._common import CompileTicker
    from tileprobe.cli.tune import _progress
    con, buf = _piped()
    clock = _Clock()
    cb = _progress(con, CompileTicker(con, noun="candidates", clock=clock))
    cb("compile", ("compiler", "tileiras 13.4.92")), cb("compile", ("stored", 0)), cb("compile", ("total", 40))
    for k in range(1, 41):                 # a compile every second
        clock.t += 1
        if k == 2:
            cb("compile", ("failed", 1))
        cb("compile", ("advance", 1))
    assert buf.getvalue().splitlines() == ["compiling 40 candidates …",
                                           "compiled 10/40 candidates (1 failed), 10 s",
                                           "compiled 25/40 candidates (1 failed), 25 s",
                                           "compiled 40/40 candidates (1 failed), 40 s"]


def test_the_audit_says_which_compiles_failed_before_counting_them(tmp_path):
    """The pipeline's callback: ("failed", 1) before the ("advance", 1) of a compile that failed (cuTile refuses
    float4_e2m1fn on sm_90: compile_error, counted as failed by the summary line), none for one that compiled."""
    from tileprobe.audit.pipeline import audit
    events = []
    audit([str(ROOT / "tests" / "data" / "probe_failures.py")], ["sm_90"], jobs=1,
          progress=lambda kind, n: events.append((kind, n)))
    assert events == [("compiler", "tileiras 13.4.92"), ("stored", 0), ("total", 1), ("failed", 1), ("advance", 1)]


def test_repeat_prints_a_line_when_the_compiles_agree_too():
    from tileprobe.cli.audit import repeat_line
    same = [_rec((64, 64), o) for o in (1, 2)]
    for r in same:
        r.deterministic, r.code_hashes = True, ["a"]
    assert repeat_line(same, 3) == "repeat 3: each of the 2 compiled variant(s) gave the same machine code in all 3 compiles"
    same[1].deterministic, same[1].code_hashes = False, ["a", "b"]
    assert repeat_line(same, 3) == ("repeat 3: 1 of 2 compiled variant(s) gave different machine code between compiles: "
                                    "k sm_90 TILE=64×64 DT=fp16 occupancy=2 (2 codes)")


def test_run_best_lines_name_the_compiler_and_advice_says_1_cta():
    from tileprobe.judge.advice import advice
    from tileprobe.report.common import best_lines
    recs = []
    for build, us in ((B134, (900.0, 610.0)), ("Cuda compilation tools, release 13.3, V13.3.36", (905.0, 880.0))):
        for occ, t in zip((1, 2), us):
            r = _rec((64, 64), occ)
            r.tileiras, r.threads, r.registers, r.shared_bytes, r.stack_bytes = build, 384, 168, 1000, 0
            r.ctas_per_sm, r.limiter = 1, "registers"
            r.run = VariantRun(status="ok", median_us=t)
            recs.append(r)
    from tileprobe.run.session import best_hints
    lines = best_lines(best_hints(recs))
    assert lines == ["k sm_90 tileiras 13.4.92 TILE=64×64 DT=fp16: best occupancy=2 610.0 µs, 1.48× vs default "
                     "occupancy=1 900.0 µs",
                     "k sm_90 tileiras 13.3.36 TILE=64×64 DT=fp16: best occupancy=2 880.0 µs, 1.03× vs default "
                     "occupancy=1 905.0 µs"]
    judge_records(recs)
    text = " ".join(advice(recs))
    assert "1 CTA/SM, 168 registers" in text and "1 CTAs/SM" not in text


def test_compare_reads_spills_from_the_sass():
    from tileprobe.analyses.compare import compare_records
    a, b = _rec((64, 64), 2), _rec((64, 64), 2)
    for r, stack, spills in ((a, 0, (0, 0)), (b, 408, (171, 122))):
        r.threads, r.registers, r.shared_bytes, r.stack_bytes, r.ctas_per_sm = 384, 168, 1000, stack, 1
        r.sass = SassFacts(spill_loads=spills[0], spill_stores=spills[1])
    b.tileiras = "Cuda compilation tools, release 13.4, V13.4.93"
    (ch,) = compare_records([a], [b])
    assert ch.kind == "regression" and ch.details == ["spills 0 → 171 LDL/122 STL"]
    a.sass = b.sass = None
    (ch,) = compare_records([a], [b])
    assert ch.details == ["stack 0 → 408 B (new stack use, SASS not read: spills or a local array)"]


def test_tune_space_takes_where_and_overrides():
    from tileprobe.tune.static import load_space
    probe = str(ROOT / "tests" / "data" / "faulty_tune.py")
    full, errors = load_space([probe])
    assert not errors
    n = sum(len(p.configs) for p in full)
    (only,) = [p.configs for p in load_space([probe], where={"TILE": 1024, "MODE": 0})[0]]
    assert [c.label for c in only] == ["TILE=1024 MODE=0"] and n > 1
    over, _ = load_space([probe], cases={"TILE": [1024]}, hints={"occupancy": [1, 2]})
    assert {dict(c.tunables)["TILE"] for p in over for c in p.configs} == {1024}
    assert {c.hints_dict["occupancy"] for p in over for c in p.configs} == {1, 2}
    with pytest.raises(WhereError, match="matches no configuration to tune; TILE takes 256, 1024"):
        load_space([probe], where={"TILE": 512})


@pytest.mark.parametrize("columns, width", [("100", 100), (None, 200), ("0", 200), ("wide", 200), (" 90 ", 90),
                                            ("²", 200), ("١٠٠", 200), ("-5", 200)])
def test_piped_output_is_as_wide_as_columns_says(monkeypatch, capsys, columns, width):
    """Not a terminal (capsys): ``$COLUMNS`` when it is a positive whole number, else 200 columns."""
    from tileprobe.cli._common import console
    if columns is not None:
        monkeypatch.setenv("COLUMNS", columns)
    assert console().width == width and console(stderr=True).width == width


def test_a_variant_whose_sass_was_not_read_says_so(examples):
    """nvdisasm 13.4/13.5 reject some tileiras 13.4.92 cubins (TileGym's clustered persistent matmul, sm_90,
    occupancy=2: "Opclass 'nop_', undefined value 0x10"): the table's '-' gets a reason line and --summary a count."""
    import copy
    rows = [copy.deepcopy(r) for r in examples if r.kernel == "rms_norm" and r.arch == "sm_90"]
    rows[1].sass = SassFacts(error="nvdisasm could not decode the cubin (exit 1): nvdisasm error : Opclass 'nop_'")
    con = Console(width=200, record=True, color_system=None, file=open(os.devnull, "w"))
    render_audit(rows, con, reasons=True, brief=True)
    out = con.export_text()
    assert (f"  {variant_label(rows[1])}: SASS not read (LDL/STL, TMA and MMA shown as -): nvdisasm could not decode "
            "the cubin (exit 1): nvdisasm error : Opclass 'nop_'") in out
    assert out.count("SASS not read") == 1
    (line,) = summary_lines(rows)
    assert "1 with SASS unread (nvdisasm failed: spills from the stack frame)" in line


def test_at_80_columns_hint_headers_are_shortened_not_broken(examples):
    """TileGym's matmul on sm_90 at 80 columns: after dropping every droppable column it is still too wide, so
    ``occupancy`` and ``num_ctas`` become ``occ`` and ``ctas`` (a line says so) instead of wrapping mid-word."""
    import copy
    rows = [r for r in examples if r.kernel == "tilegym_matmul" and r.arch == "sm_90"]
    spilling = _render(rows, 80)          # its spill counts are never dropped: one line per variant
    assert "┃" not in spilling and spilling.count("LDL/STL 1791/1591") == 2   # occupancy 1 and 2
    rows = [copy.deepcopy(r) for r in rows]
    for r in rows:                          # without spills the LDL/STL column may go, and the table fits
        r.sass = r.sass.replace(spill_loads=0, spill_stores=0)
    out = _render(rows, 80)
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines if line[:1] in "┏┃┡│└")
    assert re.search(r"┃ TILE +┃ occ ┃ ctas ┃ regs ┃", out) and "occupa" not in out.split("headers:")[0]
    assert "headers: occ occupancy · ctas num_ctas" in lines
    assert "128×128×32" in out                              # case values whole, not folded
    assert "headers:" not in _render(rows, 120)


def test_bare_tileprobe_prints_the_commands(capsys):
    from tileprobe.cli import main
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tileprobe") and "audit" in err and "required: cmd" not in err


@pytest.mark.parametrize("argv, usage", [(["history", "--audit", "1"], "usage: tileprobe history ["),
                                         (["toolchain", "list", "--x"], "usage: tileprobe toolchain list [")])
def test_a_bad_option_prints_its_commands_usage(argv, usage, capsys):
    from tileprobe.cli import main
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(usage), err
    assert f"error: unrecognized arguments: {' '.join(argv[-2:] if argv[0] == 'history' else argv[-1:])}" in err
    assert "{audit,sass" not in err


@pytest.mark.parametrize("text, message", [
    ("", "--where '' names nothing"), (",,,", "--where ',,,' names nothing"),
    ("occupancy=1,occupancy=2", "--where 'occupancy=1,occupancy=2' gives occupancy twice (1 and 2); a variant has "
                                "one value of each")])
def test_where_that_names_nothing_or_a_name_twice_is_refused(text, message):
    with pytest.raises(WhereError) as e:
        parse_where(text)
    assert str(e.value).startswith(message)
    assert parse_where(None) == {}


def test_overrides_list_each_value_once_and_each_name_once():
    """--case TILE=256,256 --hint occupancy=1,1 compiled duplicates again on every run (a tester, 2026-12-01)."""
    assert parse_overrides(["TILE=256,256,(1,2),1×2", "N=1,1.0,True"], "--case") == {
        "TILE": [256, [1, 2]], "N": [1, 1.0, True]}
    with pytest.raises(WhereError, match=r"--hint occupancy= is given twice; list its values once"):
        parse_overrides(["occupancy=1", "occupancy=2"], "--hint")


def test_markdown_cells_are_text_not_images_links_or_tags():
    """A case value ``![img](http://tracker…)`` was written raw into the bug report: an image on GitHub."""
    from tileprobe.report.common import table_md
    md = table_md(["case"], [["![x](http://t.example/x.png) <img src=x> p < 0.001 a|b [y]"]])
    assert md.splitlines()[2] == r"| !\[x\](http://t.example/x.png) \<img src=x> p < 0.001 a\|b \[y\] |"


def test_too_narrow_for_any_table_one_line_per_variant(examples):
    """At 40 columns the kept columns cannot fit: the occupancy column was drawn zero wide and the last verdict
    cut off (a tester, 2026-12-01). Now each variant is a line holding every kept value."""
    rows = [r for r in examples if r.kernel == "rms_norm" and r.arch == "sm_90"][:2]
    out = _render(rows, 40)
    assert "┃" not in out and "│" not in out
    assert ("  occ=1 · regs 255 · smem B (cubin) 191,256 · CTAs/SM 1 · LDL/STL 159/91 · occ verdict met · tma "
            "verdict hon") in out                     # the spill counts stay
    assert "one line per variant: a table does not fit 40 columns" in out


def test_the_last_line_says_how_many_variants_where_selected(examples):
    """`--where num_ctas=4` showed 2 rows under "14 variants": every hint value is audited for the verdicts."""
    from tileprobe.audit.pipeline import AuditResult
    from tileprobe.cli.audit import _summary
    rows = [r for r in examples if r.kernel == "rms_norm" and r.arch == "sm_90"]
    res = AuditResult(records=rows, wall_s=1.25)
    assert _summary(res, 2) == (f"{len(rows)} variants (2 shown by --where; the other hint values were audited for "
                                "the verdicts), 0 failed to compile, 1.2 s")
    assert _summary(res, len(rows)) == _summary(res) == f"{len(rows)} variants, 0 failed to compile, 1.2 s"


@pytest.mark.parametrize("argv, hint", [(["audit", "p.py", "--sumary"], " (did you mean --summary?)"),
                                        (["tune", "p.py", "--keep-warmm=5"], " (did you mean --keep-warm?)"),
                                        (["audit", "p.py", "--zzz"], "")])
def test_a_misspelt_option_gets_the_near_one(argv, hint, capsys):
    """A new user (session 17): `--sumary` got argparse's usage and no suggestion, unlike a misspelt hint."""
    from tileprobe.cli import main
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.rstrip()
    assert e.value.code == 2 and err.endswith(f"error: unrecognized arguments: {argv[-1]}{hint}"), err
