"""``audit`` warns once about an environment that would break the user's own JIT compile (a CUDA_HOME without
libnvvm), as ``tileprobe doctor`` does; its own compiles drop CUDA_HOME, so they succeed and said nothing."""
from __future__ import annotations

from tileprobe.analyses.doctor import jit_environment_findings
from tileprobe.cli import main


def test_a_cuda_home_without_libnvvm_is_a_finding(tmp_path):
    root = tmp_path / "cuda"
    (root / "bin").mkdir(parents=True)
    (found,) = jit_environment_findings({"CUDA_HOME": str(root), "PATH": ""})
    assert found.topic == "CUDA_HOME" and found.level in ("warn", "error")
    assert found.message.startswith(f"CUDA_HOME={root} has no nvvm/lib64/libnvvm.so or lib/libnvvm.so.4")
    assert found.fix.startswith("unset CUDA_HOME")
    nvvm = root / "nvvm" / "lib64"
    nvvm.mkdir(parents=True)
    (nvvm / "libnvvm.so").write_bytes(b"")
    (root / "version.json").write_text('{"cuda": {"version": "13.4.0"}}')
    assert jit_environment_findings({"CUDA_HOME": str(root), "PATH": ""}) == []
    assert jit_environment_findings({"PATH": ""}) == []


def _audit_broken_probe(tmp_path, capsys) -> tuple[int, str]:
    probe = tmp_path / "broken_probe.py"
    probe.write_text("this is not python\n")
    code = main(["audit", str(probe), "--arch", "sm_90", "--store", str(tmp_path / "s.sqlite")])
    return code, capsys.readouterr().err


def test_audit_warns_once_about_a_cuda_home_without_libnvvm(tmp_path, monkeypatch, capsys):
    root = tmp_path / "cuda-empty"
    root.mkdir()
    monkeypatch.setenv("CUDA_HOME", str(root))
    code, err = _audit_broken_probe(tmp_path, capsys)
    assert code == 3                                   # the broken probe; the warning changes no exit code
    text = " ".join(err.split())
    assert text.count("warning: CUDA_HOME=") == 1
    assert f"CUDA_HOME={root} has no nvvm/lib64/libnvvm.so or lib/libnvvm.so.4" in text
    assert "Fix: unset CUDA_HOME" in text and "`tileprobe doctor` checks the whole setup" in text


def test_audit_says_nothing_about_a_sound_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    code, err = _audit_broken_probe(tmp_path, capsys)
    assert code == 3 and "warning: CUDA_" not in err
