"""``--tileiras V`` with a release that is not installed downloads nothing unless asked (``--install``, or a
yes at a terminal prompt); it says the release is not installed, its size when known, and the command to install
it. No network: the registry's version list is planted, and any download fails the test."""
from __future__ import annotations

import pytest
from support import write_vec_probe

import tileprobe.toolchain as toolchain

PUBLISHED = ["13.3.36", "13.4.59", "13.4.92", "13.5.37"]


@pytest.fixture
def no_download(monkeypatch, tmp_path):
    """The registry lists 13.5.37 (not installed here: the managed toolchains' folder is an empty one of this
    test's, whatever this machine has installed); installing or downloading anything raises."""
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", str(tmp_path / "no-toolchains"))
    calls = []

    def refuse(*a, **kw):
        calls.append(a)
        raise AssertionError(f"downloaded unasked: {a}")
    monkeypatch.setattr(toolchain, "published_versions", lambda package=toolchain.TILEIRAS_PKG: list(PUBLISHED))
    monkeypatch.setattr(toolchain, "install", refuse)
    monkeypatch.setattr(toolchain, "_download", refuse)
    return calls


def _argv(command: str, probe: str, tileiras: str) -> list[str]:
    """A command line of ``command`` (audit, compare, gate) on ``probe`` with ``--tileiras tileiras``."""
    head = {"audit": ["audit", probe], "compare": ["compare", "--probe", probe], "gate": ["gate", probe]}[command]
    tail = ["--expect", "occupancy=2: met"] if command == "gate" else []
    return [*head, "--arch", "sm_90", "--tileiras", tileiras, *tail, "--no-store"]


@pytest.mark.parametrize("command", ["audit", "compare", "gate"])
def test_an_uninstalled_release_is_not_downloaded(no_download, tmp_path, capsys, command):
    from tileprobe.cli import main
    probe = write_vec_probe(tmp_path / "p.py")
    code = main(_argv(command, probe, "13.4.92,13.5" if command == "compare" else "13.5"))
    err = capsys.readouterr().err
    assert code != 0 and no_download == []
    assert "tileiras 13.5.37 is not installed; nothing was downloaded" in " ".join(err.split())
    assert "`tileprobe toolchain install 13.5.37`, or add --install" in " ".join(err.split())


def test_the_message_names_the_size_of_a_release_installed_here(no_download, tmp_path):
    import json
    root = tmp_path / "toolchains"
    (root / "13.3.36").mkdir(parents=True)
    (root / "13.3.36" / toolchain.MANIFEST).write_text(json.dumps(
        {"schema_version": 1, "version": "13.3.36", "pins": {}, "size_bytes": 209030512}))
    with pytest.raises(toolchain.ReleaseNotInstalled) as e:
        toolchain.resolve_toolchains(["13.5"], root=root)
    assert (e.value.version, e.value.size_bytes) == ("13.5.37", 209030512)
    assert "about 209 MB" in str(e.value) and no_download == []


def test_install_asked_for_installs(no_download, monkeypatch, tmp_path):
    from tileprobe.cli._common import resolve_one
    got = []
    monkeypatch.setattr(toolchain, "install", lambda version, **kw: got.append(version) or toolchain.Toolchain(
        version, str(tmp_path), str(tmp_path / "bin" / "tileiras")))
    assert resolve_one("13.5", install=True)[0].version == "13.5.37" and got == ["13.5.37"]


def test_a_wrong_arch_alone_is_refused_before_any_probe_is_loaded(tmp_path, monkeypatch, capsys):
    """`--arch sm_9` used to cost a whole probe load (33-49 s for TileGym) before its one-line error."""
    import tileprobe.audit.pipeline as pipeline
    from tileprobe.cli import main
    monkeypatch.setattr(pipeline, "load_probe_files", lambda *a, **kw: pytest.fail("loaded the probes"))
    assert main(["audit", write_vec_probe(tmp_path / "p.py"), "--arch", "sm_9", "--no-store"]) == 3
    assert "--arch sm_9: 'sm_9' is not a target tileiras lists" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["audit", "compare", "gate"])
def test_every_unusable_release_is_named_the_same_way_by_every_command(no_download, tmp_path, capsys, command):
    """One ``--tileiras`` resolver: each entry is resolved on its own and every unusable one is named, as
    ``--tileiras ENTRY: why``. audit exits 3 (none usable), the commands that need all they name exit 1."""
    from tileprobe.cli import main
    code = main(_argv(command, write_vec_probe(tmp_path / "p.py"), "13.5,13.9"))
    err = " ".join(capsys.readouterr().err.split())
    assert code == (3 if command == "audit" else 1) and no_download == []
    head = "no requested compiler can be used" if command == "audit" else "2 requested compilers cannot be used"
    assert err.startswith(f"tileprobe: {head}: --tileiras 13.5: tileiras 13.5.37 is not installed; nothing was "
                          "downloaded. Install it")
    assert err.endswith("--tileiras 13.9: nvidia-cuda-tileiras 13.9 is not published; published: 13.3.36, 13.4.59, "
                        "13.4.92, 13.5.37.")


@pytest.mark.parametrize("side", ["static", "bundle-out"])
def test_bisect_downloads_no_release_in_between_unasked(no_download, tmp_path, capsys, monkeypatch, side):
    """bisect between 13.3.36 and 13.5.37 needs 13.4.59 and 13.5.37, which are not here (13.3.36 and 13.4.92 are):
    without --install (and no terminal) nothing is downloaded, and the message names both and their size (a new
    user, 2026-12-02: bisect installed 13.4.59, 209 MB, unasked)."""
    from tileprobe.cli import main
    probe = write_vec_probe(tmp_path / "p.py")
    here = [type("T", (), {"version": v})() for v in ("13.3.36", "13.4.92")]
    monkeypatch.setattr(toolchain, "local_toolchains", lambda root=None: here)
    argv = ["bisect", probe, "--arch", "sm_90", "--where", "occupancy=2", "--property", "compiles",
            "--good", "13.3.36", "--bad", "13.5.37", "--no-store"]
    if side == "bundle-out":
        argv += ["--bundle-out", str(tmp_path / "b")]
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0 and no_download == []
    assert "2 tileiras release(s) are not installed: 13.4.59, 13.5.37; nothing was downloaded" in err
    assert "MB in all" in err and "--install" in err


def test_the_download_question_is_asked_only_at_a_terminal(monkeypatch, capsys):
    """`confirmed` (resolve_one's and bisect's question): at a terminal a yes is True and a no False; in a pipe it
    asks nothing and is False."""
    import io
    import sys

    from tileprobe.cli._common import confirmed

    class Tty(io.StringIO):
        def isatty(self):
            return True
    for answer, want in (("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False)):
        monkeypatch.setattr(sys, "stdin", Tty(answer))
        monkeypatch.setattr(sys, "stderr", Tty())
        assert confirmed("Download 13.5.37 (about 209 MB)?") is want
        assert sys.stderr.getvalue() == "Download 13.5.37 (about 209 MB)? [y/N] "
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))      # not a terminal
    assert confirmed("Download?") is False and sys.stdin.read() == "y\n"
