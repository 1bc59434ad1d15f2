"""Reading back and analysing large stores (issue 21 item 3): the accessor's fits, the report's
figures and ``geosweep verify`` cost what the data costs, not a Python call per cell.

Counts, never seconds: the Python function calls a call makes (``cProfile``'s total, builtins
included) at two store sizes; the artists of a figure as the number of parameter sets grows;
the checksums :func:`geosweep.sweeps.store.shard_checksums` gives, bit for bit those of ``cell_checksum``."""

from __future__ import annotations

import cProfile
import pstats
import warnings

import numpy as np
import pytest
import xarray as xr
import zarr

import geosweep  # noqa: F401 - registers ds.geosweep
from geosweep.analysis.fits import linear_fit, loglog_fit
from geosweep.kernels.status import STATUS_MEANINGS
from geosweep.sweeps.store import CHECKSUM_SKIP, StoreRef, cell_checksum, shard_checksums, verify

FLAGS = {"flag_values": list(STATUS_MEANINGS), "flag_meanings": " ".join(STATUS_MEANINGS.values())}


def calls(fn) -> int:
    """Python function calls (builtins included) made by ``fn()``."""
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    return pstats.Stats(prof).total_calls


def ensemble(seeds: int) -> xr.Dataset:
    """An in-memory store of 2 integrators × 2 h × ``seeds``: energy errors over 11 outputs (one
    integrator drifting, one bounded), per-cell summaries and costs; one failed cell."""
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 0.1, 11)
    h = np.array([0.01, 0.005])
    dims = ("integrator", "h", "seed")
    shape = (2, 2, seeds)
    scale = (h[None, :, None] / 0.01) ** np.array([2.0, 4.0])[:, None, None] * (1 + rng.random(shape))
    drift = np.array([10.0, 0.0])[:, None, None, None] * t
    wiggle = np.array([0.1, 1.0])[:, None, None, None] * np.sin(200 * t)
    energy = 1e-6 * scale[..., None] * (drift + wiggle)
    status = np.zeros(shape, np.int8)
    status[1, 0, 0] = 3
    cost = 1e-3 / h[None, :, None] * (1 + 0.1 * rng.random(shape))
    return xr.Dataset(
        {
            "energy_error": ((*dims, "time"), energy, {"units": "J", "long_name": "E - E0"}),
            "E0": (dims, np.full(shape, 2.0), {"units": "J"}),
            "steps": (dims, np.broadcast_to(0.1 / h[None, :, None], shape).copy(), {"units": "1"}),
            "max_rel_energy_error": (dims, np.abs(energy).max(-1) / 2.0, {"units": "1", "long_name": "max rel"}),
            "wall_time": (dims, cost, {"units": "s"}),
            "f_evals": (dims, np.round(cost * 1e4), {"units": "1"}),
            "status": (dims, status, FLAGS),
        },
        coords={
            "integrator": ["vi", "rk4"],
            "h": ("h", h, {"units": "s"}),
            "seed": np.arange(seeds),
            "time": ("time", t, {"units": "s"}),
            "integrator_order": ("integrator", [2, 4]),
            "integrator_adaptive": ("integrator", [False, False]),
        },
        attrs={"system": "pendulum_chain", "system_family": "dg"},
    )


# ---------------------------------------------------------------------------------- fits
def _linregress_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Reference: ``scipy.stats.linregress`` series by series (slope, stderr, intercept, rms, n)."""
    from scipy.stats import linregress

    out = np.full((5, y.shape[0]), np.nan)
    for k, row in enumerate(y):
        w = np.isfinite(x) & np.isfinite(row)
        out[4, k] = n = w.sum()
        if n < 2 or np.ptp(x[w]) == 0:
            continue
        f = linregress(x[w], row[w])
        r = row[w] - (f.intercept + f.slope * x[w])
        out[:4, k] = f.slope, f.stderr if n >= 3 else np.nan, f.intercept, np.sqrt(np.mean(r * r))
    return out


def test_linear_fit_matches_linregress_series_by_series():
    rng = np.random.default_rng(1)
    x = np.linspace(0.0, 1.0, 11)
    y = rng.normal(size=(300, 11)) * 10.0 ** rng.integers(-12, 3, size=(300, 1)) + 0.5 * x
    y[:40, 7:] = np.nan  # failed part-way
    y[40:50, :10] = np.nan  # one point: nothing fitted
    y[50:60, 2:] = np.nan  # two points: exact line, no standard error
    y[60:70] = 3.0  # constant
    y[70:80, ::2] = np.inf
    got = np.array(linear_fit(x, y), dtype=np.float64)
    want = _linregress_rows(x, y)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    scale = np.nanmax(np.abs(np.where(np.isfinite(y), y, np.nan)), axis=1)  # round-off of each series' values
    fitted = ~np.isnan(want[0])
    assert np.allclose(got[0], want[0], rtol=1e-12, atol=0, equal_nan=True)  # slope
    for k in (2, 3):  # intercept, rms: round-off of the series' values
        assert np.all(np.abs(got[k] - want[k])[fitted] <= 1e-12 * scale[fitted])
    # stderr: linregress's sqrt(1 − r²) loses half the digits on a near-exact line (r → ±1)
    se = ~np.isnan(want[1])
    assert np.all(np.abs(got[1] - want[1])[se] <= 1e-9 * np.abs(want[1][se]) + 1e-7 * np.abs(want[0][se]))
    assert np.array_equal(got[4], want[4])
    p, se, c, n, used = loglog_fit(np.array([0.01, 0.005, 0.0025]), 3.0 * np.array([0.01, 0.005, 0.0025]) ** 4)
    assert p == pytest.approx(4.0, rel=1e-12) and n == 3 and used.all()


def test_fits_make_no_python_call_per_series():
    """10 000 series cost the Python calls of 100 (the fit is whole-array numpy)."""
    x = np.linspace(0.0, 1.0, 11)
    small, large = (np.random.default_rng(2).normal(size=(n, 11)) for n in (100, 10_000))
    assert calls(lambda: linear_fit(x, large)) <= calls(lambda: linear_fit(x, small)) + 20


@pytest.mark.parametrize(
    "method", [lambda a: a.classify().compute(), lambda a: a.order().compute(), lambda a: a.drift().compute()]
)
def test_classify_and_order_calls_do_not_grow_with_cells(method):
    """classify/order/drift on 4 000 cells make about the Python calls of 40 (not one fit per cell)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = calls(lambda: method(ensemble(10).geosweep))
        large = calls(lambda: method(ensemble(1000).geosweep))
    assert large < 1.5 * small


def test_classify_and_order_results_on_an_ensemble():
    """The vectorised fits classify and order as the physics says: the drifting RK-like integrator
    drifts, the bounded one is bounded; orders 2 and 4 are observed; the failed cell is left out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = ensemble(50).geosweep
        c = acc.classify().compute()
        o = acc.order().compute()
    labels = c["classification"]
    assert set(np.unique(labels.sel(integrator="vi").values)) == {"drifting"}
    assert set(np.unique(labels.sel(integrator="rk4").values)) == {"bounded", "undetermined"}
    assert str(labels.sel(integrator="rk4", h=0.01, seed=0).values) == "undetermined"  # the failed cell
    assert int(o["n_points"].sel(integrator="rk4", seed=0)) == 1
    orders = o["order"].where(o["n_points"] == 2)
    assert np.nanmedian(orders.sel(integrator="vi")) == pytest.approx(2.0, abs=0.6)
    assert np.nanmedian(orders.sel(integrator="rk4")) == pytest.approx(4.0, abs=0.6)


# ---------------------------------------------------------------------------------- figures
def test_work_precision_figure_bounded_as_parameter_sets_grow():
    """An ensemble of 400 seeds: one median curve (with percentile bars) per integrator per panel,
    not a line per seed; a handful of parameter sets keeps one curve each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from geosweep.analysis.figures import MAX_CURVES, work_precision

    def artists(seeds: int) -> int:
        fig = work_precision(ensemble(seeds))
        n = sum(len(ax.get_lines()) + len(ax.collections) for ax in fig.axes)
        plt.close(fig)
        return n

    few, many, more = artists(3), artists(100), artists(400)
    assert few == 2 * 2 * 3  # 2 panels × 2 integrators × 3 seeds: a curve per parameter set
    assert many == more <= 2 * 2 * 7  # per panel and integrator: a median line, 4 caps, 2 bar sets
    fig = work_precision(ensemble(MAX_CURVES + 1))
    assert "median" in fig.get_suptitle()
    plt.close(fig)


def test_status_map_column_labels_match_every_combination():
    from geosweep.analysis.figures import _column_labels

    ds = ensemble(3).assign_coords(seed=[0.5, 1.0, 2.0])
    assert _column_labels(ds, ["h", "seed"]) == [f"h={h:g}, seed={s:g}" for h in (0.01, 0.005) for s in (0.5, 1, 2)]
    assert _column_labels(ds, ["integrator"]) == ["integrator=vi", "integrator=rk4"]
    assert _column_labels(ds, []) == [""]


# ---------------------------------------------------------------------------------- verify
def test_shard_checksums_bitwise_cell_checksum():
    rng = np.random.default_rng(3)
    shape = (2, 3, 4)
    blocks = {
        "energy": rng.normal(size=(*shape, 5)),
        "steps": rng.integers(0, 99, size=shape).astype(np.int64),
        "final_state": rng.normal(size=(*shape, 2, 3)),
        "flag": rng.random(shape) > 0.5,
        "small": rng.integers(-5, 5, size=(*shape, 2)).astype(np.int8),
        CHECKSUM_SKIP[0]: rng.random(shape),
    }
    status = rng.integers(-2, 4, size=shape).astype(np.int8)
    mask = rng.random(shape) > 0.3
    want = [cell_checksum({k: v[c] for k, v in blocks.items()}, int(status[c])) for c in zip(*np.nonzero(mask))]
    assert shard_checksums(blocks, status, mask).tolist() == want
    assert shard_checksums(blocks, status).size == status.size


SPEC = {
    "name": "readback-verify",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "cf4"],
    "h": [0.01, 0.005],
    "T": 0.05,
    "dt_out": 0.01,
    "params": {"N": 3, "ic": "random", "seed": list(range(64))},
}


def test_verify_checks_a_shard_at_once_and_finds_a_changed_value(tmp_path):
    """256 cells: verify's Python calls per checked cell are a handful (one hash per cell, not one
    per variable per cell); a value changed on disk is found in its shard, and only that cell."""
    from geosweep.sweeps.engine import run_sweep

    store = tmp_path / "s.zarr"
    assert run_sweep(SPEC, store, serial=True).complete
    ref = StoreRef.of(store)
    assert verify(ref) == {"damaged": [], "flags": []}
    everything = calls(lambda: verify(ref))
    group = zarr.open_group(str(store), mode="r+")
    done = np.asarray(group["done"][...])
    group["done"][..., ::2] = np.int8(0)  # every other seed unfinished: every shard read, 128 cells fewer to check
    half = calls(lambda: verify(ref))
    assert (everything - half) / 128 < 30  # per cell, whatever the number of variables (~45 here)
    group["done"][...] = done
    value = np.asarray(group["final_state"][1, 0, 40])
    group["final_state"][1, 0, 40] = value + 1e-9
    assert verify(ref) == {"damaged": [(1, 0, 40)], "flags": []}


def test_verify_an_undecodable_shard_object_without_reading_cell_by_cell(tmp_path):
    """Store format 3: a variable's shard is one object; when it cannot be decoded every finished
    cell of that shard is damaged — found from the shard, not by one read per cell per variable."""
    from geosweep.sweeps.engine import run_sweep

    store = tmp_path / "s.zarr"
    assert run_sweep(SPEC, store, serial=True).complete
    ref = StoreRef.of(store)
    intact = calls(lambda: verify(ref))
    group = zarr.open_group(str(store), mode="r")
    shards = tuple(group["done"].chunks)
    objects = sorted(p for p in (store / "energy").rglob("*") if p.is_file() and p.name != "zarr.json")
    objects[0].write_bytes(b"\x00garbage")  # the first shard's energy object
    first = [tuple(c) for c in np.ndindex(*shards)]
    damaged = verify(ref)["damaged"]
    assert sorted(damaged) == sorted(first)
    assert calls(lambda: verify(ref)) - intact < 30 * len(first)


def test_repair_verifies_lost_done_flags_shard_by_shard(tmp_path):
    """Every cell written in full but its ``done`` flag lost (a writer killed between the checksum and
    the flag, for a whole store): ``repair_flags`` verifies them from their shards — all kept done —
    with a handful of Python calls per cell, not a read per cell per variable."""
    from geosweep.sweeps.engine import run_sweep
    from geosweep.sweeps.repair import repair_flags

    store = tmp_path / "s.zarr"
    assert run_sweep(SPEC, store, serial=True).complete
    ref = StoreRef.of(store)
    group = zarr.open_group(str(store), mode="r+")
    group["done"][..., ::2] = np.int8(0)  # 128 cells: same shards as below, half the cells
    half = calls(lambda: repair_flags(ref))  # a ref without a lease token: no fence (one writer here)
    group["done"][...] = np.int8(0)  # every cell
    out = {}
    everything = calls(lambda: out.update(repair_flags(ref)))
    assert out["verified"] == 256 and bool((np.asarray(group["done"][...]) == 1).all())
    assert (everything - half) / 128 < 30
    assert verify(ref) == {"damaged": [], "flags": []}


def test_classify_and_order_stay_lazy_with_tasks_per_shard(tmp_path):
    """On ``xr.open_zarr`` data classify/order stay dask-backed, and their graphs grow with the shards
    (dask chunks), not with the cells (a guard: store format 3 made it so, the fits must keep it)."""
    from geosweep.sweeps.engine import run_sweep

    def tasks(seeds: int) -> tuple[int, int]:
        spec = {**SPEC, "name": f"lazy-{seeds}", "params": {**SPEC["params"], "seed": list(range(seeds))}}
        store = tmp_path / f"s{seeds}.zarr"
        assert run_sweep(spec, store, serial=True).complete
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            acc = xr.open_zarr(store).geosweep
            c, o = acc.classify(), acc.order()
        assert c["slope"].chunks is not None and o["order"].chunks is not None  # lazy
        chunks = len(xr.open_zarr(store)["status"].data.to_delayed().ravel())
        return chunks, len(c.__dask_graph__()) + len(o.__dask_graph__())

    (chunks_small, small), (chunks_large, large) = tasks(16), tasks(64)
    assert chunks_large < 4 * chunks_small  # 4× the cells
    assert large * chunks_small <= small * chunks_large  # tasks ∝ chunks at most
