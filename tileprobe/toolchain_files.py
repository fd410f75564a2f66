"""The files side of managed toolchains: tileiras version specs (``13.4`` / ``13.4.92``) and published-version
lists, the folder toolchains (and cuda-tile frontends, :mod:`tileprobe.frontend`) live in, and what of a compiler
wheel is extracted. Pure functions: no network, no compiler run (:mod:`tileprobe.toolchain` does those and
re-exports these names)."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from platformdirs import user_cache_dir

from tileprobe.errors import ToolchainError

TILEIRAS_PKG = "nvidia-cuda-tileiras"
_EXE = ".exe" if os.name == "nt" else ""
_BIN_FILES = {f"tileiras{_EXE}", f"ptxas{_EXE}", f"tileirdisasm{_EXE}"}
_SPEC_RE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


def parse_spec(spec: str) -> tuple[int, ...]:
    """``"13.3"`` → ``(13, 3)``; ``"13.3.36"`` → ``(13, 3, 36)``.

    Raises:
        ToolchainError: anything else (``"13"``, ``"v13.3"``, ``"13.3.36rc1"``).
    """
    m = _SPEC_RE.match(str(spec).strip())
    if not m:
        raise ToolchainError(f"{spec!r} is not a tileiras version: give MAJOR.MINOR (13.4, the newest 13.4.x) "
                             "or MAJOR.MINOR.PATCH (13.4.92); `tileprobe toolchain list --available` lists them.")
    return tuple(int(g) for g in m.groups() if g is not None)


def major_minor(version: str) -> tuple[int, int]:
    """``"13.4.92"`` → ``(13, 4)``; the key cuTile compares across the three packages."""
    parts = parse_spec(version)
    return parts[0], parts[1]


def _sort_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def match_version(spec: str, published: Sequence[str], package: str = TILEIRAS_PKG) -> str:
    """The published version a spec names: itself when exact, else the newest patch of MAJOR.MINOR.

    Raises:
        ToolchainError: no published version matches; the message lists the published ones.
    """
    want = parse_spec(spec)
    hits = sorted((v for v in published if _sort_key(v)[:len(want)] == want), key=_sort_key)
    if not hits:
        listed = ", ".join(sorted(published, key=_sort_key)) or "none"
        raise ToolchainError(f"{package} {spec} is not published; published: {listed}.")
    return hits[-1]


def companion_version(tileiras_version: str, published: Sequence[str], package: str) -> str:
    """The newest published ``package`` release with tileiras' major.minor (its patch number differs).

    Raises:
        ToolchainError: that major.minor has no release of ``package``.
    """
    try:
        return match_version("%d.%d" % major_minor(tileiras_version), published, package)
    except ToolchainError as e:
        raise ToolchainError(f"tileiras {tileiras_version} needs {package} of the same major.minor: {e}") from None


def parse_pip_versions(text: str) -> list[str] | None:
    """Final releases from ``pip index versions`` ("Available versions: a, b") or a ``pip download`` error
    ("(from versions: a, b)"), ascending; ``None`` when the text has neither. Pre-releases (``13.4.46rc1``) are
    dropped."""
    m = re.search(r"Available versions:\s*(.*)", text) or re.search(r"\(from versions:\s*([^)]*)\)", text)
    if not m:
        return None
    found = {v.strip() for v in m.group(1).split(",")}
    return sorted((v for v in found if re.fullmatch(r"\d+\.\d+\.\d+", v)), key=_sort_key)


def toolchains_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$TILEPROBE_TOOLCHAINS`` or ``platformdirs.user_cache_dir("tileprobe")/toolchains`` (not created)."""
    env = os.environ if env is None else env
    if env.get("TILEPROBE_TOOLCHAINS"):
        return Path(env["TILEPROBE_TOOLCHAINS"]).expanduser()
    return Path(user_cache_dir("tileprobe")) / "toolchains"


def wanted(member: str) -> str | None:
    """The toolchain-relative path a wheel member is extracted to, or ``None`` to leave it out.

    Kept: ``bin/{tileiras,ptxas,tileirdisasm}``, ``lib/*``, ``nvvm/**`` except ``nvvm/bin`` (cicc: unused).
    """
    prefix = "nvidia/cu13/"
    if not member.startswith(prefix) or member.endswith("/"):
        return None
    rel = member[len(prefix):]
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    if parts[0] == "bin":
        return rel if len(parts) == 2 and parts[1] in _BIN_FILES else None
    if parts[0] == "lib":
        return rel if len(parts) == 2 else None
    if parts[0] == "nvvm":
        return rel if len(parts) > 2 and parts[1] != "bin" else None
    return None


def extract_wheel(wheel: str | os.PathLike, dest: str | os.PathLike) -> list[str]:
    """Extract the :func:`wanted` members of a wheel into ``dest``, keeping executable bits; return their paths."""
    out = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            rel = wanted(info.filename)
            if rel is None:
                continue
            target = Path(dest, rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(target, 0o755 if rel.startswith("bin/") else (mode or 0o644) | 0o444)
            out.append(rel)
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
