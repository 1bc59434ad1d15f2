"""Orphaned tasks of a killed driver write nothing once a new run holds the lease (issue 23 item 5,
issue 26 item 2), with real processes: a ``dask scheduler`` and a geosweep ``dask worker`` on
loopback, ``geosweep run --address`` killed with SIGKILL while its slice runs on the worker, and a
rerun started at once.

The rerun takes the lease over (the killed driver's process is gone) and then stops itself (SIGSTOP,
right before it would touch the store), so while it holds the lease it writes nothing: every change to
the store in that window is a write of the killed run's orphaned task, which keeps integrating on the
worker (Dask cannot stop a running thread) and saves a checkpoint every segment, then its shard. The
window lasts until the worker no longer runs any task of the killed run. Then the rerun continues and
completes the store, which verifies and equals a ``--serial`` run bitwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from geosweep.sweeps.store import open_results
from tests.proc_util import dask_cluster as _cluster
from tests.proc_util import geosweep as _geosweep
from tests.proc_util import stopped as _stopped
from tests.proc_util import wait_until as _wait

#: two cells of ≈ 4·10⁶ and 2·10⁶ steps (seconds each on one core), a checkpoint every 2·10⁵ steps; each
#: cell is a store shard and a slice of its own, run one at a time on the worker: a slice writes its
#: checkpoints, then its shard itself
SPEC = """
name = "orphan"
system = "spring_pendula"
integrators = ["explicit_vi"]
h = [0.001, 0.002]
T = 4000.0
dt_out = 2.0
checkpoint_every = 200.0
"""
#: values that differ between runs of the same cells (timing), left out of the bitwise comparison
TIMING = ("wall_time", "completed_at", "steps_per_second")
#: the rerun: imported before it is needed (so it takes the lease at once once told), then stopped right
#: after taking the lease, before it creates or checks the store (it writes nothing while stopped)
RERUN = """
import os, signal, sys, time
import distributed, geosweep.flows.cli, geosweep.sweeps.engine as _e
_orig = _e.ensure_store
def _stop_then_create(*a, **k):
    os.kill(os.getpid(), signal.SIGSTOP)
    return _orig(*a, **k)
_e.ensure_store = _stop_then_create
while not os.path.exists(sys.argv[1]):
    time.sleep(0.005)
sys.exit(geosweep.flows.cli.main(sys.argv[2:]))
"""
LEASE_TIMEOUT = "3"


def _files(store: Path) -> dict[str, tuple[int, int, int]]:
    """Every file of a local store: (inode, mtime_ns, size) — an atomic replace changes the inode."""
    out = {}
    for d, _, names in os.walk(store):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(os.path.join(d, name))
                out[os.path.relpath(os.path.join(d, name), store)] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return out


def _tasks_of(pid: int):
    """A ``client.run`` function: the keys (and states) of the tasks a worker holds for the driver ``pid``."""

    def tasks(dask_worker) -> list[tuple[str, str]]:
        return [(str(k), ts.state) for k, ts in dask_worker.state.tasks.items() if f"-{pid}-" in str(k)]

    return tasks


def _cells_done(store: Path) -> int:
    import zarr

    return int(zarr.open_group(str(store), mode="r")["done"][...].sum())


def _lease_owner(lease: Path) -> str | None:
    try:
        return json.loads(lease.read_text())["owner"]
    except (OSError, ValueError, KeyError):
        return None


def test_orphaned_task_of_a_killed_driver_writes_nothing_once_a_rerun_holds_the_lease(tmp_path):
    """Before the fencing the orphaned slice wrote on after the takeover: its checkpoints, then its
    whole shard (cell values and ``done``)."""
    workers = 1
    from distributed import Client

    spec, store, reference = tmp_path / "s.toml", tmp_path / "s.zarr", tmp_path / "ref.zarr"
    # cells of ~4 and ~2 s: the first one's slice still runs when the test kills its driver (with
    # T = 4000, ~1.3 s after its first checkpoint, a busy CI machine once saw its shard done first)
    spec.write_text(SPEC.replace("T = 4000.0", "T = 12000.0"))
    lease = Path(f"{store}.lease")
    env = {**os.environ, "GEOSWEEP_LEASE_TIMEOUT": LEASE_TIMEOUT}
    env.pop("PREFECT_API_URL", None)
    run_args = ["run", str(spec), "--store", str(store), "--no-prefect"]
    with _cluster(tmp_path, env, workers) as (address, cluster_log), Client(address, timeout=60) as client:
        client.wait_for_workers(workers, timeout=120)
        go = tmp_path / "go"
        rerun = subprocess.Popen(
            [sys.executable, "-c", RERUN, str(go), *run_args, "--address", address], cwd=tmp_path, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        killed = subprocess.Popen(_geosweep(*run_args, "--address", address), cwd=tmp_path, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            # the killed run's slice integrates on the worker: its first checkpoint is in the store
            _wait(lambda: any((store / "_checkpoints").glob("*.npz")), "the first run's first checkpoint", killed)
            running = _tasks_of(killed.pid)
            _wait(lambda: any(any("-slice-" in k and s == "executing" for k, s in tasks)
                              for tasks in client.run(running).values()),
                  "a slice of the first run to run on the worker", killed)  # fmt: skip
            killed_owner = _lease_owner(lease)
            os.kill(killed.pid, signal.SIGKILL)
            killed.wait(30)
            go.touch()  # the rerun starts at once and takes the lease over
            _wait(lambda: _stopped(rerun.pid), "the rerun to take the lease and stop", rerun)
            owner = _lease_owner(lease)
            assert owner is not None and owner != killed_owner and owner.split(":")[1] == str(rerun.pid)
            held = _files(store)  # the store when the rerun holds the lease
            assert _cells_done(store) == 0  # the orphaned slices had work (and their writes) left
            # the orphaned task runs on until its slice ends (it wrote on) or its next write is refused
            orphans = _tasks_of(killed.pid)
            _wait(lambda: not any(client.run(orphans).values()), "the killed run's tasks to end on the worker")
            after = _files(store)
            changed = sorted(k for k in held.keys() | after.keys() if held.get(k) != after.get(k))
            assert not changed, f"the killed run's orphaned task wrote after the takeover: {changed}"
            assert _lease_owner(lease) == owner
            os.kill(rerun.pid, signal.SIGCONT)
            out, err = rerun.communicate(timeout=300)
        finally:
            for p in (killed, rerun):
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p.pid, signal.SIGCONT)
                    p.kill()
                    p.wait(30)
    assert rerun.returncode == 0, err[-3000:]
    assert "resuming" in err and "Traceback" not in err, err[-3000:]
    assert "Traceback" not in cluster_log.read_text(), cluster_log.read_text()[-3000:]
    assert not lease.exists()
    check = subprocess.run(_geosweep("verify", str(store)), capture_output=True, text=True, timeout=120, env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    serial = subprocess.run(_geosweep("run", str(spec), "--store", str(reference), "--serial"), cwd=tmp_path,
                            capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert serial.returncode == 0, serial.stderr[-3000:]
    got, want = open_results(store), open_results(reference)
    assert int(got.done.sum()) == got.done.size
    for name in want.data_vars:
        if name not in TIMING:
            np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-x", "-q"]))


def _s3_objects(s3, bucket: str) -> dict[str, tuple[str, str]]:
    """Every object of ``bucket``: key → (ETag, LastModified), listed afresh (no client cache)."""
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            out[obj["Key"]] = (obj["ETag"], str(obj["LastModified"]))
    return out


def test_orphaned_task_on_another_host_writes_nothing_to_an_object_store_once_a_rerun_holds_the_lease(tmp_path):
    """Across hosts, without a shared file system: the worker in a mount namespace of its own (an empty tmpfs
    over the driver's directory), the store on S3 (a moto server). The driver is SIGKILLed while its slice
    runs; the rerun starts at once, takes the lease over and stops; meanwhile no object of the bucket changes
    although the orphaned slice runs on; then the rerun completes the store."""
    import json

    import boto3
    from distributed import Client
    from moto import server as moto_server

    from tests.test_signals import _free_port
    from tests.test_store_visibility import Cluster, _unshare_problem

    if problem := _unshare_problem():
        pytest.skip(problem)
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    creds = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket="orphan")
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.replace("T = 4000.0", "T = 8000.0"))  # the orphaned slice outlives the takeover
    url = "s3://orphan/s.zarr"
    options = json.dumps({"client_kwargs": {"endpoint_url": endpoint}})
    env = {**{k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}, **creds}
    env["GEOSWEEP_LEASE_TIMEOUT"] = LEASE_TIMEOUT
    saved = {k: os.environ.get(k) for k in (*creds, "GEOSWEEP_LEASE_TIMEOUT")}
    os.environ.update({**creds, "GEOSWEEP_LEASE_TIMEOUT": LEASE_TIMEOUT})  # the Cluster's processes inherit these
    cluster = Cluster(tmp_path, tmp_path, plain=0, private=1)
    run_args = ["run", str(spec), "--store", url, "--no-prefect", "--storage-options", options]
    killed = rerun = None
    try:
        client: Client = cluster.client
        go = tmp_path / "go"
        rerun = subprocess.Popen(
            [sys.executable, "-c", RERUN, str(go), *run_args, "--address", cluster.address], cwd=tmp_path, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        killed = subprocess.Popen(_geosweep(*run_args, "--address", cluster.address), cwd=tmp_path, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        _wait(lambda: any("_checkpoints/" in k for k in _s3_objects(s3, "orphan")), "a first checkpoint", killed)
        running = _tasks_of(killed.pid)
        _wait(lambda: any(any("-slice-" in k and s == "executing" for k, s in tasks)
                          for tasks in client.run(running).values()),
              "a slice of the first run to run on the worker", killed)  # fmt: skip
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(30)
        go.touch()  # the rerun takes the lease over at once (its owner's process is gone), then stops
        _wait(lambda: _stopped(rerun.pid), "the rerun to take the lease and stop", rerun)
        lease = json.loads(s3.get_object(Bucket="orphan", Key="s.zarr.lease")["Body"].read())
        assert lease["owner"].split(":")[1] == str(rerun.pid)
        held = _s3_objects(s3, "orphan")
        from geosweep.sweeps.store import StoreRef

        ref = StoreRef.of(url, {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}})
        assert int(open_results(ref).done.sum()) == 0  # the orphaned slice had work (and its writes) left
        orphans = _tasks_of(killed.pid)
        _wait(lambda: not any(client.run(orphans).values()), "the killed run's tasks to end on the worker")
        after = _s3_objects(s3, "orphan")
        changed = sorted(k for k in held.keys() | after.keys() if held.get(k) != after.get(k))
        assert not changed, f"the killed run's orphaned task wrote after the takeover: {changed}"
        os.kill(rerun.pid, signal.SIGCONT)
        out, err = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, err[-3000:]
        assert "resuming" in err and "Traceback" not in err, err[-3000:]
        assert int(open_results(ref).done.sum()) == 2
    finally:
        for p in (killed, rerun):
            if p is not None and p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait(30)
        cluster.close()
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
