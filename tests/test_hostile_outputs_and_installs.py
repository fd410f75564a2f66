"""What a hostile tester left open on 2026-12-05, each refused with a message naming the problem and the fix
(non-zero exit) or checked against what is really there: ``table merge -o`` onto a symbolic link, an index whose
meta.json matches an edited table's size and mtime, ``frontend install 00001.6.0``, a failed ``frontend install``
that left its folder, a frontend folder holding another release than its name, and ``compare --probe
--tileiras V,V`` (one compiler compared with itself)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tileprobe import frontend
from tileprobe.cli import main
from tileprobe.errors import ToolchainError


def _table(path: Path, tile: int) -> Path:
    row = {"problem": {"N": 4096}, "case": {"TILE": tile}, "hints": {}, "verdict": "winner", "median_us": 10.0,
           "arch": "sm_90", "gpu": f"GPU{tile}", "num_sms": 132, "tileiras": "Cuda compilation tools, release 13.4, "
           "V13.4.92", "cuda_tile": "1.7.0", "timing": "sustained"}
    path.write_text(json.dumps({"schema_version": 1, "kind": "tileprobe.tune", "tool": "t", "created": "x",
                                "provenance": {"gpu": f"GPU{tile}", "arch": "sm_90"}, "kernels": {"vadd": [row]}}))
    return path


@pytest.mark.parametrize("target", ["table", "other file", "nothing"])
def test_a_merge_onto_a_symbolic_link_is_refused_and_writes_nothing_through_it(tmp_path, capsys, target):
    a, b = _table(tmp_path / "a.json", 512), _table(tmp_path / "b.json", 1024)
    dest = tmp_path / "elsewhere.json"
    if target == "table":
        _table(dest, 256)
    elif target == "other file":
        dest.write_text("precious\n")
    before = dest.read_bytes() if dest.exists() else None
    link = tmp_path / "out.json"
    link.symlink_to(dest)
    assert main(["table", "merge", str(a), str(b), "-o", str(link)]) == (1 if target == "nothing" else 2)
    err = " ".join(capsys.readouterr().err.split())
    if target == "nothing":     # every command's output check refuses a dangling link (it made the target before)
        assert f"-o {link}: a symbolic link to {dest}, which does not exist" in err, err
    else:
        assert f"-o {link} is a symbolic link (to {dest})" in err and "give the target's own path" in err, err
    assert link.is_symlink() and os.readlink(link) == str(dest)           # the link is left as it was
    assert (dest.read_bytes() if dest.exists() else None) == before       # nothing written through it, nor made
    assert not list(tmp_path.glob("out.json.*")) and not list(tmp_path.glob("elsewhere.json.*"))


def test_an_index_shipped_beside_its_table_still_answers_and_an_edit_that_moves_the_mtime_is_read_whole(tmp_path):
    """A table and its index copied as they are (`cp -p`: a new ctime, the same size and mtime) answer from the index;
    an edit that changes the size or the mtime passes the index over. An edit that keeps the size and puts the
    mtime back is answered from the index: docs/FAILURES.md names it (the ctime would catch it, and would also
    pass over every shipped copy's index)."""
    import shutil

    from tileprobe.record.hook import load_capture
    cap = load_capture()
    key = "00aa" * 4
    doc = {"schema_version": 1, "kind": "tileprobe.tune",
           "kernels": {"a": [{"case": {}, "search": {"key": key, "config": {"TILE": 1}}}]}}
    table = _exported(tmp_path, doc)
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    shutil.copy2(table, shipped / "t.json")
    shutil.copytree(tmp_path / "t.json.index", shipped / "t.json.index", copy_function=shutil.copy2)
    assert [r["search"]["config"] for _, r in cap.index_rows(str(shipped / "t.json"), key)] == [{"TILE": 1}]
    st = os.stat(table)
    table.write_text(json.dumps(doc).replace('"TILE": 1', '"TILE": 7'))   # same size
    os.utime(table, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))       # a new mtime (a coarse clock may not move)
    assert cap.index_rows(str(table), key) is None                          # passed over: the table is read whole
    answerer = cap.Answerer(str(table))
    answerer.load()
    assert [r["search"]["config"] for _, r in answerer.rows[key]] == [{"TILE": 7}]


def _exported(tmp_path, doc: dict):
    """``doc`` written as the table ``tmp_path/t.json`` with its index beside it, as ``tune --export`` writes them."""
    from tileprobe.tune.table_store import write_index
    table = tmp_path / "t.json"
    table.write_text(json.dumps(doc))
    write_index(str(table), doc)
    return table


def _use_reads_the_table_whole(cap, table, key, why, capsys, monkeypatch) -> list:
    """`use --env` of a table whose index it does not trust: exit 0, the variable that has the command's processes
    read the table whole exported, the reason said; under that variable no process reads the index (``cap``: the
    hook's capture module). Returns the configurations the table itself answers for ``key``."""
    assert main(["use", str(table), "--env"]) == 0
    out = capsys.readouterr()
    assert f"export {cap.ENV_NO_INDEX}={table}" in out.out, out.out
    assert f"the index {table}.index is not this table's: {why}" in " ".join(out.err.split()), out.err
    monkeypatch.setenv(cap.ENV_NO_INDEX, str(table))       # what the command's processes get
    assert cap.index_rows(str(table), key) is None
    answerer = cap.Answerer(str(table))
    answerer.load()
    return [r["search"]["config"] for _, r in answerer.rows.get(key, [])]


def test_a_forged_index_meta_after_an_edit_is_caught_by_use_and_the_table_read_whole(tmp_path, monkeypatch,
                                                                                      capsys):
    """An edit of the table, then a ``meta.json`` rewritten to the edited table's size and mtime: each process's
    check (size, mtime) is fooled, so ``tileprobe use`` checks the table's SHA-256 once (written at export) and has
    its processes read the table whole; an index without that hash is not trusted either."""
    from tileprobe.record.hook import load_capture
    cap = load_capture()
    key = "00aa" * 4
    doc = {"schema_version": 1, "kind": "tileprobe.tune",
           "kernels": {"a": [{"case": {}, "search": {"key": key, "config": {"TILE": 1}}}]}}
    table = _exported(tmp_path, doc)
    assert cap.index_mismatch(str(table)) is None
    assert main(["use", str(table), "--env"]) == 0
    out = capsys.readouterr()
    assert cap.ENV_NO_INDEX not in out.out and "is not this table's" not in out.err, out
    meta_path = tmp_path / "t.json.index" / "meta.json"
    meta = json.loads(meta_path.read_text())
    table.write_text(json.dumps(doc).replace('"TILE": 1', '"TILE": 7'))    # the edit
    st = os.stat(table)
    for forged in ({**meta, "size": st.st_size, "mtime_ns": st.st_mtime_ns},
                   {"schema": meta["schema"], "size": st.st_size, "mtime_ns": st.st_mtime_ns}):
        meta_path.write_text(json.dumps(forged))
        monkeypatch.delenv(cap.ENV_NO_INDEX, raising=False)
        assert [r["search"]["config"] for _, r in cap.index_rows(str(table), key)] == [{"TILE": 1}]   # fooled
        why = cap.index_mismatch(str(table))
        assert why is not None and ("edited after the export" in why if "sha256" in forged else "no sha256" in why)
        assert _use_reads_the_table_whole(cap, table, key, why, capsys, monkeypatch) == [{"TILE": 7}]


@pytest.mark.parametrize("forgery", ["edited", "added", "removed", "no digest"])
def test_a_forged_index_bucket_is_caught_by_use_and_the_table_read_whole(tmp_path, monkeypatch, capsys, forgery):
    """A bucket of the index edited to a row the table does not hold (the table and ``meta.json`` untouched): it was
    served, since ``tileprobe use`` hashed only the table (a hostile tester, 2026-12-05). The buckets' digest is
    written at export and checked with the table's hash, once per ``use`` command: a bucket edited, added or
    removed, or an index without the digest, is said and the table read whole; the searching process's own check
    (size, mtime) is as before."""
    from tileprobe.record.hook import load_capture
    cap = load_capture()
    key, other = "00aa" * 4, "ffbb" * 4
    row = {"case": {"config": "C0"}, "search": {"key": key, "config": {"TILE": 1}}}
    doc = {"schema_version": 1, "kind": "tileprobe.tune", "kernels": {"a": [row]}}
    table = _exported(tmp_path, doc)
    monkeypatch.delenv(cap.ENV_NO_INDEX, raising=False)
    assert cap.index_mismatch(str(table)) is None
    folder = tmp_path / "t.json.index"
    bucket = folder / f"{cap.index_bucket(key)}.json"
    forged = {**row, "search": {"key": key, "config": {"TILE": 999}}}
    if forgery == "edited":
        bucket.write_text(json.dumps([["a", forged]]))
        served = [{"TILE": 999}]
    elif forgery == "added":
        (folder / f"{cap.index_bucket(other)}.json").write_text(
            json.dumps([["a", {**forged, "search": {"key": other, "config": {"TILE": 999}}}]]))
        key, served = other, [{"TILE": 999}]
    elif forgery == "removed":
        bucket.unlink()
        served = []
    else:
        meta = json.loads((folder / "meta.json").read_text())
        del meta["buckets_sha256"]
        (folder / "meta.json").write_text(json.dumps(meta))
        served = [{"TILE": 1}]
    assert [r["search"]["config"] for _, r in cap.index_rows(str(table), key)] == served   # each process: fooled
    why = cap.index_mismatch(str(table))
    assert why == ("its meta.json holds no SHA-256 of its buckets (an older tileprobe wrote it, or not tileprobe)"
                   if forgery == "no digest" else "its buckets are not the ones its meta.json names (a bucket was "
                   "edited, added or removed after the export)"), why
    assert _use_reads_the_table_whole(cap, table, key, why, capsys, monkeypatch) == \
        ([] if forgery == "added" else [{"TILE": 1}])


@pytest.mark.parametrize("version", ["00001.6.0", "1.06.0", "1.6.00", "1.6.0rc05", " 1.6.0", "1.6.0\n"])
def test_a_frontend_version_must_be_spelled_as_the_release_is(tmp_path, monkeypatch, capsys, version):
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", str(tmp_path))
    assert main(["frontend", "install", version]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"{version!r} is not a cuda-tile release" in err and "without leading zeros" in err, err
    assert os.listdir(tmp_path) == []                                       # nothing made, nothing downloaded


def test_a_failed_frontend_install_leaves_no_folder(tmp_path, monkeypatch):
    env = {"TILEPROBE_TOOLCHAINS": str(tmp_path)}
    calls = []

    def fake_run(cmd, what, timeout_s=900):     # the venv is made, then pip fails (an unpublished release)
        calls.append(cmd[2])
        if cmd[2] == "venv":
            os.makedirs(os.path.join(cmd[-1], "bin"))
            Path(cmd[-1], "pyvenv.cfg").write_text("home = /usr\n")
            return
        raise ToolchainError(f"{what} failed (exit 1):\n  ERROR: No matching distribution found for cuda-tile==99.0.0")
    monkeypatch.setattr(frontend, "_run", fake_run)
    with pytest.raises(ToolchainError, match="No matching distribution"):
        frontend.install("99.0.0", env)
    assert calls == ["venv", "pip"] and os.listdir(tmp_path) == []


def test_a_frontend_folder_holding_another_release_than_its_name_is_refused(tmp_path):
    env = {"TILEPROBE_TOOLCHAINS": str(tmp_path)}
    root = tmp_path / "cuda-tile-1.6.0"
    site = root / "lib" / "python3.11" / "site-packages"
    (site / "cuda_tile-1.7.0.dist-info").mkdir(parents=True)      # what pip really put there
    (site / frontend.PTH_NAME).write_text("/x\n")
    (root / "bin").mkdir()
    (root / "bin" / "python").write_text("")
    with pytest.raises(ToolchainError, match=r"left cuda_tile-1\.7\.0\.dist-info there, not that release.*"
                                             r"`tileprobe frontend install 1\.6\.0 --force`"):
        frontend.find("1.6.0", env)
    (site / "cuda_tile-1.7.0.dist-info").rename(site / "cuda_tile-1.6.0.dist-info")
    assert frontend.find("1.6.0", env).version == "1.6.0"


@pytest.mark.parametrize("fixed", [[], ["--fixed-bytecode"]])
def test_compare_refuses_one_compiler_named_twice(tmp_path, capsys, fixed):
    from tileprobe._cutile import which_tool
    from tileprobe.toolchain import tileiras_version
    here = tileiras_version(which_tool("tileiras"))[0]       # the pip compiler: resolved with nothing downloaded
    assert main(["compare", "--probe", str(tmp_path / "p.py"), "--tileiras", f"{here},{here}", "--no-store",
                 *fixed]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--tileiras {here},{here} names one compiler twice: compare needs two different ones" in err, err


def test_a_toolchain_manifest_that_names_another_release_than_its_folder_is_refused(tmp_path):
    from tileprobe.toolchain import MANIFEST, Toolchain, installed
    folder = tmp_path / "13.3.36"
    folder.mkdir()
    doc = {"schema_version": 1, "version": "13.5.37", "build": "Cuda compilation tools, release 13.5, V13.5.37",
           "pins": {"nvidia-cuda-tileiras": "13.5.37"}}
    (folder / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(ToolchainError, match=r"says version '13\.5\.37', build .*V13\.5\.37', nvidia-cuda-tileiras "
                                             r"'13\.5\.37', but the folder is tileiras 13\.3\.36's.*tileprobe toolchain "
                                             r"remove 13\.3\.36 && tileprobe toolchain install 13\.3\.36"):
        Toolchain.from_dir(folder)
    assert installed(tmp_path) == []                     # not listed as 13.5.37
    doc.update(version="13.3.36", build="Cuda compilation tools, release 13.3, V13.3.36",
               pins={"nvidia-cuda-tileiras": "13.3.36"})
    (folder / MANIFEST).write_text(json.dumps(doc))
    assert [t.version for t in installed(tmp_path)] == ["13.3.36"]


def test_a_managed_compiler_whose_binary_says_another_release_is_refused_when_resolved(tmp_path):
    """A folder and manifest both edited to say 13.5.37 around another release's tileiras: what it runs decides."""
    from tileprobe._cutile import which_tool
    from tileprobe.audit.pipeline import resolve_compiler
    from tileprobe.toolchain import Toolchain, tileiras_version
    real = which_tool("tileiras")
    here = tileiras_version(real)[0]
    liar = "13.5.37" if here != "13.5.37" else "13.3.36"
    tc = Toolchain(version=liar, root=str(tmp_path / liar), tileiras=real, source="managed")
    with pytest.raises(ToolchainError, match=rf"says it is tileiras {here} .*but its folder .* are {liar}'s; "
                                             rf"reinstall: tileprobe toolchain remove {liar}"):
        resolve_compiler(tc)
    assert resolve_compiler(Toolchain(version=here, root=str(tmp_path), tileiras=real, source="managed")).version == here


def test_a_link_at_a_frontends_folder_is_refused_and_its_target_is_untouched(tmp_path, monkeypatch, capsys):
    """`cuda-tile-1.6.0` a symbolic link to a user's folder: `venv --clear` emptied the target (a hostile tester,
    2026-12-05); now the install is refused before anything runs, and the target keeps its files."""
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "data.txt").write_text("precious")
    tc = tmp_path / "tc"
    tc.mkdir()
    (tc / "cuda-tile-1.6.0").symlink_to(victim)
    monkeypatch.setattr(frontend, "_run", lambda *a, **k: pytest.fail(f"ran {a[0]}"))
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", str(tc))
    assert main(["frontend", "install", "1.6.0", "--force"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "is a symbolic link" in err and "never writes through a link" in err, err
    assert sorted(p.name for p in victim.iterdir()) == ["data.txt", "sub"] and (victim / "data.txt").read_text() == "precious"


def test_a_forced_install_that_fails_keeps_the_working_frontend(tmp_path, monkeypatch):
    """--force builds beside the working environment and swaps only when the new one is whole: pip failing leaves
    the old one as it was (it was cleared first, then removed)."""
    env = {"TILEPROBE_TOOLCHAINS": str(tmp_path)}
    working = tmp_path / "cuda-tile-1.6.0" / "lib" / "python3.11" / "site-packages"
    working.mkdir(parents=True)
    (working / frontend.PTH_NAME).write_text("/x\n")

    def fake_run(cmd, what, timeout_s=900):
        if cmd[2] == "venv":
            os.makedirs(os.path.join(cmd[-1], "bin"))
            return
        raise ToolchainError(f"{what} failed (exit 1):\n  ERROR: pip could not reach the index")
    monkeypatch.setattr(frontend, "_run", fake_run)
    with pytest.raises(ToolchainError, match="could not reach the index"):
        frontend.install("1.6.0", env, force=True)
    assert (working / frontend.PTH_NAME).read_text() == "/x\n" and os.listdir(tmp_path) == ["cuda-tile-1.6.0"]


def test_compare_says_why_a_compiler_was_left_out(tmp_path, monkeypatch, capsys):
    """A managed folder whose manifest says 13.9.99 around another release's tileiras: `compare --probe` said only
    "found 1" (a hostile tester, 2026-12-05); it now names the compiler, what is wrong and the reinstall command."""
    from support import write_vec_probe

    from tileprobe._cutile import which_tool
    from tileprobe.toolchain import MANIFEST, tileiras_version
    real = which_tool("tileiras")
    here = tileiras_version(real)[0]
    folder = tmp_path / "tc" / "13.9.99"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "tileiras").symlink_to(real)
    (folder / MANIFEST).write_text(json.dumps({"schema_version": 1, "version": "13.9.99",
                                               "build": "Cuda compilation tools, release 13.9, V13.9.99",
                                               "pins": {"nvidia-cuda-tileiras": "13.9.99"}}))
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", str(tmp_path / "tc"))
    probe = write_vec_probe(tmp_path / "vec.py", occupancy=(1,))
    assert main(["compare", "--probe", probe, "--arch", "sm_90", "--tileiras", f"{here},13.9.99", "--no-store"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "need exactly two compiler builds to compare, found 1" in err, err
    assert f"says it is tileiras {here}" in err and "reinstall: tileprobe toolchain remove 13.9.99" in err, err
