"""nvdisasm listings of the cubins in tests/data, each made once per test run and shared by the files that compare
a reader against them (tests/test_regpool.py, tests/test_sass_batch.py).

Each of those files checked its reader against nvdisasm's own ELF listing of every cubin of tests/data (35 cubins,
about 0.4 s of nvdisasm each on the 2-core CPU machine; more under load), and two of them made the same listings
again: the same bytes and options always give the same listing, so it is kept on disk in the run's shared temp
folder (pytest-xdist workers included) and in memory. The listing is nvdisasm's output exactly as
``tileprobe.model.sass._disassemble`` returns it; only where it is made once instead of several times changes.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tileprobe.model.sass import have_nvdisasm

#: Every cubin of tests/data, the set the readers are checked on against nvdisasm.
CUBINS = sorted((Path(__file__).resolve().parent / "data").glob("**/*.cubin"))
#: The mark of a test that runs nvdisasm.
needs_nvdisasm = pytest.mark.skipif(not have_nvdisasm(), reason="nvdisasm not installed")


class ListingCache:
    """``cache(path, options)``: nvdisasm's listing (text) of the cubin at ``path`` with ``options`` (a tuple of
    nvdisasm flags: ``("-c",)`` the plain listing, ``tileprobe.model.sass.FACTS_OPTIONS`` the faster one).

    ``folder`` holds one file per (cubin bytes, options, nvdisasm) key, written whole (a temp file then
    ``os.replace``): a worker that reads it sees a complete listing; two workers that make one at once both write
    the same text. Raises what ``_disassemble`` raises (``ToolchainError`` when nvdisasm cannot run or fails)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._memo: dict[str, str] = {}

    def __call__(self, path: Path, options: tuple[str, ...] = ("-c",)) -> str:
        from tileprobe.model.sass import _disassemble, find_nvdisasm
        tool = find_nvdisasm()
        data = Path(path).read_bytes()
        key = hashlib.sha256(b"\0".join([data, " ".join(options).encode(), str(tool).encode()])).hexdigest()
        if key in self._memo:
            return self._memo[key]
        file = self.folder / f"{key}.txt"
        try:
            with open(file, encoding="utf-8", newline="") as f:     # newline="": the text as written, \r kept
                text = f.read()
        except FileNotFoundError:
            text = _disassemble(tool, data, str(path), options)
            tmp = self.folder / f"{key}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            os.replace(tmp, file)
        self._memo[key] = text
        return text
