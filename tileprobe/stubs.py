"""Stub host-only imports while a kernel module is imported.

A kernel often lives in a package whose import pulls host-side machinery an audit never needs: a JIT extension
builder, a native library, a GPU runtime (FlashInfer's ``flashinfer.jit``). ``stub_modules`` replaces such modules,
and all their submodules, by stubs for the duration of a ``with`` block::

    from tileprobe import stub_modules
    with stub_modules("flashinfer.jit", "flashinfer.utils"):
        from flashinfer.cute_dsl.gemm import gemm_kernel

or, for a kernel named by string, ``Probe(kernel="flashinfer.x:kernel", stub_modules=["flashinfer.jit"])``.

A stub module gives a stub for any attribute; a stub can be called, indexed, iterated (empty), subclassed and used
as a decorator (``@stub`` and ``@stub(...)`` return the decorated object unchanged, so ``@ct.kernel`` functions under
a host-only decorator survive). Modules that were already imported are put back when the block ends; modules
imported inside it (the kernel's) stay.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any


class Stub:
    """Stands for any object of a stubbed module."""

    def __init__(self, name: str):
        self._stub_name = name

    def __getattr__(self, attr: str) -> Stub:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Stub(f"{self._stub_name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and (isinstance(args[0], type) or callable(args[0])):
            return args[0]          # used as a decorator: keep what it decorates
        return Stub(f"{self._stub_name}()")

    def __getitem__(self, key: Any) -> Stub:
        return Stub(f"{self._stub_name}[{key!r}]")

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (object,)

    def __repr__(self) -> str:
        return f"<tileprobe stub {self._stub_name}>"


class StubModule(types.ModuleType):
    """A module whose every attribute is a :class:`Stub` (and which can hold stub submodules)."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Stub(f"{self.__name__}.{attr}")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names: tuple[str, ...]):
        self.names = names

    def covers(self, fullname: str) -> bool:
        return any(fullname == n or fullname.startswith(n + ".") for n in self.names)

    def find_spec(self, fullname, path=None, target=None):
        if not self.covers(fullname):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = StubModule(spec.name)
        module.__path__ = []
        module.__all__ = []
        return module

    def exec_module(self, module):
        pass


class stub_modules:
    """Context manager: while active, importing any of ``names`` (or their submodules) gives a stub module.

    Args:
        names: dotted module names, e.g. ``"flashinfer.jit"``.

    Raises:
        TypeError: a name that is not a string.
    """

    def __init__(self, *names: str):
        for n in names:
            if not isinstance(n, str) or not n:
                raise TypeError(f"stub_modules: module names are strings like 'flashinfer.jit', got {n!r}")
        self.names = tuple(names)
        self._finder: _StubFinder | None = None
        self._saved: dict[str, types.ModuleType] = {}

    def __enter__(self) -> stub_modules:
        if not self.names:
            return self
        self._finder = _StubFinder(self.names)
        self._saved = {k: m for k, m in sys.modules.items() if self._finder.covers(k)}
        for k in self._saved:
            del sys.modules[k]
        sys.meta_path.insert(0, self._finder)
        return self

    def __exit__(self, *exc) -> None:
        if self._finder is None:
            return
        sys.meta_path.remove(self._finder)
        for k in [k for k, m in sys.modules.items() if isinstance(m, StubModule) and self._finder.covers(k)]:
            del sys.modules[k]
        sys.modules.update(self._saved)
        self._finder = None
