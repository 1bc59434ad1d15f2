"""geosweep on a real Slurm started by the test suite (:mod:`tests.slurm_cluster`: ``slurm-wlm`` 22.05,
``munge``, one node on loopback): jobs submitted through ``--cluster``, workers connect, the sweep equals
``--serial`` bitwise; ``scancel`` of every job mid-run on an adaptive cluster (new jobs finish it); fixed
jobs with a worker lifetime refused in one line; from 0 jobs a job per long cell; a long cell outliving
hard walltimes; the jobs of a non-root user; the ``pbs`` kind's job scripts through Slurm's Torque
compatibility commands (``slurm-wlm-torque``); a real PBS when one runs (none is packaged here).

Each run is waited on with a limit (:func:`_finish`): a stall fails with what ``squeue`` says."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from tests.proc_util import seeded_numba_cache
from tests.slurm_cluster import install_torque_wrappers, is_torque_wrapper, slurm, slurm_user  # noqa: F401
from tests.test_cli_output import LONG, N_LONG, _cells_done, _cmd
from tests.test_cluster_interrupts import _no_jobs_left, slurm_cluster_file

#: values that differ between runs of the same cells (timing), left out of the bitwise comparison
TIMING = ("wall_time", "completed_at", "steps_per_second")


def _run(tmp_path, args, env, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([*_cmd(), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def _start(tmp_path, args, env) -> subprocess.Popen:
    return subprocess.Popen(
        [*_cmd(), *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc: subprocess.Popen, slurm, seconds: float, what: str) -> tuple[str, str]:  # noqa: F811
    """``proc``'s (stdout, stderr) once it exits. A run still going after ``seconds`` is interrupted and
    the test fails with what Slurm's queue says and the run's last lines: a stall fails in minutes."""
    try:
        return proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        queue = slurm.squeue()
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        slurm.cancel_all()
        pytest.fail(f"{what} still running after {seconds:.0f} s; squeue: {queue}; its stderr: {err[-2500:]}")


def _same_values(got, want) -> None:
    for name in want.data_vars:
        if name not in TIMING:
            np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)


@pytest.fixture(scope="module")
def long_serial(tmp_path_factory):
    """LONG run with ``--serial`` once for the module's bitwise comparisons."""
    from geosweep.flows.cli import main

    d = tmp_path_factory.mktemp("long-serial")
    (d / "long.toml").write_text(LONG)
    assert main(["run", str(d / "long.toml"), "--store", str(d / "serial.zarr"), "--serial", "-q"]) == 0
    return d / "serial.zarr"


def _same_as_serial(store, serial) -> None:
    from geosweep.sweeps.store import open_results

    got, want = open_results(str(store)), open_results(str(serial))
    assert int(got.done.sum()) == got.done.size == N_LONG
    _same_values(got, want)


def test_a_sweep_through_slurm_jobs_equals_serial_bitwise(tmp_path, slurm, long_serial):  # noqa: F811
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
    _same_as_serial(tmp_path / "l.zarr", long_serial)


def test_scancel_of_every_job_mid_run_on_an_adaptive_cluster_is_finished_by_new_jobs(tmp_path, slurm, long_serial):  # noqa: F811
    """Every job cancelled once a cell is done: adaptive scaling submits new jobs, the cells rerun from
    their checkpoints, and the store equals ``--serial`` bitwise."""
    (tmp_path / "long.toml").write_text(LONG)
    env = {**slurm.env()}
    env.pop("PREFECT_API_URL", None)
    cluster = slurm_cluster_file(tmp_path, slurm, jobs=0, adapt_max_jobs=2)
    proc = _start(tmp_path, ["run", "long.toml", "--store", "l.zarr", "--no-prefect", "--cluster", cluster], env)
    try:
        t0 = time.monotonic()
        while _cells_done(tmp_path / "l.zarr") < 1:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() - t0 < 300, f"no cell done after 300 s; squeue: {slurm.squeue()}"
            time.sleep(0.2)
        cancelled = [j["id"] for j in slurm.squeue() if j["state"] == "RUNNING"]
        assert cancelled
        subprocess.run(["scancel", *cancelled], env=env, check=True)
        out, err = _finish(proc, slurm, 600, "the run after scancel")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert f"cells complete: {N_LONG}/{N_LONG}" in out
    assert _no_jobs_left(slurm) == []
    _same_as_serial(tmp_path / "l.zarr", long_serial)


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


#: two cells of ≈ 1.3 s each (LONG's first two): from 0 jobs their estimated costs ask for a job each
TWO = LONG.replace('name = "out-long"', 'name = "two"').replace(
    LONG[LONG.index("omega = [") :].strip(), "omega = [0.0, 0.2]"
)


def test_an_adaptive_slurm_cluster_gives_each_long_cell_a_job_from_zero_jobs(tmp_path, slurm):  # noqa: F811
    """From 0 jobs, two cells (each a slice of its own, ``--slice-seconds`` below either's estimated cost)
    have two jobs submitted before the first runs; before, Dask asked for one job (the sweep's model tasks)
    and the cells ran one after the other."""
    (tmp_path / "two.toml").write_text(TWO)
    env = {**slurm.env()}
    env.pop("PREFECT_API_URL", None)
    cluster = slurm_cluster_file(tmp_path, slurm, jobs=0, adapt_max_jobs=4)
    args = ["run", "two.toml", "--store", "t.zarr", "--no-prefect", "--cluster", cluster, "--slice-seconds", "0.01"]
    proc = subprocess.Popen(
        [*_cmd(), *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen: set[str] = set()
    try:
        t0 = time.monotonic()
        while True:
            jobs = slurm.squeue()
            seen |= {j["id"] for j in jobs}
            if any(j["state"] == "RUNNING" for j in jobs):
                break
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() - t0 < 300, jobs
            time.sleep(0.1)
        submitted_before_the_first_ran = len(seen)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert submitted_before_the_first_ran == 2, (seen, err[-2000:])
    assert "cells complete: 2/2" in out
    assert _no_jobs_left(slurm) == []


def test_the_jobs_of_a_non_root_user_run_as_that_user(slurm, slurm_user):  # noqa: F811
    """The driver runs as a non-root user (:func:`tests.slurm_cluster.slurm_user`), its jobs run as that
    user (their logs and the store are the user's) and the sweep completes."""
    import sys

    work = slurm_user.work
    (work / "two.toml").write_text(TWO)
    cluster = slurm_cluster_file(work, slurm, jobs=1, numba_cache_dir=seeded_numba_cache(work / "numba"))
    subprocess.run(["chown", "-R", f"{slurm_user.uid}", str(work)], check=False)  # written by this process
    env = slurm_user.env(slurm)
    env.pop("PREFECT_API_URL", None)
    cmd = [sys.executable, "-m", "geosweep.flows.cli", "run", "two.toml", "--store", "t.zarr", "--no-prefect"]
    p = subprocess.run(
        slurm_user.command([*cmd, "--cluster", cluster]), cwd=work, env=env, capture_output=True, text=True, timeout=900
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "cells complete: 2/2" in p.stdout
    logs = sorted((work / "joblogs").glob("*.err"))
    assert logs and all(log.stat().st_uid == slurm_user.uid for log in logs), logs
    assert (work / "t.zarr" / "zarr.json").stat().st_uid == slurm_user.uid
    assert _no_jobs_left(slurm) == []


#: one cell of lj_sphere's rk4, T set by :func:`_walltime_spec`; a checkpoint every ≈ 1/60 of the cell
WALLTIME = """
name = "walltime"
system = "lj_sphere"
integrators = ["rk4"]
h = [0.0025]
T = {T}
dt_out = 1.0
checkpoint_every = {every}
[params]
omega = [0.0]
"""
#: Slurm ends a job of a one-minute walltime 60–90 s after its start (slurmctld checks time limits every
#: 30 s); a job started after a kill starts just after such a check, so it lives ≈ 90 s. A cell of this many
#: seconds of this machine's work outlasts one job's work (two jobs' work) whatever the phase of the checks
WALLTIME_CELL_SECONDS = {1: 120.0, 2: 220.0}


def _walltime_spec(tmp_path, seconds: float) -> str:
    """WALLTIME with a T of ``seconds`` of work at this machine's speed, measured by a short serial
    run of the same cell (machines differ by more than the margin of a job's work)."""
    from geosweep.flows.cli import main
    from geosweep.sweeps.store import open_results

    (tmp_path / "cal.toml").write_text(WALLTIME.format(T=10.0, every=5.0))
    cal = str(tmp_path / "cal.zarr")
    assert main(["run", str(tmp_path / "cal.toml"), "--store", cal, "--serial", "--threads-per-cell", "1", "-q"]) == 0
    ds = open_results(cal)
    rate = float(ds.steps.sum() / ds.wall_time.sum())  # steps per second
    T = min(10 * math.ceil(seconds * rate * 0.0025 / 10), 5000)
    return WALLTIME.format(T=float(T), every=float(max(1, round(T / 60))))


@pytest.mark.slow  # 4 min here, and 2 min of the other core: CI runs the short versions named below
@pytest.mark.parametrize("walltimes", [1, 2])
def test_a_long_cell_outlives_hard_walltimes_of_its_jobs(tmp_path, slurm, walltimes):  # noqa: F811
    """Jobs of a one-minute walltime (Slurm kills them: SIGTERM, then SIGKILL) run a cell longer than one
    (``walltimes`` = 1, 2–3 minutes) or two of them (2, ~5 minutes). The same checks, short, in CI: a
    job killed mid-run and its cells finished bitwise by new jobs
    (:func:`test_scancel_of_every_job_mid_run_on_an_adaptive_cluster_is_finished_by_new_jobs`), and a
    cell outliving several workers, resubmitted each time its checkpoint advanced
    (tests/test_resubmit.py). Dask gives the slice up at each
    death (``allowed-failures`` 0 in the driver, so one walltime is enough), the driver resubmits it since
    its checkpoint advanced, new jobs continue it (``walltimes`` times at least), and the store equals
    ``--serial`` bitwise (run meanwhile on the other core). Before: ``KilledWorker``, exit 1."""
    (tmp_path / "long.toml").write_text(_walltime_spec(tmp_path, WALLTIME_CELL_SECONDS[walltimes]))
    env = {**slurm.env(), "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    env.pop("PREFECT_API_URL", None)
    cluster = slurm_cluster_file(tmp_path, slurm, jobs=0, adapt_max_jobs=1, walltime="00:01:00")
    proc = _start(tmp_path, ["run", "long.toml", "--store", "l.zarr", "--no-prefect", "--cluster", cluster], env)
    serial = _start(
        tmp_path, ["run", "long.toml", "--store", "serial.zarr", "--serial", "--threads-per-cell", "1"], None
    )
    try:
        out, err = _finish(proc, slurm, 900, "the run on one-minute jobs")
        s_out, s_err = _finish(serial, slurm, 300, "the --serial run")
    finally:
        for p in (proc, serial):
            if p.poll() is None:
                p.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "DUE TO TIME LIMIT" in "".join(f.read_text() for f in (tmp_path / "joblogs").glob("*.err"))
    for attempt in range(2, 2 + walltimes):  # that many walltimes at least, each survived
        assert re.search(rf"checkpoints advanced \(.*\): resubmitted \(attempt {attempt}\)", err), err[-3000:]
    assert "cells complete: 1/1" in out
    assert _no_jobs_left(slurm) == []
    assert serial.returncode == 0, s_err[-3000:]
    from geosweep.sweeps.store import open_results

    _same_values(open_results(str(tmp_path / "l.zarr")), open_results(str(tmp_path / "serial.zarr")))


def _pbs_unavailable() -> str | None:
    """Why no real PBS runs here, or None when ``qsub``/``pbsnodes`` are installed and answer."""
    import shutil

    if is_torque_wrapper("qsub"):
        return "qsub is Slurm's Torque wrapper (slurm-wlm-torque), not a PBS: see the test on those wrappers"
    if shutil.which("qsub") is None or shutil.which("pbsnodes") is None:
        policy = subprocess.run(
            ["apt-cache", "policy", "openpbs-server", "torque-server"], capture_output=True, text=True, check=False
        ).stdout
        packaged = "Candidate:" in policy and "Candidate: (none)" not in policy
        return (
            "no PBS on this machine (qsub/pbsnodes missing)"
            + ("" if packaged else "; neither OpenPBS nor Torque is in this machine's apt archive (Debian ships none)")
            + " — the pbs kind is covered by its job script (tests/test_deploy.py) and by running it"
            + " through Slurm's Torque wrappers (test_pbs_job_scripts_run_through_slurms_torque_commands)"
        )
    p = subprocess.run(["pbsnodes", "-a"], capture_output=True, text=True, check=False, timeout=30)
    return None if p.returncode == 0 else f"pbsnodes -a fails ({p.stderr.strip()[-200:]}): no PBS server answers"


def test_a_sweep_through_pbs_jobs(tmp_path):
    """The Slurm sweep on a real PBS, when one is installed and running (the suite does not start one)."""
    if reason := _pbs_unavailable():
        pytest.skip(reason)
    (tmp_path / "two.toml").write_text(TWO)
    (tmp_path / "pbs.toml").write_text(
        f'kind = "pbs"\ncores = 1\nmemory = "1GiB"\nwalltime = "00:20:00"\njobs = 1\n'
        f'log_directory = "{tmp_path / "joblogs"}"\ndashboard_address = ":0"\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    p = _run(tmp_path, ["run", "two.toml", "--store", "t.zarr", "--no-prefect", "--cluster", "pbs.toml"], env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "cells complete: 2/2" in p.stdout


def test_pbs_job_scripts_run_through_slurms_torque_commands(tmp_path, slurm):  # noqa: F811
    """No PBS is packaged for this machine, but Slurm's Torque compatibility commands are: the ``pbs`` kind's
    job script (dask-jobqueue's ``#PBS`` directives) goes through ``qsub``, its worker connects, the sweep
    completes and ``qdel`` leaves no job. This checks geosweep's PBS path up to the ``qsub``/``qdel``
    interface; PBS's own scheduling is the Slurm behind the wrappers."""
    if reason := install_torque_wrappers():
        pytest.skip(reason)
    (tmp_path / "two.toml").write_text(TWO)
    (tmp_path / "pbs.toml").write_text(
        f'kind = "pbs"\ncores = 1\nmemory = "1GiB"\nwalltime = "00:20:00"\njobs = 1\n'
        f'numba_cache_dir = "{os.environ.get("NUMBA_CACHE_DIR", "$HOME/.cache/geosweep/numba")}"\n'
        f'log_directory = "{tmp_path / "joblogs"}"\ndashboard_address = ":0"\n'
    )
    env = {**slurm.env()}
    env.pop("PREFECT_API_URL", None)
    proc = _start(tmp_path, ["run", "two.toml", "--store", "t.zarr", "--no-prefect", "--cluster", "pbs.toml"], env)
    out, err = _finish(proc, slurm, 300, "the run through qsub")
    assert proc.returncode == 0, err[-3000:]
    assert "cells complete: 2/2" in out
    assert sorted(tmp_path.glob("*.sh.e*")), "no job log named as qsub names it (SCRIPT.eJOBID)"
    assert _no_jobs_left(slurm) == []
