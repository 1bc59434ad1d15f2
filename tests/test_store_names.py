"""Every system's parameter names, the sweep axes and the store's variable and coordinate names are
disjoint (issue 22 item 1): a collision is refused at validation, in one line, before any work."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from geosweep.kernels.core.cells import COMMON_DIAGNOSTICS
from geosweep.kernels.registry import FAMILIES, SYSTEMS, Param, SystemDef, load_builtins, register_system
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.spec import SpecError
from geosweep.sweeps.store import name_clash, template


def test_every_registered_system_has_names_of_its_own():
    load_builtins()
    for sysdef in SYSTEMS.values():
        famdef = FAMILIES[sysdef.family]
        model = sysdef.build(**{p.name: p.default for p in sysdef.params})
        assert name_clash(sysdef, famdef, model) is None, sysdef.name


def test_nh_quartic_sweeps_over_its_initial_energy(tmp_path):
    spec = {
        "name": "quartic-energy",
        "system": "nh_quartic",
        "integrators": ["dg_gonzalez"],
        "h": [0.02],
        "T": 1.0,
        "dt_out": 0.5,
        "params": {"initial_energy": [3.06, 1.0]},
    }
    assert run_sweep(spec, tmp_path / "q.zarr", serial=True).complete
    ds = xr.open_zarr(tmp_path / "q.zarr")
    assert list(ds.initial_energy.values) == [3.06, 1.0]
    np.testing.assert_allclose(ds.E0.squeeze().values, [3.06, 1.0], rtol=1e-12)
    assert float(ds.max_rel_energy_error.max()) < 1e-12


def test_the_old_parameter_name_is_refused_naming_the_new_one():
    spec = {"name": "q", "system": "nh_quartic", "integrators": ["dg_gonzalez"], "h": [0.02], "T": 1.0,
            "dt_out": 0.5, "params": {"energy": 2.0}}  # fmt: skip
    with pytest.raises(SpecError) as e:
        make_plan(spec)
    assert "params.energy" in str(e.value) and "initial_energy" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("clash", ["energy", "status", "time", "integrator_order", "state"])
def test_a_system_with_a_clashing_parameter_is_refused_in_one_line(clash):
    base = SYSTEMS["suslov"] if "suslov" in SYSTEMS else (load_builtins(), SYSTEMS["suslov"])[1]

    def build(**kw):
        kw.pop(clash)
        return base.build(**kw)

    toy = register_system(
        SystemDef(f"toy_clash_{clash}", "dg", "a toy", base.params + (Param(clash, float, 1.0, "1", "clashes"),),
                  build)
    )  # fmt: skip
    try:
        spec = {"name": "t", "system": toy.name, "integrators": ["dg_gonzalez"], "h": [0.1], "T": 1.0, "dt_out": 0.5}
        with pytest.raises(SpecError) as e:
            make_plan(spec)
        msg = str(e.value)
        assert "\n" not in msg and f"params.{clash}" in msg and toy.name in msg
    finally:
        SYSTEMS.pop(toy.name)


def test_the_check_knows_every_name_the_store_writes():
    plan = make_plan({"name": "g", "system": "gearbox", "integrators": ["dg_gonzalez", "dopri5_skew"], "h": [0.1],
                      "tol": [1e-6], "T": 1.0, "dt_out": 0.5, "params": {"seed": [0, 1]}})  # fmt: skip
    ds, _ = template(plan)
    from geosweep.sweeps.store import stored_names

    names = stored_names(plan.famdef, plan.first_model)
    assert set(ds.data_vars) <= names
    fixed = {n for n in ds.coords if n not in {p.name for p in plan.sysdef.params}}
    assert fixed <= names | set(plan.grid.dims)
    assert {d.name for d in COMMON_DIAGNOSTICS} <= names
