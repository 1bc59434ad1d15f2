"""Checkpointed cells: a long cell runs in segments, an interrupted sweep continues every partial
cell from its last checkpoint, and the store ends bitwise identical to an uninterrupted run —
after an exception mid-run, a SIGKILL of the driver, a SIGKILL of a worker process, and on a
cluster whose workers live shorter than one cell (real LocalCluster, real zarr stores)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from geosweep.kernels.core.layout import A_T
from geosweep.sweeps import checkpoints
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.store import StoreRef
from geosweep.sweeps.summary import status_table
from tests.sweep_util import assert_stores_bitwise_equal


def _spec(T: float, checkpoint_every: float | None, name: str = "ckpt") -> dict:
    spec = {
        "name": name,
        "system": "lj_sphere",
        "integrators": ["explicit_vi"],
        "h": [0.005],
        "T": T,
        "dt_out": 1.0,
        "params": {"level": 2, "omega": [3.25, 2.0]},
    }
    if checkpoint_every is not None:
        spec["checkpoint_every"] = checkpoint_every
    return spec


class _Stop(Exception):
    pass


def _runs(store) -> list[dict]:
    return list(zarr.open_group(str(store), mode="r").attrs["runs"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """T = 40, one uninterrupted run (the default segment covers the whole cell)."""
    store = tmp_path_factory.mktemp("ref") / "ref.zarr"
    res = run_sweep(_spec(40.0, None), store, serial=True)
    assert res.complete and res.segments == 2  # one segment per cell
    return store


def test_interrupted_cell_resumes_from_its_checkpoint_bitwise(tmp_path, reference):
    store = tmp_path / "s.zarr"
    spec = _spec(40.0, 4.0)  # 10 segments per cell; checkpoint_every is not part of the identity

    def stop_midway(p):
        if p.steps_total and p.steps_done >= 0.35 * p.steps_total:
            raise _Stop

    with pytest.raises(_Stop):
        run_sweep(spec, store, serial=True, progress=stop_midway)
    ref = StoreRef.of(store)
    assert checkpoints.count(ref) == 1
    partial = np.array(list(checkpoints.progress(ref).values()))
    assert partial.size == 1 and 0.3 <= partial[0] <= 0.8
    table = status_table(store)
    assert "partial cells" in table and f"{100 * partial[0]:.0f} %" in table

    res = run_sweep(spec, store, serial=True)
    assert res.complete and res.resumed == 1
    seg_done = round(partial[0] * 10)
    assert res.segments == (10 - seg_done) + 10 * (res.ran - 1)  # only the missing segments ran
    assert checkpoints.count(ref) == 0
    assert_stores_bitwise_equal(str(reference), str(store))
    assert _runs(store)[-1]["segments_run"] == res.segments


def _cli(spec_path, store, *extra):
    return [sys.executable, "-m", "geosweep.flows.cli", "run", str(spec_path), "--store", str(store), *extra]


def _write_toml(path: Path, spec: dict) -> Path:
    lines = [f'name = "{spec["name"]}"', f'system = "{spec["system"]}"', 'integrators = ["explicit_vi"]']
    lines += [f"h = {spec['h']}", f"T = {spec['T']}", f"dt_out = {spec['dt_out']}"]
    if "checkpoint_every" in spec:
        lines.append(f"checkpoint_every = {spec['checkpoint_every']}")
    lines += ["[params]", "level = 2", "omega = [3.25, 2.0]"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_sigkill_of_the_driver_mid_segment(tmp_path, reference):
    spec = _spec(40.0, 2.0)
    spec_path = _write_toml(tmp_path / "k.toml", spec)
    store = tmp_path / "k.zarr"
    proc = subprocess.Popen(
        _cli(spec_path, store, "--serial"), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    ckpt_dir = store / checkpoints.DIRNAME
    deadline = time.time() + 120
    try:
        while time.time() < deadline:
            if ckpt_dir.exists() and any(p.suffix == ".npz" for p in ckpt_dir.iterdir()):
                time.sleep(0.05)  # now mid-segment
                break
            assert proc.poll() is None, "the sweep finished before it could be killed"
            time.sleep(0.01)
        else:
            raise AssertionError("no checkpoint appeared")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # the checkpoints are the truth (a kill may fall between a checkpoint and its progress write)
    ref = StoreRef.of(store)
    done_flags = np.asarray(zarr.open_group(str(store), mode="r")["done"][...])
    expected = 0
    for cell in np.ndindex(*done_flags.shape):
        if done_flags[cell] == 1:
            continue
        saved = checkpoints.load(ref, cell)
        t = float(saved["acc"][A_T]) if saved is not None else 0.0
        expected += 20 - round(t / 2.0)
    rerun = subprocess.run(_cli(spec_path, store, "--serial"), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert_stores_bitwise_equal(str(reference), str(store))
    # only what was missing ran: 20 segments per cell, minus the ones checkpointed
    assert _runs(store)[-1]["segments_run"] == expected
    assert not (ckpt_dir.exists() and any(ckpt_dir.iterdir()))


@pytest.fixture(scope="module")
def long_reference(tmp_path_factory) -> Path:
    """T = 400 (80 000 steps per cell, several seconds), uninterrupted."""
    store = tmp_path_factory.mktemp("longref") / "ref.zarr"
    run_sweep(_spec(400.0, None), store, serial=True)
    return store


def test_workers_living_shorter_than_a_cell(tmp_path, long_reference):
    """Worker processes retire every 3 s (dask ``lifetime``), cells need longer: the sweep still
    completes, each cell continuing from its checkpoint on the next worker."""
    import dask
    from distributed import Client, LocalCluster

    store = tmp_path / "w.zarr"
    # a restarting worker may take more than the default 15 s to come back on a loaded machine;
    # the cluster would then close its nanny and the sweep wait forever for workers
    cfg = {"distributed.scheduler.allowed-failures": 100, "distributed.deploy.lost-worker-timeout": "600s"}
    with dask.config.set(cfg):
        with (
            LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                lifetime="3s",
                lifetime_restart=True,
            ) as cluster,
            Client(cluster) as client,
        ):
            res = run_sweep(_spec(400.0, 25.0), store, client=client)
    assert res.complete, res.errors
    runs = _runs(store)
    assert sum(r["cells_run"] for r in runs) == 2
    assert_stores_bitwise_equal(str(long_reference), str(store))


def test_sigkill_of_a_worker_mid_segment(tmp_path, long_reference):
    import threading

    from distributed import Client, LocalCluster

    store = tmp_path / "wk.zarr"
    ckpt_dir = store / checkpoints.DIRNAME
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            pids = client.run(os.getpid)
            killed: list[int] = []

            def killer():
                deadline = time.time() + 120
                while time.time() < deadline and not killed:
                    # both cells have a checkpoint: whichever worker dies, its cell has one to resume from
                    if ckpt_dir.exists() and sum(p.suffix == ".npz" for p in ckpt_dir.iterdir()) == 2:
                        time.sleep(0.1)
                        pid = next(iter(pids.values()))
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                    time.sleep(0.02)

            t = threading.Thread(target=killer)
            t.start()
            res = run_sweep(_spec(400.0, 25.0), store, client=client)
            t.join()
    assert killed and res.complete, res.errors
    assert res.resumed >= 1  # the killed worker's cell continued from its checkpoint
    assert_stores_bitwise_equal(str(long_reference), str(store))


# ---- the object store going away and coming back ------------------------------------------
class _Proxy:
    """A TCP forwarder on 127.0.0.1 that can be switched off (connections refused, open ones
    cut) and on again on the same port: an S3 endpoint that goes away and comes back."""

    def __init__(self, target_port: int):
        import socket

        self.target = target_port
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.listener = None
        self.conns: list = []

    def start(self) -> None:
        import socket
        import threading

        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", self.port))
        ls.listen(64)
        self.listener = ls

        def pipe(a, b):
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    try:
                        s.close()
                    except OSError:
                        pass

        def accept():
            while True:
                try:
                    client, _ = ls.accept()
                except OSError:
                    return
                upstream = socket.create_connection(("127.0.0.1", self.target))
                self.conns += [client, upstream]
                threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
                threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()

    def stop(self) -> None:
        import socket

        self.listener.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass
        self.conns = []


def test_object_store_outage_mid_run(tmp_path, reference):
    """The S3 endpoint (moto on loopback, behind a switchable proxy) disappears in the middle of a
    checkpointed cell: the run stops with an error; once the endpoint is back, the rerun continues
    from the last checkpoint that reached the store, and the result is bitwise the reference."""
    moto_server = pytest.importorskip("moto.server")
    import boto3
    import xarray as xr

    moto = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        target = moto._server.server_port
        proxy = _Proxy(target)
        proxy.start()
        endpoint = f"http://127.0.0.1:{proxy.port}"
        boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1"
        ).create_bucket(Bucket="ckpt")
        opts = {
            "key": "k",
            "secret": "s",
            "client_kwargs": {"endpoint_url": endpoint},
            "config_kwargs": {"retries": {"max_attempts": 2}, "connect_timeout": 2, "read_timeout": 5},
            "skip_instance_cache": True,
        }
        url = "s3://ckpt/outage.zarr"
        spec = _spec(40.0, 4.0)

        def cut_midway(p):
            if p.steps_total and p.steps_done >= 0.35 * p.steps_total and proxy.listener is not None:
                proxy.stop()
                proxy.listener = None

        with pytest.raises(Exception):  # noqa: B017 - whatever the S3 client raises for a vanished endpoint
            run_sweep(spec, url, serial=True, storage_options=opts, progress=cut_midway)
        proxy.start()
        ref = StoreRef.of(url, opts)
        done_before = int(np.asarray(ref.open_group("r")["done"][...]).sum())
        res = run_sweep(spec, url, serial=True, storage_options=opts)
        assert res.complete and res.resumed == 1
        assert done_before + res.ran == 2  # 0 cells lost, 0 computed twice
        assert checkpoints.count(ref) == 0
        a = xr.open_zarr(str(reference))
        b = xr.open_zarr(url, storage_options=opts)
        for name in a.data_vars:
            if name in ("wall_time", "completed_at"):
                continue
            assert np.array_equal(a[name].values, b[name].values, equal_nan=True), name
    finally:
        moto.stop()


def test_tidy_removes_what_a_killed_writer_left(tmp_path):
    """A SIGKILL during a checkpoint write leaves ``<cell>.npz.<uuid>.tmp``; the end of the next run
    removes such files (no writer is left then), keeps the checkpoints of partial cells, and removes
    the directory once no checkpoint is left."""
    store = tmp_path / "s.zarr"
    zarr.open_group(str(store), mode="w")
    ref = StoreRef.of(store)
    checkpoints.save(ref, (0, 1), {"S": np.arange(3.0)}, 0.5)
    checkpoints.save(ref, (0, 2), {"S": np.arange(3.0)}, 0.5)
    d = store / checkpoints.DIRNAME
    (d / "c0_1.npz.0123abcd.tmp").write_bytes(b"partial")
    (d / "c0_2.npz.4567abcd.tmp").write_bytes(b"partial")
    checkpoints.delete(ref, (0, 1))
    checkpoints.tidy(ref)
    assert sorted(p.name for p in d.iterdir()) == ["c0_2.npz"]
    assert checkpoints.count(ref) == 1 and checkpoints.progress(ref) == {(0, 2): 0.5}
    checkpoints.delete(ref, (0, 2))
    checkpoints.tidy(ref)
    assert not d.exists() and checkpoints.count(ref) == 0
