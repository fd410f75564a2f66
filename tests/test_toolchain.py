"""Managed toolchains: version matching, install (offline, with synthetic wheels), manifest, resolve, remove,
and one real install of tileiras 13.3.36 from the package registry (``slow``: about 150 MB of wheels).

The published lists below are the registry's on 2026-11-29 (FIELD_NOTES "Packages"; ``pip index versions``).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tileprobe import toolchain as tcm
from tileprobe.errors import ToolchainError
from tileprobe.toolchain import Toolchain

TILEIRAS_PUBLISHED = ["13.1.80", "13.2.51", "13.2.78", "13.2.86", "13.3.36", "13.4.59", "13.4.92", "13.5.37"]
COMPANION_PUBLISHED = ["13.0.48", "13.0.88", "13.1.80", "13.1.115", "13.2.51", "13.2.78", "13.2.86", "13.3.33",
                       "13.3.73", "13.4.59", "13.4.92", "13.5.37"]
PUBLISHED = {tcm.TILEIRAS_PKG: TILEIRAS_PUBLISHED, tcm.NVCC_PKG: COMPANION_PUBLISHED,
             tcm.NVVM_PKG: COMPANION_PUBLISHED}
HELP_13_3 = """OVERVIEW: tileiras
  --gpu-name=<value>             - Specify name of NVIDIA GPU to generate code for.
    =sm_80                       -   SM 80
    =sm_86                       -   SM 86
    =sm_90                       -   SM 90
    =sm_100                      -   SM 100
    =sm_120                      -   SM 120
  --host-arch=<value>            - Specify the architecture for the generated host code.
    =x86_64                      -   x86_64
"""


def tool_script(release_line: str, help_text: str = "") -> str:
    """A shell script answering --version (with ``release_line``) and --help like tileiras / ptxas."""
    return ("#!/bin/sh\n"
            f"if [ \"$1\" = --version ]; then printf '%s\\n' 'NVIDIA (R) fake' '{release_line}' 'Build local.1_'; exit 0; fi\n"
            "if [ \"$1\" = --help ]; then cat <<'EOF'\n" + help_text + "EOF\nexit 0; fi\nexit 2\n")


def release(v: str) -> str:
    major, minor, _ = v.split(".")
    return f"Cuda compilation tools, release {major}.{minor}, V{v}"


def write_exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_wheel(dest: Path, package: str, version: str, members: dict[str, tuple[bytes, int]]) -> Path:
    """A wheel named like the registry's, holding ``members`` (name → (bytes, unix mode))."""
    path = dest / f"{package.replace('-', '_')}-{version}-py3-none-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, (data, mode) in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            zf.writestr(info, data)
        zf.writestr(f"{package.replace('-', '_')}-{version}.dist-info/METADATA", "Name: x\n")
    return path


def fake_download(tileiras_release: str | None = None, calls: list | None = None):
    """A stand-in for ``toolchain._download`` that builds the three wheels locally."""
    def download(pins, dest):
        if calls is not None:
            calls.append(dict(pins))
        dest.mkdir(parents=True, exist_ok=True)
        t, n, v = pins[tcm.TILEIRAS_PKG], pins[tcm.NVCC_PKG], pins[tcm.NVVM_PKG]
        tile = tool_script(release(tileiras_release or t), HELP_13_3).encode()
        return {
            tcm.TILEIRAS_PKG: fake_wheel(dest, tcm.TILEIRAS_PKG, t, {"nvidia/cu13/bin/tileiras": (tile, 0o755)}),
            tcm.NVCC_PKG: fake_wheel(dest, tcm.NVCC_PKG, n, {
                "nvidia/cu13/bin/ptxas": (tool_script(release(n)).encode(), 0o755),
                "nvidia/cu13/bin/nvcc": (b"#!/bin/sh\n", 0o755),
                "nvidia/cu13/include/fatbinary_section.h": (b"", 0o644)}),
            tcm.NVVM_PKG: fake_wheel(dest, tcm.NVVM_PKG, v, {
                "nvidia/cu13/lib/libnvvm.so.4": (b"\x7fELF fake", 0o755),
                "nvidia/cu13/nvvm/bin/cicc": (b"#!/bin/sh\n", 0o755),
                "nvidia/cu13/nvvm/libdevice/libdevice.10.bc": (b"BC", 0o644),
                "nvidia/cu13/include/nvvm.h": (b"", 0o644)}),
        }
    return download


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """Published lists from PUBLISHED, synthetic wheels, no pip toolchain, toolchains in tmp_path/tc."""
    monkeypatch.setattr(tcm, "_PUBLISHED", {k: list(v) for k, v in PUBLISHED.items()})
    calls: list = []
    monkeypatch.setattr(tcm, "_download", fake_download(calls=calls))
    monkeypatch.setattr(tcm, "pip_toolchain", lambda: None)
    root = tmp_path / "tc"
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", str(root))
    return root, calls


# --- versions -------------------------------------------------------------------------------------------------

def test_parse_spec():
    assert tcm.parse_spec("13.3") == (13, 3)
    assert tcm.parse_spec(" 13.3.36 ") == (13, 3, 36)
    for bad in ("13", "v13.3", "13.3.36rc1", "13.3.x", ""):
        with pytest.raises(ToolchainError, match=r"is not a tileiras version: give MAJOR\.MINOR \(13\.4"):
            tcm.parse_spec(bad)


@pytest.mark.parametrize("spec, expected", [("13.3", "13.3.36"), ("13.2", "13.2.86"), ("13.4", "13.4.92"),
                                            ("13.4.59", "13.4.59"), ("13.5.37", "13.5.37")])
def test_match_version(spec, expected):
    assert tcm.match_version(spec, TILEIRAS_PUBLISHED) == expected


def test_match_version_unknown_lists_published():
    with pytest.raises(ToolchainError, match=r"^nvidia-cuda-tileiras 13\.4\.93 is not published; published: "
                                             r"13\.1\.80, 13\.2\.51, .*, 13\.5\.37\.$"):
        tcm.match_version("13.4.93", TILEIRAS_PUBLISHED)
    with pytest.raises(ToolchainError, match=r"13\.9 is not published"):
        tcm.match_version("13.9", TILEIRAS_PUBLISHED)


def test_companion_takes_newest_patch_of_the_major_minor():
    # tileiras 13.3.36 ships beside nvcc/nvvm 13.3.33 and 13.3.73: patches differ, the newest is taken
    assert tcm.companion_version("13.3.36", COMPANION_PUBLISHED, tcm.NVCC_PKG) == "13.3.73"
    assert tcm.companion_version("13.4.59", COMPANION_PUBLISHED, tcm.NVVM_PKG) == "13.4.92"
    assert tcm.companion_version("13.1.80", COMPANION_PUBLISHED, tcm.NVCC_PKG) == "13.1.115"
    with pytest.raises(ToolchainError, match=r"tileiras 13\.6\.1 needs nvidia-cuda-nvcc of the same major\.minor: "
                                             r"nvidia-cuda-nvcc 13\.6 is not published"):
        tcm.companion_version("13.6.1", COMPANION_PUBLISHED, tcm.NVCC_PKG)


def test_parse_pip_versions_from_index_and_download_error():
    index = ("nvidia-cuda-tileiras (13.5.37)\nAvailable versions: 13.5.37, 13.4.92, 13.4.59, 13.3.36, 13.2.86, "
             "13.2.78, 13.2.51, 13.1.80\n  INSTALLED: 13.4.92\n")
    assert tcm.parse_pip_versions(index) == TILEIRAS_PUBLISHED
    err = ("ERROR: Could not find a version that satisfies the requirement nvidia-cuda-tileiras==0.0.0a0 (from "
           "versions: 13.1.80, 13.2.51, 13.2.78, 13.2.86, 13.3.36, 13.4.46rc1, 13.4.59, 13.4.92, 13.5.37)\n")
    assert tcm.parse_pip_versions(err) == TILEIRAS_PUBLISHED  # the pre-release is dropped
    assert tcm.parse_pip_versions("(from versions: none)") == []
    assert tcm.parse_pip_versions("ERROR: network unreachable") is None


def test_published_versions_falls_back_to_pip_download_and_caches(monkeypatch):
    monkeypatch.setattr(tcm, "_PUBLISHED", {})
    seen = []

    def pip(*args, timeout_s=0):
        seen.append(args[0])
        if args[0] == "index":
            return subprocess.CompletedProcess(args, 1, "", "ERROR: unknown command")
        return subprocess.CompletedProcess(args, 1, "", "ERROR: ... (from versions: 13.4.92, 13.1.80, 13.3.36)")
    monkeypatch.setattr(tcm, "_pip", pip)
    assert tcm.published_versions() == ["13.1.80", "13.3.36", "13.4.92"]
    assert tcm.published_versions() == ["13.1.80", "13.3.36", "13.4.92"]
    assert seen == ["index", "download"]


def test_published_versions_registry_unreachable(monkeypatch):
    monkeypatch.setattr(tcm, "_PUBLISHED", {})
    monkeypatch.setattr(tcm, "_pip", lambda *a, timeout_s=0: subprocess.CompletedProcess(
        a, 1, "", "ERROR: Could not fetch URL https://pypi.org/simple/: connection refused"))
    with pytest.raises(ToolchainError, match=r"could not list the published versions of nvidia-cuda-tileiras from "
                                             r"the package registry:\n  ERROR: Could not fetch URL.*\nCheck the "
                                             r"network"):
        tcm.published_versions()


def test_parse_targets():
    assert tcm.parse_targets(HELP_13_3) == ["sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]


# --- the Toolchain record and extraction ----------------------------------------------------------------------

def test_toolchain_validates_fields():
    with pytest.raises(ToolchainError, match=r"Toolchain\.version must be MAJOR\.MINOR\.PATCH, got '13\.3'"):
        Toolchain("13.3", "/r", "/r/bin/tileiras")
    with pytest.raises(ToolchainError, match=r"Toolchain\.source must be one of .*got 'conda'"):
        Toolchain("13.3.36", "/r", "/r/bin/tileiras", source="conda")
    tc = Toolchain("13.3.36", "/r", "/r/bin/tileiras", ["/r/lib"], {"a": "1"})
    assert tc.lib_dirs == ("/r/lib",) and hash(tc) == hash(Toolchain("13.3.36", "/r", "/r/bin/tileiras", ["/r/lib"]))
    assert tc.as_dict() == {"tileiras": "/r/bin/tileiras", "lib_dirs": ["/r/lib"], "version": "13.3.36"}


@pytest.mark.parametrize("member, rel", [
    ("nvidia/cu13/bin/tileiras", "bin/tileiras"), ("nvidia/cu13/bin/ptxas", "bin/ptxas"),
    ("nvidia/cu13/bin/tileirdisasm", "bin/tileirdisasm"), ("nvidia/cu13/lib/libnvvm.so.4", "lib/libnvvm.so.4"),
    ("nvidia/cu13/nvvm/libdevice/libdevice.10.bc", "nvvm/libdevice/libdevice.10.bc"),
    ("nvidia/cu13/bin/nvcc", None), ("nvidia/cu13/bin/crt/link.stub", None), ("nvidia/cu13/nvvm/bin/cicc", None),
    ("nvidia/cu13/include/nvvm.h", None), ("nvidia_nvvm-13.3.73.dist-info/RECORD", None),
    ("nvidia/cu13/lib/../../../etc/passwd", None), ("nvidia/cu13/lib/", None)])
def test_wanted(member, rel):
    assert tcm.wanted(member) == rel


def test_extract_wheel_keeps_only_what_tileiras_needs_and_exec_bits(tmp_path):
    wheels = fake_download()({tcm.TILEIRAS_PKG: "13.3.36", tcm.NVCC_PKG: "13.3.73", tcm.NVVM_PKG: "13.3.73"},
                             tmp_path / "w")
    dest = tmp_path / "out"
    for w in wheels.values():
        tcm.extract_wheel(w, dest)
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == ["bin/ptxas", "bin/tileiras", "lib/libnvvm.so.4", "nvvm/libdevice/libdevice.10.bc"]
    assert os.access(dest / "bin/tileiras", os.X_OK) and os.access(dest / "bin/ptxas", os.X_OK)


# --- install / manifest / installed / remove ------------------------------------------------------------------

def test_install_writes_manifest_and_round_trips(offline):
    root, calls = offline
    tc = tcm.install("13.3", stream=None)
    assert (tc.version, tc.source, tc.root) == ("13.3.36", "managed", str(root / "13.3.36"))
    assert tc.pins == {tcm.TILEIRAS_PKG: "13.3.36", tcm.NVCC_PKG: "13.3.73", tcm.NVVM_PKG: "13.3.73"}
    assert tc.tileiras == str(root / "13.3.36/bin/tileiras") and tc.lib_dirs == (str(root / "13.3.36/lib"),)
    doc = json.loads((root / "13.3.36/toolchain.json").read_text())
    assert doc["schema_version"] == 1 and doc["version"] == "13.3.36"
    assert doc["build"] == "Cuda compilation tools, release 13.3, V13.3.36"
    assert set(doc["wheels"]) == set(tcm.PACKAGES)
    assert all(re.fullmatch(r"[0-9a-f]{64}", w["sha256"]) for w in doc["wheels"].values())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", doc["installed_at"])
    assert doc["size_bytes"] == sum(p.stat().st_size for p in (root / "13.3.36").rglob("*")
                                    if p.is_file() and p.name != "toolchain.json")
    assert Toolchain.from_dir(root / "13.3.36") == tc
    assert tcm.installed() == [tc]
    assert [p.name for p in root.iterdir()] == ["13.3.36"]  # no staging left behind
    assert tcm.install("13.3.36") == tc and len(calls) == 1  # installed: no second download


def test_install_sha256_is_the_wheels(offline, monkeypatch, tmp_path):
    root, _ = offline
    kept = {}
    real = tcm._download

    def keep(pins, dest):
        wheels = real(pins, dest)
        kept.update({p: hashlib.sha256(w.read_bytes()).hexdigest() for p, w in wheels.items()})
        return wheels
    monkeypatch.setattr(tcm, "_download", keep)
    tcm.install("13.4.59", stream=None)
    doc = json.loads((root / "13.4.59/toolchain.json").read_text())
    assert {p: w["sha256"] for p, w in doc["wheels"].items()} == kept
    assert doc["pins"][tcm.NVCC_PKG] == "13.4.92"  # newest 13.4 patch, not 13.4.59


def test_install_refuses_a_binary_that_is_not_the_version(offline, monkeypatch):
    root, _ = offline
    monkeypatch.setattr(tcm, "_download", fake_download(tileiras_release="13.2.86"))
    with pytest.raises(ToolchainError, match=r"the nvidia-cuda-tileiras 13\.3\.36 wheel holds tileiras 13\.2\.86"):
        tcm.install("13.3.36", stream=None)
    assert list(root.iterdir()) == []


def test_install_over_a_foreign_folder_needs_force(offline):
    root, _ = offline
    (root / "13.3.36" / "bin").mkdir(parents=True)
    with pytest.raises(ToolchainError, match=r"13\.3\.36 exists but holds no toolchain\.json .*`tileprobe toolchain "
                                             r"install 13\.3\.36 --force` replaces it"):
        tcm.install("13.3.36", stream=None)
    assert tcm.install("13.3.36", force=True, stream=None).version == "13.3.36"


def test_install_unknown_version(offline):
    with pytest.raises(ToolchainError, match=r"nvidia-cuda-tileiras 13\.3\.99 is not published; published: "
                                             r"13\.1\.80.*13\.5\.37"):
        tcm.install("13.3.99")


def test_manifest_errors(tmp_path):
    d = tmp_path / "13.4.92"
    d.mkdir()
    (d / "toolchain.json").write_text("{broken")
    with pytest.raises(ToolchainError, match=r"toolchain\.json is unreadable .*tileprobe toolchain remove 13\.4\.92 "
                                             r"&& tileprobe toolchain install 13\.4\.92"):
        Toolchain.from_dir(d)
    assert tcm.installed(tmp_path) == []  # skipped, not fatal
    (d / "toolchain.json").write_text(json.dumps({"schema_version": 99, "version": "13.4.92"}))
    with pytest.raises(ToolchainError, match=r"schema_version 99, newer than this tileprobe reads \(1\)"):
        Toolchain.from_dir(d)


def test_remove(offline):
    root, _ = offline
    tcm.install("13.3.36", stream=None)
    tcm.install("13.4.92", stream=None)
    with pytest.raises(ToolchainError, match=r"tileiras 13\.5 is not installed; managed toolchains: 13\.3\.36, "
                                             r"13\.4\.92\."):
        tcm.remove("13.5")
    assert tcm.remove("13.3").version == "13.3.36"
    assert [t.version for t in tcm.installed()] == ["13.4.92"] and not (root / "13.3.36").exists()


def test_remove_refuses_the_pip_toolchain(offline, monkeypatch, tmp_path):
    pip = Toolchain("13.4.92", str(tmp_path), str(tmp_path / "bin/tileiras"), source="pip")
    monkeypatch.setattr(tcm, "pip_toolchain", lambda: pip)
    with pytest.raises(ToolchainError, match=r"tileiras 13\.4\.92 is this environment's pip package, not a managed "
                                             r"toolchain; remove it with `pip uninstall nvidia-cuda-tileiras"):
        tcm.remove("13.4.92")


def test_toolchains_dir(monkeypatch, tmp_path):
    assert tcm.toolchains_dir({"TILEPROBE_TOOLCHAINS": str(tmp_path)}) == tmp_path
    assert tcm.toolchains_dir({}).parts[-2:] == ("tileprobe", "toolchains")


def test_pip_toolchain_requires_one_major_minor(monkeypatch):
    import importlib.metadata as md
    fake = {tcm.TILEIRAS_PKG: "13.4.92", tcm.NVCC_PKG: "13.3.73", tcm.NVVM_PKG: "13.4.92"}
    monkeypatch.setattr(md, "version", lambda name: fake[name])
    assert tcm.pip_versions() == fake
    assert tcm.pip_toolchain() is None  # cuTile skips it too


# --- resolve ------------------------------------------------------------------------------------------------------

def fake_pip_toolchain(monkeypatch, tmp_path, version="13.4.92") -> Toolchain:
    exe = write_exe(tmp_path / "cu13/bin/tileiras", tool_script(release(version)))
    pip = Toolchain(version, str(tmp_path / "cu13"), str(exe), (str(tmp_path / "cu13/lib"),),
                    {p: version for p in tcm.PACKAGES}, "pip")
    monkeypatch.setattr(tcm, "pip_toolchain", lambda: pip)
    return pip


def test_resolve_uses_the_environment_pip_tileiras_without_installing(offline, monkeypatch, tmp_path):
    pip = fake_pip_toolchain(monkeypatch, tmp_path)
    monkeypatch.setattr(tcm, "install", lambda *a, **k: pytest.fail("must not install"))
    monkeypatch.setattr(tcm, "_PUBLISHED", {})
    monkeypatch.setattr(tcm, "_query_published", lambda p: pytest.fail("an exact local version needs no registry"))
    assert tcm.resolve_toolchains(["13.4.92"]) == [pip]


def test_resolve_major_minor_picks_newest_published_and_prefers_pip(offline, monkeypatch, tmp_path):
    pip = fake_pip_toolchain(monkeypatch, tmp_path)
    monkeypatch.setattr(tcm, "install", lambda *a, **k: pytest.fail("must not install"))
    assert tcm.resolve_toolchains(["13.4", "13.4.92"]) == [pip]  # deduplicated


def test_resolve_missing_without_auto_install(offline):
    with pytest.raises(ToolchainError, match=r"^tileiras 13\.3\.36 is not installed; nothing was downloaded\. "
                                             r"Install it.* with `tileprobe toolchain install 13\.3\.36`, or add "
                                             r"--install to this command"):
        tcm.resolve_toolchains(["13.3"])          # the default installs nothing


def test_resolve_installs_missing_with_a_notice(offline, capsys):
    root, _ = offline
    (out,) = tcm.resolve_toolchains(["13.3.36"], auto_install=True)
    assert (out.tileiras, out.lib_dirs, out.version, out.source) == (
        str(root / "13.3.36/bin/tileiras"), (str(root / "13.3.36/lib"),), "13.3.36", "managed")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.fullmatch(r"tileprobe: installing tileiras 13\.3\.36 \(nvcc 13\.3\.73, nvvm "
                                          r"13\.3\.73\) into .*13\.3\.36", err[0])
    tcm.resolve_toolchains(["13.3.36"])
    assert capsys.readouterr().err == ""  # second time: already installed


def test_resolve_unknown_version_lists_published(offline):
    with pytest.raises(ToolchainError, match=r"nvidia-cuda-tileiras 13\.9\.1 is not published; published: "
                                             r"13\.1\.80, .*13\.5\.37"):
        tcm.resolve_toolchains(["13.9.1"])
    with pytest.raises(ToolchainError, match=r"'13' is not a tileiras version"):
        tcm.resolve_toolchains(["13"])


def test_resolve_offline_major_minor_falls_back_to_local(offline, monkeypatch, tmp_path):
    pip = fake_pip_toolchain(monkeypatch, tmp_path)

    def unreachable(package):
        raise ToolchainError("could not list the published versions")
    monkeypatch.setattr(tcm, "_PUBLISHED", {})
    monkeypatch.setattr(tcm, "_query_published", unreachable)
    assert tcm.resolve_toolchains(["13.4"]) == [pip]
    with pytest.raises(ToolchainError, match="could not list the published versions"):
        tcm.resolve_toolchains(["13.5"])


def test_resolve_a_path(tmp_path, monkeypatch):
    exe = write_exe(tmp_path / "tk/bin/tileiras", tool_script(release("13.2.86")))
    (tmp_path / "tk/lib").mkdir()
    (out,) = tcm.resolve_toolchains([str(exe)])
    assert (out.tileiras, out.lib_dirs, out.version) == (
        str(exe.resolve()), (str((tmp_path / "tk/lib").resolve()),), "13.2.86")
    assert tcm.resolve_toolchain(str(exe)).source == "path"
    bad = write_exe(tmp_path / "bad/tileiras", "#!/bin/sh\necho hello\n")
    with pytest.raises(ToolchainError, match=r"--version printed no release .*run `tileprobe doctor`"):
        tcm.resolve_toolchains([str(bad)])


def test_cli_install_list_remove(offline, monkeypatch, tmp_path, capsys):
    import argparse
    root, _ = offline
    fake_pip_toolchain(monkeypatch, tmp_path)
    from tileprobe.cli import toolchain as toolchain_cli
    parser = argparse.ArgumentParser()
    toolchain_cli.add_parser(parser.add_subparsers())

    def run(*argv):
        args = parser.parse_args(argv)
        return args.func(args)
    assert run("toolchain", "install", "13.3") == 0
    assert "13.3.36" in capsys.readouterr().out
    assert run("toolchain", "list", "--available") == 0
    out = capsys.readouterr().out
    assert re.search(r"13\.3\.36 .*managed .*13\.3\.73", out) and re.search(r"13\.4\.92 .*pip", out)
    assert re.search(r"13\.3\.36\s+\(installed\)", out) and re.search(r"13\.4\.92\s+\(installed\)", out)
    assert not re.search(r"13\.5\.37\s+\(installed\)", out)
    assert run("toolchain", "remove", "13.3.36") == 0 and tcm.installed() == []


def test_cli_list_without_toolchains_says_how_to_add_one(offline, capsys):
    from tileprobe.cli import main
    root, _ = offline
    assert main(["toolchain", "list"]) == 0
    assert " ".join(capsys.readouterr().out.split()) == (f"no toolchains in {root}; `tileprobe toolchain install "
                                                          "13.4` adds one")
    assert main(["toolchain", "remove", "13.1"]) == 1
    assert capsys.readouterr().err.strip() == "tileprobe: tileiras 13.1 is not installed; managed toolchains: none."


# --- the real thing -------------------------------------------------------------------------------------------

KERNEL = '''
import cuda.tile as ct

@ct.kernel
def add_one(X, Y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(Y, index=(bid,), tile=ct.load(X, index=(bid,), shape=(TILE,)) + 1.0)
'''

COMPILE = '''
import os, sys, tempfile
from tileprobe import _cutile
from tileprobe.probe.signature import ArraySpec, jit_signature
tileiras, lib = sys.argv[1], sys.argv[2]
_cutile.install_fake_driver()
_cutile.use_compiler(tileiras, [lib])
tmp = tempfile.mkdtemp()
_cutile.configure_context(tmp, 300)
from add_one_kernel import add_one
from cuda.tile.compilation import export_kernel
sig = jit_signature(add_one, [ArraySpec((1024,), "float32"), ArraySpec((1024,), "float32"), 128])
for arch in ("sm_90", "sm_120"):
    export_kernel(add_one, [sig], os.path.join(tmp, arch + ".cubin"), gpu_code=arch, output_format="cubin")
    print(arch, os.path.getsize(os.path.join(tmp, arch + ".cubin")))
print(_cutile.compiler_build_string())
'''


@pytest.mark.slow
def test_install_13_3_36_from_the_registry_and_compile(tmp_path, monkeypatch):
    """Downloads ~150 MB of wheels (3 s here, 2026-11-29); a registry failure fails the test with pip's words."""
    monkeypatch.setenv("TILEPROBE_TOOLCHAINS", str(tmp_path / "tc"))
    monkeypatch.setattr(tcm, "_PUBLISHED", {})
    try:
        tc = tcm.install("13.3.36", stream=None)
    except ToolchainError as e:
        pytest.fail(f"installing tileiras 13.3.36 from the package registry failed (is it reachable?):\n{e}")
    assert tc.pins[tcm.NVCC_PKG].startswith("13.3.") and tc.pins[tcm.NVVM_PKG].startswith("13.3.")
    out = subprocess.run([tc.tileiras, "--version"], capture_output=True, text=True, check=True).stdout
    assert "Cuda compilation tools, release 13.3, V13.3.36" in out
    ptxas = subprocess.run([os.path.join(tc.root, "bin", "ptxas"), "--version"], capture_output=True, text=True,
                           check=True).stdout
    assert f"V{tc.pins[tcm.NVCC_PKG]}" in ptxas
    assert os.path.isfile(os.path.join(tc.lib_dirs[0], "libnvvm.so.4"))
    assert "sm_90" in tcm.tileiras_targets(tc.tileiras) and "sm_107" not in tcm.tileiras_targets(tc.tileiras)
    doc = json.loads(Path(tc.root, "toolchain.json").read_text())
    assert {p: w["sha256"] for p, w in doc["wheels"].items()}.keys() == set(tcm.PACKAGES)
    # Compile for real, with a CUDA_HOME that would break tileiras if it leaked (FIELD_NOTES: the CUDA_HOME trap)
    (tmp_path / "add_one_kernel.py").write_text(KERNEL)
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(repo)]), "CUDA_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", COMPILE, tc.tileiras, tc.lib_dirs[0]], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^sm_90 \d+$", proc.stdout, re.M) and re.search(r"^sm_120 \d+$", proc.stdout, re.M)
    assert "V13.3.36" in proc.stdout
