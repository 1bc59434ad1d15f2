"""geosweep: parameter sweeps for long-time energy studies of geometric integrators.

One import namespace over the project's folders (mapped in ``pyproject.toml``):

* :mod:`geosweep.kernels` — Numba models and integrators, pure computation on arrays;
* :mod:`geosweep.sweeps` — spec, grid, plan, Dask execution and the zarr store (no Prefect);
* :mod:`geosweep.flows` — the Prefect flows, deployments and the ``geosweep`` CLI;
* :mod:`geosweep.analysis` — the ``ds.geosweep`` xarray accessor and reports;
* :mod:`geosweep.deploy` — cluster files (Slurm/PBS, Kubernetes) and object-store output.

``import geosweep`` registers the ``ds.geosweep`` accessor on :class:`xarray.Dataset`, in either order
of the two imports (without importing xarray itself: :mod:`geosweep._xarray_hook`)::

    import xarray as xr, geosweep
    ds = xr.open_zarr("results/sphere-demo.zarr")
    ds.geosweep.classify()
"""

from __future__ import annotations

import pathlib
from importlib.metadata import PackageNotFoundError, version

# A source checkout (PYTHONPATH=<checkout>, or a worktree next to an editable install): the subpackages are
# the checkout's top-level folders, so they are found next to this folder. An installed wheel has them inside.
_here = pathlib.Path(__file__).resolve().parent
if not (_here / "kernels").is_dir() and (_here.parent / "kernels" / "__init__.py").is_file():
    __path__.append(str(_here.parent))  # noqa: F821 - the package's own search path

# First (stdlib only): the ``geosweep`` command's own process turns a signal into
# its one line from here on (geosweep.flows.entry); a worker process of ``geosweep run --processes`` (a
# multiprocessing child, which imports this package first) ignores SIGINT at once (geosweep.flows.output).
from geosweep.flows import entry as _entry  # noqa: E402, I001

_entry.install()
_entry.pause("import")  # a test hook: a signal during the imports
from geosweep.flows import output as _output  # noqa: E402, F401, I001
from geosweep import _xarray_hook  # noqa: E402, I001

_xarray_hook.install()  # ds.geosweep: now if xarray is imported, else on its import

try:
    __version__ = version("geosweep")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"

#: the front door (geosweep/api.py, geosweep/solution.py), imported on first use (PEP 562): ``import
#: geosweep`` stays light, ``geosweep.integrate`` loads the sweep machinery when first called for
_FRONT_DOOR = {
    **dict.fromkeys(("system", "systems", "integrators", "integrate", "run", "extend", "open", "verify"), "api"),
    "Solution": "solution",
}


def __getattr__(name: str):
    if name == "methods":  # the integrators as objects (geosweep/methods.py), a light module
        import importlib

        return importlib.import_module("geosweep.methods")
    if name in _FRONT_DOOR:
        import importlib

        value = getattr(importlib.import_module(f"geosweep.{_FRONT_DOOR[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'geosweep' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_FRONT_DOOR, "methods"})


__all__ = ["__version__", *_FRONT_DOOR]
