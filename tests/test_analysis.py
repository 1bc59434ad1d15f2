"""The analysis package: ds.geosweep accessor, KE map, `geosweep report`, example notebook."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import geosweep  # noqa: F401 - registers ds.geosweep
from geosweep.analysis.accessor import CellsDroppedWarning
from geosweep.kernels.status import STATUS_MEANINGS
from geosweep.sweeps.engine import run_sweep

ROOT = Path(__file__).resolve().parent.parent
SEED = 20240605  # each synthetic dataset draws its own noise: the same whatever ran before
#: CF flag attrs as the store writes them on ``status`` (analysis reads labels only from these)
FLAGS = {"flag_values": list(STATUS_MEANINGS), "flag_meanings": " ".join(STATUS_MEANINGS.values())}


# ----------------------------------------------------------------------------- synthetic data
def _synthetic_drift() -> xr.Dataset:
    """integrator a: bounded oscillation; b: linear drift 1e-3/time; c: failed at t = 50."""
    t = np.arange(0.0, 100.0 + 1e-9, 0.1)
    h = np.array([0.01, 0.005])
    noise = 1e-4 * np.random.default_rng(SEED).standard_normal((3, 2, t.size))
    err = np.empty((3, 2, t.size))
    err[0] = 1e-2 * np.sin(2 * np.pi * t / 3.0) + noise[0]
    err[1] = 1e-3 * t + noise[1]
    err[2] = 1e-3 * t + noise[2]
    err[2, :, t > 50] = np.nan
    status = np.array([[0, 0], [0, 0], [3, -2]], dtype=np.int8)
    return xr.Dataset(
        {
            "energy_error": (("integrator", "h", "time"), err, {"units": "J"}),
            "E0": (("integrator", "h"), np.full((3, 2), -2.0)),
            "status": (("integrator", "h"), status, FLAGS),
        },
        coords={"integrator": ["a", "b", "c"], "h": h, "time": t},
        attrs={"system": "synthetic", "system_family": "s2"},
    )


def _synthetic_order() -> xr.Dataset:
    """error = C·h^p·(1 + 5 % noise): p = 2 for vi, 4 for rk4; one NaN point, one failed cell."""
    h = 0.1 / 2.0 ** np.arange(6)
    p = np.array([2.0, 4.0])
    noise = 0.05 * np.random.default_rng(SEED + 1).standard_normal((2, h.size))
    err = np.array([[3.0], [0.5]]) * h[None, :] ** p[:, None] * (1 + noise)
    err[0, 2] = np.nan
    status = np.zeros((2, h.size), dtype=np.int8)
    status[1, 0] = 3  # failed at the largest h: its (finite) value must not enter the fit
    err[1, 0] = 1e6
    return xr.Dataset(
        {
            "mean_abs_energy_error": (("integrator", "h"), err),
            "wall_time": (("integrator", "h"), 1e-3 / h * np.array([[1.0], [4.0]])),
            "f_evals": (("integrator", "h"), np.round(1.0 / h * np.array([[1.0], [4.0]])).astype(np.int64)),
            "status": (("integrator", "h"), status, FLAGS),
        },
        coords={
            "integrator": ["explicit_vi", "rk4"],
            "h": h,
            "integrator_family": ("integrator", ["s2", "s2"]),
            "integrator_order": ("integrator", [2, 4]),
            "integrator_adaptive": ("integrator", [False, False]),
        },
        attrs={"system": "synthetic", "system_family": "s2"},
    )


def test_drift_recovers_slope_and_classifies():
    ds = _synthetic_drift()
    with pytest.warns(CellsDroppedWarning, match=r"kept 4 of 6 cells; left out 2 \(not_applicable: 1, nonfinite: 1\)"):
        fit = ds.geosweep.drift(window=(10.0, 90.0))
    np.testing.assert_allclose(fit.slope.sel(integrator="b").values, 1e-3, rtol=1e-3)
    assert (abs(fit.slope.sel(integrator="b") - 1e-3) < 4 * fit.slope_stderr.sel(integrator="b")).all()
    assert (fit.n_points.sel(integrator="b") == 801).all() and float(fit.t0) == 10.0 and float(fit.t1) == 90.0
    assert fit.slope.sel(integrator="c").isnull().all()  # failed / not applicable cells masked
    with pytest.warns(CellsDroppedWarning):
        cls = ds.geosweep.classify()
    assert (cls.classification.sel(integrator="a") == "bounded").all()
    assert (cls.classification.sel(integrator="b") == "drifting").all()
    assert (cls.classification.sel(integrator="c") == "undetermined").all()
    assert "threshold" in cls.attrs["criterion"] or "rms_residual" in cls.attrs["criterion"]
    # without masking the failed cell's finite prefix is still fitted (NaN samples skipped)
    raw = ds.geosweep.drift(only_ok=False)
    np.testing.assert_allclose(raw.slope.sel(integrator="c", h=0.01), 1e-3, rtol=1e-2)


def test_ok_failed_report_and_drop():
    ds = _synthetic_drift()
    with pytest.warns(CellsDroppedWarning) as rec:
        ok = ds.geosweep.ok()
    assert "kept 4 of 6" in str(rec[0].message) and "dropped labels" in str(rec[0].message)
    assert list(ok.integrator.values) == ["a", "b"]  # c has no ok cell: label removed, and said so
    assert ok.attrs["geosweep_selection"].startswith("geosweep: ok cells")
    with pytest.warns(CellsDroppedWarning):
        bad = ds.geosweep.failed()
    assert list(bad.integrator.values) == ["c"] and list(bad.h.values) == [0.01]
    table = ds.geosweep.failures()
    assert len(table) == 1 and table.status_label.iloc[0] == "nonfinite"


def test_labels_and_integrator_facts_come_from_the_data():
    """Status labels from flag_meanings (renamed labels follow the data), orders/adaptivity from coords."""
    from geosweep.analysis.figures import cells, status_map

    ds = _synthetic_drift()
    ds["status"][2, 0] = 5
    assert ds.geosweep.status_counts() == {"not_applicable": 1, "ok": 4, "energy_blowup": 1}
    assert ds.geosweep.failures().status_label.tolist() == ["energy_blowup"]
    legend = [t.get_text() for t in status_map(ds).axes[0].get_legend().get_texts()]
    assert legend == ["-2 not_applicable", "0 ok", "5 energy_blowup"]
    renamed = ds.copy()
    renamed["status"] = ds.status.assign_attrs(flag_values=[0, 5, -2], flag_meanings="fine exploded filler")
    assert renamed.geosweep.status_counts() == {"filler": 1, "fine": 4, "exploded": 1}
    bare = ds.copy()
    bare["status"] = ds.status.copy().drop_attrs()
    assert bare.geosweep.status_counts()["unlabelled_5"] == 1  # no labels in the data: none invented
    # relative error: the stored rel_energy_error wins; else energy_error (absolute) / |E0|
    np.testing.assert_allclose(ds.geosweep.relative_energy_error(), ds.energy_error / 2.0)
    marked = ds.assign(rel_energy_error=ds.energy_error * 0 + 7.0)
    assert float(marked.geosweep.relative_energy_error().max()) == 7.0
    # expected orders and adaptivity from the integrator_* coords (not the registry)
    od = _synthetic_order().assign_coords(integrator_order=("integrator", [3, 5]))
    with pytest.warns(CellsDroppedWarning):
        assert list(od.geosweep.order().expected_order.values) == [3.0, 5.0]
    assert od.geosweep.integrators().to_dict("index")["rk4"] == {"family": "s2", "order": 5, "adaptive": False}
    mixed = xr.Dataset(
        {"status": (("integrator", "h", "tol"), np.array([[[0, -2]], [[0, 0]]], dtype=np.int8), FLAGS)},
        coords={"integrator": ["fix", "ada"], "h": [0.1], "tol": [1e-3, 1e-6]},
    )
    mixed = mixed.assign_coords(integrator_adaptive=("integrator", [False, True]))
    assert [(n, d) for n, d, _, _ in cells(mixed)] == [("fix", "h"), ("ada", "tol"), ("ada", "tol")]


def test_order_recovers_p_and_reports_points():
    ds = _synthetic_order()
    with pytest.warns(CellsDroppedWarning, match="nonfinite: 1"):
        o = ds.geosweep.order().compute()
    np.testing.assert_allclose(o.order.values, [2.0, 4.0], atol=0.1)
    assert list(o.n_points.values) == [5, 5]
    assert not bool(o.used.sel(integrator="explicit_vi").isel(h=2))  # NaN point skipped
    assert not bool(o.used.sel(integrator="rk4").isel(h=0))  # failed cell skipped
    assert list(o.expected_order.values) == [2.0, 4.0]
    with pytest.raises(ValueError, match="reduce them first"):
        _synthetic_drift().geosweep.order("energy_error")
    msg = r"kept 10 of 12 cells; left out 2 \(nonfinite: 1, ok_with_nonfinite_value: 1"
    with pytest.warns(CellsDroppedWarning, match=msg):
        wp = ds.geosweep.work_precision(cost_var="evals")
    assert list(wp.columns) == ["integrator", "h", "mean_abs_energy_error", "f_evals"] and len(wp) == 10


def test_lazy_on_open_zarr(tmp_path):
    from dask.callbacks import Callback

    path = tmp_path / "syn.zarr"
    _synthetic_drift().chunk({"integrator": 1, "h": 1}).to_zarr(path, zarr_format=3, consolidated=False)
    ds = xr.open_zarr(path, consolidated=False)
    executed = []

    class Count(Callback):
        def _start(self, dsk):
            executed.append(len(dsk))

    with Count():
        fit = ds.geosweep.drift(only_ok=False)
        cls = ds.geosweep.classify(only_ok=False)
    assert executed == []  # nothing computed until asked
    assert fit.slope.chunks is not None and cls.drifting.chunks is not None
    assert (cls.classification.sel(integrator="b").compute() == "drifting").all()
    with pytest.warns(CellsDroppedWarning):
        o = ds.geosweep.order(ds.energy_error.max("time"))  # loads only status to count cells
    assert o.order.chunks is not None


# ----------------------------------------------------------------------------- KE map
def test_ke_map_pure_function():
    from geosweep.analysis.kemap import face_membership, ke_face, mesh, patch_matrix
    from geosweep.kernels.systems.lj_sphere import lj_sphere

    verts, faces = mesh(4)
    assert faces.shape == (5120, 3)
    P = patch_matrix(faces, len(verts))
    assert sorted(set(np.asarray(P.sum(axis=1)).ravel())) == [12.0, 13.0]
    m = lj_sphere()
    counts = np.asarray(((face_membership(m.q0, verts, faces) @ P) > 0).sum(axis=0)).ravel()
    assert (counts == 3).all()  # spec §3.6: three molecules in every patch at t = 0
    # rigid rotation about e3 at rate 2: KE_i = 2 (1 − z_i²); face means follow it
    w = np.tile([0.0, 0.0, 2.0], (len(verts), 1))
    ke = ke_face(verts, w)
    zc = verts[faces].mean(axis=1)[:, 2]
    assert np.isfinite(ke).all() and np.abs(ke - 2.0 * (1 - zc**2)).max() < 0.05


# ----------------------------------------------------------------------------- real sweeps
SPRING = {
    "name": "an-sp",
    "system": "spring_pendula",
    "integrators": ["explicit_vi", "rk2", "rk4"],
    "h": [0.01, 0.005],
    "T": 20.0,
    "dt_out": 0.05,
}
SPHERE = {
    "name": "an-lj",
    "system": "lj_sphere",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.01, 0.005],
    "T": 0.25,
    "dt_out": 0.05,
    "params": {"omega": [3.25, 1.0]},
}
TORUS = {
    "name": "an-to",
    "system": "torus",
    "integrators": ["v2_newmark", "v1"],
    "h": [2e-3, 1e-3],
    "T": 1.0,
    "dt_out": 0.01,
    "snapshot_dt": 0.25,
    "params": {"N_p": 16},
}
CHAIN = {
    "name": "an-ch",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "rkmk45"],
    "h": [0.01, 0.005],
    "tol": [1e-6, 1e-8],
    "T": 1.0,
    "dt_out": 0.01,
    "params": {"N": 3},
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("analysis")
    out = {}
    for key, spec in (("spring", SPRING), ("sphere", SPHERE), ("torus", TORUS), ("chain", CHAIN)):
        out[key] = str(root / f"{key}.zarr")
        assert run_sweep(spec, out[key], serial=True).complete
    return out


def test_real_sweep_vi_bounded_rk_drifting(stores):
    ds = xr.open_zarr(stores["spring"])
    cls = ds.geosweep.classify(relative=True).compute()
    assert (cls.classification.sel(integrator="explicit_vi") == "bounded").all()
    assert (cls.classification.sel(integrator="rk2") == "drifting").all()
    assert (cls.classification.sel(integrator="rk4") == "drifting").all()  # measured ratio ≈ 30 vs VI ≈ 0.2
    o = ds.geosweep.order().compute()  # mean |ΔE| of the explicit VI: order 2 (spec A4)
    assert abs(float(o.order.sel(integrator="explicit_vi")) - 2.0) < 0.2
    wp = ds.geosweep.work_precision(cost_var="f_evals")
    assert len(wp) == 6 and (wp.f_evals > 0).all()


GENERIC = {"energy_error_vs_time", "energy_envelope", "error_vs_step", "work_precision", "status_map"}
EXPECTED = {
    "spring": GENERIC | {"constraint_errors"},  # momentum not conserved: stated in the notes
    "sphere": GENERIC | {"constraint_errors", "momentum_errors", "ke_map"},
    "torus": GENERIC | {"momentum_errors", "torus_energy_partition", "torus_snapshots"},
    # chain (planar paper start): J = e3·L stays exactly 0 and L is not conserved (g ≠ 0): no momentum panel
    "chain": GENERIC | {"constraint_errors", "adaptive_step_sizes"},
}


def _check_png(path: Path) -> None:
    import matplotlib.image as mpimg

    assert path.stat().st_size > 5000, path
    img = mpimg.imread(path)
    assert img.shape[0] >= 250 and img.shape[1] >= 300, (path, img.shape)
    rgb = (img[..., :3] * 255).astype(np.uint8).astype(np.uint32)
    colours = np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2])  # one int per colour: 8x faster
    assert len(colours) > 20, (path, len(colours))


def test_report_every_figure(stores, tmp_path):
    from geosweep.analysis.report import make_report

    for key, store in stores.items():
        rep = make_report(store, tmp_path / key)
        assert set(rep.figures) == EXPECTED[key], (key, set(rep.figures), rep.notes)
        for path in rep.figures.values():
            _check_png(path)
        index = (tmp_path / key / "index.md").read_text()
        assert all(f"({name}.png)" in index for name in rep.figures)
        assert (tmp_path / key / "index.html").exists()
    assert "step size of the adaptive methods against time" in (tmp_path / "chain" / "index.md").read_text()
    assert "not conserved" in (tmp_path / "spring" / "index.md").read_text()
    assert "identically 0 for every method in this store" in (tmp_path / "chain" / "index.md").read_text()
    # the envelope is at least as wide as the point samples, in every store
    for store in stores.values():
        ds = xr.open_zarr(store)
        ok = ds.status == 0
        lo, hi, pt = (ds[v].where(ok) for v in ("energy_error_lower", "energy_error_upper", "energy_error"))
        assert bool(((lo <= pt) | lo.isnull()).all()) and bool(((pt <= hi) | hi.isnull()).all())


def test_cli_report(stores, tmp_path, capsys):
    from geosweep.flows.cli import main

    assert main(["report", stores["sphere"], "--out", str(tmp_path / "r")]) == 0
    assert "8 figures; omega = 3.25" in capsys.readouterr().out and (tmp_path / "r" / "ke_map.png").exists()
    assert main(["report", stores["sphere"], "--out", str(tmp_path / "r1"), "--sel", "omega=1"]) == 0
    assert "8 figures; omega = 1)" in capsys.readouterr().out
    assert "## Energy drift and classification at omega = 1" in (tmp_path / "r1" / "index.md").read_text()
    assert main(["report", str(tmp_path / "missing.zarr")]) == 2


def test_ke_map_uses_snapshots(stores):
    """The map reads q_* and w_* of ``snapshot_state`` by their ``state`` labels, at the stored times."""
    from geosweep.analysis.system_figures import ke_map
    from geosweep.kernels.systems.lj_sphere import lj_sphere

    ds = xr.open_zarr(stores["sphere"]).load()
    assert [str(s) for s in ds.state.values] == ["q_x", "q_y", "q_z", "w_x", "w_y", "w_z"]
    cell = ds.sel(integrator="explicit_vi", h=0.005, omega=3.25)
    q0, w0 = lj_sphere(omega=3.25).initial_state()
    np.testing.assert_array_equal(cell.geosweep.state("q", snapshots=True).isel(snapshot=0), q0)
    np.testing.assert_array_equal(cell.geosweep.state("w", snapshots=True).isel(snapshot=0), w0)
    np.testing.assert_array_equal(cell.geosweep.state("q", snapshots=True).isel(snapshot=-1), cell.geosweep.state("q"))
    fs = ds.final_state
    snap = xr.concat([fs.where(~fs.state.str.startswith("w"), 0.5 * fs), fs], "snapshot")
    ds = ds.assign(snapshot_state=snap.transpose(*ds.snapshot_state.dims)).assign_coords(
        snapshot_time=("snapshot", [0.1, 0.25])
    )
    fig, caption, notes = ke_map(ds.isel(omega=0), times=(0.1, 0.25))
    titles = [a.get_title() for a in fig.axes[:4]]
    assert fig is not None and notes == [] and titles[:2] == ["t = 0.1, from +z", "t = 0.25, from +z"]
    assert titles[2:] == ["t = 0.1, from −z", "t = 0.25, from −z"]  # both hemispheres
    fig, caption, notes = ke_map(ds.isel(omega=0), times=(0.0, 0.1, 0.25))
    assert fig is not None and "no snapshot at t = 0" in notes[0]


#: the 80-particle torus with v2_newmark at h = 1e-2 blows up at step 27 (|E − E0| > 0.5·|E0|); h = 1e-3 is fine.
#: (N_p = 8 and 16 do not blow up at h = 1e-2 within T = 3.)
BLOWUP = {
    "name": "an-blow",
    "system": "torus",
    "integrators": ["v2_newmark"],
    "h": [1e-2, 1e-3],
    "T": 0.5,
    "dt_out": 0.01,
    "params": {"N_p": 80},
    "integrator_options": {"v2_newmark": {"blowup": 0.5}},
}


def test_report_labels_an_energy_blowup_cell(tmp_path, capsys):
    """A real store with a status-5 cell: status map legend, counts and failure table say energy_blowup."""
    from geosweep.analysis.figures import status_map
    from geosweep.flows.cli import main

    store = tmp_path / "blow.zarr"
    assert run_sweep(BLOWUP, store, serial=True).complete
    ds = xr.open_zarr(store)
    assert ds.status.sel(integrator="v2_newmark").values.tolist() == [5, 0]
    assert ds.geosweep.status_counts() == {"ok": 1, "energy_blowup": 1}
    legend = [t.get_text() for t in status_map(ds).axes[0].get_legend().get_texts()]
    assert legend == ["0 ok", "5 energy_blowup"]
    assert main(["report", str(store), "--out", str(tmp_path / "r")]) == 0
    assert "figures" in capsys.readouterr().out
    assert (tmp_path / "r" / "status_map.png").stat().st_size > 5000
    index = (tmp_path / "r" / "index.md").read_text()
    page = (tmp_path / "r" / "index.html").read_text()
    assert "status counts: ok: 1, energy_blowup: 1" in index and "energy_blowup" in page
    assert "## Failed cells" in index
    row = next(line for line in index.splitlines() if line.startswith("| v2_newmark | 0.01 |"))
    assert "| energy_blowup |" in row
    for text in (index, page):
        assert "status_5" not in text and "5 ?" not in text and "unlabelled" not in text


def test_report_refuses_another_store_format(tmp_path, capsys):
    from geosweep.analysis.report import make_report
    from geosweep.flows.cli import main
    from geosweep.sweeps.store import StoreFormatError

    for fmt, found in ((1, "store format 1"), (None, "unversioned store format")):
        path = tmp_path / f"old{fmt}.zarr"
        ds = _synthetic_drift().assign_attrs(spec="{}")
        if fmt is not None:
            ds.attrs["geosweep_format"] = fmt
        ds.to_zarr(path, zarr_format=3)
        with pytest.raises(StoreFormatError, match=f"{found}.*formats 2 and 3 only.*Write a new store"):
            make_report(path, tmp_path / "r")
        assert main(["report", str(path)]) == 3 and found in capsys.readouterr().err


def test_notebook_runs(stores, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "examples" / "analysis.ipynb", as_version=4)
    env = {"GEOSWEEP_STORE": stores["spring"], "GEOSWEEP_REPORT_DIR": str(tmp_path / "rep")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
        client.execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert (tmp_path / "rep" / "index.md").exists()
    assert not list(tmp_path.glob("results"))  # the test store was used, no new sweep


def test_chain_step_size_figure_in_a_mixed_h_tol_store(tmp_path):
    """A store mixing fixed-step (h) and adaptive (tol) methods, h axis of length 1."""
    from geosweep.analysis.report import make_report
    from geosweep.sweeps.engine import run_sweep

    spec = {
        "name": "mixed",
        "system": "pendulum_chain",
        "integrators": ["rkmk45", "rkmk4"],
        "h": [0.01],
        "tol": [1e-5, 1e-6],
        "T": 1.0,
        "dt_out": 0.05,
        "params": {"N": 2},
    }
    run_sweep(spec, tmp_path / "m.zarr", serial=True)
    rep = make_report(tmp_path / "m.zarr", tmp_path / "r")
    assert "adaptive_step_sizes" in rep.figures
    _check_png(rep.figures["adaptive_step_sizes"])
