"""A dg sweep's ``state`` coordinate is always labelled (issue 22 item 7b): the gearbox forms share one
stored layout (q1..q3, rho1, rho2, p1..p3; NaN where a form does not carry an entry), and a sweep whose
models store different layouts (nh_quartic over n) is refused in one line naming the parameter."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.spec import SpecError

LAYOUT = ["q1", "q2", "q3", "rho1", "rho2", "p1", "p2", "p3"]


def test_mixed_gearbox_forms_store_one_labelled_layout(tmp_path):
    spec = {"name": "forms", "system": "gearbox", "integrators": ["dg_gonzalez", "si_dla"], "h": [0.1], "T": 1.0,
            "dt_out": 0.5, "params": {"form": ["reduced", "canonical"]}}  # fmt: skip
    assert run_sweep(spec, tmp_path / "f.zarr", serial=True).complete
    ds = xr.open_zarr(tmp_path / "f.zarr")
    assert list(ds.state.values) == LAYOUT
    fs = ds.final_state.isel(body=0, h=0)
    red, can = fs.sel(form="reduced"), fs.sel(form="canonical")
    assert np.isfinite(red.sel(state=["q1", "q2", "q3", "rho1", "rho2"])).all()
    assert np.isnan(red.sel(state=["p1", "p2", "p3"])).all()
    assert np.isfinite(can.sel(state=["q1", "q2", "q3", "p1", "p2", "p3"])).all()
    assert np.isnan(can.sel(state=["rho1", "rho2"])).all()
    # the same physical positions, whatever the form and the method (one step apart at most: 0.1 h)
    q = fs.sel(state=["q1", "q2"]).values  # (integrator, form, 2)
    assert np.abs(q - q[0, 0]).max() < 1e-2
    # the reduced form's ρ and the canonical form's p describe the same momentum: ρ2 = X2·p
    z = can.sel(integrator="dg_gonzalez").values  # (state,)
    s = np.sin(z[2])
    assert abs((-s * z[5] + z[6]) / np.sqrt(1 + s * s) - float(red.sel(integrator="dg_gonzalez", state="rho2"))) < 1e-3


def test_a_sweep_over_models_with_different_layouts_is_refused():
    spec = {"name": "q", "system": "nh_quartic", "integrators": ["dg_gonzalez"], "h": [0.02], "T": 1.0,
            "dt_out": 0.5, "params": {"n": [2, 3]}}  # fmt: skip
    with pytest.raises(SpecError) as e:
        make_plan(spec)
    msg = str(e.value)
    assert "\n" not in msg and "params.n:" in msg and "state layouts" in msg
