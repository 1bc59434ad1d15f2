"""Workers that do not see the driver's store, without a shared file system: a real ``dask scheduler``
and ``dask worker`` processes, one worker "host" in a mount namespace of its own (``unshare -m``) with
a tmpfs over the store's parent directory — the path is missing there, or holds a stale same-path copy
of the store. The run stops before any slice with one line and exit 2 and writes nothing, neither on
the driver's store nor on the worker's copy (before: exit 1 after six failed slices, or exit 0 with
the results on the worker's disk and a summary read through the workers). A driver's summary never
reads through the cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.proc_util import store_files, wait_for_scheduler
from tests.test_cli_output import LONG, _cells_done, _cmd
from tests.test_signals import _free_port, _start

#: LONG, short: four cells
SMALL = LONG.replace("T = 3.0", "T = 0.5").replace(
    "omega = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4, 2.6, 2.8, 3.0]",
    "omega = [0.0, 1.0, 2.0, 3.0]",
)


def _unshare_problem() -> str | None:
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine"
    p = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs none /mnt"], capture_output=True, text=True)
    if p.returncode != 0:
        return (
            f"cannot make a mount namespace with a tmpfs (unshare -m needs root or CAP_SYS_ADMIN): {p.stderr.strip()}"
        )
    return None


pytestmark = pytest.mark.skipif(bool(_unshare_problem()), reason=str(_unshare_problem()))


class Cluster:
    """A scheduler and workers; ``private`` workers see an empty tmpfs over ``shared`` (plus ``copy``
    copied into it, when given)."""

    def __init__(self, tmp_path, shared, plain: int, private: int, copy=None, worker_env: dict | None = None):
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        self.env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        wenv = worker_env or self.env
        self.log = open(tmp_path / "cluster.log", "w")
        port = self.address.rsplit(":", 1)[1]
        sched = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", port]
        self.procs = [_start([*sched, "--dashboard-address", ":0"], self.env, self.log)]
        wait_for_scheduler(self.address, self.procs[0])
        worker = [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            self.address,
            "--no-dashboard",
            "--nthreads",
            "2",
        ]
        worker += ["--resources", "geosweep-slice=1"]
        for _ in range(plain):
            self.procs.append(_start([*worker, "--name", "plain"], wenv, self.log))
        setup = f"mount -t tmpfs none {shared}"
        if copy is not None:
            setup += f" && cp -a {copy} {shared}/"
        for i in range(private):
            cmd = ["unshare", "-m", "sh", "-c", f'{setup} && exec "$@"', "sh", *worker, "--name", f"private-{i}"]
            self.procs.append(_start(cmd, wenv, self.log))
        from distributed import Client

        self.client = Client(self.address, timeout=60)
        self.client.wait_for_workers(plain + private, timeout=120)

    def on(self, name: str, fn, *args):
        """``fn(*args)`` on the worker called ``name``."""
        addr = next(a for a, w in self.client.scheduler_info(n_workers=-1)["workers"].items() if w["name"] == name)
        return self.client.run(fn, *args, workers=[addr])[addr]

    def close(self) -> None:
        self.client.close()
        for p in self.procs:
            p.kill()
            p.wait(10)
        self.log.close()


def _run(tmp_path, cluster: Cluster, store, prefect: bool = False) -> subprocess.CompletedProcess:
    args = [*_cmd(), "run", "long.toml", "--store", str(store), "--address", cluster.address]
    args += [] if prefect else ["--no-prefect"]
    return subprocess.run(args, cwd=tmp_path, env=cluster.env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("prefect", [False, True], ids=["no-prefect", "prefect"])
def test_a_worker_without_the_stores_path_stops_the_run_before_any_slice(tmp_path, prefect):
    (tmp_path / "long.toml").write_text(LONG)
    shared = tmp_path / "shared"
    shared.mkdir()
    cluster = Cluster(tmp_path, shared, plain=1, private=1)
    try:
        p = _run(tmp_path, cluster, shared / "l.zarr", prefect)
        out = p.stdout + p.stderr
        assert p.returncode == 2, out[-3000:]
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith("geosweep: worker tcp://127.0.0.1:") and "(1 of 2 workers)" in last, out[-3000:]
        assert f"the store's path {shared / 'l.zarr'} does not exist there" in last, out[-3000:]
        assert "shares, at the same path" in last and "Traceback" not in out and "slice failed" not in out
        assert _cells_done(shared / "l.zarr") == 0
        assert cluster.on("private-0", os.listdir, str(shared)) == []  # nothing written on the worker
    finally:
        cluster.close()


def test_a_worker_with_a_stale_same_path_copy_stops_the_run_and_nothing_is_written(tmp_path):
    """The worker's node-local copy (same path, same spec, left by an earlier attempt) is not the
    driver's store: refused, exit 2; neither store changes."""
    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.store import StoreRef, ensure_store

    (tmp_path / "long.toml").write_text(LONG)
    shared, stale = tmp_path / "shared", tmp_path / "stale"
    shared.mkdir()
    stale.mkdir()
    ensure_store(make_plan(str(tmp_path / "long.toml")), StoreRef.of(str(stale / "l.zarr")))
    cluster = Cluster(tmp_path, shared, plain=0, private=1, copy=stale / "l.zarr")
    try:
        copy_before = cluster.on("private-0", store_files, str(shared / "l.zarr"))
        assert copy_before == store_files(str(stale / "l.zarr"))
        p = _run(tmp_path, cluster, shared / "l.zarr")
        out = p.stdout + p.stderr
        assert p.returncode == 2, out[-3000:]
        last = p.stderr.strip().splitlines()[-1]
        assert "there is not the driver's store (another copy at the same path" in last, out[-3000:]
        assert "Traceback" not in out and "cells complete" not in out
        assert _cells_done(shared / "l.zarr") == 0
        time.sleep(1.0)
        assert cluster.on("private-0", store_files, str(shared / "l.zarr")) == copy_before
    finally:
        cluster.close()


def test_the_summary_is_read_by_the_driver_not_through_the_cluster(tmp_path):
    """``status_table`` with a Dask client active whose only worker cannot see the store (before: the
    counts were computed on that worker: FileNotFoundError, or another copy's counts)."""
    from distributed import Client

    from geosweep.sweeps.summary import status_table

    (tmp_path / "long.toml").write_text(SMALL)
    shared = tmp_path / "shared"
    shared.mkdir()
    p = subprocess.run([*_cmd(), "run", "long.toml", "--store", str(shared / "l.zarr"), "--serial", "-q"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    cluster = Cluster(tmp_path, shared, plain=0, private=1)
    try:
        with Client(cluster.address, timeout=60):
            table = status_table(str(shared / "l.zarr"))
        assert "cells complete: 4/4" in table
    finally:
        cluster.close()


def test_a_worker_without_the_drivers_credentials_stops_the_run_in_one_line(tmp_path):
    """An S3 store (a moto server) whose credentials are only in the driver's environment (AWS_* variables):
    the workers have none — one line naming the credentials, exit 2, no cell written (before: every slice
    failed with NoCredentialsError and the closing summary crashed)."""
    import json

    import boto3
    import fsspec
    from moto import server as moto_server

    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    creds = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    boto3.client("s3", endpoint_url=endpoint, **{k.lower(): v for k, v in creds.items() if "KEY" in k}).create_bucket(
        Bucket="vis-test"
    )
    (tmp_path / "long.toml").write_text(SMALL)
    none = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "PREFECT_API_URL"}
    none.update(HOME=str(tmp_path), AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
    cluster = Cluster(tmp_path, tmp_path, plain=1, private=0, worker_env=none)
    try:
        options = json.dumps({"client_kwargs": {"endpoint_url": endpoint}})
        args = [*_cmd(), "run", "long.toml", "--store", "s3://vis-test/v.zarr", "--address", cluster.address]
        env = {**none, **creds}
        p = subprocess.run([*args, "--no-prefect", "--storage-options", options], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
        out = p.stdout + p.stderr
        assert p.returncode == 2, out[-3000:]
        last = p.stderr.strip().splitlines()[-1]
        assert "with its credentials (NoCredentialsError" in last, out[-3000:]
        assert "credentials in the driver's environment do not reach the workers" in last
        assert "Traceback" not in out and "slice failed" not in out
        fs = fsspec.filesystem("s3", key="testing", secret="testing", client_kwargs={"endpoint_url": endpoint})
        from geosweep.sweeps.store import StoreRef, open_results

        assert not [f for f in fs.find("vis-test/v.zarr") if "_checkpoints" in f]
        ref = StoreRef.of(
            "s3://vis-test/v.zarr", {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}
        )
        assert int(open_results(ref).done.sum()) == 0  # no cell written
    finally:
        cluster.close()
        server.stop()
