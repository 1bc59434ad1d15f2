"""Custom systems reach every command: ``--import MODULE`` and the ``geosweep.plugins`` entry points,
through the installed ``geosweep`` command with the README's rotor ring (tests/custom_rotors.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import xarray as xr

ROTORS = Path(__file__).resolve().parent / "custom_rotors.py"
SPEC = """name = "ring"
system = "rotor_ring"
integrators = ["explicit_vi", "rk4"]
h = [0.02]
T = 2.0
dt_out = 0.1
[params]
k = [0.5, 2.0]
"""


def _geosweep(*args: str, cwd, env: dict | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("geosweep")
    cmd = [exe] if exe else [sys.executable, "-m", "geosweep.flows.cli"]
    return subprocess.run([*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_import_option_reaches_validate_run_status_report(tmp_path):
    shutil.copy(ROTORS, tmp_path / "my_rotors.py")  # a module in the working directory, not installed
    (tmp_path / "ring.toml").write_text(SPEC)
    p = _geosweep("validate", "ring.toml", cwd=tmp_path)
    assert p.returncode == 2 and "rotor_ring" in p.stderr  # unknown without the plugin
    p = _geosweep("validate", "ring.toml", "--import", "my_rotors", cwd=tmp_path)
    assert p.returncode == 0 and "valid. 4 cells" in p.stdout, p.stderr
    # worker processes unpickle the user's potential: the module must reach them too
    p = _geosweep("run", "ring.toml", "--import", "my_rotors", "--no-prefect", "--processes", "--workers", "2",
                  cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "cells complete: 4/4" in p.stdout
    ds = xr.open_zarr(tmp_path / "results" / "ring.zarr")
    assert int((ds.status == 0).sum()) == 4 and ds.attrs["system"] == "rotor_ring"
    p = _geosweep("status", "results/ring.zarr", "--import", "my_rotors", cwd=tmp_path)
    assert p.returncode == 0 and "cells complete: 4/4" in p.stdout
    p = _geosweep("report", "results/ring.zarr", "--import", "my_rotors", cwd=tmp_path)
    assert p.returncode == 0 and (tmp_path / "results" / "ring.zarr.report" / "index.md").exists(), p.stderr
    p = _geosweep("systems", "--import", "my_rotors", cwd=tmp_path)
    assert "rotor_ring  [family s2]" in p.stdout
    p = _geosweep("validate", "ring.toml", "--import", "no_such_module", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip() == (
        "geosweep: --import no_such_module: ModuleNotFoundError: No module named 'no_such_module'"
    )


def test_entry_point_plugin_is_loaded_by_every_command(tmp_path):
    """A package that declares ``[project.entry-points."geosweep.plugins"]``, as pip installs it (a dist-info)."""
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(ROTORS, site / "ring_plugin.py")
    info = site / "geosweep_ring-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: geosweep-ring\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[geosweep.plugins]\nring = ring_plugin\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    (tmp_path / "ring.toml").write_text(SPEC)
    p = _geosweep("validate", "ring.toml", cwd=tmp_path, env=env)
    assert p.returncode == 0 and "valid. 4 cells" in p.stdout, p.stderr
    p = _geosweep("run", "ring.toml", "--serial", "--store", "r.zarr", cwd=tmp_path, env=env)
    assert p.returncode == 0 and "cells complete: 4/4" in p.stdout, p.stderr[-3000:]


def test_nightly_deployment_carries_the_imports(tmp_path, monkeypatch):
    """``serve --import``: the module is imported to validate the spec and again in each night's flow run."""
    from geosweep.flows.deployments import nightly_deployment
    from geosweep.kernels.registry import FAMILIES, INTEGRATORS, SYSTEMS

    shutil.copy(ROTORS, tmp_path / "nightly_rotors.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "nightly_rotors", raising=False)
    # all three restored: a family the spec's validation loaded meanwhile (s2) is registered again when
    # next needed, not left in FAMILIES without its systems (a later test's spec would not find them)
    saved = [(registry, dict(registry)) for registry in (SYSTEMS, INTEGRATORS, FAMILIES)]
    (tmp_path / "ring.toml").write_text(SPEC)
    try:
        dep = nightly_deployment(tmp_path / "ring.toml", str(tmp_path / "n"), imports=["nightly_rotors"])
    finally:
        for registry, entries in saved:
            registry.clear()
            registry.update(entries)
        sys.modules.pop("nightly_rotors", None)
    assert dep.parameters["imports"] == ["nightly_rotors"] and dep.name == "nightly-ring"
