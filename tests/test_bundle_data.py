"""A bundle is data: `tileprobe run --bundle DIR` reads audit.json and cubins/ without running or reading
anything else — probe code only from paths on the command line, cubin names checked, regular files only, every
malformed field named."""
import hashlib
import json
import os
import re
import threading

import pytest

from tileprobe.cli import main
from tileprobe.errors import TileprobeError
from tileprobe.run import session
from tileprobe.run.bundle import cubin_reader, load_bundle_records
from tileprobe.run.watchdog import TaskOutcome
from tileprobe.schema import VariantRecord, dump

CUBIN = b"\x7fELF not really a cubin"
SHA = hashlib.sha256(CUBIN).hexdigest()


def _record(**kw):
    fields = dict(kernel="k", probe="/audit/machine/probe_k.py", case={"T": 1}, hints={"occupancy": 1},
                  arch="sm_90", tileiras="Cuda compilation tools, release 13.4, V13.4.92", status="ok",
                  cubin_sha256=SHA, symbol="k", threads=128, registers=32, ctas_per_sm=4)
    fields.update(kw)
    return VariantRecord(**fields)


def _bundle(tmp_path, records=None, doc=None):
    d = tmp_path / "bundle"
    (d / "cubins").mkdir(parents=True)
    (d / "cubins" / f"{SHA}.cubin").write_bytes(CUBIN)
    doc = doc if doc is not None else dump(records or [_record()], {"tileiras": ["t"]})
    (d / "audit.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return d


def _doc_with(**variant_fields):
    doc = dump([_record()], {})
    doc["variants"][0].update(variant_fields)
    return doc


@pytest.mark.parametrize("doc, message", [
    ("{not json", r"audit\.json: not JSON \(line 1, column 2"),
    ("[1, 2]", r"audit\.json: holds list, not a tileprobe result object"),
    ({"schema_version": "2", "variants": []}, r"audit\.json: schema_version is '2', not an integer"),
    ({"schema_version": 2, "variants": {}}, r"audit\.json: variants is dict, not a list"),
    ({"schema_version": 2, "variants": ["x"]}, r"audit\.json: variants\[0\] is str, not an object"),
    (_doc_with(case=[1]), r"audit\.json: variants\[0\]\.case is \[1\], not an object"),
    (_doc_with(threads="128"), r"audit\.json: variants\[0\]\.threads is \"128\", not an integer or null"),
    (_doc_with(kernel=None), r"audit\.json: variants\[0\]\.kernel is null, not a string"),
    (_doc_with(cubin_sha256="../../../../etc/passwd"), r"variants\[0\]\.cubin_sha256 is '\.\./\.\./\.\./\.\./etc/passwd', "
                                                       r"not 64 lowercase hex digits"),
    (_doc_with(cubin_sha256="/etc/passwd"), r"variants\[0\]\.cubin_sha256 is '/etc/passwd', not 64"),
    (_doc_with(cubin_sha256="a" * 63 + "\x00"), r"variants\[0\]\.cubin_sha256 is 'a{63}\\x00', not 64"),
    (_doc_with(arch="sm_9000"), r"variants\[0\]\.arch: "),
    ({"schema_version": 99, "variants": []}, r"audit\.json: written with result schema 99"),
])
def test_malformed_audit_json_names_the_file_and_the_field(tmp_path, doc, message):
    d = _bundle(tmp_path, doc=doc)
    with pytest.raises(TileprobeError, match=message) as info:
        session.load_bundle(str(d))
    assert str(d / "audit.json") in str(info.value)


def test_cubins_are_read_only_from_the_bundle_as_regular_files(tmp_path):
    d = _bundle(tmp_path)
    get = cubin_reader(str(d))
    assert get(SHA) == CUBIN and get("0" * 64) is None
    for bad in ("../audit", "/etc/passwd", "A" * 64, "a" * 63 + "\0", SHA + "/../x"):
        with pytest.raises(TileprobeError, match="is not 64 lowercase hex digits"):
            get(bad)
    outside = tmp_path / "secret.cubin"
    outside.write_bytes(b"secret")
    link = "1" * 64
    os.symlink(outside, d / "cubins" / f"{link}.cubin")
    with pytest.raises(TileprobeError, match="is a symbolic link; a bundle holds regular files only"):
        get(link)
    fifo = "2" * 64
    os.mkfifo(d / "cubins" / f"{fifo}.cubin")
    box = {}

    def read_fifo():
        try:
            get(fifo)
        except TileprobeError as e:
            box["error"] = str(e)
    t = threading.Thread(target=read_fifo, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading a FIFO from a bundle blocked"
    assert "is a FIFO" in box["error"]


@pytest.mark.parametrize("name, read, message", [
    ("cubins", lambda d: cubin_reader(str(d))(SHA), "is not a folder of the bundle"),
    ("audit.json", lambda d: load_bundle_records(str(d)), "audit.json is a symbolic link"),
])
def test_bundle_parts_that_are_links_are_refused(tmp_path, name, read, message):
    d = _bundle(tmp_path)
    os.rename(d / name, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", d / name)
    with pytest.raises(TileprobeError, match=message):
        read(d)


def test_recorded_probe_paths_are_never_imported(tmp_path):
    """A bundle whose records name a probe next to it (or anywhere) does not get it imported: only the probe files
    given on the command line are (trust_recorded=False)."""
    d = _bundle(tmp_path)
    evil = d / "probe_k.py"
    evil.write_text("open(__file__ + '.ran', 'w').close()\n")
    recorded = str(evil)
    assert session.resolve_probe_path(recorded, [], [str(d)], trust_recorded=False) is None
    assert session.resolve_probe_path(recorded, [], [str(d)]) == recorded      # records audited here: trusted
    given = tmp_path / "mine" / "probe_k.py"
    given.parent.mkdir()
    given.write_text("")
    assert session.resolve_probe_path(recorded, [str(given)], trust_recorded=False) == str(given)


class FakeWatchdog:
    """Stands in for the GPU worker: records what would run."""
    restarts = 0
    submitted: list = []

    def __init__(self, timeout_s=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def start(self):
        return {"sm": "sm_90", "name": "Fake GPU", "num_sms": 132, "driver": "0"}

    def submit(self, fn, kwargs, timeout_s=None):
        FakeWatchdog.submitted.append(kwargs["probe_path"])
        return TaskOutcome("done", value={"status": "ok", "median_us": 1.0}, wall_s=0.1, worker_pid=1)

    def close(self):
        pass


def test_run_bundle_imports_only_given_probes(tmp_path, monkeypatch):
    d = _bundle(tmp_path, records=[_record(probe=str(tmp_path / "bundle" / "probe_k.py"))])
    (d / "probe_k.py").write_text("open(__file__ + '.ran', 'w').close()\n")
    monkeypatch.setattr(session._watchdog, "Watchdog", FakeWatchdog)
    FakeWatchdog.submitted = []
    with pytest.raises(TileprobeError, match=r"name its probe files too \(probe_k\.py\): a bundle is data, and "
                                             r"tileprobe imports probe code only from probe files given on the "
                                             r"command line"):
        session.run_sweep([], bundle=str(d))
    monkeypatch.chdir(d)   # the cwd holds the recorded file too: still not imported
    res = session.run_sweep([str(tmp_path / "other.py")], bundle=str(d))
    assert res.records == []   # the bundle's probe is probe_k.py; other.py picks none of its records
    given = tmp_path / "mine" / "probe_k.py"
    given.parent.mkdir()
    given.write_text("")
    res = session.run_sweep([str(given)], bundle=str(d))
    assert FakeWatchdog.submitted == [str(given)] and res.records[0].run.status == "ok"
    assert not (d / "probe_k.py.ran").exists()


def test_run_bundle_cli_says_a_bundle_is_data(tmp_path, capsys):
    d = _bundle(tmp_path, doc=_doc_with(cubin_sha256="../x"))
    assert main(["run", "--bundle", str(d), "p.py"]) == 1
    err = capsys.readouterr().err
    assert "variants[0].cubin_sha256" in err and "Traceback" not in err


def test_tune_bundle_imports_only_given_probes_and_reports_bad_cubins(tmp_path):
    from types import SimpleNamespace

    from tileprobe.tune.gpu import WorkerBench
    d = _bundle(tmp_path)
    (d / "probe_k.py").write_text("")
    get = cubin_reader(str(d))
    rec = _record(probe=str(d / "probe_k.py"))
    bench = WorkerBench(None, {}, get, search_dirs=[str(d)], trust_recorded=False)
    out = bench.payload(SimpleNamespace(id="c1", record=rec))
    assert isinstance(out, str) and "a bundle is data" in out and "tileprobe run --bundle DIR path/to/probe_k.py" in out
    os.symlink(tmp_path / "elsewhere", d / "cubins" / f"{'3' * 64}.cubin")
    bad = bench.payload(SimpleNamespace(id="c2", record=_record(cubin_sha256="3" * 64)))
    assert "is a symbolic link; a bundle holds regular files only" in bad
    given = tmp_path / "probe_k.py"
    given.write_text("")
    ok = WorkerBench(None, {}, get, probe_paths=[str(given)], trust_recorded=False).payload(
        SimpleNamespace(id="c3", record=rec))
    assert ok["probe_path"] == str(given) and ok["cubin"] == CUBIN


@pytest.mark.parametrize("doc, message", [
    ("[" * 200_000 + "]" * 200_000, r"audit\.json: nested deeper than the JSON reader goes"),
    ('{"schema_version": 2, "variants": [], "x": ' + "7" * 5000 + "}",
     r"audit\.json: holds a number of more than 4,300 digits"),
], ids=["nested-200000", "int-5000-digits"])
def test_run_bundle_of_a_deep_or_huge_number_document_is_a_message_not_a_traceback(tmp_path, capsys, doc, message):
    """A hostile tester (2026-12-04): RecursionError and ValueError tracebacks."""
    d = _bundle(tmp_path, doc=doc)
    with pytest.raises(TileprobeError, match=message):
        session.load_bundle(str(d))
    assert main(["run", "--bundle", str(d), "p.py"]) == 1
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err, err
