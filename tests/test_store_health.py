"""The store tells damage from a full disk, reads from read-only media and notices damage (a hostile tester,
2026-12-04): a full file system was reported as "damaged … move the file aside" (a good store, intact once space
was freed); ``history`` refused a store on read-only media; a probe overwrote 8 KB of the store and the audit and
``history`` exited 0. Full and read-only file systems are real ones (a tmpfs in a user and mount namespace,
``unshare -rm``; skipped where that is not allowed); the rest injects the failure."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import types

import pytest
from test_store_prune import B1, _save

from tileprobe.cli import main
from tileprobe.errors import StoreError
from tileprobe.store import Store, connection, health

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _filled(path, n: int = 3) -> None:
    with Store.open(str(path)) as s:
        for i in range(n):
            _save(s, i, B1, "2026-10-01T00:00:00.000000Z", i + 1)


def _rows(path) -> int:
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return c.execute("SELECT COUNT(*) FROM compiles").fetchone()[0]


def _in_namespace(tmp_path, script: str) -> subprocess.CompletedProcess:
    """Run ``script`` (sh) in a new user and mount namespace where ``$M`` is a 1 MiB tmpfs holding a copy of the
    store ``$M/s.sqlite`` (from ``tmp_path/s.sqlite``); the tmpfs goes with the namespace."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    body = f"set -e\nM={mnt}\nmount -t tmpfs -o size=1m tmpfs $M\ncp {tmp_path}/s.sqlite $M/\n" + textwrap.dedent(script)
    env = dict(os.environ, PYTHONPATH=ROOT, TILEPROBE_STORE=str(tmp_path / "default.sqlite"))
    try:
        return subprocess.run(["unshare", "-rm", "sh", "-c", body], capture_output=True, text=True, env=env,
                              timeout=120)
    except FileNotFoundError:
        pytest.skip("no unshare here")


def _skip_without_namespaces(proc):
    if "mount" in proc.stderr and ("Operation not permitted" in proc.stderr or "permission denied" in proc.stderr):
        pytest.skip(f"no tmpfs in a user namespace here: {proc.stderr.strip()[:200]}")
    if proc.returncode and "unshare:" in proc.stderr:
        pytest.skip(f"no user namespaces here: {proc.stderr.strip()[:200]}")


_SAVE = """import sys
sys.path.insert(0, {tests!r})
from test_store_prune import _save, B1
from tileprobe.store import Store
from tileprobe.errors import StoreError
try:
    with Store.open(sys.argv[1]) as s:
        _save(s, 9, B1, "2026-10-02T00:00:00.000000Z", 99)
except StoreError as e:
    print("save:", e)
"""


def test_a_full_disk_is_said_as_such_and_the_store_stays_intact(tmp_path):
    _filled(tmp_path / "s.sqlite")
    (tmp_path / "save.py").write_text(_SAVE.format(tests=os.path.join(ROOT, "tests")))
    py = sys.executable
    proc = _in_namespace(tmp_path, f"""
        dd if=/dev/zero of=$M/fill bs=4k 2>/dev/null || true
        {py} -m tileprobe history --store $M/s.sqlite 2>{tmp_path}/history.err && echo "history=0" || echo "history=$?"
        {py} {tmp_path}/save.py $M/s.sqlite > {tmp_path}/save.out
        rm $M/fill
        cp $M/s.sqlite {tmp_path}/after.sqlite
        """)
    _skip_without_namespaces(proc)
    assert "history=1" in proc.stdout, (proc.stdout, proc.stderr)
    for said in ((tmp_path / "history.err").read_text(), (tmp_path / "save.out").read_text()):
        assert "no space left on" in said and "(tmpfs): " in said and "bytes free, the store" in said, said
        assert "is intact" in said and "move" not in said.replace("Do not move the store aside", ""), said
    assert _rows(str(tmp_path / "after.sqlite")) == 3


def test_a_full_disk_then_freed_space_loses_nothing(tmp_path):
    _filled(tmp_path / "s.sqlite")
    (tmp_path / "after").mkdir()
    py = sys.executable
    proc = _in_namespace(tmp_path, f"""
        dd if=/dev/zero of=$M/fill bs=4k 2>/dev/null || true
        {py} -m tileprobe history --store $M/s.sqlite >/dev/null 2>&1 || true
        rm $M/fill
        {py} -m tileprobe history --store $M/s.sqlite --json $M/../h.json
        cp $M/s.sqlite {tmp_path}/after/
        """)
    _skip_without_namespaces(proc)
    assert proc.returncode == 0, proc.stderr
    assert _rows(str(tmp_path / "after" / "s.sqlite")) == 3


def test_reading_commands_work_on_read_only_media(tmp_path):
    _filled(tmp_path / "s.sqlite")
    py = sys.executable
    proc = _in_namespace(tmp_path, f"""
        mount -o remount,ro $M
        {py} -m tileprobe history --store $M/s.sqlite --json $M/../h.json
        {py} -m tileprobe store --store $M/s.sqlite size
        """)
    _skip_without_namespaces(proc)
    assert proc.returncode == 0, proc.stderr
    import json
    doc = json.loads((tmp_path / "h.json").read_text())
    assert sorted(v["case"]["I"] for v in doc["variants"]) == [0, 1, 2]


def test_a_write_to_a_read_only_store_says_why(tmp_path, monkeypatch):
    path = tmp_path / "s.sqlite"
    _filled(path)
    monkeypatch.setattr(health, "writable", lambda p: False)
    with Store.open(str(path)) as s:
        assert s.read_only
        assert len(s._query("SELECT key FROM compiles")) == 3
        with pytest.raises(StoreError, match="cannot write the results store .* read-only media"):
            _save(s, 7, B1, "2026-10-01T00:00:00.000000Z", 70)


def _error(code: int, text: str) -> sqlite3.OperationalError:
    e = sqlite3.OperationalError(text)
    e.sqlite_errorcode = code
    return e


def test_sqlite_full_and_io_errors_on_a_low_disk_are_a_full_disk_not_damage(tmp_path, monkeypatch):
    path = str(tmp_path / "s.sqlite")
    _filled(path)
    monkeypatch.setattr(connection, "_SAVED", {"compiles": 1, "runs": 0})
    with Store.open(path) as s:
        for code, text, free in ((13, "database or disk is full", 10 << 30), (10 | (3 << 8), "disk I/O error", 4096)):
            monkeypatch.setattr(health, "free_bytes", lambda p, free=free: free)
            with pytest.raises(StoreError) as e:
                with s._errors():
                    raise _error(code, text)
            said = str(e.value)
            assert said.startswith("no space left on ") and f": {free} bytes free, the store {path} is intact" in said
            assert "kept 1 compile(s)" in said and "was not kept" in said and "damaged" not in said
        monkeypatch.setattr(health, "free_bytes", lambda p: 10 << 30)
        with pytest.raises(StoreError, match=r"disk I/O error \(sqlite: disk I/O error\); the write was rolled back") as e:
            with s._errors():
                raise _error(10, "disk I/O error")
        with pytest.raises(StoreError, match="is damaged"):
            with s._errors():
                raise _error(11, "database disk image is malformed")
    assert os.path.exists(health.note_path(path))     # damage said by sqlite: the next open checks the file


def _damage(path: str) -> None:
    """What a probe did from args(): 8 KB of 0xff written into the middle of the store file."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek((size // 2) // 4096 * 4096)
        f.write(b"\xff" * 8192)


def test_damage_by_untrusted_code_is_noticed_after_the_command_and_by_every_later_one(tmp_path, capsys):
    path = str(tmp_path / "s.sqlite")
    _filled(path, 6)
    store = Store.open(path)
    store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    _damage(path)                                     # while the audit runs
    result = types.SimpleNamespace(records=[], environment={}, wall_s=1.0)
    with pytest.raises(StoreError, match=r"is damaged \(PRAGMA quick_check: .*\.recover"):
        store.save_audit(result, "audit p.py")
    store.close()
    assert os.path.exists(health.note_path(path))
    assert main(["history", "--store", path]) != 0
    err = capsys.readouterr().err
    assert "is damaged (PRAGMA integrity_check" in err and ".recovered" in err    # history checks in full
    with pytest.raises(StoreError, match="is damaged"):
        Store.open(path)


def _damage_an_index(path: str) -> None:
    """An index whose rows no longer match its table ("row N missing from index"), which no tileprobe command saw
    happen: SQLite's own schema edited so the index names other columns than its rows were built from."""
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA writable_schema = ON")
        c.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX compiles_by_kernel ON compiles (arch, kernel, "
                  "created)' WHERE name = 'compiles_by_kernel'")


def test_a_damaged_index_is_said_by_the_commands_that_read_rows_before_they_read(tmp_path, capsys):
    path = str(tmp_path / "s.sqlite")
    _filled(path, 6)
    _damage_an_index(path)
    with sqlite3.connect(path) as c:     # what the reading commands used to pass: rows read, quick_check ok
        assert c.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        assert c.execute("SELECT COUNT(*) FROM compiles").fetchone()[0] == 6
    for argv in (["history", "--store", path], ["store", "--store", path, "size"],
                 ["store", "--store", path, "prune", "--keep-latest", "0", "--dry-run"],
                 ["history", "--store", path, "--json", "-"], ["compare", "1", "2", "--store", path],
                 ["report", "--store", path, "-o", str(tmp_path / "r.html")]):
        assert main(argv) != 0, argv
        out = capsys.readouterr()
        assert "is damaged (PRAGMA integrity_check: row 1 missing from index compiles_by_kernel" in out.err, \
            (argv, out.err)
        assert ".recovered" in out.err and "compiles" not in out.out, (argv, out.out)
    with sqlite3.connect(path) as c:     # nothing was pruned from the damaged store
        assert c.execute("SELECT COUNT(*) FROM compiles").fetchone()[0] == 6
    assert not (tmp_path / "r.html").exists()
    with Store.open(path) as s:          # a writing command's open still works (its check comes after it ran)
        assert s.read_only is False


def _compiles_without_the_index(path: str) -> int:
    """The rows of the store's ``compiles`` table read past its (damaged) index: the store file is still SQLite's."""
    with sqlite3.connect(path) as c:
        return c.execute("SELECT COUNT(*) FROM compiles NOT INDEXED").fetchone()[0]


def test_a_damage_note_path_that_is_a_link_is_replaced_not_followed(tmp_path, capsys):
    """A link at the damage note's path (``s.sqlite.damaged -> s.sqlite``, or to any other file) made the note
    overwrite what it points at (the store itself: a hostile tester, 2026-12-05): the link is replaced by the note,
    the store and the other file are as they were."""
    for target in ("s.sqlite", "victim.txt"):
        folder = tmp_path / target.replace(".", "_")
        folder.mkdir()
        path = str(folder / "s.sqlite")
        _filled(path, 6)
        _damage_an_index(path)
        (folder / "victim.txt").write_text("the user's own file\n")
        os.symlink(target, health.note_path(path))
        assert main(["history", "--store", path]) != 0
        err = capsys.readouterr().err
        assert "is damaged (PRAGMA integrity_check: row 1 missing from index compiles_by_kernel" in err, err
        assert (folder / "victim.txt").read_text() == "the user's own file\n"
        assert _compiles_without_the_index(path) == 6       # the store is still the store, all its rows there
        note = health.note_path(path)
        assert not os.path.islink(note) and os.path.isfile(note)
        assert "row 1 missing from index compiles_by_kernel" in open(note).read()
        assert not [n for n in os.listdir(folder) if n.endswith(".tmp")]       # no temporary note left


def test_a_damage_note_path_that_is_a_fifo_does_not_hang_the_command(tmp_path):
    """A FIFO at the damage note's path hung ``history`` and ``store prune`` (the note's ``open`` for writing waits
    for a reader: a hostile tester, 2026-12-05): each says the damage and exits in bounded time, the FIFO replaced
    by the note."""
    path = str(tmp_path / "s.sqlite")
    _filled(path, 6)
    _damage_an_index(path)
    env = dict(os.environ, PYTHONPATH=ROOT, TILEPROBE_STORE=str(tmp_path / "default.sqlite"))
    for argv in (["history", "--store", path], ["store", "--store", path, "prune", "--keep-latest", "0"]):
        note = health.note_path(path)
        if os.path.lexists(note):
            os.remove(note)
        os.mkfifo(note)
        try:
            proc = subprocess.run([sys.executable, "-m", "tileprobe", *argv], capture_output=True, text=True,
                                  env=env, timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{argv} blocked on the FIFO at the damage note's path")
        assert proc.returncode != 0, (argv, proc.stdout, proc.stderr)
        assert "is damaged (PRAGMA integrity_check: row 1 missing from index" in proc.stderr, (argv, proc.stderr)
        assert os.path.isfile(note) and not os.path.islink(note)
    assert _compiles_without_the_index(path) == 6


def test_a_sound_store_clears_an_old_damage_note(tmp_path):
    path = str(tmp_path / "s.sqlite")
    _filled(path)
    health.write_note(path, ["sqlite: database disk image is malformed"])
    with Store.open(path) as s:
        assert len(s._query("SELECT key FROM compiles")) == 3
    assert not os.path.exists(health.note_path(path))


def test_an_empty_store_option_is_an_error_not_the_default_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TILEPROBE_STORE", str(tmp_path / "default.sqlite"))
    _filled(tmp_path / "default.sqlite")
    assert main(["history", "--store", ""]) != 0
    assert '--store "" names no file' in capsys.readouterr().err
    with pytest.raises(StoreError, match='names no file'):
        Store.open("")


def test_a_compile_that_finds_the_disk_full_is_named_as_not_kept(tmp_path, monkeypatch):
    """On a disk with little space the audit did not say which compiles were kept (2026-12-04): the error names the
    compile that was not kept, and counts those this command kept."""
    path = str(tmp_path / "s.sqlite")
    _filled(path, 2)
    monkeypatch.setattr(connection, "_SAVED", {"compiles": 2, "runs": 0})
    monkeypatch.setattr(health, "free_bytes", lambda p: 8192)
    with Store.open(path) as s:
        real = s._conn

        class Full:
            def execute(self, sql, *a):
                if sql.startswith("INSERT"):
                    raise _error(13, "database or disk is full")
                return real.execute(sql, *a)
        s._conn = Full()
        with pytest.raises(StoreError) as e:
            _save(s, 5, B1, "2026-10-03T00:00:00.000000Z", 55)
        s._conn = real
    said = str(e.value)
    assert "no space left on" in said and "8192 bytes free" in said and "kept 2 compile(s)" in said
    assert "The compile not kept: k I=5 occupancy=1 sm_90 (ok); the kept ones are not compiled again." in said, said
    assert _rows(path) == 2


@pytest.mark.parametrize("suffix, role", [("-wal", "its write-ahead log"), ("-journal", "its rollback journal")])
def test_a_folder_where_sqlite_keeps_its_log_is_named_not_called_read_only(tmp_path, capsys, suffix, role):
    store = tmp_path / "s.sqlite"
    _filled(store)
    os.mkdir(str(store) + suffix)
    assert main(["history", "--store", str(store)]) == 1
    err = capsys.readouterr().err
    assert f"{store}{suffix} is a folder, not a file ({role}, which SQLite makes beside the store)" in err, err
    assert "read-only" not in err and "disk I/O error. Check the disk" not in err and "damaged" not in err, err
    os.rmdir(str(store) + suffix)            # moved aside as the message says: every row is there
    assert _rows(str(store)) == 3
    assert main(["history", "--store", str(store)]) == 0
