"""tileiras as a program, and what a process does to import cuTile fast: its release line
(``tileiras --version``), the targets its ``--help`` lists, where a CUDA tool is on this machine, and the finder
that keeps torch out of a cuTile import, and the lookup of the tileiras cuTile would pick (in a child that imports
:mod:`tileprobe._cutile`). Nothing here touches cuTile's private names (those are
:mod:`tileprobe._cutile`'s, which re-exports these)."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading

from tileprobe.errors import ToolchainError
from tileprobe.model.toolkit import tool_timeout_s
from tileprobe.procs import run_in_group


def as_text(output: bytes | str) -> str:
    """A tool's output as :func:`tileprobe.procs.run_in_group` gives it (bytes, or text with ``text=True``) as text,
    undecodable bytes replaced."""
    return output.decode(errors="replace") if isinstance(output, bytes) else output


class NoTorch:
    """A ``sys.meta_path`` finder that makes ``torch`` unimportable while cuTile is imported: cuTile's
    ``_cext.foreign_dtype_object_to_native`` imports torch at ``import cuda.tile._compile`` (1.9 of its 2.2 s on the
    2-core machine, ``python -X importtime``, 2026-12-02) and answers "not a foreign dtype" without it. Used by the
    zygote (:func:`tileprobe.probe.zygote.allow_torch_free`) and the compiler lookup (:class:`DefaultCompilerLookup`).
    """

    def find_spec(self, name, path=None, target=None):
        """Raise ModuleNotFoundError for ``torch`` and its submodules; None (not mine) for any other name."""
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r} (tileprobe: cuTile imported without torch)",
                                      name=name)
        return None


def tileiras_build(tileiras: str) -> str:
    """Run ``tileiras --version`` and return its last line, e.g. ``Cuda compilation tools, release 13.4, V13.4.92``.

    Raises :class:`ToolchainError` if it does not run (a missing library, a wrong platform).
    """
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    try:
        limit = tool_timeout_s()
        rc, out, err = run_in_group([tileiras, "--version"], env, limit)
    except OSError as e:
        raise ToolchainError(f"{tileiras} --version failed ({e}); run `tileprobe doctor`.") from e
    if rc is None:
        raise ToolchainError(f"{tileiras} --version did not answer within {limit:g} s; it was stopped. "
                             "Run `tileprobe doctor`.")
    if rc != 0:
        raise ToolchainError(f"{tileiras} --version failed (exit status {rc}: "
                             f"{as_text(err).strip()[:300]}); run `tileprobe doctor`.")
    return parse_build(as_text(out))


def tileiras_targets(tileiras: str) -> list[str]:
    """The ``--gpu-name`` targets ``tileiras --help`` lists (e.g. 13.2.86: sm_80 … sm_89, sm_100 … sm_121, no
    sm_90), run without CUDA_HOME / CUDA_PATH, contained (:func:`tileprobe.procs.run_in_group`: its process group
    is killed after :func:`~tileprobe.model.toolkit.tool_timeout_s`); ``[]`` when it does not answer or lists none
    (then nothing is refused before compiling)."""
    from tileprobe.model.toolkit import parse_targets
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    try:
        rc, out, _err = run_in_group([tileiras, "--help"], env, tool_timeout_s())
    except OSError:
        return []
    return parse_targets(as_text(out)) if rc is not None else []


def parse_build(version_text: str) -> str:
    """The release line of ``tileiras --version`` (``Cuda compilation tools, release 13.4, V13.4.92``).

    tileiras 13.4.92 prints five lines; the release line is the 4th, a ``Build …`` line follows it.
    """
    lines = [ln.strip() for ln in (version_text or "").splitlines() if ln.strip()]
    for ln in lines:
        if "release" in ln and re.search(r"V\d+\.\d+", ln):
            return ln
    return lines[-1] if lines else "unknown"


def which_tool(name: str) -> str | None:
    """Find a CUDA tool (cuobjdump, nvdisasm, tileiras) on PATH or in the pip ``nvidia/cu13/bin`` folder."""
    found = shutil.which(name)
    if found:
        return found
    try:
        import nvidia.cu13 as cu13  # type: ignore
        return shutil.which(name, path=os.path.join(cu13.__path__[0], "bin"))
    except (ImportError, AttributeError, IndexError):
        return None


#: The lookup child of :class:`DefaultCompilerLookup`: cuTile imported with torch unimportable (:class:`NoTorch`:
#: cuTile's ``_cext`` imports it at import, seconds, and no part of the lookup), then its ``_find_compiler_bin``.
_LOOKUP_CODE = r"""
import json, os, sys
from tileprobe import _cutile
if os.environ.get("TILEPROBE_LOOKUP_TORCH") != "1":
    sys.meta_path.insert(0, _cutile.NoTorch())
try:
    print(json.dumps([str(_cutile.current_compiler()), ""]))
except Exception as e:
    print(json.dumps(["", str(e)]))
"""


class DefaultCompilerLookup:
    """The tileiras cuTile would pick (:func:`current_compiler`), found in a child process started at once, so
    that it overlaps the probe loaders: on the H200 host the lookup took 4.15 s in a loader, and as it
    imported cuTile's compiler side (torch with it) the loader could no longer say whether the probe needs torch.
    Here cuTile is imported without torch (0.3 s instead of 2.2 s on the 2-core machine); if that import fails,
    the lookup is asked again with torch. Not probe code: no probe file is imported.

    ``result()`` → (path, "") or ("", the error's text), after at most ``timeout_s`` seconds (then the error says
    it did not answer).
    """

    def __init__(self, timeout_s: float):
        self.timeout_s, self.answer = timeout_s, ("", f"the tileiras lookup did not answer within {timeout_s:g} s")
        self.thread = threading.Thread(target=self._run, name="tileprobe-tileiras-lookup", daemon=True)
        self.thread.start()   # the child dies with this thread (PR_SET_PDEATHSIG), which waits for it

    def _ask(self, with_torch: bool) -> tuple[str, str] | None:
        from tileprobe.procs import importable_env
        env = importable_env({k: v for k, v in os.environ.items() if k != "TILEPROBE_LOOKUP_TORCH"})
        if with_torch:
            env["TILEPROBE_LOOKUP_TORCH"] = "1"
        rc, out, err = run_in_group([sys.executable, "-c", _LOOKUP_CODE], env, self.timeout_s)
        try:
            path, error = json.loads(as_text(out).strip().splitlines()[-1])
            return str(path), str(error)
        except (ValueError, IndexError, TypeError):
            if rc is None:
                return None
            return "", f"the tileiras lookup failed ({as_text(err).strip()[-500:] or rc})"

    def _run(self) -> None:
        answer = self._ask(False)
        if answer is not None and not answer[0] and "without torch" in answer[1]:
            answer = self._ask(True)
        if answer is not None:
            self.answer = answer

    def result(self) -> tuple[str, str]:
        """(tileiras path, "") or ("", why there is none), waiting for the child up to its timeout."""
        self.thread.join(self.timeout_s + 5)
        return self.answer
