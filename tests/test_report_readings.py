"""What the accessor and the report say about a store (issue 22, items 5 and 6): errors at round-off
are a class of their own, never "drifting" and never fitted for an order; O(1) errors that barely
fall with h are pre-asymptotic, not an order; panels that are zero for every method are not called
exact; the torus's wall impact switches the energy plot to linear time."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import geosweep  # noqa: F401 - registers ds.geosweep
from geosweep.analysis.accessor import CellsDroppedWarning
from geosweep.sweeps.engine import run_sweep

GEARBOX = {
    "name": "rr-gearbox",
    "system": "gearbox",
    "integrators": ["dg_avf", "dg_itoh_abe", "rk4_skew"],
    "h": [0.1, 0.05],
    "T": 50.0,
    "dt_out": 0.5,
}
#: paper 001 §3.4.4 at the paper's h = 0.01 and h/2: lp_cf4's energy error 0.164 → 0.154 (measured)
TOP = {
    "name": "rr-top",
    "system": "heavy_top",
    "integrators": ["lp_cf4", "slgi_half"],
    "h": [0.01, 0.005],
    "T": 60.0,
    "dt_out": 0.5,
}
#: sweeps/examples/chain_e3.toml's initial condition (ic = "paper"), two methods, a short run
CHAIN_PAPER = {
    "name": "rr-chain",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "rk4_ambient"],
    "h": [0.01],
    "T": 0.2,
    "dt_out": 0.01,
    "params": {"N": 2, "ic": "paper"},
}
#: sweeps/examples/torus_impact.toml at its default slice (v0 = 1, tilt = 0), one map, one h, full T
TORUS_IMPACT = {
    "name": "rr-torus",
    "system": "torus",
    "integrators": ["v2_newmark"],
    "h": [0.002],
    "T": 25.0,
    "dt_out": 0.01,
    "params": {"v0": 1.0, "tilt": 0.0},
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("readings")
    out = {}
    for key, spec in (("gearbox", GEARBOX), ("top", TOP), ("chain", CHAIN_PAPER)):
        out[key] = root / f"{key}.zarr"
        assert run_sweep(spec, out[key], serial=True).complete
    return out


def _report(store, out):
    from geosweep.analysis.report import make_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CellsDroppedWarning)
        return make_report(store, out)


def _rows(index: str, name: str) -> list[str]:
    return [ln for ln in index.splitlines() if ln.startswith(f"| {name} |")]


# ------------------------------------------------------------------------------ item 5
def test_discrete_gradients_at_round_off_are_not_drifting(stores, tmp_path):
    """Gearbox (004 §4.4): the discrete gradients hold H to ≈ 1e-14 (a slow rounding walk that the
    drift fit alone calls drifting); they are classified round-off, their order is not fitted, and
    the report says so. RK4 keeps its drift and its order 4."""
    ds = xr.open_zarr(stores["gearbox"])
    assert float(ds.max_rel_energy_error.sel(integrator=["dg_avf", "dg_itoh_abe"]).max()) < 1e-13
    c = ds.geosweep.classify(relative=True).compute()
    assert (c.classification.sel(integrator=["dg_avf", "dg_itoh_abe"]) == "round-off").all()
    assert (c.classification.sel(integrator="rk4_skew") == "drifting").all()
    assert (c.level <= c.roundoff_floor).sel(integrator="dg_avf").all()
    o = ds.geosweep.order().compute()
    dg = o.sel(integrator=["dg_avf", "dg_itoh_abe"])
    assert dg.order.isnull().all() and (dg.regime == "round-off").all() and (dg.n_roundoff == 2).all()
    assert not dg.used.any()
    rk = o.sel(integrator="rk4_skew")
    assert str(rk.regime.values) == "fitted" and int(rk.n_roundoff) == 0 and abs(float(rk.order) - 4.0) < 1.0
    index = _report(stores["gearbox"], tmp_path / "r").index.read_text()
    for name in ("dg_avf", "dg_itoh_abe"):
        rows = _rows(index, name)
        assert rows and all("drifting" not in r and "asymptotic" not in r for r in rows), rows
        assert sum("| round-off |" in r for r in rows) == 2  # the drift table, both h
        assert any("every error at round-off" in r for r in rows)  # the order table


def test_round_off_floor_scales_with_steps_and_can_be_turned_off():
    """Synthetic: a 1e-15 rounding walk with a trend is round-off below the floor 10·ε·steps,
    drifting when the floor is turned off (the old behaviour), and a real drift is never round-off."""
    t = np.linspace(0.0, 10.0, 101)
    walk = 1e-15 * (1 + t)  # monotone: a perfect "drift" fit at round-off level
    drift = 1e-6 * t
    ds = xr.Dataset(
        {
            "rel_energy_error": (("integrator", "time"), np.stack([walk, drift]), {"units": "1"}),
            "energy_error": (("integrator", "time"), np.stack([walk, drift]), {"units": "J"}),
            "E0": (("integrator",), [1.0, 1.0], {"units": "J"}),
            "steps": (("integrator",), [1000, 1000]),
            "status": (("integrator",), np.zeros(2, np.int8)),
        },
        coords={"integrator": ["dg", "rk"], "time": t},
    )
    c = ds.geosweep.classify(relative=True)
    assert list(c.classification.values) == ["round-off", "drifting"]
    np.testing.assert_allclose(c.roundoff_floor.values, 10 * np.finfo(float).eps * 1000)
    assert list(ds.geosweep.classify(relative=True, roundoff=0.0).classification.values) == ["drifting", "drifting"]
    few = ds.assign(steps=ds.steps * 0 + 1)  # one step: a floor of 10 ε is below the walk's 1e-14
    assert list(few.geosweep.classify(relative=True).classification.values) == ["drifting", "drifting"]


def test_pre_asymptotic_order_is_not_printed_as_an_order(stores, tmp_path):
    """Heavy top at the paper's h = 0.01 and h/2: lp_cf4's energy error is O(1) (0.164 → 0.154,
    slope 0.09 against the nominal 4; an independent check measures 4.02 for h ≤ 2.5e-4): the report
    calls it pre-asymptotic and leaves the order blank, distinct from round-off; slgi_half is fitted."""
    ds = xr.open_zarr(stores["top"])
    e = ds.max_rel_energy_error.sel(integrator="lp_cf4").values
    assert 0.1 < e[1] < e[0] < 0.2
    o = ds.geosweep.order().compute()
    assert str(o.regime.sel(integrator="lp_cf4").values) == "pre-asymptotic"
    assert str(o.regime.sel(integrator="slgi_half").values) == "fitted"
    index = _report(stores["top"], tmp_path / "r").index.read_text()
    (row,) = [r for r in _rows(index, "lp_cf4") if "pre-asymptotic" in r]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "—" and "not in the asymptotic regime" in row and "0.164 … 0.154" in row
    assert "round-off" not in row and "matches" not in row and "0.09 ±" not in row


# ------------------------------------------------------------------------------ item 6
def test_zero_panels_for_every_method_are_not_called_exact(stores, tmp_path):
    """chain_e3's ic = "paper" is planar: the tangency error and |J − J0| are exactly 0 even for the
    ambient RK4, which preserves neither; the notes say so instead of "exact by construction"."""
    ds = xr.open_zarr(stores["chain"])
    assert float(abs(ds.tangency_error.sel(integrator="rk4_ambient")).max()) == 0.0
    rep = _report(stores["chain"], tmp_path / "r")
    notes = [n for n in rep.notes if "identically 0" in n]
    assert len(notes) == 2 and any(n.startswith("tangency") for n in notes) and any("|J − J0|" in n for n in notes)
    for n in notes:
        assert "exact by construction" not in n and "every method in this store" in n and "planar" in n


@pytest.mark.parametrize("draw", ["energy_error_vs_time", "energy_envelope"])
def test_torus_impact_draws_linear_time(tmp_path_factory, draw):
    """torus_impact.toml: the error sits at round-off until the wall contact at t ≈ 0.5 (sample 50 of
    2501, inside the first 5 % that the old detector skipped), then ≈ 1e-3: linear time."""
    from geosweep.analysis import figures as F

    root = tmp_path_factory.getbasetemp() / "torus-impact.zarr"
    if not root.exists():
        assert run_sweep(TORUS_IMPACT, root, serial=True).complete
    ds = xr.open_zarr(root)
    first = float(ds.first_wall_contact_t.max())
    assert 0.4 < first < 0.6
    fig = getattr(F, draw)(ds)
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_yscale() == "log" and "linear" in ax.get_xlabel()
