"""Threads inside one cell (issue 27): the (S²)ⁿ potentials compiled with ``threaded=True`` give
bitwise the same trajectories, summaries and stores on 1, 2 and 3 threads (built-in Lennard-Jones
and a user potential), a checkpointed cell resumed on 2 threads equals an uninterrupted run on one,
and the run option reaches the cells (run API, CLI, Dask worker threads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.s2.integrate import _integrate
from geosweep.kernels.s2.model import threaded_potential
from geosweep.kernels.s2.stepper import initial_state, make_stepper
from geosweep.kernels.systems.lj_sphere import lj_potential, lj_sphere
from geosweep.sweeps.engine import cell_threads, run_sweep
from tests.sweep_util import assert_stores_bitwise_equal

ROOT = Path(__file__).resolve().parents[1]

# Runs in a fresh process with NUMBA_NUM_THREADS=3 (this machine may have fewer cores): every
# case on 1, 2 and 3 threads, each compared bit for bit with the 1-thread run.
_THREADS_SCRIPT = r"""
import json, sys
import numpy as np
from geosweep.kernels.s2.integrate import _integrate
from geosweep.kernels.s2.model import threaded_potential
from geosweep.kernels.s2.stepper import make_stepper
from geosweep.kernels.systems.lj_sphere import lj_sphere
from tests.custom_threaded import charged_sphere

def arrays(tr):
    out = [tr.energy, tr.unit_error, tr.tangency_error, tr.momentum, tr.q, tr.w, tr.q_snap, tr.w_snap]
    out.append(np.array([tr.summary[k] for k in sorted(tr.summary)]))
    out.append(np.array([tr.info[k] for k in sorted(tr.info)], dtype=float))
    return out

cases = [("lj42", lj_sphere(level=1), "explicit_vi", 0.005, 400),
         ("lj162", lj_sphere(level=2), "explicit_vi", 0.005, 300),
         ("lj162_rk4", lj_sphere(level=2), "rk4", 0.002, 100),
         ("coulomb162", charged_sphere(level=2), "explicit_vi", 0.01, 300)]
report = {}
for name, system, method, h, n in cases:
    ref = arrays(_integrate(system, method, h, n, 10, snapshot_stride=50))
    row = {"summary": _integrate(system, method, h, n, 10).summary}
    for k in (2, 3):
        sp = make_stepper(system, method, threads=k)
        tr = _integrate(system, method, h, n, 10, snapshot_stride=50, threads=k)
        same = all(np.array_equal(a.view(np.int64), b.view(np.int64)) for a, b in zip(arrays(tr), ref))
        row[k] = {"threads": sp.threads, "threaded_cb": sp.cb is threaded_potential(system.potential), "bitwise": same}
    report[name] = row
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def thread_report() -> dict:
    env = {**os.environ, "NUMBA_NUM_THREADS": "3", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["lj42", "lj162", "lj162_rk4", "coulomb162"])
@pytest.mark.parametrize("k", ["2", "3"])
def test_trajectories_bitwise_on_any_thread_count(thread_report, case, k):
    row = thread_report[case][k]
    assert row["threads"] == int(k) and row["threaded_cb"]  # the threaded copy really ran, on k threads
    assert row["bitwise"]


def test_energy_behaviour_of_the_threaded_user_potential():
    """The user potential (Coulomb charges on the sphere) on 2 threads: explicit VI energy error
    of second order in h and without drift, J conserved and |q_i| = 1 to round-off."""
    from tests.custom_threaded import charged_sphere

    s = charged_sphere(level=2)
    runs = [_integrate(s, "explicit_vi", h, n, n // 100, threads=2) for h, n in ((0.02, 500), (0.01, 1000))]
    assert [r.core.stepper.threads for r in runs] == [2, 2]
    e1, e2 = (r.summary["max_abs_dE"] for r in runs)
    assert 3.5 < e1 / e2 < 4.5  # order 2
    err = np.abs(runs[1].energy_error)
    assert err[len(err) // 2 :].max() < 1.5 * err[: len(err) // 2].max()  # bounded, no drift
    assert runs[1].summary["max_momentum_error"] < 1e-12
    assert runs[1].summary["max_unit_error"] < 1e-14


def test_lj_potential_threaded_copy_matches_the_scalar_formula():
    """The blocks of rows give the plain scalar double loop's values bit for bit (spec sphere §3.1)."""
    s = lj_sphere(level=2)
    rng = np.random.default_rng(3)
    q = s.q0 + 0.02 * rng.standard_normal(s.q0.shape)
    q = np.ascontiguousarray(q / np.linalg.norm(q, axis=1)[:, None])
    eps, sig = s.params
    V = 0.0
    g = np.zeros_like(q)
    for i in range(len(q)):
        vi, gi = 0.0, np.zeros(3)
        for j in range(len(q)):
            if j != i:
                d = q[i] - q[j]
                s2 = sig * sig / (d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
                s6 = s2 * s2 * s2
                e = s6 * s6 - s6
                c = (-24.0 * eps / (sig * sig)) * s2 * (s6 * s6 + e)
                vi += e
                gi[0] += c * d[0]
                gi[1] += c * d[1]
                gi[2] += c * d[2]
        g[i] = gi
        V += vi
    V = 2.0 * eps * V
    for pot in (lj_potential, threaded_potential(lj_potential)):
        gp = np.empty_like(q)
        assert pot(q, s.params, gp) == V
        assert np.array_equal(gp, g)


WARMED = """
import json
from geosweep.kernels.registry import FAMILIES, load_builtins
load_builtins()
FAMILIES["s2"].warmup()
from geosweep.kernels.s2 import model
print(json.dumps({
    "threaded": [p.py_func.__name__ for _, p in model._THREADED.values()],
    "uncompiled": [d.py_func.__name__ for d in model._LAZY + [p for _, p in model._THREADED.values()]
                   if not d.signatures],
}))
"""


def test_the_family_warmup_compiles_the_threaded_copies():
    """``warmup()`` (deploy/Dockerfile's build step, the test harness's cache warming) leaves no
    potential to compile at run time, threaded copies included: a run compiles them for any
    thread count, and many workers compiling one function into the cache at once can race."""
    out = subprocess.run([sys.executable, "-c", WARMED], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "_lj_potential_threaded" in seen["threaded"]
    assert seen["uncompiled"] == []


def test_checkpoint_resume_on_two_threads_equals_one_thread_run():
    s = lj_sphere(level=2)
    ref = _integrate(s, "explicit_vi", 0.005, 600, 10)
    q, w = s.initial_state()
    kw = {"T": 3.0, "dt_out": 0.05, "h": 0.005, "n_steps": 600}
    traj = Trajectory(make_stepper(s, "explicit_vi", threads=2), initial_state(s, q, w), **kw)
    traj.advance(237)
    saved = traj.checkpoint()
    resumed = Trajectory.restore(make_stepper(s, "explicit_vi", threads=2), saved)
    assert resumed.stepper.threads == 2
    resumed.advance()
    assert np.array_equal(resumed.S, ref.core.S)
    assert np.array_equal(resumed.out, ref.core.out, equal_nan=True)
    assert np.array_equal(resumed.acc, ref.core.acc, equal_nan=True)


def test_cell_threads_rule():
    assert cell_threads(None, 1, 2) == 2  # fewer runnable cells than cores: the cores are shared out
    assert cell_threads(None, 3, 16) == 5
    assert cell_threads(None, 2, 2) == 1  # as many cells as cores: one thread each (as before)
    assert cell_threads(None, 40, 8) == 1
    assert cell_threads(3, 40, 8) == 3  # an explicit count wins
    assert cell_threads(1, 1, 64) == 1


def _spec(name: str, T: float = 20.0, checkpoint_every: float | None = None) -> dict:
    spec = {"name": name, "system": "lj_sphere", "integrators": ["explicit_vi"], "h": [0.005], "T": T,
            "dt_out": 1.0, "params": {"level": 2}}  # fmt: skip
    if checkpoint_every is not None:
        spec["checkpoint_every"] = checkpoint_every
    return spec


@pytest.fixture(scope="module")
def one_thread_store(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("t1") / "one.zarr"
    assert run_sweep(_spec("threads"), store, serial=True, threads_per_cell=1).complete
    return store


class _Stop(Exception):
    pass


def test_interrupted_two_thread_sweep_resumes_bitwise(tmp_path, one_thread_store):
    """A sweep on 2 threads per cell stopped mid-cell, resumed from its checkpoint on 2 threads:
    the store equals the uninterrupted 1-thread run's, bit for bit."""
    store = tmp_path / "two.zarr"
    spec = _spec("threads", checkpoint_every=2.0)
    logs: list[str] = []

    def stop(p):
        if p.steps_total and p.steps_done >= 0.4 * p.steps_total:
            raise _Stop

    with pytest.raises(_Stop):
        run_sweep(spec, store, serial=True, threads_per_cell=2, progress=stop)
    res = run_sweep(spec, store, serial=True, log=logs.append)  # automatic: 1 cell on 2 cores
    assert res.complete and res.resumed == 1
    if (os.cpu_count() or 1) >= 2:
        assert any("threads per cell" in line for line in logs), logs
    assert_stores_bitwise_equal(str(one_thread_store), str(store))


def test_dask_worker_threads_and_cli_option(tmp_path, one_thread_store):
    """2 threads per cell inside a Dask worker thread (real LocalCluster), and ``--threads-per-cell``."""
    store = tmp_path / "dask.zarr"
    assert run_sweep(_spec("threads"), store, n_workers=1, threads_per_cell=2).complete
    assert_stores_bitwise_equal(str(one_thread_store), str(store))
    spec_path = tmp_path / "threads.toml"
    spec_path.write_text('name = "threads"\nsystem = "lj_sphere"\nintegrators = ["explicit_vi"]\nh = [0.005]\n'
                         "T = 20.0\ndt_out = 1.0\n[params]\nlevel = 2\n")  # fmt: skip
    cli_store = tmp_path / "cli.zarr"
    cmd = [sys.executable, "-m", "geosweep.flows.cli", "run", str(spec_path), "--store", str(cli_store), "--serial",
           "--threads-per-cell", "2"]  # fmt: skip
    out = subprocess.run(cmd, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "up to 2 threads per cell" in out.stderr + out.stdout
    assert_stores_bitwise_equal(str(one_thread_store), str(cli_store))
    bad = subprocess.run([*cmd[:-2], "--threads-per-cell", "0"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "threads-per-cell" in bad.stderr
