"""A run of a few short cells runs in the driver's process, without Dask, whatever cluster it was given
(issue 21: 300 cells of 0.1 ms on 2 worker threads ran at 0.88× serial, 10³ at 0.98×; the Python around such
cells holds the GIL, so a Dask round trip costs more than two workers save). The rule is
:func:`geosweep.sweeps.execution.runs_in_driver`; the suite runs with it (the users' default), and a test
written for the Dask path asks for that path (conftest's ``dask_path``). Real LocalCluster, real zarr
stores, the real command line."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from distributed import Client, LocalCluster, get_task_stream
from pydantic import ValidationError

from geosweep.sweeps.engine import LOCAL_WORKER, run_sweep
from geosweep.sweeps.execution import (
    AUTO_PROCESS_CELL_SECONDS,
    IN_DRIVER_ENV,
    IN_DRIVER_SECONDS,
    Execution,
    in_driver_seconds,
    runs_in_driver,
)
from geosweep.sweeps.plan import make_plan
from tests.sweep_util import assert_stores_bitwise_equal
from tests.test_small_runs import SPEC

#: 300 chain cells of ~0.1 ms (estimated 5 µs each, 1.5 ms in all)
SHORT = dict(SPEC, name="in-driver")
#: 4 cells estimated at ~0.5 ms each: too long to stay in the driver, however few
LONG = dict(SHORT, name="in-driver-long", T=10.0, dt_out=0.5, params={"N": 3, "ic": "random", "seed": [0, 1]})


@pytest.fixture
def rule_on(monkeypatch):
    """The default rule, as a user gets it, whatever the developer's environment sets."""
    monkeypatch.delenv(IN_DRIVER_ENV, raising=False)


@pytest.fixture(scope="module")
def threads():
    with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
        with Client(cluster) as client:
            yield client


def test_the_rule_takes_few_short_cells_only(rule_on):
    short = np.full(1000, 2e-5)  # 10³ cells of 0.1 ms, as estimated: 0.02 s
    assert runs_in_driver(short)
    assert not runs_in_driver(np.full(2000, 2e-5))  # 0.04 s: two workers gain
    assert not runs_in_driver([1e-3] * 10)  # 10 cells of ~2 ms: the kernels run side by side
    assert not runs_in_driver(np.append(short, AUTO_PROCESS_CELL_SECONDS))  # one cell too long
    assert runs_in_driver(np.append(short, np.zeros(50)))  # cells not applicable count for nothing
    assert not runs_in_driver([]) and not runs_in_driver(np.zeros(3))
    assert not runs_in_driver(short, below=0.0)
    assert runs_in_driver(np.full(10**4, 2e-5), below=1.0)


def test_a_part_of_a_run_in_the_driver_runs_there_too(rule_on):
    """The command line decides from every cell before it starts a cluster; the engine from the cells
    a resumed run has left: the rule must give the same answer for any part."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(400):
        costs = rng.uniform(0, 1, size=int(rng.integers(1, 700))) * rng.uniform(0, 4e-4)
        if runs_in_driver(costs):
            checked += 1
            part = costs[rng.random(costs.size) < rng.random()]
            assert runs_in_driver(part) or not (part > 0).any()
    assert 40 < checked < 360  # both answers occur


def test_the_threshold_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(IN_DRIVER_ENV, raising=False)
    assert in_driver_seconds() == IN_DRIVER_SECONDS
    monkeypatch.setenv(IN_DRIVER_ENV, "0.5")
    assert in_driver_seconds() == 0.5 and runs_in_driver(np.full(10**4, 2e-5))
    for bad in ("-1", "soon", "nan"):
        monkeypatch.setenv(IN_DRIVER_ENV, bad)
        with pytest.raises(ValueError, match=IN_DRIVER_ENV):
            in_driver_seconds()
    with pytest.raises(ValidationError, match="in_driver_below"):
        Execution(in_driver_below=-1)


def test_a_small_run_given_a_cluster_runs_in_the_driver_bitwise(tmp_path, threads, rule_on):
    plan = make_plan(SHORT)
    lines: list[str] = []
    with get_task_stream(threads) as stream:
        res = run_sweep(plan, tmp_path / "driver.zarr", client=threads, log=lines.append)
    assert res.complete and res.ran == plan.grid.size and not res.errors
    assert any("run in this process, without Dask" in line for line in lines), lines
    assert stream.data == []  # no task reached the cluster
    assert run_sweep(plan, tmp_path / "serial.zarr", serial=True).ran == plan.grid.size
    assert_stores_bitwise_equal(tmp_path / "driver.zarr", tmp_path / "serial.zarr")


def test_in_driver_below_zero_sends_the_run_to_the_workers(tmp_path, threads, rule_on):
    plan = make_plan(SHORT)
    lines: list[str] = []
    with get_task_stream(threads) as stream:
        res = run_sweep(
            plan, tmp_path / "dask.zarr", client=threads, execution=Execution(in_driver_below=0), log=lines.append
        )
    assert res.complete and res.ran == plan.grid.size
    assert not any("without Dask" in line for line in lines)
    assert any(str(t["key"]).startswith("geosweep-") for t in stream.data)


def test_few_long_cells_still_go_to_the_workers(tmp_path, threads, rule_on):
    plan = make_plan(LONG)
    assert float(plan.cost_array().max()) >= AUTO_PROCESS_CELL_SECONDS
    with get_task_stream(threads) as stream:
        res = run_sweep(plan, tmp_path / "long.zarr", client=threads)
    assert res.complete and res.ran == 4
    assert any(str(t["key"]).startswith("geosweep-") for t in stream.data)


def test_a_resumed_run_with_few_short_cells_left_finishes_in_the_driver(tmp_path, threads, rule_on, monkeypatch):
    """The first run goes to Dask (rule off) and its store loses some cells; the rerun, with the rule
    on, computes only those, in the driver, and the store is the serial one's."""
    from geosweep.sweeps.store import StoreRef, mark_for_rerun

    plan = make_plan(SHORT)
    monkeypatch.setenv(IN_DRIVER_ENV, "0")
    run_sweep(plan, tmp_path / "r.zarr", client=threads)
    mark_for_rerun(StoreRef.of(tmp_path / "r.zarr"), list(plan.grid.cells())[::15])  # 20 cells to redo
    monkeypatch.delenv(IN_DRIVER_ENV)
    lines: list[str] = []
    with get_task_stream(threads) as stream:
        res = run_sweep(plan, tmp_path / "r.zarr", client=threads, log=lines.append)
    assert res.ran == 20 and res.skipped == plan.grid.size - 20
    assert stream.data == [] and any("20 short cells" in line for line in lines), lines
    run_sweep(plan, tmp_path / "serial.zarr", serial=True)
    assert_stores_bitwise_equal(tmp_path / "r.zarr", tmp_path / "serial.zarr")


def test_the_command_line_starts_no_cluster_for_a_small_run(tmp_path):
    spec = tmp_path / "small.toml"
    seeds = ", ".join(str(s) for s in range(40))
    spec.write_text(
        'name = "cli-in-driver"\nsystem = "pendulum_chain"\nintegrators = ["rkmk4"]\nh = [0.025]\nT = 0.1\n'
        f'dt_out = 0.05\n[params]\nN = 3\nic = "random"\nseed = [{seeds}]\n'
    )
    env = {k: v for k, v in os.environ.items() if k != IN_DRIVER_ENV}
    cmd = [sys.executable, "-m", "geosweep.flows.cli", "run", str(spec), "--store", str(tmp_path / "s.zarr")]
    p = subprocess.run([*cmd, "--no-prefect", "--workers", "2"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "40 short cells" in p.stderr and "without Dask" in p.stderr, p.stderr
    assert "Dask dashboard" not in p.stderr and "on 2 workers" not in p.stderr
    assert "cells complete: 40/40" in p.stdout
    # the Prefect path (its temporary server): the flow's run decides the same, before any cluster starts
    p = subprocess.run([*cmd[:-1], str(tmp_path / "p.zarr")], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "execute-sweep" in p.stderr and "40 short cells" in p.stderr and "without Dask" in p.stderr, p.stderr
    assert "cells complete: 40/40" in p.stdout
    assert_stores_bitwise_equal(tmp_path / "s.zarr", tmp_path / "p.zarr")
    # a cluster file is not started for such a spec, but a bad one is refused before any work
    p = subprocess.run([*cmd[:-1], str(tmp_path / "c.zarr"), "--no-prefect", "--cluster", str(tmp_path / "none.yaml")],
                       capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert p.returncode == 2 and "none.yaml" in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert not (tmp_path / "c.zarr").exists()
    bad = dict(env, **{IN_DRIVER_ENV: "later"})
    p = subprocess.run(cmd, capture_output=True, text=True, env=bad, timeout=300)
    assert p.returncode == 2 and IN_DRIVER_ENV in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]


def test_validate_says_a_small_run_runs_in_this_process(rule_on):
    from geosweep.sweeps.estimate import estimate

    est = estimate(SHORT, 2, prefect=False)
    assert est.in_driver and est.workers == 1
    assert any("in this process (a few short cells: no Dask)" in line for line in est.lines())
    est = estimate(LONG, 2, prefect=False)
    assert not est.in_driver and est.workers == 2
    assert any("on 2 worker(s)" in line for line in est.lines())
