"""One writer per store: a second run is refused while the first holds the lease; a stale
lease (its run was killed) is taken over (real CLI subprocesses, real zarr stores)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.lease import Lease, StoreBusyError
from geosweep.sweeps.store import StoreRef

SPEC = """
name = "lease"
system = "lj_sphere"
integrators = ["explicit_vi"]
h = [0.005]
T = 600.0
dt_out = 1.0
checkpoint_every = 50.0
[params]
level = 2
omega = [3.25, 2.0]
"""


def _cli(spec, store):
    return [sys.executable, "-m", "geosweep.flows.cli", "run", str(spec), "--store", str(store), "--serial"]


def test_second_run_is_refused_then_resumes(tmp_path):
    spec = tmp_path / "l.toml"
    spec.write_text(SPEC)
    store = tmp_path / "l.zarr"
    first = subprocess.Popen(_cli(spec, store), start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        lease = tmp_path / "l.zarr.lease"
        deadline = time.time() + 60
        while not lease.exists() and time.time() < deadline:
            time.sleep(0.01)
        second = subprocess.run(_cli(spec, store), capture_output=True, text=True, timeout=120)
        assert second.returncode == 3, second.stderr
        assert "being written by another run" in second.stderr and "Traceback" not in second.stderr
        assert first.wait(timeout=300) == 0
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert not (tmp_path / "l.zarr.lease").exists()  # released
    again = subprocess.run(_cli(spec, store), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr


def test_stale_lease_is_taken_over(tmp_path):
    spec = {"name": "st", "system": "spring_pendula", "integrators": ["explicit_vi"], "h": [0.01], "T": 0.2,
            "dt_out": 0.1}  # fmt: skip
    store = tmp_path / "s.zarr"
    (tmp_path / "s.zarr.lease").write_text(json.dumps({"owner": "gone:1:x", "heartbeat": time.time() - 600}))
    assert run_sweep(spec, store, serial=True).complete
    fresh = Lease(StoreRef.of(store)).acquire()
    try:
        try:
            run_sweep(spec, store, serial=True)
        except StoreBusyError as e:
            assert fresh.owner in str(e)
        else:
            raise AssertionError("a fresh lease must refuse a second writer")
    finally:
        fresh.release()


def test_a_busy_store_on_the_prefect_path_is_one_line_without_prefects_traceback(tmp_path):
    """Another run holds the store's lease and this run goes through the Prefect flow (its temporary
    server): exit 3 and the one line, last; no Prefect record of the failure or traceback before it
    (before: the task's and flow's logged StoreBusyError tracebacks), no error after it."""
    spec = tmp_path / "s.toml"
    spec.write_text('name = "busy"\nsystem = "spring_pendula"\nintegrators = ["rk4"]\nh = [0.01]\nT = 0.2\n')
    with open(spec, "a") as f:
        f.write("dt_out = 0.1\n")
    store = tmp_path / "s.zarr"
    assert run_sweep(str(spec), store, serial=True).complete
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    cmd = [sys.executable, "-m", "geosweep.flows.cli", "run", str(spec), "--store", str(store)]
    with Lease(StoreRef.of(store)):
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 3, p.stderr[-3000:]
    assert lines[-1].startswith(f"geosweep: store {store} is being written by another run"), p.stderr[-3000:]
    before = "\n".join(lines[:-1])
    assert "Traceback" not in p.stderr and "StoreBusyError" not in before and "Failed" not in before, p.stderr
