"""``tileprobe report``: one self-contained HTML file — tables, plots, verdicts, remarks, escaping, and a real
browser (headless Chromium, Debian package ``chromium``) that must render it with no console errors.

Without Chromium the browser tests are skipped with the reason and the install command (``pytest -ra`` lists
it); under CI (``CI`` set, as ``.ci/run`` runs, which installs Chromium) a missing Chromium fails them instead.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tileprobe.analyses.compare import compiler_steps_by_kernel
from tileprobe.cli import main
from tileprobe.records import SassFacts
from tileprobe.report.html import NO_MATPLOTLIB, VERDICT_STYLE, render_html
from tileprobe.schema import VariantRecord, VariantRun, Verdict

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "data" / "kernels.py"
B133 = "Cuda compilation tools, release 13.3, V13.3.36"
B134 = "Cuda compilation tools, release 13.4, V13.4.92"
EVIL = "<script>alert('k')</script>"
EVIL_CASE = "<img src=x onerror=alert(1)>"
OKABE_BLUE = (0x00 / 255, 0x72 / 255, 0xB2 / 255)       # PALETTE[0]: the first case's line


def rec(build, gather, occ, *, kernel="w4a16_gemm", ctas=1, regs=168, verdict="honoured", reason="ok", run_us=None,
        status="ok", remarks=(), error="", arch="sm_120"):
    r = VariantRecord(kernel=kernel, probe="/p/w4a16.py", case={"GATHER": gather}, hints={"occupancy": occ},
                      arch=arch, tileiras=build, status=status, cuda_tile="1.7.0", threads=384, registers=regs,
                      shared_bytes=100_484, stack_bytes=0, ctas_per_sm=ctas, warps_per_sm=12 * ctas,
                      occupancy_pct=25.0 * ctas, limiter="registers", error=error, remarks=list(remarks))
    if status == "ok":
        r.verdicts = {"occupancy": Verdict(verdict, reason)}
    if run_us is not None:
        r.run = VariantRun(status="ok", median_us=run_us, p25_us=run_us * 0.98, p75_us=run_us * 1.03,
                           gpu="RTX 5090")
    return r


REMARK = {"kind": "Missed", "pass": "tileas", "name": "RemarkMemoryTmaLoadFailed", "line": 31, "column": 9,
          "function": "w4a16_gemm", "message": "TMA load not used", "details": ["Reason: gather"]}


def synthetic() -> list[VariantRecord]:
    out = []
    for build in (B133, B134):
        for gather in (False, True):
            ignored = build == B134 and gather
            out += [rec(build, gather, 1, run_us=900.0, remarks=[REMARK] if gather else []),
                    rec(build, gather, 2, ctas=1 if ignored else 2, regs=168 if ignored else 80,
                        verdict="ignored" if ignored else "honoured",
                        reason="same machine code and resources as occupancy=1" if ignored else "2 CTAs/SM ≥ 2",
                        run_us=880.0 if ignored else 610.0),
                    rec(build, gather, 4, ctas=2 if not ignored else 1, regs=80, verdict="partial",
                        reason="2 CTAs/SM (up from 1)")]
    out.append(rec(B134, True, 8, status="compile_error", error="error: failed to compile Tile IR program"))
    return out


# --- rendering (no compiler, no browser) ---------------------------------------------------------------------------

def test_report_has_tables_plots_verdicts_times_and_remarks():
    recs = synthetic()
    page = render_html(recs, title="w4a16", sources=["unit"], compiler_steps=compiler_steps_by_kernel(recs))
    assert page.startswith("<!DOCTYPE html>")
    assert page.count('<table class="audit">') == 2 + 1 + 1      # per (kernel, compiler, arch), changes, remarks
    assert page.count("<svg") == 1                               # sm_120 × occupancy
    svg = page[page.index("<svg"):page.index("</svg>")]
    for label in ("registers / thread", "shared memory / CTA (KiB)", "CTAs / SM", "median time (µs), bar: p25–p75",
                  "tileiras 13.3.36 · GATHER=True", "tileiras 13.4.92 · GATHER=True", "CTAs/SM asked", "ignored",
                  "honoured", "partial"):
        assert label in svg
    assert "infeasible" not in svg and ">met<" not in svg        # the legend lists the verdicts that occur
    # one colour per case (Okabe-Ito), the same for that case under both compilers; older compiler dashed
    assert svg.count("stroke: #0072b2") >= 2 and svg.count("stroke: #e69f00") >= 2
    assert "stroke-dasharray" in svg
    assert '<span class="v v-ignored" title="same machine code and resources as occupancy=1">IGNORED</span>' in page
    assert '<span class="v v-partial" title="2 CTAs/SM (up from 1)">partial</span>' in page
    assert "median µs" in page and "610.0" in page
    assert "TMA load not used" in page and "Reason: gather" in page
    assert '<tr class="failed">' in page and "error: failed to compile Tile IR program" in page
    assert not re.search(r"https?://", page), "the report must not reference any URL"
    assert "<script" not in page.lower() and "<link" not in page.lower()


def test_what_changed_between_compilers_sass_columns_and_failures_once():
    recs = synthetic()
    for r in recs:
        r.sass = SassFacts(spill_loads=3 if r.hints["occupancy"] == 4 else 0, spill_stores=1, tma={"UTMALDG": 2},
                           matrix={"HMMA": 64}, matrix_families=["HMMA"])
    for occ in (1, 2):      # the same traceback twice on sm_90, where nothing compiled
        recs.append(rec(B134, True, occ, status="compile_error", arch="sm_90",
                        error="Traceback (most recent call last):\nUnsupportedFeatureError: float4_e2m1fn"))
    page = render_html(recs, compiler_steps=compiler_steps_by_kernel(recs))
    changes = page[page.index("What changed from tileiras 13.3.36 to tileiras 13.4.92"):]
    assert "w4a16_gemm sm_120 GATHER=True occupancy=2</td><td>occupancy honoured → ignored; CTAs/SM 2 → 1" in changes
    assert "5 variant(s) changed, 4 identical" in changes     # 2 regressions, 3 only under 13.4.92
    assert "<th>LDL/STL</th><th>TMA</th><th>MMA</th>" in page and '<td class="num">3/1</td>' in page
    assert page.count("UnsupportedFeatureError: float4_e2m1fn") == 1
    assert "<b>2 variants (GATHER=True occupancy=1, GATHER=True occupancy=2)</b>: compile_error" in page
    assert "w4a16_gemm on sm_90: no plot, every variant failed (2 compile_error)" in page
    assert page.count("<svg") == 1                               # sm_120 only: no empty axes for sm_90


def test_integer_ticks_on_counts():
    """CTAs/SM and registers are counts: no tick at 2.5 (an earlier report showed 2.5 and 7.5 on the CTAs/SM axis)."""
    recs = [rec(B134, False, o, ctas=c, regs=g) for o, c, g in ((1, 1, 255), (2, 3, 128), (4, 7, 64), (8, 8, 32))]
    svg = render_html(recs)
    ticks = re.findall(r"<text[^>]*>([0-9.]+)</text>", svg)
    assert "2.5" not in ticks and "7.5" not in ticks and "0.5" not in ticks


def test_everything_from_users_and_compilers_is_escaped():
    r = rec(B134, EVIL_CASE, 2, kernel=EVIL, verdict="ignored", reason="<b>bold</b> & more",
            remarks=[dict(REMARK, message="</td><script>x()</script>", details=["Shape: <64, 4>"])])
    r.case = {"NAME": EVIL_CASE, "PRICE": "$x$"}
    bad = rec(B134, True, 4, kernel=EVIL, status="compile_error", error="</pre><script>boom()</script>")
    bad.repro = "tileiras <in.bc> -o out"
    page = render_html([r, rec(B134, EVIL_CASE, 1, kernel=EVIL), bad], title=EVIL, sources=[EVIL])
    low = page.lower()
    assert "<script" not in low and "<img" not in low and "<b>bold" not in low and "<64" not in low
    assert "&lt;script&gt;alert(&#x27;k&#x27;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;/pre&gt;&lt;script&gt;boom()&lt;/script&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; more" in page
    svg = page[page.index("<svg"):page.index("</svg>")]
    assert "&lt;script&gt;" in svg                               # matplotlib escaped the title it drew
    assert "$x$" in page                                         # shown literally, not parsed as mathtext


def test_without_matplotlib_the_report_has_tables_and_says_how_to_get_plots(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib → ImportError
    page = render_html(synthetic(), compiler_steps=compiler_steps_by_kernel(synthetic()))
    assert "<svg" not in page and page.count('<table class="audit">') == 4
    assert "pip install &#x27;tileprobe[report]&#x27;" in page and NO_MATPLOTLIB.startswith("Plots need matplotlib")


# --- a real audit, the CLI, and the browser ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_report(tmp_path_factory):
    """Audit a 2-variant probe whose name and case carry HTML into a store and a JSON file; report both."""
    d = tmp_path_factory.mktemp("report")
    probe = d / "probe_evil.py"
    probe.write_text(textwrap.dedent(f"""
        from tileprobe import Probe
        N = 1 << 16
        probe = Probe(kernel={str(KERNELS) + ':vec_add'!r},
                      args=lambda case, arrays: (arrays.randn((N,), "float32"), arrays.randn((N,), "float32"),
                                                 arrays.empty((N,), "float32"), 1024),
                      cases={{"NOTE": [{EVIL_CASE!r}]}}, hints={{"occupancy": [1, 2]}}, name={EVIL!r})
        """))
    store, js = str(d / "r.sqlite"), str(d / "audit.json")
    assert main(["audit", str(probe), "--arch", "sm_90", "--jobs", "2", "--store", store, "--json", js,
                 "--format", "none"]) == 0
    out_store, out_json = d / "from_store.html", d / "from_json.html"
    assert main(["report", "--store", store, "-o", str(out_store), "--title", "tiny <probe>"]) == 0
    assert main(["report", "--json", js, "-o", str(out_json)]) == 0
    return {"dir": d, "store": store, "html": out_store, "html_json": out_json}


def test_report_cli_from_store_and_from_json(real_report):
    for path in (real_report["html"], real_report["html_json"]):
        page = path.read_text()
        assert page.count("<svg") == 1 and "&lt;script&gt;alert(" in page and "<script" not in page.lower()
        assert page.count("<tr>") + page.count('<tr class="failed">') >= 3     # header + 2 variants
    assert "<title>tiny &lt;probe&gt;</title>" in real_report["html"].read_text()


def test_report_to_stdout_writes_the_page_there_and_no_file_named_dash(real_report, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--json", str(real_report["dir"] / "audit.json"), "-o", "-"]) == 0
    out, err = capfd.readouterr()
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>") and out.count("<svg") == 1
    assert "wrote the HTML to stdout: 2 variants" in err and not (tmp_path / "-").exists()


def test_report_without_records_says_what_to_do(tmp_path, capsys):
    from tileprobe.store import Store
    Store.open(tmp_path / "empty.sqlite").close()
    assert main(["report", "--store", str(tmp_path / "empty.sqlite"), "-o", str(tmp_path / "x.html")]) == 1
    assert "no records to report" in capsys.readouterr().err


def test_report_from_a_store_that_does_not_exist_creates_nothing(tmp_path, capsys):
    assert main(["report", "--store", str(tmp_path / "typo.sqlite"), "-o", str(tmp_path / "x.html")]) == 1
    assert "no results store at" in capsys.readouterr().err
    assert not (tmp_path / "typo.sqlite").exists()


NO_CHROMIUM = ("headless Chromium is not on PATH: the HTML report was not rendered in a browser. Install it "
               "(Debian/Ubuntu: apt-get update && apt-get install -y chromium) to run these tests")


def chromium() -> str:
    """The Chromium to run; skipped (with :data:`NO_CHROMIUM`) without one, failed instead under CI."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail(f"CI: {NO_CHROMIUM}", pytrace=False)
    pytest.skip(NO_CHROMIUM)


def run_chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", *args, page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def browser_problems(stderr: str) -> list[str]:
    """Console messages (any level) and failed loads Chromium logged while rendering."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "net::ERR_" in ln]


def has_colour(png: Path, rgb: tuple, tol: float = 0.06) -> bool:
    import numpy as np
    from matplotlib.image import imread
    img = imread(str(png))[..., :3]
    return bool((np.abs(img - np.array(rgb)).max(axis=-1) < tol).any())


def check_in_chromium(page: Path, tmp: Path, n_svg: int) -> None:
    """One Chromium run renders ``page``, dumps its DOM and takes a screenshot (headless Chromium does both in one
    run: one browser start per page, not two): no console message or failed load, ``n_svg`` plots in the DOM, and
    the plots' blue in the screenshot."""
    shot = tmp / (page.stem + ".png")
    dom = run_chromium(page, tmp / f"profile-{page.stem}", "--dump-dom", f"--screenshot={shot}",
                       "--window-size=1400,2400", "--hide-scrollbars")
    assert browser_problems(dom.stderr) == []
    assert dom.stdout.count("<svg") == n_svg and dom.stdout.count('<figure class="plot">') == n_svg
    assert '<table class="audit">' in dom.stdout
    assert shot.stat().st_size > 20_000
    assert has_colour(shot, OKABE_BLUE), "no plot line (Okabe-Ito blue) in the screenshot: the SVG plots did not render"


def test_console_error_detection_works(tmp_path):
    planted = tmp_path / "planted.html"
    planted.write_text("<!DOCTYPE html><html><body><p>x</p><script>console.error('planted')</script></body></html>")
    proc = run_chromium(planted, tmp_path / "profile", "--dump-dom")
    assert any("planted" in ln for ln in browser_problems(proc.stderr))


def test_report_renders_in_headless_chromium(real_report, tmp_path):
    check_in_chromium(real_report["html"], tmp_path, n_svg=1)
    page = tmp_path / "synthetic.html"
    page.write_text(render_html(synthetic(), compiler_steps=compiler_steps_by_kernel(synthetic())))
    check_in_chromium(page, tmp_path, n_svg=1)
    assert has_colour(tmp_path / "synthetic.png", tuple(int(VERDICT_STYLE["ignored"][0][i:i + 2], 16) / 255
                                                        for i in (1, 3, 5)))


@pytest.mark.slow
def test_bundled_examples_report_renders_in_headless_chromium(tmp_path, shared_store_path):
    """The report of examples/rms_norm.py (sm_90) and examples/w4a16_gemm.py (sm_120): 22 variants, compiled once
    per test run in the run's shared store (tests/test_examples_audit.py and tests/test_versions.py audit them too),
    reported from the two audits' JSON files (the shared store holds other tests' records; the report from a store
    is rendered by test_report_renders_in_headless_chromium)."""
    chromium()     # skip (or fail under CI) before compiling when there is no browser
    inputs = []
    for probe, arch in (("examples/rms_norm.py", "sm_90"), ("examples/w4a16_gemm.py", "sm_120")):
        js = tmp_path / f"{Path(probe).stem}.json"
        assert main(["audit", str(ROOT / probe), "--arch", arch, "--store", shared_store_path, "--json", str(js),
                     "--format", "none"]) == 0
        inputs += ["--json", str(js)]
    page = tmp_path / "examples.html"
    assert main(["report", *inputs, "-o", str(page), "--title", "tileprobe: bundled examples"]) == 0
    text = page.read_text()
    assert "rms_norm" in text and "w4a16_gemm" in text and "IGNORED" in text
    check_in_chromium(page, tmp_path, n_svg=2)


def test_same_kernel_name_from_two_probes_gets_two_sections():
    a = rec("V13.4.92", True, 1)
    b = rec("V13.4.92", True, 1)
    a.probe, b.probe = "/x/first.py", "/y/second.py"
    page = render_html([a, b], plots=False)
    assert "<h2>w4a16_gemm (first.py)</h2>" in page and "<h2>w4a16_gemm (second.py)</h2>" in page


def test_each_arch_plot_sits_beside_its_tables_and_the_hint_less_build_comes_first_everywhere():
    """Records in a store's order (the hint-less build last): the HTML tables, the terminal tables and the plots'
    x axes all put it first, under one name; each arch's plots follow that arch's tables, not all the tables."""
    import io

    from rich.console import Console

    from tileprobe.report.html import have_matplotlib
    from tileprobe.report.terminal import render_audit
    rows = []
    for arch in ("sm_90", "sm_120"):
        for occ in (2, 4, None):
            r = rec(B134, False, occ, arch=arch, ctas=2 if occ else 1, regs=80 if occ else 168)
            if occ is None:
                r.verdicts, r.effective_hints = {}, {"occupancy": None}     # the kernel declares none
            rows.append(r)
    page = render_html(rows, plots=True)
    table = page[page.index("<h3>sm_90"):page.index("</table>", page.index("<h3>sm_90"))]
    cells = re.findall(r"<tr><td>False</td><td>([^<]*)</td>", table)
    assert cells == ["hint-less", "2", "4"]
    out = io.StringIO()
    render_audit(rows, Console(file=out, width=160, force_terminal=False, color_system=None), reasons=False)
    firsts = [ln.split("│")[2].strip() for ln in out.getvalue().splitlines() if ln.startswith("│ False")]
    assert firsts[:3] == ["hint-less", "2", "4"]
    if have_matplotlib():
        first_plot = page.index('<figure class="plot">')
        assert page.index("<h3>sm_90") < first_plot < page.index("<h3>sm_120")    # beside sm_90's table
        svg = page[first_plot:page.index("</figure>", first_plot)]
        ticks = re.findall(r">(hint-less|2|4)</text>", svg)
        assert ticks[:3] == ["hint-less", "2", "4"]
