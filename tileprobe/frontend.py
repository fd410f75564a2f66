"""cuda-tile frontends as a dimension: isolated environments with another cuda-tile than tileprobe's own.

``tileprobe frontend install 1.6.0`` makes ``<toolchains>/cuda-tile-1.6.0/`` (``<toolchains>``:
:func:`tileprobe.toolchain_files.toolchains_dir`, beside the managed tileiras releases), a venv of this Python
(``python -m venv --without-pip``) holding only ``cuda-tile==1.6.0`` (installed with ``--no-deps`` by this
environment's pip, ``pip --python``), then a ``tileprobe-parent.pth`` that puts this environment's site-packages
*after* its own: tileprobe's dependencies (rich, pyelftools ...), the compiler packages and a probe's imports
(numpy, torch) come from here, while ``cuda.tile`` (a namespace package's portion, searched in ``sys.path``
order) and ``importlib.metadata.version("cuda-tile")`` are the venv's. ``--cuda-tile 1.6.0`` on ``audit`` runs the
whole audit with that venv's interpreter (:func:`reexec_argv`): probe loaders, the zygote and the compile workers
all import that cuda-tile, and every record names it (``cuda_tile``).

Installing the .pth last matters: with it in place first, pip would see this environment's cuda-tile and try to
replace it.
"""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

from tileprobe.errors import ToolchainError
from tileprobe.toolchain_files import toolchains_dir

PREFIX = "cuda-tile-"
PTH_NAME = "tileprobe-parent.pth"
#: Set in a command :func:`reexec_argv` started: the cuda-tile version it runs with.
FRONTEND_ENV = "TILEPROBE_FRONTEND"
#: A release as PyPI spells it: MAJOR.MINOR.PATCH (a pre-release suffix a/b/rc allowed), no leading zeros (pip reads
#: ``00001.6.0`` as 1.6.0, and the folder would bear a name no other command finds: a hostile tester, 2026-12-05).
_VERSION_RE = re.compile(r"^(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)(?:(?:a|b|rc)(?:0|[1-9]\d*))?$")


@dataclasses.dataclass(frozen=True)
class Frontend:
    """One isolated cuda-tile: ``version`` (``"1.6.0"``), the venv ``root`` and its ``python`` (absolute path)."""
    version: str
    root: str
    python: str


def frontend_dir(version: str, env: Mapping[str, str] | None = None) -> Path:
    """``<toolchains>/cuda-tile-<version>`` (not created). Raises :class:`ToolchainError` for a version that is not
    MAJOR.MINOR.PATCH as a release spells it (:data:`_VERSION_RE`: no leading zeros; a pre-release such as
    ``1.6.0rc5`` is allowed)."""
    if not _VERSION_RE.fullmatch(str(version)):
        from tileprobe.errors import shown
        raise ToolchainError(f"{shown(version, quote=True)} is not a cuda-tile release: give MAJOR.MINOR.PATCH as the "
                             "release spells it, without leading zeros, e.g. `tileprobe frontend install 1.6.0`")
    return toolchains_dir(env) / f"{PREFIX}{version}"


def _python_of(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def installed(env: Mapping[str, str] | None = None) -> list[Frontend]:
    """The frontends made by :func:`install` under ``<toolchains>``, by version (folders without their .pth, an
    interrupted install, are left out)."""
    base = toolchains_dir(env)
    found = []
    for d in sorted(base.iterdir()) if base.is_dir() else ():
        version = d.name[len(PREFIX):]
        if d.name.startswith(PREFIX) and _VERSION_RE.fullmatch(version) and _pth_of(d) is not None:
            found.append(Frontend(version, str(d), str(_python_of(d))))
    return found


def _pth_of(root: Path) -> Path | None:
    hits = list(root.glob(f"lib*/python*/site-packages/{PTH_NAME}")) + list(root.glob(f"Lib/site-packages/{PTH_NAME}"))
    return hits[0] if hits else None


def find(version: str, env: Mapping[str, str] | None = None) -> Frontend:
    """The installed frontend of ``version``. Raises :class:`ToolchainError` naming the command that makes it, also
    when its folder holds another cuda-tile release than its name says (its ``cuda_tile-*.dist-info``)."""
    root = frontend_dir(version, env)
    pth = _pth_of(root)
    if pth is None or not _python_of(root).exists():
        raise ToolchainError(f"cuda-tile {version} has no environment of tileprobe's ({root}); make it with "
                             f"`tileprobe frontend install {version}`")
    try:     # the folder's name is checked against the release really installed there
        _check_installed(pth.parent, version)
    except ToolchainError as e:
        raise ToolchainError(f"{e}; make it again with `tileprobe frontend install {version} --force`") from None
    return Frontend(version, str(root), str(_python_of(root)))


def _run(cmd: Sequence[str], what: str, timeout_s: float = 900) -> None:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"{what}: `{' '.join(cmd)}` did not finish ({e})") from e
    if proc.returncode != 0:
        tail = "\n  ".join([ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()][-6:])
        raise ToolchainError(f"{what} failed (exit {proc.returncode}):\n  {tail}\nCheck the version "
                             "(`pip index versions cuda-tile`) and pip's index settings (`pip config list`).")


def parent_site_dirs() -> list[str]:
    """This environment's site-packages folders (purelib, platlib), which a frontend's .pth appends."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(p for p in (paths.get("purelib"), paths.get("platlib")) if p))


def install(version: str, env: Mapping[str, str] | None = None, *, force: bool = False) -> Frontend:
    """Make the isolated environment of cuda-tile ``version`` (module doc); an existing one is kept unless ``force``.

    Raises:
        ToolchainError: a version that is not MAJOR.MINOR.PATCH, or venv / pip failed (pip's last lines quoted).
    """
    root = frontend_dir(version, env)
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise ToolchainError(f"{root} is {'a symbolic link' if root.is_symlink() else 'not a folder'}: tileprobe "
                             "makes each frontend's folder itself and never writes through a link; remove it "
                             f"(`rm {root}`) and install again")
    if not force and _pth_of(root) is not None:
        return find(version, env)
    root.parent.mkdir(parents=True, exist_ok=True)
    # Built in a new folder beside it and renamed into place: a failed install leaves neither a half-made folder nor
    # a broken working one (--force), and nothing that was at the final path is cleared through.
    build = root.parent / f".{root.name}.new-{os.getpid()}"
    import shutil
    try:
        _run([sys.executable, "-m", "venv", "--without-pip", str(build)], f"making the venv {build}", 300)
        python = _python_of(build)
        _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-input",
              "--disable-pip-version-check", f"cuda-tile=={version}"], f"installing cuda-tile=={version} into {root}")
        site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, timeout=120).stdout.strip())
        _check_installed(site, version)
        (site / PTH_NAME).write_text("".join(f"{d}\n" for d in parent_site_dirs()), encoding="utf-8")
        _swap_into_place(build, root)
    except BaseException:        # a failed (or interrupted) install leaves no folder behind (a 56 KB one was left)
        shutil.rmtree(build, ignore_errors=True)
        raise
    python = _python_of(root)
    return Frontend(version, str(root), str(python))


def _swap_into_place(build: Path, root: Path) -> None:
    """Move the finished environment ``build`` to ``root``; an older one there (``--force``) is moved aside first and
    removed after. (A venv's interpreter finds its site-packages from where it is, so the moved one works; its
    activate scripts, which tileprobe does not use, still name the build folder.)"""
    import shutil
    old = root.parent / f".{root.name}.old-{os.getpid()}"
    if root.exists():
        os.rename(root, old)
    os.rename(build, root)
    shutil.rmtree(old, ignore_errors=True)


def _check_installed(site: Path, version: str) -> None:
    """The venv's site-packages ``site`` holds cuda-tile ``version`` itself (its ``cuda_tile-VERSION.dist-info``),
    not another release pip chose.

    Raises:
        ToolchainError: naming what is there instead.
    """
    there = sorted(p.name for p in site.glob("cuda_tile-*.dist-info")) if site.is_dir() else []
    if f"cuda_tile-{version}.dist-info" not in there:
        raise ToolchainError(f"installing cuda-tile=={version} into {site.parent} left {', '.join(there) or 'no cuda-tile'}"
                             " there, not that release; check the version (`pip index versions cuda-tile`)")


def reexec_argv(frontend: Frontend, argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run ``tileprobe <argv>`` with ``frontend``'s interpreter: this
    tileprobe's code first on ``PYTHONPATH`` (the same tileprobe, whatever that venv would find), and
    :data:`FRONTEND_ENV` naming the version (so that a second ``--cuda-tile`` is not followed again)."""
    from tileprobe.procs import importable_env
    env = importable_env()
    env[FRONTEND_ENV] = frontend.version
    return [frontend.python, "-m", "tileprobe", *argv], env


def strip_option(argv: Sequence[str], option: str) -> list[str]:
    """``argv`` without ``option VALUE`` / ``option=VALUE`` (the first of them)."""
    out, i = [], 0
    argv = list(argv)
    while i < len(argv):
        a = argv[i]
        if a == option:
            i += 2
            continue
        if not a.startswith(option + "="):
            out.append(a)
        i += 1
    return out


def _installed_here() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version
    try:
        return dist_version("cuda-tile")
    except PackageNotFoundError:
        return ""


def command_for(version: str, argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of ``tileprobe <argv>`` with cuda-tile ``version``: this interpreter when
    it is the one installed here, else its environment's (:func:`reexec_argv`). Raises :class:`ToolchainError` when
    that has none (the message names `tileprobe frontend install VERSION`)."""
    if _installed_here() == version:
        from tileprobe.procs import importable_env
        return [sys.executable, "-m", "tileprobe", *argv], importable_env()
    return reexec_argv(find(version), argv)


def run_with(version: str, argv: Sequence[str], option: str = "--cuda-tile") -> int | None:
    """Run ``tileprobe <argv>`` (without ``option``) with cuda-tile ``version``'s environment and return its exit
    status; None when this process already runs with that version (installed here, or started by this function):
    go on here. The child inherits stdin/stdout/stderr and dies with this process (``PR_SET_PDEATHSIG``).

    Raises:
        ToolchainError: no environment of that version (the message names `tileprobe frontend install VERSION`).
    """
    from tileprobe.procs import preexec_die_with_parent
    if os.environ.get(FRONTEND_ENV) == version or _installed_here() == version:
        return None
    cmd, env = reexec_argv(find(version), strip_option(argv, option))
    proc = subprocess.Popen(cmd, env=env, preexec_fn=preexec_die_with_parent(os.getpid()))
    try:
        return proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
