"""SASS facts of many cubins in one raw nvdisasm run per target (model/sass_batch.py) equal the facts of one ELF run
per cubin (model/sass.py: sass_facts) on every cubin of tests/data; the audit's reader (audit/sass_reader.py) reads
them in batches beside the compiles."""
import re
import threading
import time
from pathlib import Path

import pytest

from tests.support_sass import CUBINS, needs_nvdisasm
from tileprobe.model import sass_batch as B
from tileprobe.model.cubin import CubinInfo
from tileprobe.model.regpool import _parse
from tileprobe.model.sass import (
    FACTS_OPTIONS,
    facts_from_listing,
    sass_facts,
)

DATA = Path(__file__).resolve().parent / "data"


def _items():
    return [(p.read_bytes(), CubinInfo.from_path(p).kernels[0].name) for p in CUBINS]


@pytest.fixture
def counted(monkeypatch):
    """The per-cubin (old) reads and the raw runs a batch makes."""
    seen = {"old": [], "raw": []}
    old, raw = B.sass_facts, B._run_raw
    monkeypatch.setattr(B, "sass_facts", lambda c, s: seen["old"].append(s) or old(c, s))
    monkeypatch.setattr(B, "_run_raw", lambda t, blob: seen["raw"].append((t, len(blob))) or raw(t, blob))
    return seen


@needs_nvdisasm
def test_batched_facts_equal_the_per_cubin_facts_on_every_cubin_of_tests_data(counted, nvdisasm_listing):
    items = _items()
    assert len(items) >= 30
    new = B.sass_facts_many(items)
    targets = {CubinInfo.from_bytes(c).target for c, _ in items}
    assert sorted(t for t, _ in counted["raw"]) == sorted(targets)   # one run per target
    old_way = []
    for path, (cubin, symbol), got in zip(CUBINS, items, new):
        elf = nvdisasm_listing(path, FACTS_OPTIONS)             # _disassemble's listing, made once per run
        assert got == facts_from_listing(cubin, symbol, elf), path      # sass_facts, without a second run
        if "USETMAXREG" in elf and re.search(r"\bBRX\b", elf):
            old_way.append(symbol)
    assert 1 <= len(old_way) < len(items) / 4 and counted["old"] == old_way   # only those read the old way
    verdicts = {pool.verdict for _, pool in new}
    assert {"hang_risk", "pool_ok", "none"} <= verdicts   # the register-pool walk ran on real USETMAXREG code


@needs_nvdisasm
def test_the_labelled_raw_listing_gives_the_register_walk_the_elf_listing_gives(nvdisasm_listing):
    """Kernels with USETMAXREG: the same instructions, the same labelled ones and every branch to the same place."""
    checked = 0
    for path, (cubin, symbol) in zip(CUBINS, _items()):
        elf = nvdisasm_listing(path, FACTS_OPTIONS)
        if "USETMAXREG" not in elf:     # only these are compared: the others need no raw run of their own (the
            continue                    # batched facts test above decodes every cubin)
        code, cache = {}, {}
        m = B._member(0, cubin, code)
        B._decode(m.target, [k for _, k in m.sections], code, cache)
        raw = B._labelled(m, cubin, cache)
        if raw is None:                 # an indirect branch: its jump table's targets are labelled in ELF only
            assert re.search(r"\bBRX\b", elf), path
            continue
        a, b = _parse(elf, symbol), _parse(raw, symbol)
        assert [(i.address, i.guard, i.opcode) for i in a] == [(i.address, i.guard, i.opcode) for i in b], path
        assert [bool(i.labels) for i in a] == [bool(i.labels) for i in b], path

        def targets(instructions):
            at = {lab: k for k, ins in enumerate(instructions) for lab in ins.labels}
            return [at.get(o[2:-1]) if o.startswith("`(") else o for ins in instructions for o in ins.operands]
        assert targets(a) == targets(b), path
        checked += 1
    assert checked >= 6


@needs_nvdisasm
def test_a_damaged_cubin_in_a_batch_gets_the_per_cubin_error_and_the_others_their_facts():
    good = (DATA / "cubins" / "vec_add_sm_90.cubin").read_bytes()
    bad_name = bytearray((DATA / "cubins" / "matmul_sm_90.cubin").read_bytes())   # hostile test 9's cubin
    i = bad_name.find(b"matmul_", bad_name.find(b".strtab"))
    bad_name[i + 1] = 0xFF
    items = [(good, ""), (b"not a cubin at all", "k"), (good[:300], ""), (bytes(bad_name), ""), (good, "")]
    got = B.sass_facts_many(items)
    for item, g in zip(items, got):
        assert g == sass_facts(*item)
    assert got[1][0].error and got[1][1] is None and got[0][1].verdict == "none"


@needs_nvdisasm
def test_identical_machine_code_is_decoded_once_and_kept_for_the_next_batch(counted):
    occ = [(DATA / "cubins" / f"vec_add_occ{n}_sm_90.cubin").read_bytes() for n in (1, 2, 4)]
    assert len({CubinInfo.from_bytes(c).code_sha256 for c in occ}) == 1 and len(set(occ)) == 3
    cache = {}
    got = B.sass_facts_many([(c, "") for c in occ], cache)
    assert counted["raw"] == [("sm_90a", sum(len(code) for code in _code(occ[0]).values()))]   # one copy decoded
    assert got == [sass_facts(c, "") for c in occ]
    B.sass_facts_many([(occ[0], "")], cache)
    assert len(counted["raw"]) == 1                 # the cache had it: no second run


def _code(cubin: bytes) -> dict:
    code = {}
    B._member(0, cubin, code)
    return code


def test_raw_arch_names_follow_nvdisasm():
    assert B.raw_arch("sm_90a") == "SM90a" and B.raw_arch("sm_120") == "SM120" and B.raw_arch("sm_100a") == "SM100a"


def test_a_raw_run_that_fails_reads_each_cubin_the_old_way(monkeypatch, counted):
    monkeypatch.setattr(B, "_run_raw", lambda t, blob: counted["raw"].append(t) or None)
    cubin = (DATA / "cubins" / "vec_add_sm_90.cubin").read_bytes()
    got = B.sass_facts_many([(cubin, ""), (cubin, "")])
    assert counted["old"] == ["", ""] and got == [sass_facts(cubin, "")] * 2


# --- the audit's reader ----------------------------------------------------------------------------------------

def _fake_read(calls, delay=0.0):
    def read(items, cache):
        calls.append(len(items))
        time.sleep(delay)
        return [{"target": "sm_90a", "instructions": len(symbol)} for _, symbol in items]
    return read


def test_the_reader_reads_a_batch_once_enough_cubins_wait():
    from tileprobe.audit.sass_reader import SassReader
    calls = []
    r = SassReader(batch=3, read=_fake_read(calls))
    for k in range(2):
        r.submit(k, b"", "x" * k)
    time.sleep(0.2)
    assert calls == [] and r.take() == []           # below a batch: nothing read yet
    r.submit(2, b"", "xx")
    deadline = time.monotonic() + 10
    got = []
    while len(got) < 3 and time.monotonic() < deadline:
        got += r.take()
        time.sleep(0.01)
    assert calls == [3] and sorted(got) == [(0, {"target": "sm_90a", "instructions": 0}),
                                            (1, {"target": "sm_90a", "instructions": 1}),
                                            (2, {"target": "sm_90a", "instructions": 2})]
    assert r.close() == []


def test_closing_reads_the_rest_split_over_the_jobs():
    from tileprobe.audit.sass_reader import SassReader
    calls = []
    r = SassReader(batch=100, jobs=2, read=_fake_read(calls))
    for k in range(5):
        r.submit(k, b"", "x" * k)
    got = r.close()
    assert sorted(calls) == [2, 3] and r.batches == 2
    assert sorted(k for k, _ in got) == [0, 1, 2, 3, 4] and all(s["instructions"] == k for k, s in got)


def test_a_reader_error_reaches_the_caller_and_abandon_returns_the_unread():
    from tileprobe.audit.sass_reader import SassReader

    def broken(items, cache):
        raise RuntimeError("a bug in the batch reader")
    r = SassReader(batch=1, read=broken)
    r.submit("a", b"", "")
    r._thread.join(10)
    with pytest.raises(RuntimeError, match="batch reader"):
        r.take()
    gate, started = threading.Event(), threading.Event()
    calls = []

    def held(items, cache):
        started.set()
        gate.wait(10)
        return _fake_read(calls)(items, cache)
    slow = SassReader(batch=2, read=held)
    slow.submit("x", b"", "")
    slow.submit("y", b"", "")          # a batch: being read (held at the gate)
    assert started.wait(10)
    slow.submit("z", b"", "")          # waiting
    gate.set()
    done, unread = slow.abandon()
    assert sorted(k for k, _ in done) == ["x", "y"] and unread == ["z"]


@needs_nvdisasm
def test_an_audit_reads_every_record_s_sass_in_batches_with_the_per_cubin_facts(monkeypatch):
    """The compile workers run no nvdisasm; each record's traits and register-pool check equal sass_facts of its
    cubin."""
    from tileprobe.audit import pipeline, sass_reader
    monkeypatch.setattr(sass_reader, "BATCH", 2)
    made = []
    real = sass_reader.SassReader

    class Counted(real):
        def __init__(self, *a, **kw):
            super().__init__(*a, batch=2, **kw)
            made.append(self)
    monkeypatch.setattr(pipeline, "SassReader", Counted)
    result = pipeline.audit([str(DATA / "probe_vadd.py")], ["sm_90"], jobs=2, with_sass=True)
    ok = [r for r in result.records if r.ok]
    assert len(ok) >= 2 and len(made) == 1 and made[0].batches >= 1
    for r in ok:
        sass, pool = sass_facts(result.cubins[r.cubin_sha256], r.symbol)
        assert r.sass == sass and r.register_pool == pool, r.hints


@needs_nvdisasm
def test_an_audit_stopped_while_facts_wait_stores_its_compiles_and_the_store_reads_their_facts_later(monkeypatch,
                                                                                                     tmp_path):
    """Loses nothing already done: the compiles whose facts were not read yet are stored without them, and the
    store's lookup reads them from the stored cubin (as for any record stored without SASS facts)."""
    from tileprobe.audit import pipeline
    from tileprobe.audit.sass_reader import SassReader
    from tileprobe.store import Store

    class Stopping(SassReader):
        def __init__(self, *a, **kw):
            super().__init__(*a, batch=100, **kw)     # nothing is read before the end

        def close(self):
            raise KeyboardInterrupt                    # Ctrl-C as the compiles end

    monkeypatch.setattr(pipeline, "SassReader", Stopping)
    probe = str(DATA / "probe_vadd.py")
    with Store.open(str(tmp_path / "s.sqlite")) as store:
        with pytest.raises(KeyboardInterrupt):
            pipeline.audit([probe], ["sm_90"], jobs=2, with_sass=True, store=store)
        stored = store.lookup(pipeline.plan_variants(pipeline.load_probes(probe), ["sm_90"]),
                              pipeline.resolve_compiler(pipeline.Toolchain.at()))
        monkeypatch.undo()
        again = pipeline.audit([probe], ["sm_90"], jobs=2, with_sass=True, store=store)
    assert len(stored[0]) == 4 and all(r.sass is None for r in stored[0])   # stored by the stopped audit, no facts
    ok = [r for r in again.records if r.ok]
    assert len(ok) == 4
    for r in ok:                                                           # read from the stored cubins
        assert (r.sass, r.register_pool) == sass_facts(again.cubins[r.cubin_sha256], r.symbol)
