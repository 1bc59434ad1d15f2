"""One import namespace: ``geosweep.*`` over the top-level folders (issue 24 item 1).

The folders ``kernels/``, ``sweeps/``, ``flows/``, ``analysis/`` and ``deploy/`` are installed as
``geosweep.kernels`` … (``[tool.setuptools.package-dir]``); nothing else of ours is importable at the top
level of an environment, so a user's own ``analysis.py`` cannot shadow ours.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("kernels", "sweeps", "flows", "analysis", "deploy")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_listed_under_the_geosweep_namespace():
    tool = _pyproject()["tool"]["setuptools"]
    inits = [p.parent.relative_to(ROOT) for f in FOLDERS for p in (ROOT / f).rglob("__init__.py")]
    found = {"geosweep"} | {"geosweep." + ".".join(d.parts) for d in inits}
    assert set(tool["packages"]) == found
    assert tool["package-dir"] == {"geosweep": "geosweep", **{f"geosweep.{f}": f for f in FOLDERS}}
    assert (ROOT / "geosweep" / "py.typed").is_file() and "py.typed" in tool["package-data"]["geosweep"]
    assert _pyproject()["project"]["scripts"]["geosweep"].startswith("geosweep.")


def test_only_geosweep_is_importable_from_the_installed_environment(tmp_path):
    """From a directory outside the checkout, the old top-level names are gone and ``import geosweep``
    gives every subpackage and registers the ``ds.geosweep`` accessor."""
    code = (
        "import importlib.util as u, sys\n"
        f"print([n for n in {FOLDERS!r} if u.find_spec(n) is not None])\n"
        "import xarray as xr, geosweep\n"
        "import geosweep.kernels, geosweep.sweeps, geosweep.flows, geosweep.analysis, geosweep.deploy\n"
        "print(hasattr(xr.Dataset, 'geosweep'), geosweep.kernels.__file__)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(" + repr(FOLDERS) + ")))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    shadowed, registered, empty = out.stdout.splitlines()
    assert shadowed == "[]"
    assert registered.startswith("True ") and registered.endswith(str(Path("kernels", "__init__.py")))
    assert empty == "[]"


def test_no_module_imports_the_old_top_level_names():
    """Every import of the project's code goes through ``geosweep.`` (two names for one module would
    be two module objects: two registries, two accessors)."""
    old = re.compile(r"^\s*(?:from|import)\s+(?:" + "|".join(FOLDERS) + r")\b", re.M)
    offenders = []
    for top in (*FOLDERS, "geosweep", "tests", "benchmarks"):
        for p in (ROOT / top).rglob("*.py"):
            if old.search(p.read_text()):
                offenders.append(str(p.relative_to(ROOT)))
    assert offenders == []
