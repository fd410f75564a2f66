"""``tileprobe doctor``: why a compile fails or uses a compiler you did not expect, and what to do about it.

What it checks (sources: cuTile's ``cuda/tile/_compile.py`` 1.7.0, ``_find_compiler_bin`` and
``_find_pip_tileiras``; FIELD_NOTES "Picking the compiler"; strace of tileiras 13.3.36 / 13.4.92, 2026-11-29):

* cuda-tile's version, and whether the private names tileprobe uses are there.
* The pip packages ``nvidia-cuda-tileiras`` / ``nvidia-cuda-nvcc`` / ``nvidia-nvvm``: cuTile takes the pip tileiras
  only when all three share major.minor; otherwise it skips it with a mere ``warnings.warn`` and falls back.
* Every tileiras in sight (pip, each PATH entry, ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``/usr/local/cuda*/bin``,
  managed toolchains), its release and ``--gpu-name`` targets, and which one cuTile would pick, in cuTile's order:
  pip packages → PATH → ``$CUDA_HOME`` (``$CUDA_PATH`` first on Windows) → default toolkit folders.
* CUDA_HOME / CUDA_PATH. tileiras takes its CUDA root from ``$CUDA_HOME``, else ``$CUDA_PATH`` (on Linux too),
  else the folder above its ``bin/``, and loads ``<root>/nvvm/lib64/libnvvm.so`` or ``<root>/lib/libnvvm.so.4``
  and runs ``<root>/bin/ptxas`` from it. A root with an older toolkit (CUDA 13.0), no libnvvm, or an empty value
  makes 13.3 and 13.4 fail every compile with only ``error: failed to compile Tile IR program`` (exit code 5).
  cuTile 1.7 removes both variables for the pip and default-folder compilers but passes them to a tileiras found
  on PATH or in ``$CUDA_HOME/bin``; tileprobe removes them for its own compiles.
* The GPU and driver, if any (``nvidia-smi``, else ``libcuda.so.1`` via ctypes in a child process).

:func:`diagnose` (what ``tileprobe doctor`` runs) returns :class:`Finding` s and takes the environment as a mapping,
so tests can fake one; :mod:`tileprobe.report` renders them.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tileprobe import _cutile
from tileprobe import toolchain as tcm
from tileprobe.analyses.results import Finding
from tileprobe.errors import PATH_SHOWN_CHARS, TileprobeError, ToolchainError, shown
from tileprobe.jsonrecord import from_dict
from tileprobe.model.arch import ARCHS
from tileprobe.model.toolkit import TRAP, libnvvm, toolkit_version


@dataclasses.dataclass
class Compiler:
    """A tileiras seen on this machine: ``path`` (real path), ``sources`` (where it was seen), ``version``
    (``"13.4.92"`` or None when it does not run), ``targets`` (``--gpu-name`` values), ``error``."""
    path: str
    sources: list[str]
    version: str | None = None
    targets: list[str] = dataclasses.field(default_factory=list)
    error: str = ""


@dataclasses.dataclass
class Pick:
    """The tileiras cuTile would use: ``path``, ``source`` (why), ``passes_cuda_home`` (whether cuTile leaves
    CUDA_HOME / CUDA_PATH in the compiler's environment), and ``skipped`` (earlier steps and why they failed)."""
    path: str | None
    source: str
    passes_cuda_home: bool
    skipped: list[str]


def _mm(version: str) -> tuple[int, int]:
    parts = version.split(".")
    return int(parts[0]), int(parts[1])


def _exe(name: str) -> str:
    return name + (".exe" if os.name == "nt" else "")


# --- cuTile's pick, reproduced without its cached / warning side effects ---------------------------------------

def _pip_state(pip: Mapping[str, str | None]) -> tuple[str | None, str]:
    """(pip tileiras path or None, reason) as ``_find_pip_tileiras`` decides."""
    missing = [p for p, v in pip.items() if v is None]
    if len(missing) == len(pip):
        return None, "no pip tileiras packages installed"
    if missing:
        return None, f"pip packages incomplete (missing {', '.join(missing)})"
    if len({_mm(v) for v in pip.values() if v is not None}) != 1:
        return None, "pip packages skipped: " + ", ".join(f"{p} {v}" for p, v in pip.items()) + " differ in major.minor"
    cu13 = tcm.pip_cu13_dir()
    exe = cu13 / "bin" / _exe("tileiras") if cu13 else None
    if exe is None or not exe.is_file():
        return None, "pip packages installed but no nvidia/cu13/bin/tileiras"
    return str(exe), "the pip packages (nvidia-cuda-tileiras, nvidia-cuda-nvcc, nvidia-nvvm of one release)"


def _default_toolkit_dirs() -> list[str]:
    """cuTile's ``_get_default_cuda_toolkit_paths`` (pure: a listdir of /usr/local; :func:`_cutile.default_toolkit_dirs`),
    or our copy of it when cuTile is missing or has no such helper."""
    try:
        found = _cutile.default_toolkit_dirs()
    except Exception:  # cuTile missing or broken
        found = None
    if found is not None:
        return found
    base = Path("/usr/local")
    rows: list[tuple[float, float, str]] = [(float("inf"), float("inf"), "cuda")]
    for d in base.iterdir() if base.is_dir() else ():
        m = re.fullmatch(r"cuda-(\d+)(?:\.(\d+))?", d.name)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)) if m.group(2) else float("inf"), d.name))
    return [str(base / n) for _, _, n in sorted(rows, reverse=True)]


def _cuda_home_passed_for(source: str) -> bool:
    """Whether cuTile keeps CUDA_HOME/CUDA_PATH for a compiler found this way (``_CompilerBinary`` in 1.7 has
    ``pass_cuda_home_var``: False for pip and default folders; older cuTile always passed them)."""
    try:
        has_flag = _cutile.passes_cuda_home_flag()
    except Exception:
        has_flag = False
    return not has_flag or source in ("PATH", "$CUDA_HOME/bin", "$CUDA_PATH/bin")


def cutile_pick(env: Mapping[str, str], pip: Mapping[str, str | None]) -> Pick:
    """Which tileiras cuTile's ``_find_compiler_bin`` would return for ``env`` (no call into it: it caches and
    warns). ``Pick.path`` is None when cuTile would raise ``FileNotFoundError``."""
    skipped: list[str] = []
    path, why = _pip_state(pip)
    if path:
        return Pick(path, "pip packages", _cuda_home_passed_for("pip"), skipped)
    skipped.append(why)
    found = shutil.which("tileiras", path=env.get("PATH", ""))
    if found:
        return Pick(found, "PATH", _cuda_home_passed_for("PATH"), skipped)
    skipped.append("no tileiras on PATH")
    order = ["CUDA_PATH", "CUDA_HOME"] if os.name == "nt" else ["CUDA_HOME"]
    var = next((v for v in order if env.get(v)), None)
    if var:
        found = shutil.which("tileiras", path=os.path.join(env[var], "bin"))
        if found:
            return Pick(found, f"${var}/bin", _cuda_home_passed_for(f"${var}/bin"), skipped)
        skipped.append(f"no tileiras in ${var}/bin")
    for d in _default_toolkit_dirs():
        exe = os.path.join(d, "bin", _exe("tileiras"))
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return Pick(exe, "default toolkit folder", _cuda_home_passed_for("default"), skipped)
    skipped.append("no tileiras in /usr/local/cuda*/bin")
    return Pick(None, "none", False, skipped)


def seen_compilers(env: Mapping[str, str], extra: Sequence[tuple[str, str]] = ()) -> list[Compiler]:
    """Every tileiras in sight, one entry per real path, with its release and targets."""
    cands: list[tuple[str, str]] = []
    cu13 = tcm.pip_cu13_dir()
    if cu13:
        cands.append(("pip packages", str(cu13 / "bin" / _exe("tileiras"))))
    for d in env.get("PATH", "").split(os.pathsep):
        if d:
            cands.append(("PATH", os.path.join(d, _exe("tileiras"))))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            cands.append((f"${var}/bin", os.path.join(env[var], "bin", _exe("tileiras"))))
    cands += [("/usr/local/cuda*", os.path.join(d, "bin", _exe("tileiras"))) for d in _default_toolkit_dirs()]
    cands += list(extra)
    out: dict[str, Compiler] = {}
    for source, path in cands:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        real = os.path.realpath(path)
        if real in out:
            if source not in out[real].sources:
                out[real].sources.append(source)
            continue
        c = out[real] = Compiler(real, [source])
        try:
            c.version, _ = tcm.tileiras_version(real, env)
            c.targets = tcm.tileiras_targets(real, env)
        except ToolchainError as e:
            c.error = str(e)
    return list(out.values())


# --- CUDA_HOME / CUDA_PATH --------------------------------------------------------------------------------------

def _check_cuda_var(var: str, env: Mapping[str, str], ref: Compiler | None, pick: Pick) -> Finding | None:
    value = env.get(var)
    if value is None:
        return None
    raw, value = value, shown(value, limit=PATH_SHOWN_CHARS)   # echoed escaped: a newline forges no line
    if var == "CUDA_PATH" and env.get("CUDA_HOME"):
        return Finding("ok", var, f"CUDA_PATH={value} is shadowed by CUDA_HOME (tileiras reads CUDA_HOME first)")
    used = pick.path is not None and pick.passes_cuda_home
    level = "error" if used else "warn"
    who = (f"cuTile passes {var} to the tileiras it uses (found via {pick.source})" if used else
           f"cuTile and tileprobe drop {var} for their own compiles, but tileiras run from a shell or from PATH "
           "(e.g. tileprobe's repro commands) fails")
    ref_txt = f"tileiras {ref.version}" if ref and ref.version else "tileiras"
    want = "%d.%d" % _mm(ref.version) if ref and ref.version else "13.x"
    fix = (f"unset {var} (cuTile and tileprobe find tileiras without it), or point it at a CUDA {want}+ toolkit "
           f"that has lib/libnvvm.so.4")
    effect = (f"tileiras takes libnvvm and ptxas from ${var} instead of its own and fails every compile with only "
              f"'{TRAP}' (exit code 5)")
    root = Path(raw)
    if not raw:
        return Finding(level, var, f"{var} is set but empty: {ref_txt} then loads whatever libnvvm the dynamic "
                                   f"linker finds and fails with only '{TRAP}' (exit code 5); {who}.", fix)
    if not root.is_dir():
        return Finding(level, var, f"{var}={value} is not a folder; {effect}; {who}.", fix)
    version, how = toolkit_version(root)
    if ref and ref.version and version and _mm(version) < _mm(ref.version):
        return Finding(level, var, f"{var}={value} is CUDA {version} (from {how}), older than {ref_txt}: {effect}; "
                                   f"{who}.", fix)
    if libnvvm(root) is None:
        return Finding(level, var, f"{var}={value} has no nvvm/lib64/libnvvm.so or lib/libnvvm.so.4: {effect}; "
                                   f"{who}.", fix)
    if version is None:
        return Finding("warn", var, f"{var}={value}: cannot tell its CUDA version (no version.json, bin/nvcc or "
                                    f"include/cuda.h); tileiras takes libnvvm and ptxas from there.", fix)
    return Finding("ok", var, f"{var}={value} is CUDA {version} (from {how}); tileiras loads libnvvm and ptxas "
                              f"from there, which is fine for {ref_txt}")


# --- GPU ---------------------------------------------------------------------------------------------------------

_CTYPES_PROBE = r"""
import ctypes, json
cu = ctypes.CDLL("libcuda.so.1")
v = ctypes.c_int(); n = ctypes.c_int(); gpus = []
assert cu.cuInit(0) == 0 and cu.cuDriverGetVersion(ctypes.byref(v)) == 0
cu.cuDeviceGetCount(ctypes.byref(n))
for i in range(n.value):
    d = ctypes.c_int(); name = ctypes.create_string_buffer(256); ma = ctypes.c_int(); mi = ctypes.c_int()
    cu.cuDeviceGet(ctypes.byref(d), i); cu.cuDeviceGetName(name, 256, d)
    cu.cuDeviceGetAttribute(ctypes.byref(ma), 75, d); cu.cuDeviceGetAttribute(ctypes.byref(mi), 76, d)
    gpus.append({"name": name.value.decode(), "arch": f"sm_{ma.value}{mi.value}"})
print(json.dumps({"driver_cuda": v.value, "gpus": gpus}))
"""


@dataclasses.dataclass
class GpuDevice:
    """One GPU as ``nvidia-smi`` or the driver names it, and its arch (``sm_90``)."""
    name: str
    arch: str


@dataclasses.dataclass
class GpuInfo:
    """The GPUs of this machine and its driver: ``driver`` the driver's version (``"580.159"``, from
    ``nvidia-smi``), ``driver_cuda`` the CUDA version it supports as ``cuDriverGetVersion`` gives it (13000: 13.0);
    None where it cannot be told."""
    gpus: list[GpuDevice] = dataclasses.field(default_factory=list)
    driver: str | None = None
    driver_cuda: int | None = None


def gpu_info(env: Mapping[str, str]) -> GpuInfo | None:
    """This machine's GPUs and driver, or None (no GPU).

    Queries ``nvidia-smi`` on the ``PATH`` of ``env`` and ``libcuda.so.1`` in a child process (so this process never
    initialises CUDA; what it prints is read into the record, a malformed answer counts as none)."""
    info = GpuInfo()
    smi = shutil.which("nvidia-smi", path=env.get("PATH", ""))
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout
            for line in out.splitlines():
                parts = [p.strip() for p in line.split(",")]
                if len(parts) == 3 and re.fullmatch(r"\d+\.\d+", parts[2]):
                    info.driver = parts[1]
                    info.gpus.append(GpuDevice(parts[0], "sm_" + parts[2].replace(".", "")))
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        proc = subprocess.run([sys.executable, "-c", _CTYPES_PROBE], capture_output=True, text=True, timeout=60,
                              env=dict(env))
        if proc.returncode == 0:
            probe = from_dict(GpuInfo, json.loads(proc.stdout), where="the driver's answer")
            info.driver_cuda = probe.driver_cuda
            info.gpus = info.gpus or probe.gpus
    except (OSError, subprocess.SubprocessError, ValueError):     # FieldError is a ValueError
        pass
    return info if info.gpus or info.driver_cuda else None


def _check_gpu(env: Mapping[str, str], ref: Compiler | None) -> list[Finding]:
    info = gpu_info(env)
    if info is None:
        return [Finding("ok", "GPU", "no GPU (no nvidia-smi, no libcuda.so.1): audits work, runs need one")]
    cuda = info.driver_cuda
    drv = f"driver {info.driver or '?'}" + (f" (CUDA {cuda // 1000}.{cuda % 1000 // 10})" if cuda else "")
    gpus = ", ".join(f"{g.name} ({g.arch})" for g in info.gpus) or "no device"
    out = [Finding("ok", "GPU", f"{gpus}; {drv}")]
    if cuda and cuda < 13000:
        out.append(Finding("error", "GPU", f"the driver supports CUDA {cuda // 1000}.{cuda % 1000 // 10}; cuTile "
                                           "needs a CUDA 13.0+ driver to run kernels (audits still work)",
                           "install an NVIDIA driver for CUDA 13 (R580 or newer)"))
    for g in info.gpus:
        if ref and ref.targets and g.arch not in ref.targets:
            out.append(Finding("warn", "GPU", f"tileiras {ref.version} cannot compile for this {g.name} "
                                              f"({g.arch}); it accepts {', '.join(ref.targets)}",
                               "tileprobe toolchain install 13.4, and audit with --tileiras 13.4"))
    return out


# --- what installs a compiler for the cuda-tile installed ---------------------------------------------------------

def compiler_range(requires: Sequence[str] | None = None) -> str:
    """The tileiras releases the installed cuda-tile's ``[tileiras]`` extra allows, as its metadata says
    (``Requires-Dist: cuda-toolkit[nvcc,nvvm,tileiras]<13.4,>=13.2; extra == "tileiras"`` in 1.5.0; ``<13.5,>=13.2``
    in 1.6.0 and 1.7.0): ``"<13.4,>=13.2"``, or ``""`` when it names none (``requires``: the Requires-Dist lines,
    default the installed cuda-tile's)."""
    import importlib.metadata

    from packaging.requirements import InvalidRequirement, Requirement
    if requires is None:
        try:
            requires = importlib.metadata.requires("cuda-tile") or []
        except importlib.metadata.PackageNotFoundError:
            return ""
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name == "cuda-toolkit" and req.marker is not None and "tileiras" in str(req.marker):
            return str(req.specifier)
    return ""


def compiler_release(spec: str) -> str:
    """The newest CUDA 13 major.minor a ``[tileiras]`` range allows (``"<13.4,>=13.2"`` → ``"13.3"``); ``"13.4"``
    (the release tileprobe's ``tileiras`` extra pins) when the range is empty or allows none."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    try:
        allowed = SpecifierSet(spec) if spec else None
    except InvalidSpecifier:
        allowed = None
    if allowed is not None:
        for minor in range(9, -1, -1):
            if allowed.contains(f"13.{minor}.999"):
                return f"13.{minor}"
    return "13.4"


def compiler_install_text(requires: Sequence[str] | None = None, version: str | None = None) -> str:
    """What installs a compiler for the installed cuda-tile: the three packages of one release (cuTile takes the
    pip tileiras only when they share major.minor), or a managed toolchain; not ``cuda-tile[tileiras]``, whose
    ``cuda-toolkit`` meta-package a CUDA build of torch pins to its own release (ResolutionImpossible).
    ``requires`` / ``version``: a cuda-tile's Requires-Dist lines and version (default: the installed one's)."""
    spec = compiler_range(requires)
    release = compiler_release(spec)
    within = f" (cuda-tile {version or _cutile_version_or('?')} takes tileiras {spec})" if spec else ""
    pkgs = " ".join(f"'{p}=={release}.*'" for p in tcm.PACKAGES)
    return (f"pip install {pkgs}{within}, or `tileprobe toolchain install {release}` and audit with --tileiras "
            f"{release}; not cuda-tile[tileiras]: its cuda-toolkit meta-package clashes with a CUDA build of torch")


def _cutile_version_or(default: str) -> str:
    try:
        return _cutile.cutile_version()
    except TileprobeError:
        return default


# --- the report --------------------------------------------------------------------------------------------------

def _check_cutile() -> Finding:
    try:
        version = _cutile.cutile_version()
        _cutile.check_cutile()
        notes = _cutile.feature_notes()   # what this release cannot give (remarks before 1.6), one line each
    except TileprobeError as e:
        m = re.search(r"pip install .*$", str(e))
        return Finding("error", "cuda-tile", str(e)[:m.start()].rstrip(" :;") if m else str(e),
                       m.group(0) if m else f"pip install 'cuda-tile=={_cutile.NEWEST_TESTED}'")
    except ImportError as e:
        return Finding("error", "cuda-tile", f"cuda.tile does not import: {e}",
                       f"pip install 'cuda-tile=={_cutile.NEWEST_TESTED}' (then a compiler: {compiler_install_text()})")
    return Finding("ok", "cuda-tile", "; ".join([f"cuda-tile {version}", *notes]))


def _check_pip(pip: Mapping[str, str | None]) -> Finding:
    have = {p: v for p, v in pip.items() if v is not None}
    listed = ", ".join(f"{p} {v}" for p, v in have.items())
    if not have:
        return Finding("ok", "pip packages", "no nvidia-cuda-tileiras / nvidia-cuda-nvcc / nvidia-nvvm in this "
                                             "environment")
    ref = pip.get(tcm.TILEIRAS_PKG) or next(iter(have.values()))
    want = "%d.%d" % _mm(ref)
    if len(have) < len(pip):
        missing = [p for p in pip if pip[p] is None]
        return Finding("warn", "pip packages", f"{listed} installed but not {', '.join(missing)}: cuTile skips the "
                                               "pip tileiras unless all three are installed",
                       "pip install " + " ".join(f'"{p}=={want}.*"' for p in missing))
    odd = [p for p, v in have.items() if _mm(v) != _mm(ref)]
    if odd:
        return Finding("error", "pip packages",
                       f"{listed}: major.minor differ, so cuTile silently skips the pip tileiras (a warnings.warn "
                       "at most) and uses another compiler or none",
                       "align them with tileiras: pip install " + " ".join(f'"{p}=={want}.*"' for p in odd)
                       + f' (or move tileiras to their release: pip install "{tcm.TILEIRAS_PKG}=='
                       + "%d.%d" % _mm(have[odd[0]]) + '.*")')
    return Finding("ok", "pip packages", f"{listed} (one release: cuTile uses this tileiras first)")


def _compiler_finding(c: Compiler, pick: Pick) -> Finding:
    mark = "  ← cuTile's pick" if pick.path and os.path.realpath(pick.path) == c.path else ""
    if c.error:
        return Finding("error" if mark else "warn", "tileiras", f"{c.path} ({', '.join(c.sources)}) does not run: "
                       f"{c.error}", "reinstall it (pip install --force-reinstall nvidia-cuda-tileiras, or "
                                     "tileprobe toolchain install VERSION --force)")
    targets = " ".join(c.targets) or "?"
    return Finding("ok", "tileiras", f"{c.version} at {c.path} ({', '.join(c.sources)}); targets: {targets}{mark}")


def _check_pick(pick: Pick, ref: Compiler | None) -> Finding:
    why = "; ".join(pick.skipped)
    if pick.path is None:
        return Finding("error", "compiler choice", f"cuTile finds no tileiras ({why}): every compile raises "
                                                   "FileNotFoundError",
                       compiler_install_text())
    version = ref.version if ref and ref.version else "?"
    msg = f"cuTile would use tileiras {version} at {pick.path}, found via {pick.source}"
    return Finding("ok", "compiler choice", msg + (f" ({why})" if why else "")
                   + "; `tileprobe audit --tileiras V` uses the release you name instead")


def _check_targets(ref: Compiler | None) -> Finding | None:
    if ref is None or not ref.targets:
        return None
    missing = [a for a in ARCHS if a not in ref.targets]
    note = ("no sm_XXXa names: give sm_90, tileiras itself compiles for the arch-specific features "
            "(it runs ptxas -arch sm_90a)")
    if missing:
        return Finding("warn", "targets", f"tileiras {ref.version} does not accept {', '.join(missing)} "
                                          f"(it accepts {', '.join(ref.targets)}); {note}",
                       "for those targets use a newer release: tileprobe toolchain install 13.4 (13.3+ accept "
                       "sm_80 … sm_90, 13.4+ also sm_107), then audit with --tileiras 13.4")
    return Finding("ok", "targets", f"tileiras {ref.version} accepts {', '.join(ref.targets)}; {note}")


def jit_environment_findings(env: Mapping[str, str] | None = None) -> list[Finding]:
    """The CUDA_HOME / CUDA_PATH findings of :func:`diagnose` that are not ``ok`` (a root without libnvvm, not a
    folder, empty), for ``env`` (default ``os.environ``): what would break the user's own JIT compile although
    tileprobe's contained compiles drop those variables. Cheap: no compiler is run (so a root's CUDA version is not
    compared with tileiras' release here; ``tileprobe doctor`` does that). Never raises."""
    env = dict(os.environ if env is None else env)
    try:
        pick = cutile_pick(env, tcm.pip_versions())
        found = [_check_cuda_var(v, env, None, pick) for v in ("CUDA_HOME", "CUDA_PATH")]
    except Exception as e:
        return [Finding("warn", "environment", f"cannot check CUDA_HOME / CUDA_PATH: {e}", "tileprobe doctor")]
    return [f for f in found if f is not None and f.level != "ok"]


def _check_managed(env: Mapping[str, str]) -> list[Finding]:
    root = tcm.toolchains_dir(env)
    have = tcm.installed(root)
    out = [Finding("ok", "toolchains", f"managed in {root}: " + (", ".join(t.version for t in have) or
                                                                 "none (tileprobe toolchain install 13.4 adds one)"))]
    for d in sorted(root.iterdir()) if root.is_dir() else ():
        if re.fullmatch(r"\d+\.\d+\.\d+", d.name) and d.name not in {t.version for t in have}:
            out.append(Finding("warn", "toolchains", f"{d} is an incomplete install (no readable {tcm.MANIFEST})",
                               f"rm -r {d} && tileprobe toolchain install {d.name}"))
    return out


def diagnose(env: Mapping[str, str] | None = None) -> list[Finding]:
    """Everything ``tileprobe doctor`` prints, as findings, for the environment ``env`` (default ``os.environ``).

    ``env`` supplies PATH, CUDA_HOME, CUDA_PATH and TILEPROBE_TOOLCHAINS; the pip package versions come from
    ``importlib.metadata.version`` (monkeypatch it to fake them). Never raises for a broken setup: that is a
    finding.
    """
    env = dict(os.environ if env is None else env)
    pip = tcm.pip_versions()
    findings = [_check_cutile(), _check_pip(pip)]
    managed = [(f"managed {t.version}", t.tileiras) for t in tcm.installed(tcm.toolchains_dir(env))]
    compilers = seen_compilers(env, managed)
    pick = cutile_pick(env, pip)
    ref = next((c for c in compilers if pick.path and c.path == os.path.realpath(pick.path)), None)
    if ref is None and pick.path is None:  # compare CUDA_HOME with the newest tileiras in sight
        ref = max((c for c in compilers if c.version), key=lambda c: tcm._sort_key(c.version or ""), default=None)
    findings += [_compiler_finding(c, pick) for c in compilers]
    if not compilers:
        findings.append(Finding("error", "tileiras", "no tileiras anywhere (pip, PATH, CUDA_HOME, /usr/local/cuda*, "
                                                     "managed toolchains)", compiler_install_text()))
    findings.append(_check_pick(pick, ref if pick.path else None))
    findings += [f for f in [_check_targets(ref)] if f]
    findings += [f for v in ("CUDA_HOME", "CUDA_PATH") if (f := _check_cuda_var(v, env, ref, pick))]
    findings += _check_managed(env)
    findings += _check_gpu(env, ref)
    return findings
