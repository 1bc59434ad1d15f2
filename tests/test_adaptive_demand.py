"""Adaptive scaling is told the plan's cell costs (:mod:`geosweep.sweeps.demand`): from 0 workers, a sweep of three
long cells asks for three workers at once, not one (real ``LocalCluster`` with ``adapt``); the number
follows the cells left and is 0 when the run ends."""

from __future__ import annotations

import pytest
from distributed import Client, LocalCluster

from geosweep.deploy.clusters import cost_aware_adaptive
from geosweep.sweeps.demand import KEY, Demand, workers_wanted
from geosweep.sweeps.engine import LOCAL_WORKER, run_sweep

#: three cells of 2·10⁴ steps (a fraction of a second each; the cost estimate is what counts)
SPEC = {
    "name": "demand",
    "system": "lj_sphere",
    "integrators": ["explicit_vi"],
    "h": [0.005],
    "T": 100.0,
    "dt_out": 5.0,
    "params": {"level": 2, "omega": [3.25, 2.0, 1.5]},
}


def _ups(adaptive) -> list[int]:
    """The worker counts the adaptive cluster asked for, in order."""
    return [entry[1]["n"] for entry in adaptive.log if entry[1].get("status") == "up"]


@pytest.mark.parametrize(
    "aware", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["cost-aware", "dask-default"]
)  # dask-default: the behaviour before, kept as a record (slow: ≈ 30 s more)
def test_three_long_cells_from_zero_workers_ask_for_three_workers(tmp_path, aware):
    """Dask's own target (the ``dask-default`` case: what ``adapt`` did before) asks for one worker for the
    sweep's model tasks; told the cells' costs it asks for three, and the run finishes on them."""
    from distributed.deploy import Adaptive

    with LocalCluster(n_workers=0, processes=True, dashboard_address=":0", **LOCAL_WORKER) as cluster:
        adaptive = cluster.adapt(
            minimum=0, maximum=4, interval="200ms", Adaptive=cost_aware_adaptive() if aware else Adaptive
        )
        with Client(cluster) as client:
            res = run_sweep(SPEC, tmp_path / "d.zarr", client=client, slice_seconds=0.01)
            assert client.get_metadata(list(KEY)) == 0  # the run wants no more workers
    assert res.complete, res.errors
    ups = _ups(adaptive)
    assert ups, adaptive.log
    if aware:
        assert ups[0] == 3, ups
        assert max(ups) == 3, ups  # never more workers than cells
    else:
        assert ups[0] == 1, ups  # the issue: serial throughput for a few long cells


def test_workers_wanted_from_costs():
    assert workers_wanted(3000.0, 1000.0, 3, 10.0) == 3  # three long cells: one worker each
    assert workers_wanted(3010.0, 1000.0, 1003, 10.0) == 4  # three long cells and tiny ones
    assert workers_wanted(10.0, 0.01, 1000, 10.0) == 1  # 10 s of tiny cells: one slice
    assert workers_wanted(1000.0, 1.0, 1000, 10.0) == 100  # a worker per slice of 10 s
    assert workers_wanted(0.0, 0.0, 0, 10.0) == 0
    d = Demand({(0,): 100.0, (1,): 100.0, (2,): 1.0}, 10.0)
    assert d.workers() == 3
    d.finished([(0,)])
    assert d.workers() == 2
    d.finished([(1,), (2,)])
    assert d.workers() == 0
