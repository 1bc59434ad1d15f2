"""A new family costs one module and one registration line: the toy oscillator family of
``tests/toy_family.py`` runs, resumes and sweeps like the built-in ones."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.registry import FAMILIES, RunRequest, register_module
from geosweep.kernels.status import Status
from tests import toy_family


def test_toy_family_runs_with_the_physics_of_its_methods():
    model = toy_family.build(3)
    errs = {}
    for h in (0.02, 0.01):
        req = RunRequest(T=20.0, dt_out=0.5, h=h)
        v = toy_family.run(model, "verlet", req, {}).values
        errs[h] = v["max_abs_energy_error"]
        assert v["steps"] == round(20.0 / h) and v["f_evals"] == v["steps"]
        assert v["final_state"].shape == (3, 2) and np.isfinite(v["energy"]).all()
    assert abs(errs[0.02] / errs[0.01] - 4.0) < 0.2  # Verlet: second order, bounded
    # the driver's guard catches an unstable step (h ω > 2 for the fastest oscillator)
    bad = toy_family.run(model, "symplectic_euler", RunRequest(T=14.0, dt_out=0.7, h=0.7), {"blowup": 0.5})
    assert bad.status == int(Status.ENERGY_BLOWUP) and np.isfinite(bad.values["max_abs_energy_error"])


def test_toy_family_is_resumable():
    model = toy_family.build(2)
    req = RunRequest(T=5.0, dt_out=0.25, h=0.01, snapshot_every=4)
    whole = toy_family.start(model, "verlet", req, {})
    whole.advance()
    traj = toy_family.start(model, "verlet", req, {})
    while not traj.finished:
        traj.advance(33)
        traj = Trajectory.restore(traj.stepper, traj.checkpoint())
    for name in ("S", "acc", "info", "out", "snaps"):
        assert np.array_equal(getattr(whole, name), getattr(traj, name), equal_nan=True), name


def test_toy_family_registers_with_one_line():
    from geosweep.kernels.registry import INTEGRATORS, SYSTEMS

    try:
        register_module(toy_family)
        assert FAMILIES["osc"] is toy_family.FAMILY and SYSTEMS["oscillators"].family == "osc"
        assert INTEGRATORS["verlet"].serves("osc")
    finally:  # leave the process-wide registry as the other tests expect it
        FAMILIES.pop("osc", None)
        SYSTEMS.pop("oscillators", None)
        for name in ("symplectic_euler", "verlet"):
            INTEGRATORS.pop(name, None)


@pytest.fixture
def toy_registered():
    """The toy family registered for one test, then removed (the registry is process-wide)."""
    from geosweep.kernels.registry import INTEGRATORS, SYSTEMS

    register_module(toy_family)
    yield
    FAMILIES.pop("osc", None)
    SYSTEMS.pop("oscillators", None)
    for name in ("symplectic_euler", "verlet"):
        INTEGRATORS.pop(name, None)


def test_toy_family_declares_its_order_variable_and_figures(toy_registered, tmp_path):
    """The analysis reads a family's order-error variables and figures from its declaration:
    nothing in geosweep.analysis names the toy family."""
    from geosweep.analysis.report import make_report
    from geosweep.sweeps.engine import run_sweep
    from geosweep.sweeps.store import open_results

    spec = {
        "name": "toy-orders",
        "system": "oscillators",
        "integrators": ["symplectic_euler", "verlet"],
        "h": [0.02, 0.01, 0.005],
        "T": 10.0,
        "dt_out": 0.5,
    }
    store = tmp_path / "toy.zarr"
    assert run_sweep(spec, store, serial=True).complete
    ds = open_results(str(store))
    assert ds.geosweep.default_error_var() == "max_abs_energy_error"  # not the generic max_rel_energy_error
    order = ds.geosweep.order()
    assert order.attrs.get("error_var", "max_abs_energy_error") == "max_abs_energy_error"
    observed = dict(zip(order["integrator"].values.tolist(), order["order"].values.tolist(), strict=True))
    assert abs(observed["symplectic_euler"] - 1.0) < 0.2 and abs(observed["verlet"] - 2.0) < 0.2, observed
    rep = make_report(store, tmp_path / "report")
    assert "oscillator_energy" in rep.figures and rep.figures["oscillator_energy"].stat().st_size > 1000
