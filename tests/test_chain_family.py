"""The ts2 family contract: declared diagnostics match what run() returns; options flow."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.chain import family
from geosweep.kernels.chain.family import FAMILY, INTEGRATORS, SYSTEMS
from geosweep.kernels.chain.model import ChainModel
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.status import Status

SYS = SYSTEMS[0]


def _model(**over) -> ChainModel:
    kw = {p.name: p.default for p in SYS.params}
    kw.update(over)
    for p in SYS.params:
        kw[p.name] = p.check(kw[p.name])
    return SYS.build(**kw)


def _opts(idef, **over) -> dict:
    o = {p.name: p.default for p in idef.params}
    o.update(over)
    return o


def test_declarations() -> None:
    names = [i.name for i in INTEGRATORS]
    for required in (
        "lie_euler",
        "lie_euler_heun",
        "rkmk3",
        "rkmk4",
        "rkmk4_2comm",
        "cf4",
        "cf3",
        "cf43",
        "rkmk45",
        "rk4_ambient",
        "dopri5_ambient",
    ):
        assert required in names
    assert all(i.family == "ts2" for i in INTEGRATORS)
    adaptive = {i.name for i in INTEGRATORS if i.adaptive}
    assert adaptive == {"rkmk45", "dopri5_ambient", "rkmk853", "dop853_ambient"}
    rk45 = next(i for i in INTEGRATORS if i.name == "rkmk45")
    assert {"theta", "exponent", "h0", "blowup"} <= {p.name for p in rk45.params}
    assert "tol" not in {p.name for p in rk45.params}  # tol is the sweep axis, carried by the RunRequest
    assert FAMILY.name == "ts2" and SYS.family == "ts2" and SYS.name == "pendulum_chain"
    for p in SYS.params:
        assert p.doc and p.units


@pytest.mark.parametrize("idef", INTEGRATORS, ids=lambda i: i.name)
def test_run_matches_declared_diagnostics(idef) -> None:
    model = _model(N=3, ic="twisted")
    dt_out, T = 0.05, 0.5
    request = RunRequest(T=T, dt_out=dt_out, tol=1e-6) if idef.adaptive else RunRequest(T=T, dt_out=dt_out, h=0.01)
    res = FAMILY.run(model, idef.name, request, _opts(idef))
    assert res.status == int(Status.OK) and res.wall_time > 0
    sizes = {**FAMILY.sizes(model), "time": int(round(T / dt_out)) + 1, "snapshot": request.n_snapshots}
    declared = {d.name: d for d in FAMILY.diagnostics(model)}
    assert set(declared) == set(res.values)
    for name, d in declared.items():
        v = np.asarray(res.values[name])
        assert v.shape == tuple(sizes[k] for k in d.dims), name
        assert v.dtype == np.dtype(d.dtype), name
    v = res.values
    assert np.all(np.isfinite(v["energy"])) and v["energy_error"][0] == 0.0 and v["rel_energy_error"][0] == 0.0
    assert np.isnan(v["global_error"])  # not requested
    assert v["max_rel_energy_error"] < (0.05 if idef.order == 1 else 1e-3)
    assert v["steps"] > 0 and v["f_evals"] >= v["steps"] and v["fail_step"] == -1
    if not idef.name.endswith("_ambient"):
        assert v["max_unit_error"] <= 1e-13 and v["max_tangency_error"] <= 1e-13


def test_global_error_option_and_adaptive_semantics() -> None:
    model = _model(N=2)
    idef = next(i for i in INTEGRATORS if i.name == "rkmk45")
    res = FAMILY.run(model, "rkmk45", RunRequest(T=3.0, dt_out=0.1, tol=1e-6), _opts(idef, global_error=True))
    v = res.values
    assert v["energy"].shape == (31,)
    assert int(v["steps"]) == pytest.approx(117, rel=0.15)  # E3, N = 2, L = 1
    assert 5e-6 <= v["global_error"] <= 2.1e-5
    fixed = next(i for i in INTEGRATORS if i.name == "cf4")
    r2 = FAMILY.run(model, "cf4", RunRequest(T=3.0, dt_out=0.1, h=0.01), _opts(fixed, global_error=True))
    assert 1e-5 < r2.values["global_error"] < 1e-2
    assert r2.values["rejected_steps"] == 0


def test_gravity_free_full_momentum() -> None:
    model = _model(N=3, ic="twisted", g=0.0)
    idef = next(i for i in INTEGRATORS if i.name == "rkmk4")
    request = RunRequest(T=1.0, dt_out=0.1, h=0.01)
    v = FAMILY.run(model, "rkmk4", request, _opts(idef)).values
    assert np.isfinite(v["max_momentum_error"]) and v["max_momentum_error"] <= 1e-6
    v2 = FAMILY.run(_model(N=3, ic="twisted"), "rkmk4", request, _opts(idef)).values
    assert np.isnan(v2["max_momentum_error"])


def test_failed_cell_reports_status_and_nan_tail() -> None:
    model = _model(N=5, ic="twisted")
    idef = next(i for i in INTEGRATORS if i.name == "rk4_ambient")
    request = RunRequest(T=50.0, dt_out=1.0, h=1.0)
    res = FAMILY.run(model, "rk4_ambient", request, _opts(idef, global_error=True, blowup=0.0))
    assert res.status == int(Status.NONFINITE)
    v = res.values
    k = int(v["fail_step"])
    assert k >= 1 and np.all(np.isnan(v["energy"][k:])) and np.all(np.isfinite(v["energy"][:k]))
    assert np.isnan(v["global_error"])
    # with the default energy guard the same run stops earlier, before anything is non-finite
    guarded = FAMILY.run(model, "rk4_ambient", request, _opts(idef)).values
    assert 1 <= guarded["fail_step"] <= k and abs(guarded["fail_value"]) > 0.5 * abs(guarded["E0"])
    assert np.isfinite(guarded["max_abs_energy_error"]) and np.isfinite(guarded["final_state"]).all()


def test_cost_per_step_and_warmup() -> None:
    family.warmup()
    m20 = _model(N=20)
    assert FAMILY.cost_per_step(m20, "rkmk4") < FAMILY.cost_per_step(m20, "rk4_ambient")
    assert FAMILY.cost_per_step(_model(N=200), "rkmk4") > FAMILY.cost_per_step(m20, "rkmk4")


def test_system_param_validation() -> None:
    p = SYS.param("length_mode")
    with pytest.raises(ValueError):
        p.check("beam")
    with pytest.raises(ValueError):
        SYS.param("N").check(0)
    m = _model(N=4, length_mode="scaled", L_tot=2.0, masses="random", mass_seed=3)
    assert np.allclose(m.L, 0.5) and np.all((m.m >= 0.5) & (m.m <= 1.5))
    # mass_seed draws the masses whatever the initial condition (also with ic = "random")
    a = _model(N=4, masses="random", mass_seed=3, ic="random", seed=1)
    b = _model(N=4, masses="random", mass_seed=3, ic="random", seed=2)
    c = _model(N=4, masses="random", mass_seed=4, ic="random", seed=1)
    assert np.array_equal(a.m, b.m) and not np.array_equal(a.m, c.m) and not np.array_equal(a.y0, b.y0)
    assert np.array_equal(a.m, m.m)


def test_both_forms_of_the_chain_share_one_parameter_declaration() -> None:
    """pendulum_chain and pendulum_chain_lp (dg) take the same parameters, declared once
    (geosweep.kernels.chain.model.chain_params); only N's default and bound differ."""
    from geosweep.kernels.dg.chain_lp import SYSTEM as LP

    assert [p.name for p in SYS.params] == [p.name for p in LP.params]
    assert SYS.params[1:] == LP.params[1:]
    assert (SYS.params[0].default, SYS.params[0].le, LP.params[0].default, LP.params[0].le) == (2, 100_000, 3, 60)
