"""Managed tileiras toolchains: one folder per compiler release, installed from the package registry.

A toolchain is what one tileiras release needs to compile: ``bin/tileiras`` (wheel ``nvidia-cuda-tileiras``),
``bin/ptxas`` (``nvidia-cuda-nvcc``) and ``lib/libnvvm.so.4`` + ``nvvm/libdevice`` (``nvidia-nvvm``). The three
wheels are released per CUDA major.minor but their patch numbers differ (tileiras 13.3.36 ships beside nvcc and
nvvm 13.3.33 and 13.3.73), so the companions are the newest published patch of tileiras' major.minor and the
exact pins go into ``toolchain.json``. cuTile itself only takes the pip compiler when the three share major.minor
(``cuda/tile/_compile.py::_find_pip_tileiras``, FIELD_NOTES "Picking the compiler").

How tileiras finds its helpers (strace of 13.3.36 and 13.4.92, 2026-11-29): it takes a CUDA root, ``$CUDA_HOME``
if set, else ``$CUDA_PATH``, else the folder above its own ``bin/``; it dlopens ``<root>/nvvm/lib64/libnvvm.so``
then ``<root>/lib/libnvvm.so.4`` by absolute path (LD_LIBRARY_PATH plays no part) and runs ``<root>/bin/ptxas``,
falling back to the first ``ptxas`` on PATH only when that file is missing. It never opened
``nvvm/libdevice`` (libdevice is embedded) nor ran ``nvvm/bin/cicc``. Hence the layout below (the wheels'
``nvidia/cu13/`` tree, flattened), the need for ptxas *beside* tileiras, and the CUDA_HOME trap: a CUDA_HOME or
CUDA_PATH that points at an older toolkit (13.0) or at a folder without libnvvm makes 13.3 and 13.4 fail every
compile with only ``error: failed to compile Tile IR program`` (exit 5). Toolchains are therefore always run
with both variables removed (``_cutile.use_compiler`` does so for compiles).

Layout of ``<toolchains>/<version>/``::

    bin/tileiras  bin/ptxas  [bin/tileirdisasm]  lib/libnvvm.so.4  nvvm/libdevice/libdevice.10.bc  toolchain.json

``<toolchains>`` is ``platformdirs.user_cache_dir("tileprobe")/toolchains`` or ``$TILEPROBE_TOOLCHAINS``.
``nvvm/bin/cicc`` (~90 MB) is not extracted: tileiras does not use it (above).
"""
from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from tileprobe import toolchain_files as _files
from tileprobe.errors import ToolchainError
from tileprobe.model.toolkit import (
    parse_targets,
    run_tool,
    tool_timeout_s,
)
from tileprobe.records import Key, KeyedRecord
from tileprobe.toolchain_files import (  # noqa: F401  (re-exported: the versions and files side)
    _BIN_FILES,
    _EXE,
    _SPEC_RE,
    _sha256,
    _sort_key,
    companion_version,
    extract_wheel,
    major_minor,
    match_version,
    parse_pip_versions,
    parse_spec,
    toolchains_dir,
    wanted,
)

TILEIRAS_PKG = _files.TILEIRAS_PKG
NVCC_PKG = "nvidia-cuda-nvcc"
NVVM_PKG = "nvidia-nvvm"
#: The wheels of one toolchain, in cuTile's order (``_compile._PIP_TILEIRAS_PACKAGES``).
PACKAGES = (TILEIRAS_PKG, NVCC_PKG, NVVM_PKG)
SOURCES = ("managed", "pip", "path")
MANIFEST = "toolchain.json"
MANIFEST_SCHEMA_VERSION = 1


class _Manifest(KeyedRecord):
    """A managed toolchain's ``toolchain.json`` as it is read (the installer writes it: :func:`install`)."""
    __slots__ = ()
    schema_version = Key[int | None]()
    version = Key[str | None]()       # MAJOR.MINOR.PATCH of the release
    pins = Key[dict | None]()         # the pip packages installed, name -> version
    size_bytes = Key[int | None]()    # bytes the folder takes


class _Spec(KeyedRecord):
    """The mapping form of a compiler (:meth:`Toolchain.from_dict`), every key optional."""
    __slots__ = ()
    tileiras = Key[str | None]()
    lib_dirs = Key[Sequence[str] | None]()
    version = Key[str | None]()
    build = Key[str | None]()
    identity = Key[str | None]()
    targets = Key[tuple | None]()
_RELEASE_RE = re.compile(r"V(\d+\.\d+\.\d+)")
_PUBLISHED: dict[str, list[str]] = {}


def _pip(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check"]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"`{' '.join(cmd)}` did not finish ({e}); check the network and pip's index.") from e


def _pip_tail(proc: subprocess.CompletedProcess, n: int = 6) -> str:
    lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip() and "WARNING" not in ln]
    return "\n  ".join(lines[-n:]) or f"exit code {proc.returncode}"


def _query_published(package: str) -> list[str]:
    proc = _pip("index", "versions", package, timeout_s=180)
    versions = parse_pip_versions(proc.stdout) if proc.returncode == 0 else None
    if versions is None:  # `pip index` is experimental; a failed exact pin lists the versions too
        with tempfile.TemporaryDirectory() as tmp:
            proc = _pip("download", "--no-deps", "--only-binary=:all:", "-d", tmp, f"{package}==0.0.0a0",
                        timeout_s=180)
        versions = parse_pip_versions(proc.stderr + proc.stdout)
    if not versions:
        raise ToolchainError(f"could not list the published versions of {package} from the package registry:\n  "
                             f"{_pip_tail(proc)}\nCheck the network and pip's index settings (`pip config list`).")
    return versions


def published_versions(package: str = TILEIRAS_PKG) -> list[str]:
    """Versions of ``package`` the package registry publishes for this platform, ascending (cached per process).

    Raises:
        ToolchainError: the registry is unreachable or lists nothing (the message carries pip's words).
    """
    if package not in _PUBLISHED:
        _PUBLISHED[package] = _query_published(package)
    return list(_PUBLISHED[package])


# --- the Toolchain record ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Toolchain:
    """One tileiras with the ptxas and libnvvm it runs.

    Attributes:
        version: tileiras release, ``"13.3.36"``.
        root: folder holding ``bin/`` and ``lib/`` (a managed folder, or the pip ``nvidia/cu13``).
        tileiras: absolute path of the tileiras binary.
        lib_dirs: folders to put first on LD_LIBRARY_PATH (``<root>/lib``; tileiras itself finds libnvvm there
            by absolute path, so this is belt and braces).
        pins: package → exact version (``{"nvidia-cuda-nvcc": "13.3.73", …}``).
        source: ``"managed"`` (installed by tileprobe), ``"pip"`` (this environment's packages) or ``"path"``.
        build: tileiras' release line (``"Cuda compilation tools, release 13.4, V13.4.92"``); ``""`` until the
            audit resolves the compiler (:func:`tileprobe.audit.resolve_compiler`).
        identity: the hash of the compiler's files (:func:`tileprobe.model.toolkit.compiler_identity`; a stored
            compile of other files is not reused); None: not known (any stored compile of ``build`` is reused).
        targets: the ``--gpu-name`` targets its ``--help`` lists (``()``: it lists none we could read); None: not
            asked yet.

    A tileiras known only by its path (``audit(toolchains=[Toolchain.at(path)])``, or ``Toolchain.at()`` for the
    one cuTile would pick) has ``version`` ``""`` until it is resolved.
    """
    version: str
    root: str
    tileiras: str
    lib_dirs: tuple[str, ...] = ()
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    source: str = "managed"
    build: str = ""
    identity: str | None = None
    targets: tuple[str, ...] | None = None

    def __post_init__(self):
        if self.version != "" and not re.fullmatch(r"\d+\.\d+\.\d+", str(self.version)):
            raise ToolchainError(f"Toolchain.version must be MAJOR.MINOR.PATCH, got {self.version!r}")
        if self.source not in SOURCES:
            raise ToolchainError(f"Toolchain.source must be one of {SOURCES}, got {self.source!r}")
        object.__setattr__(self, "lib_dirs", tuple(str(d) for d in self.lib_dirs))
        object.__setattr__(self, "pins", dict(self.pins))
        if self.targets is not None:
            object.__setattr__(self, "targets", tuple(self.targets))

    def as_dict(self) -> dict:
        """``{tileiras, lib_dirs, version}``: the mapping form ``tileprobe.audit.audit(toolchains=…)`` also takes
        (:meth:`from_dict`)."""
        return {"tileiras": self.tileiras, "lib_dirs": list(self.lib_dirs), "version": self.version}

    @classmethod
    def at(cls, tileiras: str = "", lib_dirs: Sequence[str] = (), *, version: str = "", build: str = "",
           identity: str | None = None) -> Toolchain:
        """A tileiras known by its path as given (not resolved; ``""``: the one cuTile would pick), source
        ``"path"``, ``root`` ``""``; what is not given is filled when the audit resolves it."""
        return cls(version=version, root="", tileiras=str(tileiras), lib_dirs=tuple(lib_dirs), source="path",
                   build=build, identity=identity)

    @classmethod
    def from_dict(cls, d: Mapping) -> Toolchain:
        """The mapping form of a compiler ``{"tileiras": path, "lib_dirs": [...], "version": "13.4.92"}`` (all
        optional; what :meth:`as_dict` gives), as :meth:`at` takes it; ``build``, ``identity`` and ``targets``
        are kept when given.

        Raises:
            ToolchainError: a ``version`` that is not MAJOR.MINOR.PATCH.
        """
        spec = _Spec.from_dict(dict(d))
        tc = cls.at(spec.tileiras or "", spec.lib_dirs or (), version=spec.version or "", build=spec.build or "",
                    identity=spec.identity)
        return dataclasses.replace(tc, targets=spec.targets) if spec.targets is not None else tc

    @classmethod
    def from_dir(cls, root: str | os.PathLike) -> Toolchain:
        """Read a managed toolchain folder's ``toolchain.json``.

        Raises:
            ToolchainError: no manifest, an unreadable one, or one newer than this tileprobe.
        """
        root = Path(root)
        try:
            doc = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ToolchainError(f"{root / MANIFEST} is unreadable ({e}); reinstall: "
                                 f"tileprobe toolchain remove {root.name} && tileprobe toolchain install {root.name}"
                                 ) from e
        manifest = _Manifest.from_dict(doc) if isinstance(doc, dict) else _Manifest()
        reinstall = f"tileprobe toolchain remove {root.name} && tileprobe toolchain install {root.name}"
        if int(manifest.schema_version or 0) > MANIFEST_SCHEMA_VERSION:
            raise ToolchainError(f"{root / MANIFEST} has schema_version {manifest.schema_version}, newer than this "
                                 f"tileprobe reads ({MANIFEST_SCHEMA_VERSION}); upgrade tileprobe.")
        if not isinstance(manifest.version, str):
            raise ToolchainError(f"{root / MANIFEST} names no version (it holds {str(doc)[:80]}); reinstall: "
                                 f"{reinstall}")
        _check_manifest(root, doc)
        return cls(version=manifest.version, root=str(root), tileiras=str(root / "bin" / f"tileiras{_EXE}"),
                   lib_dirs=(str(root / "lib"),), pins=manifest.pins or {},
                   source="managed")

    @classmethod
    def from_binary(cls, tileiras: str | os.PathLike) -> Toolchain:
        """A tileiras given by path (source ``"path"``); its version comes from ``tileiras --version``.

        Raises:
            ToolchainError: not executable, or its ``--version`` names no release.
        """
        path = Path(tileiras).expanduser().resolve()
        version, _ = tileiras_version(str(path))
        root = path.parent.parent
        libs = (str(root / "lib"),) if (root / "lib").is_dir() else ()
        return cls(version=version, root=str(root), tileiras=str(path), lib_dirs=libs, pins={}, source="path")


@dataclasses.dataclass
class _ManifestClaims:
    """What a managed folder's ``toolchain.json`` claims about the release it holds (:func:`_check_manifest`)."""
    version: object = None
    build: object = None
    pins: object = None


def _check_manifest(root: Path, doc) -> None:
    """A managed folder's manifest agrees with what is there: the folder is named by its release (``install`` names
    it so), and the ``version``, the ``build`` line and the tileiras pin all name that release. (A manifest edited to
    say 13.5.37 in the folder of 13.3.36 was listed and used as 13.5.37: a hostile tester, 2026-12-05.) What the
    binary itself says is checked when an audit resolves it (:func:`tileprobe.audit.pipeline.resolve_compiler`).

    Raises:
        ToolchainError: naming the folder, what the manifest says and the fix (reinstall).
    """
    from tileprobe.jsonrecord import from_dict
    if not isinstance(doc, dict):
        return
    m = from_dict(_ManifestClaims, doc, where=str(root / MANIFEST))
    said = [f"version {m.version!r}"] if m.version != root.name else []
    if isinstance(m.build, str) and f"V{root.name}" not in m.build.split():
        said.append(f"build {m.build!r}")
    pin = m.pins.get(TILEIRAS_PKG) if isinstance(m.pins, dict) else None
    if pin not in (None, root.name):
        said.append(f"{TILEIRAS_PKG} {pin!r}")
    if said:
        raise ToolchainError(f"{root / MANIFEST} says {', '.join(said)}, but the folder is tileiras {root.name}'s: "
                             f"the manifest was edited or the folder renamed; reinstall: tileprobe toolchain remove "
                             f"{root.name} && tileprobe toolchain install {root.name}")


def compiler_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default ``os.environ``) without CUDA_HOME / CUDA_PATH, which redirect tileiras' libnvvm/ptxas."""
    return {k: v for k, v in (os.environ if env is None else env).items() if k not in ("CUDA_HOME", "CUDA_PATH")}


def tileiras_version(tileiras: str, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Run ``tileiras --version``; return (``"13.4.92"``, ``"Cuda compilation tools, release 13.4, V13.4.92"``).

    Raises:
        ToolchainError: it does not run, or prints no ``V<major>.<minor>.<patch>``.
    """
    try:     # its own process group, TILEPROBE_TOOL_TIMEOUT_S, the group killed after
        proc = run_tool([tileiras, "--version"], compiler_env(env))
    except subprocess.TimeoutExpired:
        raise ToolchainError(f"{tileiras} --version did not answer within {tool_timeout_s():g} s "
                             "(TILEPROBE_TOOL_TIMEOUT_S); it was stopped. Run `tileprobe doctor`.") from None
    except (OSError, subprocess.SubprocessError) as e:
        raise ToolchainError(f"{tileiras} --version failed ({e}); run `tileprobe doctor`.") from e
    m = _RELEASE_RE.search(proc.stdout)
    if proc.returncode != 0 or not m:
        raise ToolchainError(f"{tileiras} --version printed no release (exit {proc.returncode}): "
                             f"{(proc.stdout + proc.stderr).strip()[-300:]!r}; run `tileprobe doctor`.")
    line = next(ln.strip() for ln in proc.stdout.splitlines() if m.group(0) in ln)
    return m.group(1), line


def tileiras_targets(tileiras: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Targets a tileiras accepts per its ``--help`` (13.3.36: sm_80 … sm_121 without sm_107); [] if it fails."""
    try:
        proc = run_tool([tileiras, "--help"], compiler_env(env))
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_targets(proc.stdout)


# --- where toolchains live --------------------------------------------------------------------------------------

def installed(root: str | os.PathLike | None = None) -> list[Toolchain]:
    """Managed toolchains under ``root`` (default :func:`toolchains_dir`), ascending by version.

    Folders without a readable ``toolchain.json`` (an interrupted install) are skipped.
    """
    base = Path(root) if root is not None else toolchains_dir()
    found = []
    for d in base.iterdir() if base.is_dir() else ():
        if _SPEC_RE.match(d.name) and (d / MANIFEST).is_file():
            try:
                found.append(Toolchain.from_dir(d))
            except (ToolchainError, KeyError):
                continue
    return sorted(found, key=lambda t: _sort_key(t.version))


def pip_versions() -> dict[str, str | None]:
    """Installed versions of the three pip packages in this environment (``None`` = not installed)."""
    out: dict[str, str | None] = {}
    for pkg in PACKAGES:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def pip_cu13_dir() -> Path | None:
    """The ``nvidia/cu13`` folder of the pip packages (``bin/tileiras``, ``lib/libnvvm.so.4``), if any."""
    try:
        spec = importlib.util.find_spec("nvidia.cu13")
    except (ImportError, ValueError):
        return None
    locs = list(getattr(spec, "submodule_search_locations", None) or [])
    return Path(locs[0]) if locs else None


def pip_toolchain() -> Toolchain | None:
    """This environment's pip tileiras as a Toolchain, when cuTile would take it: the three packages installed
    with one major.minor and ``nvidia/cu13/bin/tileiras`` present (``_compile._find_pip_tileiras``)."""
    versions = {k: v for k, v in pip_versions().items() if v is not None}
    if len(versions) < len(PACKAGES):
        return None
    try:
        if len({major_minor(v) for v in versions.values()}) != 1:
            return None
    except ToolchainError:
        return None
    cu13 = pip_cu13_dir()
    exe = cu13 / "bin" / f"tileiras{_EXE}" if cu13 else None
    if cu13 is None or exe is None or not exe.is_file():
        return None
    return Toolchain(version=versions[TILEIRAS_PKG], root=str(cu13), tileiras=str(exe),
                     lib_dirs=(str(cu13 / "lib"),), pins=versions, source="pip")


# --- install / remove -------------------------------------------------------------------------------------------

def _download(pins: Mapping[str, str], dest: Path) -> dict[str, Path]:
    """``pip download`` the pinned wheels for this platform into ``dest``; return package → wheel file."""
    from packaging.utils import canonicalize_name, parse_wheel_filename
    dest.mkdir(parents=True, exist_ok=True)
    proc = _pip("download", "--no-deps", "--only-binary=:all:", "-d", str(dest),
                *[f"{p}=={v}" for p, v in pins.items()])
    wheels = {}
    for f in dest.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(f.name)
        wheels[str(canonicalize_name(name))] = f
    missing = [p for p in pins if p not in wheels]
    if proc.returncode != 0 or missing:
        raise ToolchainError("could not download " + ", ".join(f"{p}=={v}" for p, v in pins.items())
                             + f" for this platform:\n  {_pip_tail(proc)}\nCheck the network and pip's index "
                             "settings (`pip config list`); `tileprobe toolchain list --available` shows what "
                             "the registry offers.")
    return wheels


def _verify(stage: Path, pins: Mapping[str, str]) -> str:
    """Run the staged ``tileiras --version`` / ``ptxas --version``; return tileiras' release line."""
    version, line = tileiras_version(str(stage / "bin" / f"tileiras{_EXE}"))
    if version != pins[TILEIRAS_PKG]:
        raise ToolchainError(f"the {TILEIRAS_PKG} {pins[TILEIRAS_PKG]} wheel holds tileiras {version}")
    ptxas = stage / "bin" / f"ptxas{_EXE}"
    try:
        proc = run_tool([str(ptxas), "--version"], compiler_env())
    except (OSError, subprocess.SubprocessError) as e:
        raise ToolchainError(f"{ptxas} --version failed ({e})") from e
    if f"V{pins[NVCC_PKG]}" not in proc.stdout:
        raise ToolchainError(f"{ptxas} --version does not say V{pins[NVCC_PKG]}: {proc.stdout.strip()[-200:]!r}")
    if os.name != "nt" and not (stage / "lib" / "libnvvm.so.4").is_file():
        raise ToolchainError(f"the {NVVM_PKG} {pins[NVVM_PKG]} wheel has no lib/libnvvm.so.4, which tileiras loads")
    return line


def _notice(stream: TextIO | str | None, text: str) -> None:
    """Print a progress line to ``stream``: ``"stderr"`` = ``sys.stderr`` at call time, ``None`` = silent."""
    target = sys.stderr if stream == "stderr" else stream
    if target is not None and not isinstance(target, str):
        print(text, file=target, flush=True)


def install(version: str, *, root: str | os.PathLike | None = None, force: bool = False,
            stream: TextIO | str | None = "stderr") -> Toolchain:
    """Install tileiras ``version`` (``"13.3"`` = newest 13.3.x, or ``"13.3.36"``) as a managed toolchain.

    Downloads ``nvidia-cuda-tileiras==V`` plus the newest ``nvidia-cuda-nvcc`` and ``nvidia-nvvm`` of V's
    major.minor with ``pip download --no-deps --only-binary=:all:`` (this platform), extracts what tileiras
    needs into ``<root>/<V>/``, writes ``toolchain.json`` (pins, wheel sha256s, install date, size in bytes) and
    checks ``tileiras --version`` / ``ptxas --version``. An existing install is returned as is unless ``force``.
    Progress lines go to ``stream`` (``None``: silent).

    Raises:
        ToolchainError: an unknown version (lists the published ones), a registry or download failure, or
            binaries that do not run here.
    """
    base = Path(root) if root is not None else toolchains_dir()
    want = parse_spec(version)
    if len(want) == 3 and not force and (base / version / MANIFEST).is_file():
        return Toolchain.from_dir(base / version)
    exact = match_version(version, published_versions(TILEIRAS_PKG))
    dest = base / exact
    if (dest / MANIFEST).is_file() and not force:
        return Toolchain.from_dir(dest)
    if dest.exists() and not force:
        raise ToolchainError(f"{dest} exists but holds no {MANIFEST} (an interrupted or foreign install); "
                             f"`tileprobe toolchain install {exact} --force` replaces it.")
    pins = {TILEIRAS_PKG: exact,
            NVCC_PKG: companion_version(exact, published_versions(NVCC_PKG), NVCC_PKG),
            NVVM_PKG: companion_version(exact, published_versions(NVVM_PKG), NVVM_PKG)}
    _notice(stream, f"tileprobe: installing tileiras {exact} (nvcc {pins[NVCC_PKG]}, nvvm {pins[NVVM_PKG]}) "
                    f"into {dest}")
    base.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=f".install-{exact}-", dir=base))
    try:
        wheels = _download(pins, work / "wheels")
        stage = work / exact
        for wheel in wheels.values():
            extract_wheel(wheel, stage)
        build = _verify(stage, pins)
        size = sum(f.stat().st_size for f in stage.rglob("*") if f.is_file())
        manifest = {
            "schema_version": MANIFEST_SCHEMA_VERSION, "version": exact, "build": build, "pins": pins,
            "wheels": {p: {"file": w.name, "sha256": _sha256(w)} for p, w in wheels.items()},
            "installed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "install_s": round(time.perf_counter() - t0, 1), "size_bytes": size,
            "python": sys.version.split()[0], "platform": sys.platform,
        }
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        if dest.exists() and force:
            shutil.rmtree(dest)
        try:
            os.rename(stage, dest)
        except OSError:
            if not (dest / MANIFEST).is_file():  # not a concurrent install of the same version: a real error
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Toolchain.from_dir(dest)


def remove(version: str, *, root: str | os.PathLike | None = None) -> Toolchain:
    """Delete a managed toolchain (``"13.3.36"``, or ``"13.3"`` when one 13.3.x is installed); return it.

    Raises:
        ToolchainError: not installed (lists what is), ambiguous, or the version is only pip's.
    """
    want = parse_spec(version)
    have = installed(root)
    hits = [t for t in have if _sort_key(t.version)[:len(want)] == want]
    if len(hits) != 1:
        pip = pip_toolchain()
        if not hits and pip is not None and _sort_key(pip.version)[:len(want)] == want:
            raise ToolchainError(f"tileiras {pip.version} is this environment's pip package, not a managed "
                                 f"toolchain; remove it with `pip uninstall {' '.join(PACKAGES)}`.")
        listed = ", ".join(t.version for t in have) or "none"
        what = "matches several" if hits else "is not installed"
        raise ToolchainError(f"tileiras {version} {what}; managed toolchains: {listed}.")
    shutil.rmtree(hits[0].root)
    return hits[0]


# --- resolve for `audit --tileiras V1,V2` ----------------------------------------------------------------------

def _local_match(spec: str, candidates: Iterable[Toolchain]) -> Toolchain | None:
    want = parse_spec(spec)
    hits = [t for t in candidates if _sort_key(t.version)[:len(want)] == want]
    return max(hits, key=lambda t: _sort_key(t.version)) if hits else None


class ReleaseNotInstalled(ToolchainError):
    """A ``--tileiras`` release that is published but not installed here, and nobody asked to install it (
    a typo, 13.5 for 13.3, downloaded 226 MB and took 446 s unasked). ``version``: the exact release;
    ``size_bytes``: what one installed release takes here (:func:`typical_size_bytes`), None when unknown."""

    def __init__(self, version: str, size_bytes: int | None):
        self.version, self.size_bytes = version, size_bytes
        size = (f" (about {size_bytes / 1e6:,.0f} MB, the size of a release installed here)" if size_bytes
                else f" (about {RELEASE_BYTES / 1e6:,.0f} MB: 13.3.36's size installed)")
        super().__init__(f"tileiras {version} is not installed; nothing was downloaded. Install it{size} with "
                         f"`tileprobe toolchain install {version}`, or add --install to this command "
                         "(`tileprobe toolchain list` shows what is installed)")


#: Bytes one managed release takes installed when none is here to measure: tileiras, ptxas and libnvvm of 13.3.36
#: (``toolchain.json`` ``size_bytes``, the 2-core machine, 2026-12-01).
RELEASE_BYTES = 209_000_000


class ReleasesNotInstalled(ToolchainError):
    """Releases a command needs (``bisect``'s steps) that are published but not installed here, and nobody asked
    to install them: nothing was downloaded. ``versions``: the exact releases; ``size_bytes``: their estimated total
    (:func:`typical_size_bytes` each, else :data:`RELEASE_BYTES`)."""

    def __init__(self, versions: Sequence[str], size_bytes: int):
        self.versions, self.size_bytes = list(versions), size_bytes
        super().__init__(f"{len(self.versions)} tileiras release(s) are not installed: {', '.join(self.versions)}; "
                         f"nothing was downloaded. Install them (about {size_bytes / 1e6:,.0f} MB in all) with "
                         f"`tileprobe toolchain install V` each, or add --install to this command")


def missing_releases(versions: Sequence[str], root: str | os.PathLike | None = None) -> list[str]:
    """Of exact ``versions``, those neither managed here nor this environment's pip tileiras."""
    have = {t.version for t in local_toolchains(root)}
    return [v for v in versions if v not in have]


def require_installed(versions: Sequence[str], install: bool, root: str | os.PathLike | None = None) -> None:
    """Refuse to go on when some of ``versions`` would be downloaded and ``install`` is False.

    Raises:
        ReleasesNotInstalled: naming them and their size (releases are installed only when asked).
    """
    missing = missing_releases(versions, root)
    if missing and not install:
        each = typical_size_bytes(root) or RELEASE_BYTES
        raise ReleasesNotInstalled(missing, each * len(missing))


def typical_size_bytes(root: str | os.PathLike | None = None) -> int | None:
    """Bytes the newest managed toolchain installed here takes (its ``toolchain.json`` ``size_bytes``; tileiras,
    ptxas and libnvvm of one release: 209 MB for 13.3.36), as an estimate of what another release costs; None when
    none is installed."""
    sizes = []
    for t in installed(root):
        try:
            doc = json.loads((Path(t.root) / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        n = _Manifest.from_dict(doc).size_bytes if isinstance(doc, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            sizes.append((t.version, n))
    return max(sizes, key=lambda x: _sort_key(x[0]))[1] if sizes else None


def resolve_toolchain(spec: str, auto_install: bool = False, *, root: str | os.PathLike | None = None,
                      stream: TextIO | str | None = "stderr") -> Toolchain:
    """One ``--tileiras`` entry → a Toolchain. See :func:`resolve_toolchains`."""
    if os.sep in spec or "/" in spec or spec.endswith(f"tileiras{_EXE}"):
        return Toolchain.from_binary(spec)
    want = parse_spec(spec)
    local = sorted([*installed(root)] + ([p] if (p := pip_toolchain()) else []),
                   key=lambda t: t.source != "pip")  # the environment's own compiler first

    def local_exact(version: str) -> Toolchain | None:
        return next((t for t in local if t.version == version), None)

    if len(want) == 3 and (hit := local_exact(spec)):
        return hit  # no registry needed
    try:
        exact = match_version(spec, published_versions(TILEIRAS_PKG))
    except ToolchainError:
        if len(want) == 2 and (hit := _local_match(spec, local)):
            return hit  # registry unreachable: the newest local release of that major.minor
        raise
    if hit := local_exact(exact):
        return hit
    if not auto_install:
        raise ReleaseNotInstalled(exact, typical_size_bytes(root))
    return install(exact, root=root, stream=stream)


def resolve_toolchains(specs: Sequence[str], auto_install: bool = False, *, root: str | os.PathLike | None = None,
                       stream: TextIO | str | None = "stderr") -> list[Toolchain]:
    """Turn ``--tileiras`` entries into the Toolchains ``audit(toolchains=…)`` takes.

    Each entry is ``MAJOR.MINOR`` (newest published patch), ``MAJOR.MINOR.PATCH`` or a path to a tileiras.
    The current environment's pip tileiras is used in place when it is that exact version (and its nvcc/nvvm
    match, as cuTile requires); else a managed toolchain; a missing one is installed (one line to ``stream``)
    only when ``auto_install`` (``--install``; never unasked). Duplicates are dropped, order kept.

    Raises:
        ToolchainError: a malformed or unpublished version (lists the published ones); a failed install.
        ReleaseNotInstalled: a published release not installed here, without ``auto_install`` (says
            ``tileprobe toolchain install V`` and the size; nothing is downloaded).
    """
    out, seen = [], set()
    for spec in specs:
        tc = resolve_toolchain(spec.strip(), auto_install, root=root, stream=stream)
        if tc.tileiras not in seen:
            seen.add(tc.tileiras)
            out.append(tc)
    return out


# --- what is here -----------------------------------------------------------------------------------------------

def local_toolchains(root: str | os.PathLike | None = None) -> list[Toolchain]:
    """What ``tileprobe toolchain list`` shows: the managed toolchains under ``root`` (default
    :func:`toolchains_dir`) and this environment's pip tileiras when cuTile would take it, by version then
    source."""
    pip = pip_toolchain()
    rows = [*installed(root)] + ([pip] if pip else [])
    return sorted(rows, key=lambda t: (_sort_key(t.version), t.source))


def folder_size_bytes(path: str | os.PathLike) -> int:
    """Total size in bytes of the files under ``path`` (e.g. a toolchain's ``root``)."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
