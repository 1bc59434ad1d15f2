"""One list of run-dependent stored variables (issue 24 item 3): every use reads it, so a new
run-dependent variable is left out of checksums, night comparisons and bitwise test
comparisons by adding its name in one place."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from geosweep.analysis import report
from geosweep.kernels.core import observables
from geosweep.kernels.torus.stepper import OBSERVABLES as SE3_OBSERVABLES
from geosweep.kernels.vocabulary import RUN_DEPENDENT, is_run_dependent
from geosweep.sweeps import store
from tests import sweep_util


def test_every_use_is_the_one_list():
    assert store.CHECKSUM_SKIP is RUN_DEPENDENT
    assert report.RUN_STAMPS is RUN_DEPENDENT
    assert sweep_util.RUN_STAMPS is RUN_DEPENDENT


def test_the_list_names_the_stamps_and_timings_that_are_stored():
    flags = set(store.SWEEP_FLAGS)
    assert {"wall_time", "completed_at"} <= flags & set(RUN_DEPENDENT)
    se3 = observables.diagnostics(SE3_OBSERVABLES)  # the SE(3)ⁿ family's own, those of every model
    timings = {d.name for d in se3 if d.units == "1 / s"}  # its timing diagnostic
    assert timings == {"steps_per_second"} and timings <= set(RUN_DEPENDENT)
    assert not is_run_dependent("energy") and not is_run_dependent("status") and not is_run_dependent("done")


@pytest.fixture
def new_stamp():
    """A run-dependent variable added the one documented way (its name in the list)."""
    RUN_DEPENDENT.append("toy_cpu_seconds")
    yield "toy_cpu_seconds"
    RUN_DEPENDENT.remove("toy_cpu_seconds")


def _cell(stamp: str, x: float) -> dict[str, np.ndarray]:
    return {"energy": np.arange(4.0), "steps": np.int64(7), stamp: np.float64(x)}


def test_a_new_run_dependent_variable_is_left_out_of_checksums(new_stamp):
    assert store.cell_checksum(_cell(new_stamp, 1.0), 0) == store.cell_checksum(_cell(new_stamp, 2.0), 0)
    blocks = {k: np.stack([v, v]) for k, v in _cell(new_stamp, 1.0).items()}
    other = dict(blocks, **{new_stamp: np.array([3.0, 4.0])})
    status = np.zeros(2, np.int8)
    assert np.array_equal(store.shard_checksums(blocks, status), store.shard_checksums(other, status))
    assert store.cell_checksum(_cell("not_a_stamp", 1.0), 0) != store.cell_checksum(_cell("not_a_stamp", 2.0), 0)


def _night(stamp: str, x: float) -> xr.Dataset:
    dims = ("h",)
    return xr.Dataset(
        {
            "status": (dims, np.zeros(2, np.int8)),
            "done": (dims, np.ones(2, np.int8)),
            "max_abs_energy_error": (dims, np.array([1e-3, 2e-3])),
            stamp: (dims, np.array([x, x])),
        },
        coords={"h": [0.1, 0.05]},
    )


def test_a_new_run_dependent_variable_is_not_compared_between_nights(new_stamp):
    assert report.compare_stores(_night(new_stamp, 1.0), _night(new_stamp, 5.0)).changes == []
    changed = report.compare_stores(_night("not_a_stamp", 1.0), _night("not_a_stamp", 5.0)).changes
    assert {c["quantity"] for c in changed} == {"not_a_stamp"}


def test_a_new_run_dependent_variable_is_skipped_by_the_bitwise_test_helper(new_stamp, tmp_path):
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    _night(new_stamp, 1.0).to_zarr(a)
    _night(new_stamp, 5.0).to_zarr(b)
    sweep_util.assert_stores_bitwise_equal(str(a), str(b))
    with pytest.raises(AssertionError):
        _night("not_a_stamp", 1.0).to_zarr(tmp_path / "c.zarr")
        _night("not_a_stamp", 5.0).to_zarr(tmp_path / "d.zarr")
        sweep_util.assert_stores_bitwise_equal(str(tmp_path / "c.zarr"), str(tmp_path / "d.zarr"))
