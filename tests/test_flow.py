"""The Prefect flow on a real 2-worker LocalCluster gives the same store as a serial run.

The flow takes the plan (spec validated, models built once) and a progress callback in process."""

from __future__ import annotations

import pytest
import xarray as xr
from distributed import Client, LocalCluster
from prefect.testing.utilities import prefect_test_harness

from geosweep.flows.sweep_flow import sweep_flow
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.execution import Execution
from geosweep.sweeps.plan import make_plan
from tests.sweep_util import assert_stores_bitwise_equal
from tests.test_family_sweeps import CHAIN as CHAIN_SPEC
from tests.test_family_sweeps import TORUS as TORUS_SPEC

# 4 integrators × 2 h × 3 spring stiffnesses = 24 cells, plus the sphere MD at level 2 below.
SPRINGS = {
    "name": "flow-springs",
    "system": "spring_pendula",
    "integrators": ["explicit_vi", "implicit_vi", "rk2_proj", "rk4"],
    "h": [0.01, 0.005],
    "T": 5.0,
    "dt_out": 0.05,
    "params": {"kappa12": [10.0, 20.0, 40.0]},
}
SPHERE = {
    "name": "flow-sphere",
    "system": "lj_sphere",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.01, 0.005],
    "T": 0.5,
    "dt_out": 0.05,
    "params": {"level": 2, "omega": [1.0, 3.25], "sense": ["co", "counter"]},
}


TORUS = dict(TORUS_SPEC, name="flow-torus")
CHAIN = dict(CHAIN_SPEC, name="flow-chain", params={"N": [2, 20]}, tol=[1e-6])
CELLS = {"springs-24": 24, "sphere-16": 16, "torus-24": 24, "chain-26": 26}


@pytest.fixture(scope="module")
def prefect_server():
    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        with Client(lc) as client:
            yield lc, client


@pytest.mark.parametrize("spec", [SPRINGS, SPHERE, TORUS, CHAIN], ids=list(CELLS))
def test_flow_on_local_cluster_equals_serial_bitwise(spec, prefect_server, cluster, tmp_path, request):
    lc, client = cluster
    seen = []
    plan = make_plan(spec)
    out = sweep_flow(
        plan,
        store=str(tmp_path / "flow.zarr"),
        execution=Execution(address=lc.scheduler_address, slice_seconds=0.2),
        progress=seen.append,
    )
    n = CELLS[request.node.callspec.id]
    assert out["total"] == n and out["ran"] == n and not out["errors"]
    assert out["slices"] >= 4  # really fanned out over both workers
    assert seen and seen[-1].done == n
    assert "cells complete: " + f"{n}/{n}" in out["summary"]
    # both workers wrote cells
    serial = run_sweep(spec, tmp_path / "serial.zarr", serial=True)
    assert serial.ran == n
    assert_stores_bitwise_equal(tmp_path / "flow.zarr", tmp_path / "serial.zarr")
    ds = xr.open_zarr(tmp_path / "flow.zarr")
    assert int((ds.status == 0).sum()) == n and int((ds.status == -1).sum()) == 0


def test_flow_refuses_a_bad_spec_before_work(prefect_server, tmp_path):
    from prefect.exceptions import FailedRun  # noqa: F401  (import check: Prefect API present)

    from geosweep.sweeps.spec import SpecError

    with pytest.raises(SpecError, match=r"h\[0\]"):
        sweep_flow(dict(SPRINGS, h=[-0.01]), store=str(tmp_path / "bad.zarr"))
    assert not (tmp_path / "bad.zarr").exists()


def test_flow_takes_the_plan_or_plans_a_spec_once(prefect_server, tmp_path):
    """CLI → flow → run_sweep → workers (threads, counted in this process): one build per model."""
    from prefect.client.orchestration import get_client

    from tests.test_custom_system import BUILDS, COUNTED_SPEC

    BUILDS.clear()
    plan = make_plan(COUNTED_SPEC)
    assert len(BUILDS) == 2  # k = 0.5, 2.0
    out = sweep_flow(plan, store=str(tmp_path / "plan.zarr"), execution=Execution(n_workers=2, slice_seconds=0.01))
    assert out["ran"] == 8 and out["slices"] >= 4 and len(BUILDS) == 2  # no build in the flow or on workers
    out = sweep_flow(
        COUNTED_SPEC, store=str(tmp_path / "spec.zarr"), execution=Execution(n_workers=2, slice_seconds=0.01)
    )
    assert out["ran"] == 8 and len(BUILDS) == 4  # a spec (a deployment's parameter) is planned once
    with get_client(sync_client=True) as client:
        runs = {r.parameters.get("store"): r.parameters for r in client.read_flow_runs()}
    recorded = runs[str(tmp_path / "plan.zarr")]["plan"]  # what the API holds for an in-process plan
    assert recorded == {
        "spec": plan.spec.model_dump(mode="json"),
        "cells": 8,
        "dims": {"integrator": 2, "h": 2, "k": 2},
    }
