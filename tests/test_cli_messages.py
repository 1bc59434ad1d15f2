"""What a newcomer reads: help, compile notices, verify's cell names, run summaries, Status, packaging.

Real processes and stores: ``geosweep systems`` on a cold Numba cache, a store damaged on disk,
a short quadrotor sweep.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cmd() -> list[str]:
    exe = shutil.which("geosweep")
    return [exe] if exe else [sys.executable, "-m", "geosweep.flows.cli"]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def test_top_level_help_names_every_command():
    from geosweep.flows.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    description = parser.description or ""
    for name in sub.choices:
        assert re.search(rf"\b{name}\b", description), f"`geosweep --help` does not name {name}: {description!r}"


def test_status_prints_its_name_and_keeps_its_code():
    from geosweep.kernels.status import STATUS_MEANINGS, Status

    assert str(Status.OK) == "ok" and repr(Status.NONCONVERGED) == "Status.NONCONVERGED"
    assert int(Status.NOT_APPLICABLE) == -2 and f"{Status.ENERGY_BLOWUP:d}" == "5" and Status.OK == 0
    assert STATUS_MEANINGS[2] == "nonconverged" and STATUS_MEANINGS[-1] == "not_run"


def _numba_cache_without(tmp_path: Path, cold: str) -> Path:
    """A ``NUMBA_CACHE_DIR`` holding the suite's warm cache of every kernel package except
    ``kernels/<cold>`` (:func:`geosweep.kernels._jit.cache_dirs`: where this process's Numba keeps them)."""
    from numba.core.caching import _CacheLocator

    import geosweep.kernels
    from geosweep.kernels._jit import cache_dirs

    kernels = Path(geosweep.kernels.__file__).resolve().parent
    packages = sorted({p.parent for p in kernels.rglob("*.py")})
    root = tmp_path / "numba"
    for package, warm in zip(packages, cache_dirs(kernels), strict=True):
        if package.relative_to(kernels).parts[:1] == (cold,) or not warm.is_dir():
            continue
        shutil.copytree(warm, root / _CacheLocator.get_suitable_cache_subpath(str(package / "x.py")))
    return root


def test_systems_on_a_cold_cache_compiles_nothing_and_says_nothing(tmp_path):
    """Listing the systems imports every family and reads their declarations: on an empty Numba cache
    nothing compiles (no cache file is written) and nothing is said about compiling; a second listing
    prints the same (issue 53 item 1)."""
    env = _env(NUMBA_CACHE_DIR=str(tmp_path / "numba"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    cold = subprocess.run([*_cmd(), "systems"], capture_output=True, text=True, timeout=300, env=env)
    assert cold.returncode == 0 and cold.stderr == "", cold.stderr[-2000:]
    assert "lj_sphere" in cold.stdout and "gearbox" in cold.stdout
    assert not list((tmp_path / "numba").rglob("*.nbi"))
    again = subprocess.run([*_cmd(), "systems"], capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert again.stdout == cold.stdout


def test_loading_every_family_compiles_them_saying_so_once(tmp_path):
    """``serve``'s :func:`~geosweep.flows.firstrun.load_families` compiles every family's kernels of
    declared signatures: the first family (s2, cold here) in this process, the others meanwhile in
    parallel helpers (loaded from a copy of the suite's cache where it holds them); "compiling
    kernels" is said once; a second process loads everything from the cache and says nothing."""
    env = _env(NUMBA_CACHE_DIR=str(_numba_cache_without(tmp_path, "s2")), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    code = (
        "from geosweep.flows.output import configure\nconfigure()\nfrom geosweep.flows.firstrun import load_families\n"
        "from geosweep.kernels._jit import _DECLARED\nload_families()\n"
        "assert all(d._declared is None for d in _DECLARED)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert re.search(r"compiling kernels \(first run only, ~\d+ s\)", p.stderr), p.stderr
    assert p.stderr.count("compiling kernels") == 1, p.stderr
    assert any((tmp_path / "numba").glob("s2_*/*.nbi"))  # s2 compiled into this cache
    code = code.replace("load_families()", "with watch_compiles() as n:\n    load_families()\nassert n[0] == 0, n")
    code = code.replace("import _DECLARED", "import _DECLARED, watch_compiles")
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0 and "compiling" not in again.stderr, again.stderr[-2000:]


def test_verify_names_damaged_cells_by_their_labels(tmp_path, monkeypatch, capsys):
    from geosweep.flows.cli import main
    from geosweep.sweeps.engine import run_sweep
    from geosweep.sweeps.store import layout

    monkeypatch.setattr(layout, "SHARD_CELLS", 1)  # one file per cell: damage exactly one
    monkeypatch.setattr(layout, "MIN_SHARD_SECONDS", 0.0)
    spec = {
        "name": "labels",
        "system": "spring_pendula",
        "integrators": ["explicit_vi", "rk4"],
        "h": [0.01, 0.005],
        "T": 0.1,
        "dt_out": 0.05,
        "params": {"kappa12": [5.0, 10.0]},
    }
    store = tmp_path / "v.zarr"
    assert run_sweep(spec, store, serial=True).complete
    chunks = sorted(p for p in (store / "energy").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunks[-1].write_bytes(b"\x00damaged")  # the last cell: rk4, h = 0.005, kappa12 = 10
    capsys.readouterr()
    assert main(["verify", str(store)]) == 1
    out = capsys.readouterr().out
    assert "  integrator=rk4, h=0.005, kappa12=10\n" in out, out
    assert "cell (" not in out


def test_a_quadrotor_run_summary_has_its_table(tmp_path):
    """The quadrotors store no energy error (the inputs do work): the summary tabulates the load's
    tracking error instead of printing a heading without a table."""
    from geosweep.sweeps.engine import run_sweep
    from geosweep.sweeps.summary import status_table

    spec = {
        "name": "quad-summary",
        "system": "two_quadrotors",
        "integrators": ["quad_rkmk4", "quad_rk4_ambient"],
        "h": [0.01],
        "T": 0.05,
        "dt_out": 0.01,
    }
    store = tmp_path / "q.zarr"
    assert run_sweep(spec, store, serial=True).complete
    text = status_table(store)
    assert "median over other axes of e_y_final" in text, text
    rows = [line for line in text.splitlines() if line.startswith("| quad_")]
    assert len(rows) == 2 and all(re.search(r"\d\.\d{3}e[-+]\d\d", r) for r in rows), text
    assert "max_rel_energy_error" not in text


def test_packaging_license_and_notebook_extra():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["license"] == "BSD-3-Clause"  # an SPDX expression, not the deprecated table
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "Copyright (c) 2026, the geosweep developers" in text
    (setuptools,) = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    assert setuptools == "setuptools>=77"  # PEP 639 metadata needs setuptools 77
    notebook = project["optional-dependencies"]["notebook"]
    assert any(r.startswith("jupyterlab") for r in notebook) and any(r.startswith("ipykernel") for r in notebook)
    assert 'pip install -e ".[notebook]"' in (ROOT / "README.md").read_text()
