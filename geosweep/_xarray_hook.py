"""``ds.geosweep`` without importing xarray: the accessor is registered when xarray is imported.

``import geosweep`` must not cost xarray and pandas (~0.5 s) to a program that never opens a store (a
kernels-only script, the ``geosweep`` command's ``--help``), yet ``import geosweep; import xarray``
and ``import xarray; import geosweep`` must both give ``ds.geosweep``. xarray has no entry point for
accessors (pydata/xarray#7348), so :func:`install` either imports :mod:`geosweep.analysis.accessor`
at once (xarray is already imported) or puts a finder first on :data:`sys.meta_path` that lets the
usual finder locate xarray and wraps its loader: once xarray's ``__init__`` has run, the accessor
module is imported (its ``@xr.register_dataset_accessor`` registers it) and the finder removes itself.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

#: the module whose import registers ``ds.geosweep`` (it imports xarray and pandas)
ACCESSOR_MODULE = "geosweep.analysis.accessor"
TARGET = "xarray"


class _ThenAccessor(importlib.abc.Loader):
    """xarray's own loader, followed by the accessor's import once xarray's module has executed."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        # a partly imported accessor (it is what imports xarray here) is returned as it is and registers itself
        importlib.import_module(ACCESSOR_MODULE)

    def __getattr__(self, name: str):  # get_resource_reader, is_package, … of xarray's own loader
        return getattr(self._loader, name)


class AccessorOnXarrayImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader the other finders return for ``xarray`` (once)."""

    def find_spec(self, fullname: str, path=None, target=None) -> ModuleSpec | None:
        if fullname != TARGET:
            return None
        uninstall()
        spec = next((s for f in sys.meta_path if (s := _spec_of(f, fullname, path, target)) is not None), None)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _ThenAccessor(spec.loader)
        return spec


def _spec_of(finder, fullname: str, path, target) -> ModuleSpec | None:
    find = getattr(finder, "find_spec", None)
    return find(fullname, path, target) if find is not None else None


def installed() -> bool:
    """Whether the finder waits on :data:`sys.meta_path` for xarray's import."""
    return any(isinstance(f, AccessorOnXarrayImport) for f in sys.meta_path)


def uninstall() -> None:
    """Remove the finder (xarray is being imported, or the caller registers the accessor itself)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, AccessorOnXarrayImport)]


def install() -> None:
    """Register ``ds.geosweep`` now if xarray is imported, else when it is first imported."""
    if TARGET in sys.modules:
        importlib.import_module(ACCESSOR_MODULE)
    elif not installed():
        sys.meta_path.insert(0, AccessorOnXarrayImport())
