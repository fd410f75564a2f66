"""tests/support_sass.py: a listing made once is nvdisasm's own, and another test process reads it back from the
shared folder instead of running nvdisasm again."""
from pathlib import Path

from tests.support_sass import ListingCache, needs_nvdisasm
from tileprobe.model import sass as S

CUBIN = Path(__file__).resolve().parent / "data" / "cubins" / "vec_add_sm_90.cubin"


@needs_nvdisasm
def test_a_kept_listing_is_nvdisasms_and_another_process_reads_it_back(tmp_path, monkeypatch):
    tool, data = S.find_nvdisasm(), CUBIN.read_bytes()
    first = ListingCache(tmp_path / "listings")
    fast, plain = first(CUBIN, S.FACTS_OPTIONS), first(CUBIN)
    assert fast == S._disassemble(tool, data, str(CUBIN), S.FACTS_OPTIONS)
    assert plain == S._disassemble(tool, data, str(CUBIN))
    # one file per (bytes, options): the two option sets are two listings even where their texts agree
    assert len(list((tmp_path / "listings").glob("*.txt"))) == 2 and not list((tmp_path / "listings").glob("*.tmp"))

    def no_nvdisasm(*a, **k):
        raise AssertionError("nvdisasm ran again for a listing already kept")
    monkeypatch.setattr(S, "_disassemble", no_nvdisasm)
    second = ListingCache(tmp_path / "listings")       # another pytest-xdist worker: same folder, empty memory
    assert second(CUBIN, S.FACTS_OPTIONS) == fast and second(CUBIN) == plain
