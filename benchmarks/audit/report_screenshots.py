"""The HTML report's screenshots in docs/: the bundled examples' report and a probe with 8 cases.

    python benchmarks/audit/report_screenshots.py [--store DIR]     # then look at docs/report-*.png

Audits examples/rms_norm.py and examples/w4a16_gemm.py for sm_90 and sm_120 (44 variants: w4a16_gemm cannot be
compiled for sm_90, which shows the report's note for an arch where every variant failed) and
tests/data/probe_matmul_tiles.py for sm_90 (8 tiles × 3 occupancy values), each into its own results store under
DIR (reused: a second run compiles nothing), writes the two reports next to the stores and takes a screenshot of
each with headless Chromium (1400 px wide). Prints what it wrote and each report's size.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from tileprobe.cli import main  # noqa: E402

JOBS = (
    ("examples", "tileprobe: bundled examples (rms_norm, w4a16_gemm)",
     [("examples/rms_norm.py", "sm_90,sm_120"), ("examples/w4a16_gemm.py", "sm_90,sm_120")], 5200),
    ("8-cases", "tileprobe: matmul, 8 tile shapes × occupancy",
     [("tests/data/probe_matmul_tiles.py", "sm_90")], 2100),
)


def shoot(html: str, png: str, height: int) -> None:
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if browser is None:
        sys.exit("headless Chromium is needed: apt-get install -y chromium")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--hide-scrollbars", f"--window-size=1400,{height}", f"--screenshot={png}", html],
                   check=True, capture_output=True, timeout=300)


def run(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    for name, title, probes, height in JOBS:
        store = os.path.join(folder, f"{name}.sqlite")
        for probe, archs in probes:
            assert main(["audit", os.path.join(ROOT, probe), "--arch", archs, "--store", store, "--format",
                         "none"]) == 0
        html = os.path.join(folder, f"report-{name}.html")
        assert main(["report", "--store", store, "-o", html, "--title", title]) == 0
        png = os.path.join(ROOT, "docs", f"report-{name}.png")
        shoot(html, png, height)
        print(f"{png}: {os.path.getsize(png):,} B from {html} ({os.path.getsize(html):,} B)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default="/tmp/tileprobe-screenshots", help="folder for the stores and reports")
    run(ap.parse_args().store)
