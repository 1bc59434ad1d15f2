"""geosweep on a real Slurm started by the test suite (:mod:`tests.slurm_cluster`: ``slurm-wlm`` 22.05,
``munge``, one node on loopback): jobs submitted through ``--cluster``, workers connect, the sweep equals
``--serial`` bitwise; ``scancel`` of every job mid-run on an adaptive cluster (new jobs finish it); fixed
jobs with a worker lifetime refused in one line."""

from __future__ import annotations

import re
import subprocess
import time

import numpy as np
import pytest

from tests.slurm_cluster import slurm  # noqa: F401 - the fixture
from tests.test_cli_output import LONG, N_LONG, _cells_done, _cmd
from tests.test_cluster_interrupts import _no_jobs_left, slurm_cluster_file

#: values that differ between runs of the same cells (timing), left out of the bitwise comparison
TIMING = ("wall_time", "completed_at", "steps_per_second")


def _run(tmp_path, args, env, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([*_cmd(), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def _same_as_serial(tmp_path, store) -> None:
    from geosweep.sweeps.store import open_results

    p = _run(tmp_path, ["run", "long.toml", "--store", "serial.zarr", "--serial", "-q"], None)
    assert p.returncode == 0, p.stderr[-3000:]
    got, want = open_results(str(store)), open_results(str(tmp_path / "serial.zarr"))
    assert int(got.done.sum()) == got.done.size == N_LONG
    for name in want.data_vars:
        if name not in TIMING:
            np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)


def test_a_sweep_through_slurm_jobs_equals_serial_bitwise(tmp_path, slurm):  # noqa: F811
    (tmp_path / "long.toml").write_text(LONG)
    env = {**slurm.env()}
    env.pop("PREFECT_API_URL", None)
    args = ["run", "long.toml", "--store", "l.zarr", "--no-prefect", "--cluster", slurm_cluster_file(tmp_path, slurm)]
    p = _run(tmp_path, args, env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"cells complete: {N_LONG}/{N_LONG}" in p.stdout
    assert "waiting for a first Dask worker" in p.stderr or "on 2 workers" in p.stderr, p.stderr[-3000:]
    assert sorted((tmp_path / "joblogs").glob("*.err")), "no job logs"  # the jobs really ran through sbatch
    assert _no_jobs_left(slurm) == []
    _same_as_serial(tmp_path, tmp_path / "l.zarr")


@pytest.mark.slow  # ≈ 1.5 min: CI keeps the Slurm tests to a few minutes
def test_scancel_of_every_job_mid_run_on_an_adaptive_cluster_is_finished_by_new_jobs(tmp_path, slurm):  # noqa: F811
    """Every job cancelled once a cell is done: adaptive scaling submits new jobs, the cells rerun from
    their checkpoints, and the store equals ``--serial`` bitwise."""
    (tmp_path / "long.toml").write_text(LONG)
    env = {**slurm.env()}
    env.pop("PREFECT_API_URL", None)
    cluster = slurm_cluster_file(tmp_path, slurm, jobs=0, adapt_max_jobs=2)
    args = ["run", "long.toml", "--store", "l.zarr", "--no-prefect", "--cluster", cluster]
    proc = subprocess.Popen(
        [*_cmd(), *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        t0 = time.monotonic()
        while _cells_done(tmp_path / "l.zarr") < 1:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() - t0 < 300
            time.sleep(0.2)
        cancelled = [j["id"] for j in slurm.squeue() if j["state"] == "RUNNING"]
        assert cancelled
        subprocess.run(["scancel", *cancelled], env=env, check=True)
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert f"cells complete: {N_LONG}/{N_LONG}" in out
    assert _no_jobs_left(slurm) == []
    _same_as_serial(tmp_path, tmp_path / "l.zarr")


def test_fixed_jobs_with_a_worker_lifetime_are_refused_in_one_line(tmp_path):
    """Retired workers of fixed jobs are never replaced (the shipped example stalled at 32 %): refused before
    anything starts, exit 2, one line; the adaptive form of the same file is accepted."""
    (tmp_path / "long.toml").write_text(LONG)
    (tmp_path / "c.toml").write_text('kind = "slurm"\njobs = 2\nworker_lifetime = "90s"\n')
    p = _run(tmp_path, ["run", "long.toml", "--store", "l.zarr", "--no-prefect", "--cluster", "c.toml"], None, 120)
    assert p.returncode == 2, p.stderr[-3000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "worker_lifetime with a fixed number of jobs (jobs = 2) stalls the run" in lines[0]
    assert "adapt_max_jobs" in lines[0] and not (tmp_path / "l.zarr").exists()
    from geosweep.deploy.clusters import ClusterConfig

    ClusterConfig.model_validate({"kind": "slurm", "adapt_max_jobs": 2, "worker_lifetime": "90s"})


@pytest.mark.parametrize("case", ["pending", "ended"])
def test_waiting_for_a_first_worker_ends_with_what_slurm_says(tmp_path, slurm, case):  # noqa: F811
    """A job that cannot start yet (``--begin`` an hour away: PENDING, reason BeginTime) stops the run after
    ``GEOSWEEP_FIRST_WORKER_TIMEOUT``; a job whose worker cannot start (no such python) stops it once no job
    is left. One line with the job's state, reason and log path, exit 1; no job left behind (before: "waiting
    for a first Dask worker" forever)."""
    (tmp_path / "long.toml").write_text(LONG)
    env = {**slurm.env(), "GEOSWEEP_FIRST_WORKER_TIMEOUT": "20" if case == "pending" else "240"}
    env.pop("PREFECT_API_URL", None)
    extra = {"job_extra_directives": ["--begin=now+3600"]} if case == "pending" else {"python": "python3-missing"}
    cluster = slurm_cluster_file(tmp_path, slurm, jobs=1, **extra)
    p = _run(tmp_path, ["run", "long.toml", "--store", "l.zarr", "--no-prefect", "--cluster", cluster], env, 300)
    assert p.returncode == 1, p.stderr[-3000:]
    last = p.stderr.strip().splitlines()[-1]
    logs = tmp_path / "joblogs"
    if case == "pending":
        assert re.search(r"no Dask worker connected within 20 s .*: job \d+ PENDING \(BeginTime\), log ", last), last
    else:
        assert re.search(r"no job of the cluster is left: job \d+ ENDED, log ", last), last
    assert f"{logs}/geosweep-" in last and "Traceback" not in p.stderr
    assert _no_jobs_left(slurm) == []
