"""The reducer's compilers one after another in one audit: a candidate that the first compiler's records rule out
(the property's wanted value lost there, or cuTile refused its source before tileiras ran) is not compiled under
the next. Real compiles of a tiny kernel under two installed releases (skipped where they are not installed)."""
import sqlite3
import textwrap

import pytest

from tileprobe.reduce.oracle import Oracle
from tileprobe.reduce.prop import parse_property
from tileprobe.reduce.stages import NOT_COMPILED, Stages, refused_before_tileiras
from tileprobe.schema import VariantRecord

KERNEL = textwrap.dedent('''
    import cuda.tile as ct
    from tileprobe import Probe
    N = 1024
    T = 256

    @ct.kernel
    def tiny(A, C):
        i = ct.bid(0)
        a = ct.load(A, index=(i,), shape=(T,))
        ct.store(C, index=(i,), tile=BODY)

    probe = Probe(kernel=tiny, args=lambda case, arrays: (arrays.randn((N,), "float32"),
                  arrays.empty((N,), "float32")), hints={"occupancy": [1, 2]},
                  grid=lambda case, hints, num_sms: (N // T,), name="tiny")
''')
COMPILES = KERNEL.replace("BODY", "a + a")
REFUSED = KERNEL.replace("BODY", "ct.reshape(a, (2, T))")     # cuTile's type check refuses it: no tileiras runs


def two_releases():
    from tileprobe.errors import TileprobeError
    from tileprobe.toolchain import resolve_toolchains
    try:
        return resolve_toolchains(["13.3.36", "13.4.92"])
    except TileprobeError as e:
        pytest.skip(f"tileiras 13.3.36 and 13.4.92 are not both installed here: {e}")


def compiled_under(store_path: str) -> dict[str, int]:
    con = sqlite3.connect(store_path)
    try:
        return dict(con.execute("select substr(tileiras, -7), count(*) from compiles group by tileiras").fetchall())
    finally:
        con.close()


def oracle(tmp_path, want, name):
    from tileprobe.store import Store
    work = tmp_path / name
    work.mkdir()
    store_path = str(tmp_path / f"{name}.sqlite")
    o = Oracle("sm_90", two_releases(), parse_property("compiles"), want, {}, str(work),
               store=Store.open(store_path), compile_timeout_s=120)
    return o, store_path


def test_a_candidate_ruled_out_by_the_first_compiler_is_not_compiled_under_the_second(tmp_path):
    o, store_path = oracle(tmp_path, (True, True), "a")
    assert o.staged
    ok, refused = o.check([COMPILES, REFUSED])
    assert ok.interesting and [v for v, _, _ in ok.judgements] == ["13.3.36", "13.4.92"]
    assert all(h for _, h, _ in ok.judgements) and not any(NOT_COMPILED in line for _, _, line in ok.judgements)
    assert not refused.interesting
    assert refused.judgements[0][1] is False and "TypeCheckingError" in refused.judgements[0][2]
    assert refused.judgements[1] == ("13.4.92", False, f"{NOT_COMPILED}13.3.36")
    # two variants (occupancy 1 and 2) of each candidate under 13.3.36, only the compiling one's under 13.4.92
    assert compiled_under(store_path) == {"13.3.36": 4, "13.4.92": 2}


def test_the_compiler_where_the_property_must_not_hold_goes_first_and_a_refusal_stops_there(tmp_path):
    o, store_path = oracle(tmp_path, (True, False), "b")
    ok, refused = o.check([COMPILES, REFUSED])
    # 13.4.92 (must not compile) first: the compiling candidate is ruled out there, 13.3.36 never compiles it
    assert ok.judgements[0] == ("13.3.36", False, f"{NOT_COMPILED}13.4.92") and ok.judgements[1][1] is True
    # the refused one has the wanted value under 13.4.92, but cuTile refuses it under every compiler: not compiled
    assert refused.judgements[1][1] is False and refused.judgements[0][2] == f"{NOT_COMPILED}13.4.92"
    assert not ok.interesting and not refused.interesting
    assert compiled_under(store_path) == {"13.4.92": 4}


def test_the_check_of_the_probe_as_given_compiles_under_every_compiler(tmp_path):
    o, store_path = oracle(tmp_path, (True,), "c")     # the wanted values are not known yet: nothing is staged
    assert not o.staged
    (refused,) = o.check([REFUSED])
    assert [v for v, _, _ in refused.judgements] == ["13.3.36", "13.4.92"]
    assert not any(NOT_COMPILED in line for _, _, line in refused.judgements)
    assert compiled_under(store_path) == {"13.3.36": 2, "13.4.92": 2}


def test_stage_order_and_refusals_on_records():
    st = Stages([object(), object(), object()], (True, False, True), parse_property("compiles"), {})
    assert st.order == [1, 0, 2]
    r = VariantRecord(kernel="k", probe="p.py", case={}, hints={}, arch="sm_90", tileiras="",
                      status="compile_error")
    r.failure, r.fix = "compile_error", ("fix the kernel at p.py:3, the line cuTile names: cuTile refused its "
                                         "source while checking it in Python, before tileiras ran (an error in "
                                         "the kernel, not the compiler's)")
    assert refused_before_tileiras(r)
    r.fix = "read tileiras' message; the repeat command: tileiras …"
    assert not refused_before_tileiras(r)
