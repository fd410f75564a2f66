"""The README's quick start carries no dated timings (they went stale with every session); the measured times are in
docs/SCALE.md with their machine and date, and the README points there."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_quick_start_has_no_dated_timings_and_points_to_them():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme[:readme.index("The tests run in parallel")]     # the test command's paragraph dates its own time
    assert not re.search(r"20\d\d-\d\d-\d\d", quick), re.findall(r".{40}20\d\d-\d\d-\d\d.{20}", quick)
    assert not re.search(r"\b\d+(?:–\d+)? s\b", quick), re.findall(r".{30}\b\d+(?:–\d+)? s\b", quick)
    assert 'docs/SCALE.md, "The quick start\'s times"' in quick
    scale = (ROOT / "docs" / "SCALE.md").read_text(encoding="utf-8")
    section = scale[scale.index("## The quick start's times"):]
    assert "2-core CPU machine, 2026-12-01 | 197–200 s" in section and "619 s" in section
