"""Registry contract of the ``se3`` family (declarations ↔ stored values)."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.registry import CellResult, RunRequest
from geosweep.kernels.status import Status
from geosweep.kernels.torus.family import FAMILY, INTEGRATORS, SYSTEMS


def _system(name):
    return next(s for s in SYSTEMS if s.name == name)


def _build(name, **over):
    sysdef = _system(name)
    kw = {p.name: p.check(over.get(p.name, p.default)) for p in sysdef.params}
    return sysdef.build(**kw)


def test_declarations():
    assert FAMILY.name == "se3"
    assert {i.name: i.order for i in INTEGRATORS} == {"v2_exact": 2, "v2_newmark": 2, "v1": 1}
    assert all(i.family == "se3" for i in INTEGRATORS)
    assert {s.name for s in SYSTEMS} == {"torus", "so3_pendulum"}
    torus = _system("torus")
    for name in ("N_p", "D_t", "m", "J", "K_m", "K_a", "K_s", "K_pp", "K_pw", "v0", "g0", "tilt", "shear"):
        p = torus.param(name)
        assert p.doc
    assert torus.param("shear").default == "objective"
    with pytest.raises(ValueError):
        torus.param("shear").check("bogus")
    for s in SYSTEMS:
        for p in s.params:
            assert p.doc, p.name
            p.check(p.default)


@pytest.mark.parametrize("name", ["torus", "so3_pendulum"])
def test_run_matches_declared_dims(name):
    model = _build(name)
    h, n_steps, stride = (1e-3, 1200, 20) if name == "torus" else (1e-2, 300, 2)
    request = RunRequest(T=n_steps * h, dt_out=stride * h, h=h, snapshot_every=int(round(1.0 / (stride * h))))
    res = FAMILY.run(model, "v2_newmark", request, {})  # snapshots every 1.0 time unit
    assert isinstance(res, CellResult) and res.status == int(Status.OK)
    sizes = {**FAMILY.sizes(model), "snapshot": request.n_snapshots}
    nt = n_steps // stride + 1
    diags = FAMILY.diagnostics(model)
    assert {d.name for d in diags} == set(res.values)
    for d in diags:
        shape = tuple(nt if dim == "time" else sizes[dim] for dim in d.dims)
        val = np.asarray(res.values[d.name])
        assert val.shape == shape, d.name
        assert val.dtype == np.dtype(d.dtype), d.name
        if "time" in d.dims:
            assert np.isfinite(val).all(), d.name
    assert res.values["fail_step"] == -1 and res.values["steps"] == n_steps
    # snapshots at t = 0, 1, …: the first one is the initial state
    snap = res.values["snapshot_state"]
    assert sizes["snapshot"] == int(n_steps * h) + 1 and np.isfinite(snap).all()
    x_labels = [FAMILY.state_labels.index(f"x_{c}") for c in "xyz"]
    np.testing.assert_array_equal(snap[0][:, x_labels], model.x0)
    if name == "torus":
        assert res.values["E0"] == 40.0
        assert 0.49 < res.values["first_wall_contact_t"] < 0.52
        assert np.abs(res.values["P_drift_max"][1:]).max() <= 1e-12
    else:
        assert np.abs(res.values["rho_dot_Omega"]).max() <= 1e-12


def test_failed_cell_keeps_partial_record():
    model = _build("torus")
    res = FAMILY.run(model, "v2_newmark", RunRequest(T=3.0, dt_out=1e-2, h=1e-2, snapshot_every=100), {"blowup": 0.5})
    assert res.status == int(Status.ENERGY_BLOWUP)
    assert res.values["fail_step"] > 0 and res.values["fail_step"] == res.values["steps"]
    assert abs(res.values["fail_value"]) > 0.5 * abs(res.values["E0"])  # the ΔE that tripped the guard
    assert res.values["fail_time"] == res.values["steps"] * 1e-2
    k = int(res.values["steps"])
    E = res.values["energy"]
    assert np.isfinite(E[: k + 1]).all() and np.isnan(E[k + 1 :]).all()
    assert np.isfinite(res.values["final_state"]).all()


def test_warmup_and_cost():
    FAMILY.warmup()
    small = _build("torus", N_p=80)
    big = _build("torus", N_p=640)
    assert 0 < FAMILY.cost_per_step(small, "v2_newmark") < FAMILY.cost_per_step(big, "v2_newmark")
