"""Light imports (issue 50 item 5): the kernels and the command's help import no xarray, pandas, Dask,
Prefect or zarr, and ``import geosweep`` still gives ``ds.geosweep`` whichever of geosweep and xarray is
imported first (:mod:`geosweep._xarray_hook`).

Each check runs in a fresh interpreter: the test process itself has imported everything.
"""

from __future__ import annotations

import argparse
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import geosweep.kernels
from benchmarks.bench_imports import TINY_SPEC  # the spec the benchmark's tiny-run rows time
from geosweep.flows.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
#: what a kernels-only script or the command's help must not pay for (zarr and Dask: the store's)
HEAVY = ("xarray", "pandas", "prefect", "distributed", "dask", "zarr", "pydantic")
#: the modules of geosweep.flows.cli that the parser needs; each command's module is imported when it runs
LIGHT_CLI_MODULES = ("exits", "options", "parser")


def _heavy_after(code: str) -> list[str]:
    """The modules of :data:`HEAVY` imported by ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _run(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_import_geosweep_imports_no_heavy_library():
    assert _heavy_after("import geosweep") == []


def test_every_kernels_module_imports_no_heavy_library():
    modules = [m.name for m in pkgutil.walk_packages(geosweep.kernels.__path__, "geosweep.kernels.")]
    assert len(modules) > 40 and "geosweep.kernels.status" in modules  # every family's modules are walked
    imports = "\n".join(f"import {m}" for m in ["geosweep.kernels", *modules])
    assert _heavy_after(imports) == []


def test_help_and_version_import_no_command():
    """``geosweep --help``, ``--version`` and every ``geosweep CMD --help`` (one interpreter: none of them
    may import a heavy library, so neither may all of them together)."""
    (commands,) = (a.choices for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    forms = [["--help"], ["--version"], *([cmd, "--help"] for cmd in sorted(commands))]
    code = (
        "import contextlib, io\nfrom geosweep.flows.cli import main\n"
        f"for argv in {forms!r}:\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        try:\n            main(argv)\n        except SystemExit as e:\n            assert e.code == 0, argv\n"
        "    assert 'geosweep' in out.getvalue(), argv\n"
        "import sys\n"
        "cli = {m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('geosweep.flows.cli.')}\n"
        f"assert cli <= {set(LIGHT_CLI_MODULES)!r}, cli  # no command's module\n"
        "assert 'numba' not in sys.modules and 'numpy' not in sys.modules\n"
    )
    assert _heavy_after(code) == []


def test_accessor_registered_whichever_is_imported_first():
    check = (
        "ds = xr.Dataset({'status': ('h', [0, 1])})\n"
        "from geosweep.analysis.accessor import GeosweepAccessor\n"
        "assert type(ds.geosweep) is GeosweepAccessor, type(ds.geosweep)\n"
        "from geosweep._xarray_hook import installed\n"
        "assert not installed()  # the finder has left sys.meta_path\n"
        "print(ds.geosweep.sweep_dims)\n"
    )
    for first in (
        "import geosweep\nimport xarray as xr",
        "import xarray as xr\nimport geosweep",
        "import geosweep.kernels.status\nimport xarray as xr",
        "import geosweep.analysis\nimport xarray as xr",  # the accessor itself imports xarray
        "import geosweep\nfrom xarray import Dataset\nimport xarray as xr",
    ):
        assert _run(f"{first}\n{check}").strip() == "('h',)", first


def test_xarray_imported_through_the_hook_is_xarray_as_usual():
    """The wrapped loader answers for xarray's own (its files, its package flag), and a later import of
    geosweep adds no second finder."""
    out = _run(
        "import geosweep, importlib, importlib.resources, sys\n"
        "import xarray as xr\n"
        "assert xr.__spec__.submodule_search_locations and xr.__loader__.is_package('xarray')\n"
        "assert importlib.resources.files('xarray').joinpath('__init__.py').is_file()\n"
        "importlib.reload(geosweep)\n"
        "from geosweep._xarray_hook import installed\n"
        "print(installed(), xr.Dataset().geosweep.__class__.__name__)\n"
    )
    assert out.split() == ["False", "GeosweepAccessor"]


def test_a_module_of_sweeps_imports_only_what_it_uses():
    """The command checks Numba's environment (``sweeps.numba_env``) before anything else: the package
    ``geosweep.sweeps`` imports its flow-facing modules (plan, spec, execution …) only when they are used."""
    code = (
        "import geosweep.sweeps.numba_env, sys\n"
        "loaded = [m for m in sys.modules if m.startswith('geosweep.sweeps.')]\n"
        "assert loaded == ['geosweep.sweeps.numba_env'], loaded"
    )
    assert _heavy_after(code) == []


def test_a_tiny_run_imports_no_xarray_nor_dask(tmp_path):
    """A tiny ``geosweep run --serial`` and ``--no-prefect`` (in this process: a short cell) create their
    store, run the cell and print the status table with zarr alone: no xarray, pandas, Dask, distributed
    or Prefect (issue 50 item 5: they were 0.9 s of CPU of a 2.6 s run)."""
    (tmp_path / "tiny.toml").write_text(TINY_SPEC)
    code = (
        "import contextlib, io\nfrom geosweep.flows.cli import main\n"
        "for flag, store in (('--serial', 'a.zarr'), ('--no-prefect', 'b.zarr')):\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        try:\n            main(['run', flag, 'tiny.toml', '--store', store])\n"
        "        except SystemExit as e:\n            assert not e.code, (flag, e.code)\n"
        "    assert 'cells complete: 1/1' in out.getvalue() and '| rkmk4 | ' in out.getvalue(), out.getvalue()\n"
        "import json, sys\n"
        f"print(json.dumps([m for m in {(*HEAVY[:5], 'dask.array')!r} if m in sys.modules]))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == []


def test_listing_systems_on_a_cold_cache_compiles_nothing(tmp_path):
    """``geosweep.systems()`` and ``geosweep.integrators()`` import every built-in family and read their
    declarations: on an empty Numba cache nothing compiles (issue 53 item 1), the kernels of explicit
    signatures wait for their first use (:class:`geosweep.kernels._jit.DeclaredDispatcher`)."""
    code = (
        "import sys\nfrom geosweep.kernels._jit import _DECLARED, watch_compiles\n"
        "with watch_compiles() as count:\n"
        "    import geosweep\n"
        "    systems, integrators = geosweep.systems(), geosweep.integrators()\n"
        "from geosweep.kernels.registry import BUILTIN_FAMILIES\n"
        "assert all(m in sys.modules for m in BUILTIN_FAMILIES)\n"
        "assert 'lj_sphere' in systems.index and 'rkmk4' in integrators.index\n"
        "import json\n"
        "print(json.dumps([count[0], len(_DECLARED), sum(d._declared is None for d in _DECLARED)]))"
    )
    cache = tmp_path / "numba"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    compiled, declared, used = json.loads(p.stdout.strip().splitlines()[-1])
    assert declared > 50  # every family's kernels of explicit signatures were made …
    assert (compiled, used) == (0, 0)  # … and none compiled
    assert not list(cache.rglob("*.nbi"))
