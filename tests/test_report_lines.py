"""The audit's reason lines: each ``PTX:`` line sits under its own variant's label, never under the reason of the
variant before it (the hint-less build has no verdict line of its own when the kernel declares no value)."""
from __future__ import annotations

import io

from rich.console import Console

from tileprobe.judge.verdict import judge_records
from tileprobe.records import PtxFacts
from tileprobe.report.terminal import render_audit
from tileprobe.schema import VariantRecord


def _rec(occ, regs, ctas, code, maxnreg):
    return VariantRecord(kernel="rms_norm", probe="p.py", case={"N": 5120}, hints={"occupancy": occ}, arch="sm_120",
                         tileiras="V13.4.92", status="ok", threads=128, registers=regs, shared_bytes=0,
                         driver_shared_bytes=0, stack_bytes=0, ctas_per_sm=ctas, limiter="registers",
                         code_sha256=code, ptx=PtxFacts(maxnreg=maxnreg, reqntid=[128], minnctapersm=1))


def test_each_ptx_line_is_under_its_own_variant():
    rows = [_rec(4, 128, 4, "B", 128), _rec(None, 126, 4, "A", None)]
    judge_records(rows)
    assert "occupancy" not in rows[1].verdicts          # hint-less, nothing declared: no verdict line
    out = io.StringIO()
    render_audit(rows, Console(file=out, width=100, force_terminal=False, color_system=None))
    lines = [ln.rstrip() for ln in out.getvalue().splitlines()]
    ptx = [i for i, ln in enumerate(lines) if ln.strip().startswith("PTX:")]
    assert len(ptx) == 2                                                     # the hint-less build first
    assert lines[ptx[0]].strip() == "PTX: .reqntid 128 .minnctapersm 1"
    assert lines[ptx[0] - 1].strip() == "N=5120 occupancy=hint-less:"        # its own label, one name
    assert lines[ptx[1]].strip() == "PTX: .maxnreg 128 .reqntid 128 .minnctapersm 1"


def _sized(occ, instructions):
    from tileprobe.records import SassFacts
    r = _rec(occ, 128, 4, f"C{occ}", 128)
    r.sass = SassFacts(instructions=instructions, spill_loads=0, spill_stores=0, tma={}, matrix={},
                       matrix_families=[])
    return r


def _table(rows, width):
    out = io.StringIO()
    render_audit(rows, Console(file=out, width=width, force_terminal=False, color_system=None), reasons=False)
    return out.getvalue()


def test_audit_has_a_code_size_column_dropped_first_when_narrow():
    rows = [_sized(2, 1203), _sized(4, 1219)]
    judge_records(rows)
    wide = _table(rows, 160)
    assert "instr" in wide
    line = next(ln for ln in wide.splitlines() if "│ 4 " in ln)
    assert "1,219" in line
    narrow = _table(rows, 90)
    assert "1,219" not in narrow and "not shown at 90 columns: instr, " in narrow   # the first column dropped


# --- the Markdown report stands alone ---------------------------------------------------------------------------
def test_markdown_environment_gives_one_line_per_compiler():
    from tileprobe.report.markdown import environment_md
    text = environment_md({"cuda_tile": "1.7.0", "tileiras": ["Cuda compilation tools, release 13.3, V13.3.36",
                                                               "Cuda compilation tools, release 13.4, V13.4.92"]})
    assert text == ("- cuda_tile: 1.7.0\n- tileiras:\n  - Cuda compilation tools, release 13.3, V13.3.36\n"
                    "  - Cuda compilation tools, release 13.4, V13.4.92\n")


def test_markdown_names_probes_by_relative_or_home_paths_and_the_kernel_packages(tmp_path, monkeypatch):
    import importlib.metadata as md

    from tileprobe.report.markdown import audit_markdown, display_path
    home, work = tmp_path / "home", tmp_path / "home" / "work"
    work.mkdir(parents=True)
    probe = work / "swiglu_probe.py"
    probe.write_text("import os\nimport rich\nfrom tileprobe import Probe\nimport cuda.tile as ct\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    assert display_path(str(probe)) == "swiglu_probe.py"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert display_path(str(probe)) == "~/work/swiglu_probe.py"
    r = _rec(4, 128, 4, "B", 128)
    r.probe = str(probe)
    text = audit_markdown([r], {"tileprobe": "x"})
    assert f"- kernel packages: rich {md.version('rich')}\n" in text          # not os, tileprobe, cuda-tile
    assert "`~/work/swiglu_probe.py`:" in text and str(probe) not in text


def test_the_shared_memory_column_is_explained_once_per_arch():
    """The column read 16 B on sm_80 and 1,040 B on sm_90 for one kernel, with only sm_90's reserve explained."""
    rows = [_rec(4, 128, 4, "B", 128), _rec(2, 128, 4, "C", 128)]
    sm80 = [_rec(4, 128, 4, "D", 128), _rec(2, 128, 4, "E", 128)]
    for r in sm80:
        r.arch = "sm_80"
    judge_records(rows + sm80)
    text = _table(rows + sm80, 100)
    assert text.count("smem B (cubin) on sm_120: includes the 1 KB per-CTA reserve (cubin layout only)") == 1
    assert text.count("smem B (cubin) on sm_80: excludes the 1 KB per-CTA reserve, added on top (cubin layout "
                      "only)") == 1
    assert all(len(line) <= 100 for line in text.splitlines())


def test_the_markdown_and_html_legends_say_the_met_rule():
    from tileprobe.report.html import render_html
    from tileprobe.report.markdown import audit_markdown
    rows = [_rec(4, 128, 4, "B", 128), _rec(None, 126, 4, "A", None)]
    judge_records(rows)
    md = audit_markdown(rows, {})
    assert ("\nVerdicts:\n\n- met: the goal is met and the reference (the hint-less build, else the lowest value) "
            "met it too: the hint bought nothing toward it\n") in md
    html = render_html(rows, plots=False)
    assert "honoured: the goal is met and the reference falls short of it: the hint reached the goal" in html


def test_markdown_carries_the_kernel_source_from_the_package_it_comes_from(tmp_path, monkeypatch):
    """A probe of a kernel imported from a package (TileGym-like: re-exported by the package's ``__init__``): the
    report prints the @ct.kernel function with its file and line, read as text (the package is never imported)."""
    from tileprobe.report.markdown import audit_markdown
    pkg = tmp_path / "site" / "fakegym"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise SystemExit('imported')\nfrom .swiglu import swiglu_kernel\n")
    (pkg / "swiglu.py").write_text("raise SystemExit('imported')\nimport cuda.tile as ct\n\n\ndef helper():\n"
                                   "    pass\n\n\n@ct.kernel\ndef swiglu_kernel(a, b, c, TILE: ct.Constant[int]):\n"
                                   "    x = ct.load(a, index=(ct.bid(0),), shape=(TILE,))\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    work = tmp_path / "work"
    work.mkdir()
    probe = work / "swiglu_probe.py"
    probe.write_text("from fakegym import swiglu_kernel\nfrom tileprobe import Probe\n")
    monkeypatch.chdir(work)
    r = _rec(4, 128, 4, "B", 128)
    r.probe, r.symbol = str(probe), "swiglu_kernel_Kt1_A1f32_1i16t1_p16_I256"
    text = audit_markdown([r], {})
    want = (f"\n### The kernel\n\n`{pkg / 'swiglu.py'}:9` (rms_norm):\n\n```python\n@ct.kernel\n"
            "def swiglu_kernel(a, b, c, TILE: ct.Constant[int]):\n"
            "    x = ct.load(a, index=(ct.bid(0),), shape=(TILE,))\n```\n")
    assert want in text
    assert text.index("### The kernel") < text.index("### The probe")


def test_markdown_does_not_repeat_a_kernel_the_printed_probe_defines(tmp_path, monkeypatch):
    from tileprobe.report.markdown import audit_markdown
    probe = tmp_path / "p.py"
    probe.write_text("import cuda.tile as ct\n\n\n@ct.kernel\ndef vadd(a, b):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    r = _rec(4, 128, 4, "B", 128)
    r.probe, r.symbol = str(probe), "vadd_Kt1_A1f32"
    text = audit_markdown([r], {})
    assert "### The kernel" not in text and "def vadd(a, b):" in text      # once, in the probe


def test_the_kernel_named_by_a_module_spec_string_is_found(tmp_path, monkeypatch):
    """``Probe(kernel="pkg.ops.mod:name")`` (examples/tilegym_rms_norm.py's form): the module is found on sys.path
    and read, never imported."""
    from tileprobe.report.kernel_source import find_kernel_source
    ops = tmp_path / "site" / "fakegym" / "ops"
    ops.mkdir(parents=True)
    (ops.parent / "__init__.py").write_text("raise SystemExit('imported')\n")
    (ops / "__init__.py").write_text("")
    (ops / "rms_norm.py").write_text("import cuda.tile as ct\n\n\n@ct.kernel(occupancy=2)\ndef _rms_norm_kernel(x):\n"
                                     "    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    probe = tmp_path / "p.py"
    probe.write_text('from tileprobe import Probe\nprobe = Probe(kernel="fakegym.ops.rms_norm:_rms_norm_kernel")\n')
    src = find_kernel_source(str(probe), "_rms_norm_kernel_Kt1_A1f32")
    assert src is not None and (src.path, src.line) == (str(ops / "rms_norm.py"), 4)
    assert src.text == "@ct.kernel(occupancy=2)\ndef _rms_norm_kernel(x):\n    pass"
