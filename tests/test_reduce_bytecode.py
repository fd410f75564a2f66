"""reduce compiles each distinct Tile IR program once (a candidate whose bytecode equals one already compiled runs
no tileiras), and its budget stops the compiles in flight: the candidates they were for get no answer, are not
remembered as failed, and are tried again by a resumed run."""
import contextlib
import os
import time

import pytest

from tests.support import fake_tileiras, live_processes_with
from tests.test_reduce_run import TINY, pip_tc
from tileprobe.bytecode_reuse import REUSE_ENV, code_key, reused_count
from tileprobe.reduce import engine
from tileprobe.reduce.oracle import Oracle, Outcome
from tileprobe.reduce.passes import Candidate
from tileprobe.reduce.prop import parse_property


def section(sid: int, payload: bytes, align: int = 1) -> bytes:
    """One section as cuTile's writer lays it out (``_bytecode/writer.py``); padding to 8 from offset 12+2."""
    head = bytes([sid | (0x80 if align > 1 else 0), len(payload)])
    if align > 1:
        head += bytes([align])
        head += b"\xcb" * (-(12 + len(head)) % align)   # exact only for the first section: enough here
    return head + payload


def strings(*items: bytes) -> bytes:
    out, offset = bytearray([len(items)]), 0
    out += b"\xcb" * (-len(out) % 4)
    for s in items:
        out += offset.to_bytes(4, "little")
        offset += len(s)
    return bytes(out) + b"".join(items)


#: The tiny kernel with one case: two variants (occupancy 1 and 2), two compiles per candidate.
ONE_CASE = TINY.replace('"SCALE": [True, False]', '"SCALE": [True]')
HEADER = b"\x7fTileIR\x00" + bytes([13, 3]) + b"\x00\x00"


def bytecode(code: bytes, path: bytes, line: int, helper: bytes = b"scaled@cand_aaaa:19:1_s1") -> bytes:
    return (HEADER + section(0x02, code) + section(0x03, bytes([1, line, 7])) +
            section(0x01, strings(b"kernel_fn", path.rsplit(b"/", 1)[1], path, helper)) + b"\x00")


def test_the_key_leaves_out_where_the_source_lives_and_nothing_else():
    a = bytecode(b"ops:load,add,store", b"/tmp/w/cand_aaaa.py", 10)
    moved = bytecode(b"ops:load,add,store", b"/tmp/x/cand_bbbb.py", 14, b"scaled@cand_bbbb:23:1_s1")
    other = bytecode(b"ops:load,mul,store", b"/tmp/w/cand_aaaa.py", 10)
    ka, kmoved = code_key(a, "/tmp/w/cand_aaaa.py"), code_key(moved, "/tmp/x/cand_bbbb.py")
    assert a != moved and ka == kmoved                         # file, folder, lines, helper's site: not the program
    assert code_key(a) != code_key(moved)                      # the probe not named: every string counts
    assert ka != code_key(other, "/tmp/w/cand_aaaa.py")        # an operation differs: another program
    renamed = a.replace(b"kernel_fn", b"kernel_fm")
    assert code_key(renamed, "/tmp/w/cand_aaaa.py") != ka      # the kernel's symbol is part of the program
    assert code_key(b"not bytecode") .startswith("raw-")       # unparsable: only identical bytes are equal
    assert code_key(a[:-6]).startswith("raw-")                 # cut short: no end marker


def with_text(text: bytes, path: bytes = b"/tmp/w/cand_aaaa.py") -> bytes:
    """A bytecode whose String section also holds ``text`` (a printf format or an assert message)."""
    return (HEADER + section(0x02, b"ops:load,print,store") + section(0x03, bytes([1, 10, 7])) +
            section(0x01, strings(b"kernel_fn", path.rsplit(b"/", 1)[1], path, text)) + b"\x00")


@pytest.mark.parametrize("one, two", [(b"a/b %d\n", b"c/d %d\n"), (b"msg/with/slash", b"msg/with/other"),
                                      (b"see x.py", b"see y.py"), (b"f@cand_aaaa:1:2 %d", b"f@cand_aaaa:3:4 %d")])
def test_printf_formats_and_assert_messages_are_part_of_the_key(one, two):
    probe = "/tmp/w/cand_aaaa.py"
    assert code_key(with_text(one), probe) != code_key(with_text(two), probe)
    # the probe's own path as a string is a location: another probe file, the same text, the same key
    assert code_key(with_text(one), probe) == code_key(with_text(one, b"/tmp/q/cand_cccc.py"), "/tmp/q/cand_cccc.py")


@pytest.fixture
def counted(tmp_path):
    """A tileiras that compiles for real and logs each kernel compile to ``compiles.log``."""
    from tileprobe.toolchain import Toolchain
    pip_tc()
    return Toolchain.from_binary(fake_tileiras(tmp_path, ":", logged=True)), tmp_path / "compiles.log"


def test_a_candidate_with_the_bytecode_of_one_compiled_before_is_not_compiled_again(tmp_path, counted,
                                                                                   monkeypatch):
    tc, log = counted
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv(REUSE_ENV, str(tmp_path / "reuse"))
    oracle = Oracle("sm_90", [tc], parse_property("compiles"), (True,), {"occupancy": 2}, str(work), jobs=2)
    # the same program written two ways (a local renamed): two candidates, one bytecode per hint value
    renamed = ONE_CASE.replace("extra = ", "spare = ").replace("c = a + b", "summed = a + b").replace(
        "tile=c)", "tile=summed)")
    first, second = oracle.check([ONE_CASE, renamed])
    assert oracle.compiled == 2                                # both audited: different source texts
    assert first.interesting and second.interesting
    assert first.judgements[0][2] == second.judgements[0][2]   # the same answer (registers, occupancy …)
    assert len(log.read_text().splitlines()) == 2              # tileiras ran for occupancy 1 and 2 of one of them
    assert reused_count(str(tmp_path / "reuse")) == 2          # the other's two compiles were answered from them
    other = ONE_CASE.replace("c = a + b", "c = a * b")             # another program: compiled
    oracle.check([other])
    assert len(log.read_text().splitlines()) == 4


def test_without_the_folder_every_compile_runs_tileiras(tmp_path, counted, monkeypatch):
    tc, log = counted
    monkeypatch.delenv(REUSE_ENV, raising=False)
    oracle = Oracle("sm_90", [tc], parse_property("compiles"), (True,), {"occupancy": 2}, str(tmp_path), jobs=2)
    oracle.check([ONE_CASE, ONE_CASE.replace("extra = ", "spare = ")])
    assert len(log.read_text().splitlines()) == 4


def test_the_budget_stops_compiles_in_flight_and_leaves_them_unanswered(tmp_path):
    from tileprobe.toolchain import Toolchain
    pip_tc()
    tc = Toolchain.from_binary(fake_tileiras(tmp_path, "exec sleep 613.75"))    # every kernel compile hangs
    work = tmp_path / "work"
    work.mkdir()
    oracle = Oracle("sm_90", [tc], parse_property("compiles"), (True,), {"occupancy": 2}, str(work), jobs=2,
                    compile_timeout_s=500)
    t0 = time.monotonic()
    oracle.deadline = t0 + 20
    out = oracle.check([ONE_CASE])
    assert time.monotonic() - t0 < 120                  # not the compile timeout (500 s): stopped at the deadline
    assert out[0].cut and not out[0].interesting
    assert oracle.memo == {} and oracle.compiled == 0   # no answer remembered: a resumed run audits it again
    assert not live_processes_with("sleep 613.75")      # the compilers in flight were ended


def test_a_round_cut_by_the_budget_says_so_and_remembers_no_failure(monkeypatch):
    cands = [Candidate(f"drop {i}", "x", "statement", f"delete:{i}", lambda i=i: f"x{i} = 1\n") for i in range(3)]

    class Stub:
        compiled = 0

        def check(self, sources):     # the first was answered before the deadline, the others were cut
            return [Outcome(False, (("13.4.92", False, "no"),)),
                    *[Outcome(False, (("13.4.92", False, "no variant"),), cut=True)] * (len(sources) - 1)]
    failed: set[str] = set()
    monkeypatch.setattr(engine, "candidates", lambda tree, hints, skip=None, stop=None: iter(cands))
    monkeypatch.setattr(engine, "_order", lambda src: (len(src),))
    got = engine._round("current = 'a long kernel'\n", {}, Stub(), 3, failed, None, lambda e, i: None, [])
    assert got is None                      # the budget ran out: the caller stops and journals
    assert failed == {"delete:0"}           # only the answered one is a failed edit


def test_a_resumed_run_says_so_before_it_starts(tmp_path):
    from tests.test_reduce_run import pip_tc as tc_or_skip
    tiny = tmp_path / "tiny.py"
    tiny.write_text(TINY)
    out = str(tmp_path / "out")
    kw = dict(arch="sm_90", where={"SCALE": True, "occupancy": 2}, prop="compiles", toolchains=[tc_or_skip()],
              regression=False, out_dir=out, jobs=2, budget_s=0.01)
    first = engine.reduce(str(tiny), **kw)
    events: list = []
    second = engine.reduce(str(tiny), progress=lambda e, i: events.append((e, i)), **kw)
    assert second.resumed and events[0][0] == "resumed"      # the first thing said, before "start"
    said = events[0][1]
    assert said.journal == os.path.join(out, "reduce-state.json")
    assert said.candidates == first.candidates and said.kept == len(first.kept) and said.wall_s > 0
    assert events[1][0] == "start"


def test_a_journal_written_under_another_environment_is_not_resumed_and_that_is_said(tmp_path, monkeypatch):
    # a reinstall between two runs (another nvidia-* package, cuda-tile or tileprobe) once made a resumed reduction
    # keep a step whose answer the written probe no longer gave: such a journal starts afresh, said at the start
    from tests.test_reduce_run import pip_tc as tc_or_skip
    tiny = tmp_path / "tiny.py"
    tiny.write_text(TINY)
    out = str(tmp_path / "out")
    kw = dict(arch="sm_90", where={"SCALE": True, "occupancy": 2}, prop="compiles", toolchains=[tc_or_skip()],
              regression=False, out_dir=out, jobs=2, budget_s=0.01)
    engine.reduce(str(tiny), **kw)
    real = engine.journal_environment
    monkeypatch.setattr(engine, "journal_environment", lambda tcs: [*real(tcs), ["nvidia-cuda-nvdisasm", "99.0"]])
    events: list = []
    again = engine.reduce(str(tiny), progress=lambda e, i: events.append((e, i)), **kw)
    assert not again.resumed
    assert events[0] == ("restarted", os.path.join(out, "reduce-state.json"))
    assert events[1][0] == "start"
    monkeypatch.setattr(engine, "journal_environment", real)      # the environment of the first run: resumed
    assert not engine.reduce(str(tiny), **kw).resumed              # the journal now holds the other environment's


def test_a_compiler_failure_is_reused_as_the_same_failure(tmp_path, monkeypatch):
    from tileprobe.toolchain import Toolchain
    pip_tc()
    runs = tmp_path / "runs.log"
    script = fake_tileiras(tmp_path, f'echo run >> {runs}; echo "error: planted failure 4711" >&2; exit 3')
    monkeypatch.setenv(REUSE_ENV, str(tmp_path / "reuse"))
    work = tmp_path / "work"
    work.mkdir()
    oracle = Oracle("sm_90", [Toolchain.from_binary(script)], parse_property("compiles"), (True,),
                    {"occupancy": 2}, str(work), jobs=2)
    first, second = oracle.check([ONE_CASE, ONE_CASE.replace("extra = ", "spare = ")])
    line = first.judgements[0][2]
    assert not first.interesting and "planted failure 4711" in line
    assert second.judgements == first.judgements and not second.interesting   # the same failure, replayed
    assert len(runs.read_text().splitlines()) == 2     # tileiras ran for one of them (occupancy 1 and 2)
    assert reused_count(str(tmp_path / "reuse")) == 2


def fake_cubin(n: int) -> bytes:
    """An ELF64 header with EM_CUDA as its machine (what :func:`is_cubin` reads), then ``n``."""
    return (b"\x7fELF\x02\x01\x01" + bytes(11) + (190).to_bytes(2, "little")).ljust(64, b"\x00") + b"fresh %d" % n


def test_only_a_cuda_elf_file_reads_as_a_cubin():
    from tileprobe.bytecode_reuse import is_cubin
    assert is_cubin(fake_cubin(1))
    assert not is_cubin(b"\x7fELF planted" + bytes(60))                      # not ELF64, machine not EM_CUDA
    assert not is_cubin(fake_cubin(1)[:40]) and not is_cubin(b"not an ELF file at all" * 4)


def _poison(entry: str, how: str) -> None:
    """Replace the cache file ``entry`` as a hostile tester did."""
    os.unlink(entry)
    if how == "fifo":
        os.mkfifo(entry)
    elif how == "garbage":
        with open(entry, "wb") as f:
            f.write(b"\x7fELF but no cubin" + bytes(60))
    elif how == "dev-zero":
        os.symlink("/dev/zero", entry)
    elif how == "link":
        target = entry + ".elsewhere"
        with open(target, "wb") as f:
            f.write(fake_cubin(999))
        os.symlink(target, entry)
    elif how == "folder":
        os.mkdir(entry)


@pytest.mark.parametrize("how", ["fifo", "garbage", "dev-zero", "link", "folder"])
@pytest.mark.parametrize("kind", ["cubin", "failed.json", "lock"])
def test_a_bad_file_in_the_reuse_folder_is_a_miss_compiled_afresh(tmp_path, how, kind):
    from tileprobe.bytecode_reuse import compile_once, failure_of
    folder, bc = str(tmp_path / "reuse"), tmp_path / "k.tilebc"
    bc.write_bytes(bytecode(b"ops:load,add,store", b"/tmp/w/cand_aaaa.py", 10))
    cubin, runs = tmp_path / "k.cubin", []

    def compiled():
        runs.append(1)
        cubin.write_bytes(fake_cubin(len(runs)))

    def failing():
        import subprocess
        runs.append(1)
        try:
            raise subprocess.CalledProcessError(3, ["tileiras"], "", "error: planted")
        except subprocess.CalledProcessError as e:
            raise RuntimeError("compile failed") from e

    def replay(f):
        return AssertionError(f"a failure was replayed: {f}")

    first = failing if kind == "failed.json" else compiled
    with pytest.raises(RuntimeError) if kind == "failed.json" else contextlib.nullcontext():
        compile_once(folder, str(bc), ["tileiras"], str(cubin), None, first, replay)
    assert failure_of(RuntimeError()) is None
    [entry] = [os.path.join(folder, n) for n in os.listdir(folder) if n.endswith("." + kind)]
    _poison(entry, how)
    if kind == "lock":      # no hang, no error: the lock is made again and the good cubin reused
        assert compile_once(folder, str(bc), ["tileiras"], str(cubin), None, compiled, replay) is (how != "folder")
        assert cubin.read_bytes() == fake_cubin(len(runs))
        return
    assert compile_once(folder, str(bc), ["tileiras"], str(cubin), None, compiled, replay) is False
    assert cubin.read_bytes() == fake_cubin(len(runs))    # compiled afresh, not an error or a verdict
    assert reused_count(folder) == 0
    if how != "folder":     # the bad entry made way for the good one: the next equal compile reuses it
        assert compile_once(folder, str(bc), ["tileiras"], str(tmp_path / "again.cubin"), None, compiled,
                            replay) is True
        assert (tmp_path / "again.cubin").read_bytes() == cubin.read_bytes()


def test_fifos_in_place_of_the_reused_cubins_give_the_same_verdict_not_a_compile_error(tmp_path, counted,
                                                                                     monkeypatch):
    tc, log = counted
    work, reuse = tmp_path / "work", tmp_path / "reuse"
    work.mkdir()
    monkeypatch.setenv(REUSE_ENV, str(reuse))
    oracle = Oracle("sm_90", [tc], parse_property("compiles"), (True,), {"occupancy": 2}, str(work), jobs=2)
    [first] = oracle.check([ONE_CASE])
    cubins = [p for p in reuse.iterdir() if p.name.endswith(".cubin")]
    assert len(cubins) == 2                      # occupancy 1 and 2
    for p in cubins:                             # what a hostile watcher did to the folder
        p.unlink()
        os.mkfifo(p)
    [second] = oracle.check([ONE_CASE.replace("extra = ", "spare = ")])
    assert second.interesting and second.judgements == first.judgements, second.judgements
    assert len(log.read_text().splitlines()) == 4     # compiled afresh: the FIFOs were misses
    assert reused_count(str(reuse)) == 0
    assert all(p.is_file() for p in cubins)          # and replaced by the fresh cubins
