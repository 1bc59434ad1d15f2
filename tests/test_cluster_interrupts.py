"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it) of ``geosweep run`` on a cluster:
``--cluster`` with a real Slurm (importing dask_jobqueue used to replace geosweep's SIGINT handler with
``sys.exit()``: exit 0, or "Crash detected!" on the Prefect path), and ``--address`` with real ``dask
scheduler``/``dask worker`` processes. Every path: one line, exit 130, the batch jobs cancelled, the
run's tasks released on the scheduler, and a rerun resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.proc_util import wait_for_scheduler
from tests.slurm_cluster import slurm  # noqa: F401 - the fixture
from tests.test_cli_output import LONG, N_LONG, _cells_done, _cmd
from tests.test_signals import _free_port, _run_and_signal_group, _start

LINE = "geosweep: interrupted; rerun the same command to resume"


def slurm_cluster_file(tmp_path, slurm, jobs: int = 2, **extra) -> str:  # noqa: F811
    """A cluster file for the test Slurm: ``jobs`` one-core jobs of one worker each, the warm Numba cache."""
    lines = [
        'kind = "slurm"',
        f'queue = "{slurm.partition}"',
        "cores = 1",
        'memory = "1GiB"',
        'walltime = "00:20:00"',
        f"jobs = {jobs}",
        f'numba_cache_dir = "{os.environ.get("NUMBA_CACHE_DIR", "$HOME/.cache/geosweep/numba")}"',
        f'log_directory = "{tmp_path / "joblogs"}"',
        'dashboard_address = ":0"',
    ]
    lines = [line for line in lines if line.split(" = ")[0] not in extra]  # a key in extra replaces the default
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    path = tmp_path / "cluster.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _no_jobs_left(slurm, seconds: float = 60) -> list:  # noqa: F811
    t0 = time.monotonic()
    while (jobs := [j for j in slurm.squeue() if j["state"] not in ("COMPLETED", "CANCELLED")]) and (
        time.monotonic() - t0 < seconds
    ):
        time.sleep(0.5)
    return jobs


@pytest.mark.parametrize(
    "prefect", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["no-prefect", "prefect"]
)  # the Prefect path: slow (≈ 1 min more; CI keeps the Slurm tests to a few minutes)
def test_ctrl_c_on_a_slurm_cluster_is_one_line_exit_130_and_cancels_the_jobs(tmp_path, slurm, prefect):  # noqa: F811
    """Failed before the fix: exit 0 with no message (``--no-prefect``), "Crash detected!" and exit 0
    (Prefect). The rerun on the same cluster completes the store."""
    (tmp_path / "long.toml").write_text(LONG)
    env = {**slurm.env()}
    env.pop("PREFECT_API_URL", None)
    args = ["run", "long.toml", "--store", "l.zarr", "--cluster", slurm_cluster_file(tmp_path, slurm)]
    args += [] if prefect else ["--no-prefect"]
    code, out, _ = _run_and_signal_group(args, tmp_path, signal.SIGINT, env)
    assert code == 130, out[-3000:]
    assert out.strip().splitlines()[-1] == LINE, out[-3000:]
    assert "Traceback" not in out and "Crash detected" not in out, out[-3000:]
    assert _no_jobs_left(slurm) == []
    assert 1 <= _cells_done(tmp_path / "l.zarr") < N_LONG
    if prefect:
        return
    p = subprocess.run([*_cmd(), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"cells complete: {N_LONG}/{N_LONG}" in p.stdout
    assert _no_jobs_left(slurm) == []


def test_ctrl_c_on_an_address_cluster_is_one_line_exit_130_and_releases_the_runs_tasks(tmp_path):
    """``--address``: the driver alone gets the signal (scheduler and workers are other hosts' processes);
    one line, exit 130, and the scheduler holds none of the run's tasks afterwards."""
    from distributed import Client

    (tmp_path / "long.toml").write_text(LONG)
    address = f"tcp://127.0.0.1:{_free_port()}"
    env = {**os.environ}
    env.pop("PREFECT_API_URL", None)
    log = open(tmp_path / "cluster.log", "w")
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    procs = [
        _start(
            [*dask, "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1], "--dashboard-address", ":0"], env, log
        )
    ]
    wait_for_scheduler(address, procs[0])
    worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-dashboard", "--nthreads", "2"]
    procs.append(_start([*worker, "--resources", "geosweep-slice=1"], env, log))
    try:
        args = ["run", "long.toml", "--store", "l.zarr", "--address", address, "--no-prefect"]
        code, out, _ = _run_and_signal_group(args, tmp_path, signal.SIGINT, env)
        assert code == 130, out[-3000:]
        assert out.strip().splitlines()[-1] == LINE, out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        with Client(address, timeout=30) as client:
            t0 = time.monotonic()
            while (keys := client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.tasks))) and (
                time.monotonic() - t0 < 30
            ):
                time.sleep(0.5)
            assert keys == []
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
        log.close()
