"""`geosweep report` for every family (s2, se3, ts2 in test_analysis.py; top, quad, dg here), the
figure conventions of issue 13 (one curve per integrator and parameter set, no filler points,
labels and units from the data, momentum only where conserved), slices (--sel), the HTML page."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import geosweep  # noqa: F401 - registers ds.geosweep
from geosweep.analysis.accessor import CellsDroppedWarning
from geosweep.kernels.status import STATUS_MEANINGS
from geosweep.sweeps.engine import run_sweep

FLAGS = {"flag_values": list(STATUS_MEANINGS), "flag_meanings": " ".join(STATUS_MEANINGS.values())}
GENERIC = {"energy_error_vs_time", "energy_envelope", "error_vs_step", "work_precision", "status_map"}
SPECS = {
    "top": {
        "name": "rf-top",
        "system": "heavy_top",
        "integrators": ["slgi_half", "lp_rkmk4", "lp_rkmk45"],
        "h": [0.01, 0.005],
        "tol": [1e-6, 1e-8],
        "T": 1.0,
        "dt_out": 0.05,
    },
    "quad": {
        "name": "rf-quad",
        "system": "two_quadrotors",
        "integrators": ["quad_rkmk4", "quad_rk4_ambient"],
        "h": [0.01, 0.005],
        "T": 2.0,
        "dt_out": 0.02,
        "snapshot_dt": 0.1,
        "integrator_options": {"quad_rkmk4": {"global_error": True}, "quad_rk4_ambient": {"global_error": True}},
    },
    "dg": {
        "name": "rf-dg",
        "system": "chaplygin_sleigh",
        "integrators": ["dg_avf", "rk4_skew"],
        "h": [0.1, 0.05],
        "T": 5.0,
        "dt_out": 0.1,
    },
}
EXPECTED = {
    "top": GENERIC | {"momentum_errors", "top_invariants", "adaptive_step_sizes"},
    "quad": {"error_vs_step", "work_precision", "status_map", "quad_trajectory", "quad_constraints"},
    "dg": GENERIC | {"constraint_errors", "dg_invariants"},
}


def check_png(path: Path) -> tuple[int, int]:
    """A written figure opens, is not tiny, and is not blank; returns (height, width) in px."""
    import matplotlib.image as mpimg

    assert path.stat().st_size > 5000, path
    img = mpimg.imread(path)
    assert 250 <= img.shape[0] <= 4000 and 300 <= img.shape[1] <= 4000, (path, img.shape)
    rgb = (img[..., :3] * 255).astype(np.uint8).astype(np.uint32)
    colours = np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2])  # one int per colour: 8x faster
    assert len(colours) > 20, (path, len(colours))
    return img.shape[:2]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    from geosweep.analysis.report import make_report

    root = tmp_path_factory.mktemp("families")
    out = {}
    for key, spec in SPECS.items():
        store = root / f"{key}.zarr"
        assert run_sweep(spec, store, serial=True).complete
        out[key] = (store, make_report(store, root / f"{key}.report"))
    return out


@pytest.mark.parametrize("family", sorted(SPECS))
def test_every_family_has_its_figures(reports, family):
    store, rep = reports[family]
    assert set(rep.figures) == EXPECTED[family], (family, set(rep.figures), rep.notes)
    for path in rep.figures.values():
        check_png(path)
    index = rep.index.read_text()
    assert all(f"({name}.png)" in index for name in rep.figures)


def test_quad_figures_read_the_controlled_system(reports):
    """Quadrotors: no energy-error figure (the inputs do work; the notes say so); the order is read
    from global_error's whole-state block; residual panels show RK4 far above the Lie methods."""
    store, rep = reports["quad"]
    assert any("energy not conserved" in n for n in rep.notes)
    ds = xr.open_zarr(store)
    assert ds.geosweep.default_error_var() == "global_error"
    o = ds.geosweep.order().compute()
    assert abs(float(o.order.sel(integrator="quad_rkmk4")) - 4.0) < 0.6  # RKMK4: order 4 (spec §10)
    ok = ds.status == 0
    lie = float(ds.unit_err.where(ok).sel(integrator="quad_rkmk4").max())
    rk = float(ds.unit_err.where(ok).sel(integrator="quad_rk4_ambient").max())
    assert lie < 1e-13 < rk  # what quad_constraints.png shows


def test_top_invariants_panels(reports):
    from geosweep.analysis.system_figures import top_invariants

    store, _ = reports["top"]
    fig, caption, notes = top_invariants(xr.open_zarr(store))
    titles = [a.get_title() for a in fig.axes if a.get_visible()]
    assert titles[:2] == ["|E − E0|", "Casimir ||Γ|² − 1|"] and "Casimir" in caption and notes == []
    for ax in fig.axes:
        if ax.get_visible():
            assert ax.get_xlabel() == "time [s]" and "_" not in ax.get_ylabel().split("[")[0].split("(")[0]


# ---------------------------------------------------------------------------------- conventions
def _param_store() -> xr.Dataset:
    """Two integrators × 3 h × omega (2 values): error = C·h^p, cost ∝ 1/h; one failed cell."""
    h = np.array([0.01, 0.005, 0.0025])
    om = np.array([0.0, 3.25])
    err = np.array([[1.0], [0.1]])[:, :, None] * h[None, :, None] ** np.array([2.0, 4.0])[:, None, None] * (1 + om)
    cost = (1e-3 / h)[None, :, None] * np.array([1.0, 3.0])[:, None, None] * (1 + 0.1 * om)
    status = np.zeros((2, 3, 2), dtype=np.int8)
    status[1, 0, 1] = 3
    dims = ("integrator", "h", "omega")
    return xr.Dataset(
        {
            "max_rel_energy_error": (dims, err, {"long_name": "max_k |E_k − E0| / |E0|", "units": "1"}),
            "wall_time": (dims, cost, {"long_name": "wall-clock time of the cell", "units": "s"}),
            "f_evals": (dims, np.round(cost * 1e4), {"long_name": "force evaluations", "units": "1"}),
            "status": (dims, status, FLAGS),
        },
        coords={
            "integrator": ["explicit_vi", "rk4"],
            "h": ("h", h, {"units": "1"}),
            "omega": ("omega", om, {"units": "rad / time"}),
            "integrator_order": ("integrator", [2, 4]),
            "integrator_adaptive": ("integrator", [False, False]),
        },
        attrs={"system": "lj_sphere", "system_family": "s2"},
    )


def test_work_precision_one_curve_per_integrator_and_parameter_set():
    from geosweep.analysis.figures import work_precision

    fig = work_precision(_param_store())
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {f"{n}, omega = {o:g}" for n in ("explicit_vi", "rk4") for o in (0.0, 3.25)}
    for ln in lines.values():
        x = ln.get_xdata()
        assert ln.get_marker() not in (None, "", "None") and np.all(np.diff(x) > 0)  # sorted by cost, markers
    assert len(lines["rk4, omega = 3.25"].get_xdata()) == 2  # the failed cell is not drawn
    assert ax.get_ylabel() == "max_k |E_k − E0| / |E0|"  # long_name, dimensionless: no "[1]"
    for label in ax.get_xticklabels(which="minor"):
        assert label.get_text() == ""  # no overlapping minor labels on a < 2-decade axis


def test_error_vs_step_only_matching_axes_and_no_filler(tmp_path):
    """Mixed h/tol grid: the fixed-step method only on the h panel (with its nominal order), the
    adaptive one only on the tol panel (a slope, no nominal value); no not-applicable point drawn."""
    from geosweep.analysis.figures import error_vs_step, status_map

    h, tol = np.array([0.01, 0.005, 0.0025]), np.array([1e-4, 1e-6, 1e-8])
    err = np.full((2, 3, 3), np.nan)
    status = np.full((2, 3, 3), -2, dtype=np.int8)
    err[0, :, 0], status[0, :, 0] = 0.3 * h**4, 0
    err[1, 0, :], status[1, 0, :] = 2.0 * tol, 0
    ds = xr.Dataset(
        {
            "max_rel_energy_error": (("integrator", "h", "tol"), err, {"long_name": "max rel. error", "units": "1"}),
            "status": (("integrator", "h", "tol"), status, FLAGS),
        },
        coords={
            "integrator": ["rkmk4", "rkmk45"],
            "h": ("h", h, {"units": "s"}),
            "tol": tol,
            "integrator_order": ("integrator", [4, 5]),
            "integrator_adaptive": ("integrator", [False, True]),
            "time": ("time", [0.0], {"units": "s"}),
        },
        attrs={"system": "x", "system_family": "ts2"},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", CellsDroppedWarning)  # filler cells are not a loss: no warning
        fig = error_vs_step(ds)
        ok = ds.geosweep.ok()
    assert "not_applicable: 12" in ok.attrs["geosweep_selection"]
    axh, axt = fig.axes[:2]
    lh = [t.get_text() for t in axh.get_legend().get_texts()]
    lt = [t.get_text() for t in axt.get_legend().get_texts()]
    assert len(lh) == 1 and lh[0].startswith("rkmk4: p = 4.00 ± 0.00 (nominal 4)")
    assert len(lt) == 1 and lt[0].startswith("rkmk45: slope = 1.00") and "nominal" not in lt[0]
    assert axh.get_xlabel() == "step size h [s]"
    assert sum(len(ln.get_xdata()) for ln in axh.get_lines() if ln.get_linestyle() == "None") == 3
    # the status map shows each method along its own axis: no column is filler in every row
    img = status_map(ds).axes[0].images[0].get_array()
    assert img.shape == (2, 3)
    labels = [t.get_text() for t in status_map(ds).axes[0].get_legend().get_texts()]
    assert labels == ["0 ok"]


def test_time_axis_units_jump_and_shared_scale():
    """Time label from the store's units; a jump of > 2 decades that persists switches to a linear
    time axis; panels share one y scale."""
    from geosweep.analysis.figures import energy_error_vs_time, jump_dominates, time_label

    t = np.linspace(0.0, 10.0, 201)
    rel = np.where(t < 4.0, 1e-14 * (1 + t), 1e-5 * (1 + 0.1 * np.sin(t)))
    ds = xr.Dataset(
        {
            "rel_energy_error": (("integrator", "h", "time"), np.stack([[rel], [10 * rel]])),
            "E0": (("integrator", "h"), np.ones((2, 1))),
            "energy_error": (("integrator", "h", "time"), np.stack([[rel], [10 * rel]])),
            "status": (("integrator", "h"), np.zeros((2, 1), np.int8), FLAGS),
        },
        coords={"integrator": ["a", "b"], "h": [0.01], "time": ("time", t, {"units": "s"})},
        attrs={"system": "synthetic"},
    )
    fig = energy_error_vs_time(ds)
    a, b = fig.axes[:2]
    assert a.get_xscale() == "linear" and a.get_yscale() == "log" and a.get_xlabel().startswith("time [s]")
    assert a.get_shared_y_axes().joined(a, b)
    assert time_label(ds.assign_coords(time=ds.time.assign_attrs(units="1"))) == "time (nondimensional)"
    osc = 1e-6 * (1.5 + np.sin(t[1:]))  # oscillations and a start-up rise are not jumps
    assert not jump_dominates([osc, np.r_[1e-13, 1e-9, osc[2:]]])


def test_torus_momentum_only_before_wall_contact():
    from geosweep.analysis.figures import momentum_series

    t = np.linspace(0.0, 2.0, 21)
    P = np.zeros((1, 1, 21, 3))
    P[..., 11:, 0] = 5.0  # the wall reverses the ring at t = 1.1
    ds = xr.Dataset(
        {
            "P": (("integrator", "h", "time", "component"), P + 1e-15 * np.arange(21)[:, None], {"units": "kg m s-1"}),
            "first_wall_contact_t": (("integrator", "h"), [[1.05]]),
            "status": (("integrator", "h"), np.zeros((1, 1), np.int8), FLAGS),
        },
        coords={"integrator": ["v1"], "h": [0.01], "time": t, "component": list("xyz")},
    )
    (label, err), *_ = momentum_series(ds).items()
    assert "before the first wall contact" in label
    assert float(err.isel(integrator=0, h=0).max()) < 1e-13 and bool(err.isel(time=slice(11, None)).isnull().all())


def test_slice_selection_accessor_and_default():
    ds = _param_store()
    assert ds.geosweep.default_selection() == {"omega": 3.25}  # lj_sphere declares the vortex case
    sub, desc = ds.geosweep.slice(omega="0")
    assert desc == "omega = 0" and float(sub.omega) == 0.0
    sub, desc = ds.geosweep.slice()
    assert desc == "omega = 3.25"
    with pytest.raises(ValueError, match=r"sel\.omega: 7 is not one of the swept values"):
        ds.geosweep.slice({"omega": "7"})
    with pytest.raises(ValueError, match=r"sel\.sense: not a swept parameter"):
        ds.geosweep.slice(sense="co")
    other = ds.assign_attrs(system="spring_pendula")
    assert other.geosweep.default_selection() == {"omega": 0.0}  # nothing declared: first label


def test_cli_report_sel(reports, tmp_path, capsys):
    from geosweep.flows.cli import main

    store, _ = reports["dg"]
    assert main(["report", str(store), "--out", str(tmp_path / "r"), "--sel", "J=8"]) == 2
    assert "sel.J: not a swept parameter" in capsys.readouterr().err
    assert main(["report", str(store), "--out", str(tmp_path / "r"), "--sel", "nonsense"]) == 2


def test_drift_units_are_udunits_like():
    ds = xr.Dataset(
        {
            "energy_error": (("integrator", "time"), np.ones((1, 5)), {"units": "J"}),
            "status": (("integrator",), np.zeros(1, np.int8), FLAGS),
        },
        coords={"integrator": ["a"], "time": ("time", np.arange(5.0), {"units": "s"})},
    )
    fit = ds.geosweep.drift()
    assert fit.slope.attrs["units"] == "J s-1" and fit.n_points.attrs["units"] == "1"


def test_fit_standard_error_ignores_nan_samples():
    """The drift fit's standard error counts only the finite samples (scipy.stats.linregress on
    them; xarray 2026.9's polyfit(cov=True, skipna=True) gives 0.021 here instead of 0.088)."""
    from scipy.stats import linregress

    from geosweep.analysis.fits import linear_fit

    rng = np.random.default_rng(0)
    x = np.arange(20.0)
    y = 2 * x + rng.standard_normal(20)
    y[10:] = np.nan
    b, se, a, rms, n = linear_fit(x, y[None, :])
    ref = linregress(x[:10], y[:10])
    np.testing.assert_allclose([b[0], se[0], a[0]], [ref.slope, ref.stderr, ref.intercept], rtol=1e-12)
    assert n[0] == 10
    b2, se2, *_ = linear_fit(x[:2], y[None, :2])
    assert np.isfinite(b2[0]) and np.isnan(se2[0])  # two points: a slope, no standard error
