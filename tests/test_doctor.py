"""``tileprobe doctor`` against fake environments: toolkits, tileiras scripts and pip metadata built in tmp dirs.

The diagnoses pinned here are the ones users hit (FIELD_NOTES "Picking the compiler"): a CUDA_HOME pointing at an
older toolkit (tileiras then fails every compile with only "failed to compile Tile IR program", exit 5), and
nvidia-cuda-nvcc / nvidia-nvvm releases that do not match nvidia-cuda-tileiras (cuTile then silently skips the pip
compiler).
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
from pathlib import Path

import pytest

from tileprobe import toolchain as tcm
from tileprobe.analyses import doctor
from tileprobe.analyses.doctor import Finding

ALL_TARGETS = ["sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_107", "sm_110",
               "sm_120", "sm_121"]


def write_exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_tileiras(folder: Path, version: str, targets=ALL_TARGETS) -> Path:
    """A ``bin/tileiras`` script answering --version and --help the way tileiras 13.x does."""
    major, minor, _ = version.split(".")
    help_text = "".join(f"    ={t:<28}-   SM {t[3:]}\n" for t in targets)
    return write_exe(folder / "bin" / "tileiras", (
        "#!/bin/sh\n"
        f"if [ \"$1\" = --version ]; then printf '%s\\n' 'tileiras: NVIDIA (R) Cuda Tile IR optimizing assembler' "
        f"'Cuda compilation tools, release {major}.{minor}, V{version}' 'Build local.local.1_'; exit 0; fi\n"
        "if [ \"$1\" = --help ]; then cat <<'EOF'\n"
        "  --gpu-name=<value>             - Specify name of NVIDIA GPU to generate code for.\n"
        f"{help_text}  --lineinfo - Generate line-number information\nEOF\nexit 0; fi\nexit 5\n"))


def fake_toolkit(root: Path, version: str = "13.0.2", *, version_json=True, nvcc=True, header=False,
                 libnvvm=False) -> Path:
    """A CUDA toolkit folder: version.json, a bin/nvcc script, include/cuda.h, lib/libnvvm.so.4 as asked."""
    root.mkdir(parents=True, exist_ok=True)
    major, minor, patch = version.split(".")
    if version_json:
        (root / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": version}}))
    if nvcc:
        write_exe(root / "bin" / "nvcc", "#!/bin/sh\nprintf '%s\\n' 'nvcc: NVIDIA (R) Cuda compiler driver' "
                                         f"'Cuda compilation tools, release {major}.{minor}, V{version}'\n")
    if header:
        (root / "include").mkdir(exist_ok=True)
        (root / "include" / "cuda.h").write_text(f"#define CUDA_VERSION {int(major) * 1000 + int(minor) * 10}\n")
    if libnvvm:
        (root / "lib").mkdir(exist_ok=True)
        (root / "lib" / "libnvvm.so.4").write_bytes(b"\x7fELF")
    return root


@pytest.fixture
def fake_pip(monkeypatch, tmp_path):
    """Set the pip versions of the three packages (``None`` = not installed) and the ``nvidia/cu13`` folder."""
    real_version = importlib.metadata.version

    def set_pip(versions: dict[str, str | None], cu13_tileiras: str | None = None):
        def version(name):
            if name in tcm.PACKAGES:
                if versions.get(name) is None:
                    raise importlib.metadata.PackageNotFoundError(name)
                return versions[name]
            return real_version(name)
        monkeypatch.setattr(importlib.metadata, "version", version)
        cu13 = tmp_path / "site-packages" / "nvidia" / "cu13"
        if cu13_tileiras:
            fake_tileiras(cu13, cu13_tileiras)
        monkeypatch.setattr(tcm, "pip_cu13_dir", lambda: cu13 if cu13_tileiras else None)
    return set_pip


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    """No /usr/local/cuda* and no GPU, so results do not depend on the machine running the tests."""
    monkeypatch.setattr(doctor, "_default_toolkit_dirs", lambda: [])
    monkeypatch.setattr(doctor, "gpu_info", lambda env: None)


def env_with(tmp_path: Path, **extra) -> dict[str, str]:
    # /usr/bin:/bin for the fake scripts' `cat`; no tileiras lives there (test_this_environment would show it)
    return {"PATH": f"{tmp_path / 'path' / 'bin'}:/usr/bin:/bin", "TILEPROBE_TOOLCHAINS": str(tmp_path / "toolchains"), **extra}


def one(findings, topic) -> Finding:
    hits = [f for f in findings if f.topic == topic]
    assert len(hits) == 1, (topic, findings)
    return hits[0]


NO_PIP = {p: None for p in tcm.PACKAGES}
PIP_13_4 = {p: "13.4.92" for p in tcm.PACKAGES}


# --- (a) CUDA_HOME pointing at an older toolkit ---------------------------------------------------------------

def test_cuda_home_older_than_tileiras_is_an_error_when_cutile_passes_it(tmp_path, fake_pip):
    fake_pip(NO_PIP)
    fake_tileiras(tmp_path / "path", "13.4.92")  # on PATH: cuTile keeps CUDA_HOME for it
    home = fake_toolkit(tmp_path / "cuda-13.0", "13.0.2")
    findings = doctor.diagnose(env_with(tmp_path, CUDA_HOME=str(home)))
    f = one(findings, "CUDA_HOME")
    assert f.level == "error"
    assert re.match(r"CUDA_HOME=\S+cuda-13\.0 is CUDA 13\.0\.2 \(from version\.json\), older than tileiras 13\.4\.92: "
                    r"tileiras takes libnvvm and ptxas from \$CUDA_HOME instead of its own and fails every compile "
                    r"with only 'error: failed to compile Tile IR program' \(exit code 5\); cuTile passes CUDA_HOME "
                    r"to the tileiras it uses \(found via PATH\)\.$", f.message)
    assert re.fullmatch(r"unset CUDA_HOME \(cuTile and tileprobe find tileiras without it\), or point it at a "
                        r"CUDA 13\.4\+ toolkit that has lib/libnvvm\.so\.4", f.fix)
    assert re.search(r"cuTile would use tileiras 13\.4\.92 at \S+/path/bin/tileiras, found via PATH",
                     one(findings, "compiler choice").message)


@pytest.mark.parametrize("kind, how", [("nvcc", r"bin/nvcc --version"), ("header", r"include/cuda\.h")])
def test_old_toolkit_version_read_without_version_json(tmp_path, fake_pip, kind, how):
    fake_pip(NO_PIP)
    fake_tileiras(tmp_path / "path", "13.4.92")
    home = fake_toolkit(tmp_path / "tk", "13.0.88", version_json=False, nvcc=kind == "nvcc", header=kind == "header")
    f = one(doctor.diagnose(env_with(tmp_path, CUDA_HOME=str(home))), "CUDA_HOME")
    assert f.level == "error" and re.search(rf"is CUDA 13\.0(\.88)? \(from {how}\), older than tileiras 13\.4\.92",
                                            f.message)


def test_cuda_home_older_is_a_warning_when_cutile_drops_it(tmp_path, fake_pip):
    fake_pip(PIP_13_4, cu13_tileiras="13.4.92")  # the pip compiler: cuTile 1.7 removes CUDA_HOME for it
    home = fake_toolkit(tmp_path / "cuda-13.0", "13.0.2", libnvvm=True)
    findings = doctor.diagnose(env_with(tmp_path, CUDA_HOME=str(home)))
    f = one(findings, "CUDA_HOME")
    assert f.level == "warn"
    assert re.search(r"is CUDA 13\.0\.2 \(from version\.json\), older than tileiras 13\.4\.92: .*failed to compile "
                     r"Tile IR program.*cuTile and tileprobe drop CUDA_HOME for their own compiles, but tileiras run "
                     r"from a shell or from PATH \(e\.g\. tileprobe's repro commands\) fails\.$", f.message)
    assert f.fix.startswith("unset CUDA_HOME")
    assert "found via pip packages" in one(findings, "compiler choice").message


def test_cuda_path_is_read_by_tileiras_on_linux_too(tmp_path, fake_pip):
    fake_pip(NO_PIP)
    fake_tileiras(tmp_path / "path", "13.3.36")
    home = fake_toolkit(tmp_path / "cuda-13.0", "13.0.2")
    f = one(doctor.diagnose(env_with(tmp_path, CUDA_PATH=str(home))), "CUDA_PATH")
    assert f.level == "error" and re.search(r"older than tileiras 13\.3\.36", f.message)
    assert re.match(r"unset CUDA_PATH .*CUDA 13\.3\+ toolkit", f.fix)
    shadowed = one(doctor.diagnose(env_with(tmp_path, CUDA_PATH=str(home), CUDA_HOME=str(home))), "CUDA_PATH")
    assert shadowed.level == "ok" and "shadowed by CUDA_HOME" in shadowed.message


def test_cuda_home_without_libnvvm_or_empty(tmp_path, fake_pip):
    fake_pip(NO_PIP)
    fake_tileiras(tmp_path / "path", "13.4.92")
    newer = fake_toolkit(tmp_path / "runtime-only", "13.5.0")
    f = one(doctor.diagnose(env_with(tmp_path, CUDA_HOME=str(newer))), "CUDA_HOME")
    assert f.level == "error" and re.search(r"has no nvvm/lib64/libnvvm\.so or lib/libnvvm\.so\.4", f.message)
    f = one(doctor.diagnose(env_with(tmp_path, CUDA_HOME="")), "CUDA_HOME")
    assert f.level == "error" and re.match(r"CUDA_HOME is set but empty: tileiras 13\.4\.92 then loads whatever "
                                           r"libnvvm the dynamic linker finds", f.message)


def test_cuda_home_matching_toolkit_is_fine(tmp_path, fake_pip):
    fake_pip(NO_PIP)
    fake_tileiras(tmp_path / "path", "13.4.92")
    home = fake_toolkit(tmp_path / "cuda-13.4", "13.4.1", libnvvm=True)
    findings = doctor.diagnose(env_with(tmp_path, CUDA_HOME=str(home)))
    assert one(findings, "CUDA_HOME").level == "ok"
    assert not [f for f in findings if f.level == "error"]


def test_toolkit_version_sources(tmp_path):
    assert doctor.toolkit_version(fake_toolkit(tmp_path / "a", "13.0.2")) == ("13.0.2", "version.json")
    assert doctor.toolkit_version(fake_toolkit(tmp_path / "b", "12.8.93", version_json=False)) == \
        ("12.8.93", "bin/nvcc --version")
    assert doctor.toolkit_version(fake_toolkit(tmp_path / "c", "13.1.0", version_json=False, nvcc=False,
                                               header=True)) == ("13.1", "include/cuda.h")
    assert doctor.toolkit_version(tmp_path / "nothing") == (None, "")


# --- (b) mismatched nvcc / nvvm releases ----------------------------------------------------------------------

def test_mismatched_nvcc_release(tmp_path, fake_pip):
    fake_pip({tcm.TILEIRAS_PKG: "13.4.92", tcm.NVCC_PKG: "13.3.73", tcm.NVVM_PKG: "13.4.92"}, cu13_tileiras="13.4.92")
    fake_tileiras(tmp_path / "path", "13.3.36")
    findings = doctor.diagnose(env_with(tmp_path))
    f = one(findings, "pip packages")
    assert f.level == "error"
    assert re.fullmatch(r"nvidia-cuda-tileiras 13\.4\.92, nvidia-cuda-nvcc 13\.3\.73, nvidia-nvvm 13\.4\.92: "
                        r"major\.minor differ, so cuTile silently skips the pip tileiras \(a warnings\.warn at most\) "
                        r"and uses another compiler or none", f.message)
    assert re.fullmatch(r'align them with tileiras: pip install "nvidia-cuda-nvcc==13\.4\.\*" \(or move tileiras to '
                        r'their release: pip install "nvidia-cuda-tileiras==13\.3\.\*"\)', f.fix)
    pick = one(findings, "compiler choice").message
    assert re.match(r"cuTile would use tileiras 13\.3\.36 at \S+/path/bin/tileiras, found via PATH \(pip packages "
                    r"skipped: .*differ in major\.minor\)", pick)
    assert any(f.topic == "tileiras" and "13.4.92" in f.message and "pip packages" in f.message for f in findings)


def test_mismatched_nvvm_and_nothing_else_means_no_compiler(tmp_path, fake_pip):
    fake_pip({tcm.TILEIRAS_PKG: "13.4.92", tcm.NVCC_PKG: "13.4.92", tcm.NVVM_PKG: "13.2.86"}, cu13_tileiras="13.4.92")
    findings = doctor.diagnose(env_with(tmp_path))
    assert re.search(r'pip install "nvidia-nvvm==13\.4\.\*"', one(findings, "pip packages").fix)
    f = one(findings, "compiler choice")
    assert f.level == "error" and re.match(r"cuTile finds no tileiras \(pip packages skipped: .*; no tileiras on PATH; "
                                           r"no tileiras in /usr/local/cuda\*/bin\)", f.message)
    assert f.fix == doctor.compiler_install_text()
    assert f.fix.startswith("pip install 'nvidia-cuda-tileiras==13.4.*' 'nvidia-cuda-nvcc==13.4.*' 'nvidia-nvvm==13.4.*'")


def test_incomplete_pip_set(tmp_path, fake_pip):
    fake_pip({tcm.TILEIRAS_PKG: "13.4.92", tcm.NVCC_PKG: "13.4.92", tcm.NVVM_PKG: None})
    f = one(doctor.diagnose(env_with(tmp_path)), "pip packages")
    assert f.level == "warn" and "not nvidia-nvvm" in f.message and f.fix == 'pip install "nvidia-nvvm==13.4.*"'


# --- compilers, targets, toolchains, GPU ------------------------------------------------------------------------

def test_every_tileiras_in_sight_is_listed_once(tmp_path, fake_pip, monkeypatch):
    fake_pip(PIP_13_4, cu13_tileiras="13.4.92")
    fake_tileiras(tmp_path / "path", "13.3.36", targets=ALL_TARGETS[:6] + ["sm_100", "sm_120"])
    home = fake_toolkit(tmp_path / "cuda-13.2", "13.2.0", libnvvm=True)
    fake_tileiras(home, "13.2.86")
    managed = tmp_path / "toolchains" / "13.5.37"
    fake_tileiras(managed, "13.5.37")
    (managed / "toolchain.json").write_text(json.dumps({"schema_version": 1, "version": "13.5.37", "pins": {}}))
    (tmp_path / "toolchains" / "13.1.80").mkdir()  # an interrupted install
    env = env_with(tmp_path, CUDA_HOME=str(home))
    env["PATH"] += ":" + str(tmp_path / "path" / "bin")  # the same file twice on PATH: listed once
    findings = doctor.diagnose(env)
    listed = [f.message for f in findings if f.topic == "tileiras"]
    assert [m.split()[0] for m in listed] == ["13.4.92", "13.3.36", "13.2.86", "13.5.37"]
    assert listed[0].endswith("← cuTile's pick") and "(pip packages)" in listed[0]
    assert "(managed 13.5.37)" in listed[3] and "($CUDA_HOME/bin)" in listed[2]
    assert "targets: sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_120" in listed[1]
    assert one(findings, "CUDA_HOME").level == "warn"  # CUDA 13.2 < tileiras 13.4, pip compiler drops it
    broken = [f for f in findings if f.topic == "toolchains" and f.level == "warn"]
    assert len(broken) == 1 and broken[0].fix.endswith("tileprobe toolchain install 13.1.80")


def test_old_compiler_lacks_targets(tmp_path, fake_pip):
    fake_pip(NO_PIP)
    fake_tileiras(tmp_path / "path", "13.1.80", targets=["sm_100", "sm_103", "sm_110", "sm_120", "sm_121"])
    f = one(doctor.diagnose(env_with(tmp_path)), "targets")
    assert f.level == "warn"
    assert re.match(r"tileiras 13\.1\.80 does not accept sm_80, sm_86, sm_87, sm_88, sm_89, sm_90 \(it accepts sm_100, "
                    r"sm_103, sm_110, sm_120, sm_121\); no sm_XXXa names", f.message)
    assert "tileprobe toolchain install 13.4" in f.fix


def test_gpu_findings(tmp_path, fake_pip, monkeypatch):
    fake_pip(NO_PIP)
    fake_tileiras(tmp_path / "path", "13.1.80", targets=["sm_100", "sm_120"])
    assert one(doctor.diagnose(env_with(tmp_path)), "GPU").message == \
        "no GPU (no nvidia-smi, no libcuda.so.1): audits work, runs need one"
    monkeypatch.setattr(doctor, "gpu_info", lambda env: doctor.GpuInfo([doctor.GpuDevice("NVIDIA H200", "sm_90")],
                                                                       driver="575.51", driver_cuda=12090))
    gpu = [f for f in doctor.diagnose(env_with(tmp_path)) if f.topic == "GPU"]
    assert gpu[0] == Finding("ok", "GPU", "NVIDIA H200 (sm_90); driver 575.51 (CUDA 12.9)")
    assert gpu[1].level == "error" and "CUDA 13.0+ driver" in gpu[1].message
    assert gpu[2].level == "warn" and re.match(r"tileiras 13\.1\.80 cannot compile for this NVIDIA H200 \(sm_90\)",
                                               gpu[2].message)


def test_finding_validates_level():
    with pytest.raises(ValueError, match=r"Finding\.level must be one of \('ok', 'warn', 'error'\), got 'info'"):
        Finding("info", "x", "y")


def test_cli_exit_codes_and_formats(tmp_path, fake_pip, monkeypatch, capsys):
    from tileprobe.cli import doctor as doctor_cli
    parser = argparse.ArgumentParser()
    doctor_cli.add_parser(parser.add_subparsers())
    fake_pip(NO_PIP)
    fake_tileiras(tmp_path / "path", "13.4.92")
    for k, v in env_with(tmp_path).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    args = parser.parse_args(["doctor", "--format", "markdown"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("## tileprobe doctor\n") and "- **ok** compiler choice: cuTile would use tileiras 13.4.92" in out
    monkeypatch.setenv("CUDA_HOME", str(fake_toolkit(tmp_path / "old", "13.0.2")))
    args = parser.parse_args(["doctor", "--json", "-"])
    assert args.func(args) == 1
    doc = json.loads(capsys.readouterr().out)
    assert {"level": "error", "topic": "CUDA_HOME"}.items() <= next(
        f for f in doc["findings"] if f["topic"] == "CUDA_HOME").items()


def test_this_environment(monkeypatch):
    """The real environment: cuda-tile is a dependency, so it is found; every finding is well formed."""
    monkeypatch.undo()  # the real /usr/local/cuda* and GPU probe
    findings = doctor.diagnose()
    assert one(findings, "cuda-tile").level == "ok"
    assert one(findings, "compiler choice").message.startswith(("cuTile would use tileiras", "cuTile finds no"))
    assert any(f.topic == "GPU" for f in findings)
    assert all(f.fix for f in findings if f.level == "error")


def test_cli_table_marks_each_finding_and_its_fix(tmp_path, fake_pip, monkeypatch, capsys):
    """Golden terminal output of ``tileprobe doctor`` in a fake environment: a CUDA_HOME at CUDA 13.0 beside a
    tileiras 13.4 on PATH is an error, with its fix on the next line."""
    from tileprobe.cli import main
    fake_pip(NO_PIP)
    fake_tileiras(tmp_path / "path", "13.4.92")
    old = fake_toolkit(tmp_path / "old", "13.0.2")
    for k, v in env_with(tmp_path, CUDA_HOME=str(old)).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    lines, text = out.splitlines(), " ".join(out.split())      # text: rich wraps long lines at 200 columns
    heads = [ln.split(":")[0] for ln in lines if ln[:2] in ("✓ ", "! ", "✗ ")]
    assert heads == ["✓ cuda-tile", "✓ pip packages", "✓ tileiras", "✓ compiler choice", "✓ targets", "✗ CUDA_HOME",
                     "✓ toolchains", "✓ GPU"]
    tileiras = str(tmp_path / "path" / "bin" / "tileiras")
    assert lines[1] == "✓ pip packages: no nvidia-cuda-tileiras / nvidia-cuda-nvcc / nvidia-nvvm in this environment"
    assert f"✓ tileiras: 13.4.92 at {tileiras} (PATH); targets: {' '.join(ALL_TARGETS)} ← cuTile's pick" in text
    assert f"✓ compiler choice: cuTile would use tileiras 13.4.92 at {tileiras}, found via PATH" in text
    assert (f"✗ CUDA_HOME: CUDA_HOME={old} is CUDA 13.0.2 (from version.json), older than tileiras 13.4.92: tileiras "
            "takes libnvvm and ptxas from $CUDA_HOME instead of its own") in text
    assert ("fix: unset CUDA_HOME (cuTile and tileprobe find tileiras without it), or point it at a CUDA 13.4+ "
            "toolkit that has lib/libnvvm.so.4 ✓ toolchains:") in text
    assert lines[-1] == "✓ GPU: no GPU (no nvidia-smi, no libcuda.so.1): audits work, runs need one"


@pytest.mark.parametrize("front, spec, release", [("1.5.0", "<13.4,>=13.2", "13.3"), ("1.6.0", "<13.5,>=13.2", "13.4")])
def test_the_compiler_doctor_suggests_is_the_one_that_cuda_tile_takes(front, spec, release):
    """Not cuda-tile[tileiras] (its cuda-toolkit meta-package clashes with a CUDA torch): the three packages of the
    newest release the cuda-tile's [tileiras] extra allows (its Requires-Dist, as 1.5.0 and 1.6.0 publish it), or
    a managed toolchain of that release."""
    requires = ["typing-extensions", f'cuda-toolkit[nvcc,nvvm,tileiras]{spec}; extra == "tileiras"']
    assert doctor.compiler_range(requires) == spec
    assert doctor.compiler_install_text(requires, front) == (
        f"pip install 'nvidia-cuda-tileiras=={release}.*' 'nvidia-cuda-nvcc=={release}.*' 'nvidia-nvvm=={release}.*' "
        f"(cuda-tile {front} takes tileiras {spec}), or `tileprobe toolchain install {release}` and audit with "
        f"--tileiras {release}; not cuda-tile[tileiras]: its cuda-toolkit meta-package clashes with a CUDA build of "
        "torch")
    assert doctor.compiler_release("") == "13.4"
