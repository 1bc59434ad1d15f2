"""CONTRIBUTING.md's recipes, each exercised (issue 24 item 5). A new Lie method is one record
(tests/test_lie_methods.py::test_a_method_added_to_the_tableaux_appears_in_every_family and the
order test next to it); a new family is one module and one registration line
(tests/test_new_family.py). Here: a new stored diagnostic is one declaration plus the code that
computes it, and a new integrator option is one typed ``Param``; both reach a real store."""

from __future__ import annotations

import dataclasses

import pytest
import xarray as xr
from numba import njit

from geosweep.kernels.core import observables
from geosweep.kernels.core.cells import make_run
from geosweep.kernels.core.observables import Max, Observable, Samples
from geosweep.kernels.core.trajectory import Reductions
from geosweep.kernels.registry import FAMILIES, INTEGRATORS, SYSTEMS, Diagnostic, Param, register_module
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.spec import SpecError, load_spec
from tests import toy_family

#: the new diagnostic: one declaration (column, reduction, what is stored under which name) …
SPEED = Observable("speed", Reductions.MAX, (
    Samples(Diagnostic("speed", ("time",), "1 / time", "max_i |v_i| at the sample")),
    Max(Diagnostic("max_speed", (), "1 / time", "max over every step of max_i |v_i|", computed_over="every step")),
))  # fmt: skip
DECLARED = (*toy_family.OBSERVABLES, SPEED)
O_SPEED = observables.columns(DECLARED)["speed"]


@njit(nogil=True)
def observe_with_speed(w, meth, S, p, work, full, obs):
    """… plus the code that computes its column."""
    toy_family.osc_observe(w, meth, S, p, work, full, obs)
    n = w.shape[0]
    vmax = 0.0
    for i in range(n):
        vmax = max(vmax, abs(S[n + i]))
    obs[O_SPEED] = vmax


SPEC = {"name": "recipe", "system": "oscillators", "integrators": ["verlet"], "h": [0.01], "T": 10.0, "dt_out": 0.5}


@pytest.fixture
def register():
    """Register a toy family module for one test, then restore the process-wide registry."""
    added: list = []

    def add(module) -> None:
        added.append(module)
        register_module(module)

    yield add
    for module in added:
        FAMILIES.pop(module.FAMILY.name, None)
        for s in module.SYSTEMS:
            SYSTEMS.pop(s.name, None)
        for i in module.INTEGRATORS:
            INTEGRATORS.pop(i.name, None)


def _module(family, integrators=toy_family.INTEGRATORS):
    return type("Module", (), {"FAMILY": family, "INTEGRATORS": integrators, "SYSTEMS": toy_family.SYSTEMS})


def test_a_new_diagnostic_is_one_declaration_plus_its_code_and_is_stored_under_its_name(register, tmp_path):
    register(_module(toy_family.make_family(DECLARED, observe_with_speed)))
    store = tmp_path / "speed.zarr"
    assert run_sweep(SPEC, store, serial=True).complete
    ds = xr.open_zarr(store)
    assert ds["max_speed"].attrs["long_name"] == "max over every step of max_i |v_i|"
    assert ds["max_speed"].attrs["computed_over"] == "every step" and ds["speed"].dims[-1] == "time"
    # physics: x_i = cos(ω_i t) → max_i |v_i| reaches ω_max = 3 (n = 3) to O(h²); the samples stay below the max
    vmax = float(ds["max_speed"].squeeze())
    assert abs(vmax - 3.0) < 1e-3, vmax
    assert float(ds["speed"].max()) <= vmax and float(ds["max_amplitude"].squeeze()) == 1.0


def test_a_new_integrator_option_is_one_param_validated_by_the_spec_and_passed_to_the_family(register, tmp_path):
    seen: list[dict] = []
    base = toy_family.make_family()

    def start(model, integrator, request, options):
        seen.append(dict(options))
        return base.start(model, integrator, request, options)

    family = dataclasses.replace(base, start=start, run=make_run(start, base.collect))
    jitter = Param("jitter", float, 0.0, "1", "a toy option", ge=0.0, le=1.0)
    verlet = next(i for i in toy_family.INTEGRATORS if i.name == "verlet")
    register(_module(family, (dataclasses.replace(verlet, params=(*verlet.params, jitter)),)))
    bad = dict(SPEC, integrator_options={"verlet": {"jitter": 2.0}})
    with pytest.raises(SpecError, match="jitter"):
        load_spec(bad)
    assert run_sweep(
        dict(SPEC, integrator_options={"verlet": {"jitter": 0.25}}), tmp_path / "o.zarr", serial=True
    ).complete
    assert seen and all(o["jitter"] == 0.25 for o in seen)


def test_a_diagnostic_declared_on_a_converted_family_reaches_a_real_store(monkeypatch, tmp_path):
    """The recipe on a built-in family (the quadrotors): one more output of an observable the
    family already declares — here the max of quadrotor 1's thrust column over every step — is
    stored under its name, with its value, without another line in collect or the store."""
    from geosweep.kernels.quad import family as quad

    toy = Max(Diagnostic("max_thrust_1", (), "N", "max |u_1| over every step (toy)", computed_over="every step"),
              column=0)  # fmt: skip
    declared = tuple(
        dataclasses.replace(o, outputs=(*o.outputs, toy)) if o.name == "thrust" else o for o in quad.OBSERVABLES
    )
    monkeypatch.setattr(quad, "OBSERVABLES", declared)  # = adding the output to the tuple in quad/family.py
    spec = {"name": "quad-toy", "system": "two_quadrotors", "integrators": ["quad_rkmk4"], "h": [0.01],
            "T": 0.2, "dt_out": 0.05}  # fmt: skip
    store = tmp_path / "quad.zarr"
    assert run_sweep(spec, store, serial=True).complete
    ds = xr.open_zarr(store)
    assert ds["max_thrust_1"].attrs["long_name"] == "max |u_1| over every step (toy)"
    assert float(ds["max_thrust_1"].squeeze()) == float(ds["max_thrust"].squeeze().isel(link=0)) > 0.0
    tr = quad._integrate(quad.two_quadrotors(), "quad_rkmk4", 0.2, 20)
    assert tr["max_thrust_1"] == tr["max_thrust"][0]  # the kernels-alone result has it too
