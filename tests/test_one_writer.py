"""One writer, really (issue 23): every write is fenced by the lease, a store is identified by its
real path, a run never deletes what it did not create, ``verify --repair`` takes the lease, and
hostile lease files, clock skew, a full disk or a read-only folder give one line each.

The stop/continue cases drive real processes (``geosweep run`` and ``python -c`` drivers that stop
themselves with SIGSTOP at a chosen point); a stopped run's lease is aged by rewriting its
heartbeat as if the run had been stopped for ten minutes (what Slurm's suspend does), so the
tests take seconds, and the lease timeout is short (``GEOSWEEP_LEASE_TIMEOUT``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from geosweep.flows.cli import main
from geosweep.sweeps.engine import _run_part, write_runs
from geosweep.sweeps.lease import Lease, StoreBusyError, fence
from geosweep.sweeps.store import StoreRef, open_results
from tests.proc_util import geosweep as _geosweep
from tests.proc_util import stopped as _stopped
from tests.proc_util import wait_until as _wait

SHORT = """
name = "ow"
system = "spring_pendula"
integrators = ["explicit_vi"]
h = [0.01, 0.02]
T = 0.4
dt_out = 0.1
"""
#: ≈ 5 s of integration with a checkpoint write every ≈ 0.1 s (two cells)
LONG = """
name = "ow"
system = "spring_pendula"
integrators = ["explicit_vi"]
h = [0.001, 0.002]
T = 400.0
dt_out = 0.5
checkpoint_every = 20.0
"""


def _env(timeout: float = 3.0) -> dict[str, str]:
    return {**os.environ, "GEOSWEEP_LEASE_TIMEOUT": str(timeout)}


def _driver(patch: str, *args: str) -> list[str]:
    """A ``python -c`` driver: ``patch`` (code run first: where the process stops itself), then the CLI."""
    code = f"import os, signal, sys\n{patch}\nfrom geosweep.flows.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return [sys.executable, "-c", code, *args]


#: stop right before the store is created or checked (the lease held, nothing written yet)
STOP_BEFORE_CREATION = """
import geosweep.sweeps.engine as _e
_orig = _e.ensure_store
def _stop_then_create(*a, **k):
    os.kill(os.getpid(), signal.SIGSTOP)
    return _orig(*a, **k)
_e.ensure_store = _stop_then_create
"""
#: stop in the store's creation, right before its template is written (the issue's case: B then
#: creates the store, and A's creation found it and removed it, B's cells included)
STOP_BEFORE_TEMPLATE = """
import geosweep.sweeps.store.lifecycle as _lifecycle
_orig = _lifecycle.write_template
def _stop_then_write(*a, **k):
    os.kill(os.getpid(), signal.SIGSTOP)
    return _orig(*a, **k)
_lifecycle.write_template = _stop_then_write
"""
#: stop in the middle of the store's creation (template written, fillers and marker not yet)
STOP_DURING_CREATION = """
import geosweep.sweeps.store.lifecycle as _lifecycle
_orig = _lifecycle.write_template
def _write_then_stop(*a, **k):
    out = _orig(*a, **k)
    os.kill(os.getpid(), signal.SIGSTOP)
    return out
_lifecycle.write_template = _write_then_stop
"""


def _age(lease: Path, seconds: float = 600.0) -> dict:
    """Rewrite the lease's heartbeat as if its run had been stopped for ``seconds``."""
    rec = json.loads(lease.read_text())
    rec["heartbeat"] = time.time() - seconds
    tmp = lease.with_suffix(".aged")
    tmp.write_text(json.dumps(rec))
    os.replace(tmp, lease)
    return rec


def _holds_lock(lease: Path) -> bool:
    """True if some process holds the lease's lock (a run in the middle of a write)."""
    lock = Path(f"{lease}.lock")
    if not lock.exists():
        return False
    with open(lock, "rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def _one_line(stderr: str, needle: str) -> None:
    assert "Traceback" not in stderr and "Compute Failed" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if needle in ln]
    assert len(lines) == 1, stderr


def _complete(store: Path):
    """The store's Dataset, after checking every cell is done and ``geosweep verify`` passes."""
    ds = open_results(store)
    assert int(ds.done.sum()) == ds.done.size
    check = subprocess.run(_geosweep("verify", str(store)), capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    return ds


@contextlib.contextmanager
def _process(cmd: list[str], **kwargs):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
            proc.wait(timeout=30)


# ---------------------------------------------------------------------------------------------
# item 1: a resumed run never deletes (or writes into) the store another run finished
# ---------------------------------------------------------------------------------------------
def test_resumed_run_stops_without_touching_the_store_another_run_finished(tmp_path):
    spec, store = tmp_path / "s.toml", tmp_path / "s.zarr"
    spec.write_text(SHORT)
    lease = Path(f"{store}.lease")
    args = ["run", str(spec), "--store", str(store), "--serial"]
    with _process(_driver(STOP_BEFORE_CREATION, *args), env=_env()) as a:
        _wait(lambda: _stopped(a.pid), what="run A to stop itself")
        _age(lease)  # A was suspended for ten minutes
        b = subprocess.run(_geosweep(*args), capture_output=True, text=True, timeout=300, env=_env())
        assert b.returncode == 0, b.stderr  # B took the stale lease over, created the store and finished
        os.kill(a.pid, signal.SIGCONT)
        out, err = a.communicate(timeout=300)
    assert a.returncode == 3, err
    _one_line(err, "lost its lease")
    ds = _complete(store)  # B's store, whole
    assert len(ds.attrs["runs"]) == 1  # B's record only
    assert not lease.exists()


@pytest.mark.parametrize("stop", [STOP_BEFORE_TEMPLATE, STOP_DURING_CREATION], ids=["before", "during"])
def test_takeover_waits_for_a_run_stopped_while_creating_the_store(tmp_path, stop):
    spec, store = tmp_path / "s.toml", tmp_path / "s.zarr"
    spec.write_text(SHORT)
    lease = Path(f"{store}.lease")
    args = ["run", str(spec), "--store", str(store), "--serial"]
    with _process(_driver(stop, *args), env=_env()) as a:
        _wait(lambda: _stopped(a.pid), what="run A to stop itself")
        _age(lease)
        before = sorted(p.relative_to(store) for p in store.rglob("*"))
        b = subprocess.run(_geosweep(*args), capture_output=True, text=True, timeout=300, env=_env())
        assert b.returncode == 3, b.stderr  # A is inside a write: its lease cannot be taken now
        _one_line(b.stderr, "in the middle of a write")
        assert sorted(p.relative_to(store) for p in store.rglob("*")) == before  # nothing removed or added
        os.kill(a.pid, signal.SIGCONT)
        out, err = a.communicate(timeout=300)
    assert a.returncode == 0, err
    _complete(store)


# ---------------------------------------------------------------------------------------------
# item 5: a driver stopped past the lease timeout stops at once, writing nothing, when continued
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [["--serial"], ["--no-prefect", "--workers", "1"]])
def test_stopped_driver_loses_its_lease_and_writes_nothing(tmp_path, mode):
    spec, store = tmp_path / "s.toml", tmp_path / "s.zarr"
    spec.write_text(LONG)
    lease = Path(f"{store}.lease")
    args = ["run", str(spec), "--store", str(store), *mode]
    owners: list[str] = []
    with _process(_geosweep(*args), env=_env()) as a:
        _wait(lambda: (store / "_checkpoints").exists(), what="run A's first checkpoint")
        for _ in range(50):  # stop A outside a write (inside one it keeps the lock: tested above)
            os.kill(a.pid, signal.SIGSTOP)
            _wait(lambda: _stopped(a.pid), what="run A to stop")
            if not _holds_lock(lease):
                break
            os.kill(a.pid, signal.SIGCONT)
            time.sleep(0.03)
        a_owner = _age(lease)["owner"]
        done = threading.Event()

        def watch() -> None:  # who holds the lease, as often as it can be read
            while not done.is_set():
                with contextlib.suppress(OSError, ValueError):
                    owner = json.loads(lease.read_text())["owner"]
                    if not owners or owners[-1] != owner:
                        owners.append(owner)
                time.sleep(0.005)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        with _process(_geosweep(*args), env=_env()) as b:
            _wait(lambda: owners and owners[-1] != a_owner, what="run B to take the lease over")
            os.kill(a.pid, signal.SIGCONT)
            _, err_a = a.communicate(timeout=300)
            _, err_b = b.communicate(timeout=600)
        done.set()
        watcher.join()
    assert a.returncode == 3, err_a
    _one_line(err_a, "lost its lease")
    assert b.returncode == 0, err_b
    assert owners[0] == a_owner and len(owners) == 2, owners  # A → B once, never back
    _complete(store)


def test_orphaned_task_of_a_lost_lease_writes_nothing(tmp_path):
    """A task of a run whose lease was taken over (an orphan of a killed driver on a remote
    worker): its fenced writes refuse, it returns one line, the store is unchanged."""
    spec = {"name": "orph", "system": "spring_pendula", "integrators": ["explicit_vi"], "h": [0.01], "T": 0.2,
            "dt_out": 0.1}  # fmt: skip
    store = tmp_path / "o.zarr"
    from geosweep.sweeps.plan import make_plan

    plan = make_plan(spec)
    old = Lease(StoreRef.of(store), stale_after=0.05, heartbeat=60).acquire()
    orphan_ref = old.ref
    old._stop.set()  # the driver is gone: no heartbeat any more
    time.sleep(0.1)
    new = Lease(StoreRef.of(store), stale_after=0.05).acquire()  # the next run takes the stale lease over
    try:
        from geosweep.sweeps.store import ensure_store

        ensure_store(plan, new.ref)
        cell = next(iter(plan.grid.cells()))
        fault = _run_part(
            plan.part(models={}), {k: plan.models[k] for k in plan.combinations([cell])}, [cell], orphan_ref
        )
        assert fault.lost and "lost its lease" in fault.message
        assert not (store / "_checkpoints").exists() and int(open_results(store).done.sum()) == 0
        with pytest.raises(StoreBusyError, match="lost its lease"):
            write_runs(orphan_ref, [(cell, 0, 0.0, 1, False, True, {})])
    finally:
        new.release()


# ---------------------------------------------------------------------------------------------
# item 3: verify --repair takes the lease
# ---------------------------------------------------------------------------------------------
def test_verify_repair_refuses_while_a_run_writes_the_store(tmp_path):
    spec, store = tmp_path / "s.toml", tmp_path / "s.zarr"
    spec.write_text(LONG)
    with _process(_geosweep("run", str(spec), "--store", str(store), "--serial")) as a:
        _wait(lambda: (store / "_checkpoints").exists(), what="the run's first checkpoint")
        os.kill(a.pid, signal.SIGSTOP)  # held mid-run, whatever the machine's speed (its lease stays fresh: 60 s)
        repair = subprocess.run(_geosweep("verify", str(store), "--repair"), capture_output=True, text=True,
                                timeout=120)  # fmt: skip
        os.kill(a.pid, signal.SIGCONT)
        assert repair.returncode == 3, repair.stdout + repair.stderr
        _one_line(repair.stderr, "being written by another run")
        assert "marked for recomputation" not in repair.stdout
        _, err = a.communicate(timeout=300)
    assert a.returncode == 0, err
    again = subprocess.run(_geosweep("verify", str(store), "--repair"), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and not Path(f"{store}.lease").exists(), again.stderr


# ---------------------------------------------------------------------------------------------
# item 4: a store is identified by its real path
# ---------------------------------------------------------------------------------------------
def test_symlinked_store_shares_one_lease(tmp_path):
    spec, real = tmp_path / "s.toml", tmp_path / "real.zarr"
    spec.write_text(LONG)
    real.mkdir()  # an empty folder: the store is created in it
    alias = tmp_path / "alias.zarr"
    alias.symlink_to(real)
    assert Lease(StoreRef.of(alias)).path == f"{real}.lease"
    with _process(_geosweep("run", str(spec), "--store", str(real), "--serial")) as a:
        _wait(lambda: (real / "zarr.json").exists(), what="the first run's store")
        os.kill(a.pid, signal.SIGSTOP)  # held mid-run, whatever the machine's speed (its lease stays fresh: 60 s)
        b = subprocess.run(_geosweep("run", str(spec), "--store", str(alias), "--serial"), capture_output=True,
                           text=True, timeout=300)  # fmt: skip
        os.kill(a.pid, signal.SIGCONT)
        assert b.returncode == 3, b.stderr
        _one_line(b.stderr, "being written by another run")
        assert not Path(f"{alias}.lease").exists()
        _, err = a.communicate(timeout=300)
    assert a.returncode == 0, err
    _complete(real)


def test_runs_started_together_through_two_names(tmp_path):
    spec, real = tmp_path / "s.toml", tmp_path / "real.zarr"
    spec.write_text(SHORT)
    real.mkdir()  # an empty folder, two names for it
    (tmp_path / "alias.zarr").symlink_to(real)
    procs = [subprocess.Popen(_geosweep("run", str(spec), "--store", str(tmp_path / name), "--serial"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for name in ("real.zarr", "alias.zarr")]  # fmt: skip
    results = [(p.wait(timeout=300), p.communicate()[1]) for p in procs]
    for code, err in results:
        assert code in (0, 3) and "Traceback" not in err, err
    assert 0 in [code for code, _ in results]
    _complete(real)
    assert not (tmp_path / "alias.zarr.lease").exists() and real.is_dir()


# ---------------------------------------------------------------------------------------------
# items 8/10/11: hostile lease files, clock skew, a full disk, a read-only folder
# ---------------------------------------------------------------------------------------------
def _spec_file(tmp_path: Path) -> Path:
    spec = tmp_path / "s.toml"
    spec.write_text(SHORT)
    return spec


@pytest.mark.parametrize(
    "content",
    ["[1, 2]", '{"owner": "elsewhere:1:x", "heartbeat": "abc"}', '{"owner": "elsewhere:1:x", "heartbeat": null}',
     '{"owner": "elsewhere:1:x", "heartbeat": 1e999}', "\x00garbage"],
)  # fmt: skip
def test_garbage_lease_is_taken_over_with_one_line(tmp_path, capsys, content):
    spec, store = _spec_file(tmp_path), tmp_path / "g.zarr"
    Path(f"{store}.lease").write_text(content)
    assert main(["run", str(spec), "--store", str(store), "--serial"]) == 0
    _one_line(capsys.readouterr().err, "holds no valid lease record")
    assert not Path(f"{store}.lease").exists()


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_lease_that_is_not_a_file_is_refused(tmp_path, capsys, kind):
    spec, store = _spec_file(tmp_path), tmp_path / "g.zarr"
    path = Path(f"{store}.lease")
    path.mkdir() if kind == "directory" else os.mkfifo(path)
    t0 = time.monotonic()
    assert main(["run", str(spec), "--store", str(store), "--serial"]) == 2
    assert time.monotonic() - t0 < 60  # no hang on the FIFO
    _one_line(capsys.readouterr().err, "is not a lease file")
    assert path.exists() and not store.exists()


def test_lease_from_the_future_is_taken_over_once_it_proves_dead(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GEOSWEEP_LEASE_TIMEOUT", "1.5")
    spec, store = _spec_file(tmp_path), tmp_path / "f.zarr"
    lease = Path(f"{store}.lease")
    lease.write_text(json.dumps({"owner": "elsewhere:1:x", "heartbeat": time.time() + 3600}))
    assert main(["run", str(spec), "--store", str(store), "--serial"]) == 0
    err = capsys.readouterr().err
    _one_line(err, "in the future")
    assert "Traceback" not in err


def test_lease_from_the_future_that_beats_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOSWEEP_LEASE_TIMEOUT", "1.5")
    store = tmp_path / "f.zarr"
    lease = Path(f"{store}.lease")
    stop = threading.Event()

    def write() -> None:  # a live run on a host whose clock is an hour ahead
        tmp = lease.with_suffix(".tmp")
        tmp.write_text(json.dumps({"owner": "elsewhere:1:x", "heartbeat": time.time() + 3600}))
        os.replace(tmp, lease)

    def beat() -> None:
        while not stop.is_set():
            write()
            time.sleep(0.1)

    write()
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        with pytest.raises(StoreBusyError, match="changed while watched"):
            Lease(StoreRef.of(store)).acquire()
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def _tmpfs(path: Path, size: str):
    path.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({res.stderr.decode().strip()}): a full disk needs one")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


FULL = """
name = "full"
system = "spring_pendula"
integrators = ["explicit_vi"]
h = [0.005, 0.01, 0.02, 0.04]
T = 40.0
dt_out = 0.04
"""


def test_full_disk_gives_one_line_and_resumes_bitwise(tmp_path, capsys):
    spec = tmp_path / "full.toml"
    spec.write_text(FULL)
    reference = tmp_path / "ref.zarr"
    assert main(["run", str(spec), "--store", str(reference), "--serial"]) == 0
    with _tmpfs(tmp_path / "disk", "600k") as disk:
        store = disk / "full.zarr"
        capsys.readouterr()
        assert main(["run", str(spec), "--store", str(store), "--serial"]) == 2
        _one_line(capsys.readouterr().err, "No space left on device")
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        assert main(["run", str(spec), "--store", str(store), "--serial"]) == 0
        got, want = open_results(store), open_results(reference)
        for name in want.data_vars:
            if name not in ("wall_time", "completed_at", "steps_per_second"):
                np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)


def test_read_only_folder_in_a_store_gives_one_line(tmp_path, capsys):
    spec, store = _spec_file(tmp_path), tmp_path / "r.zarr"
    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.store import ensure_store

    ensure_store(make_plan(str(spec)), StoreRef.of(store))
    folder = store / "done"
    res = subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot make a read-only folder as root here ({res.stderr.decode().strip()})")
    try:
        capsys.readouterr()
        code = main(["run", str(spec), "--store", str(store), "--no-prefect", "--workers", "1"])
        err = capsys.readouterr().err
        assert code == 2, err
        _one_line(err, "Read-only file system")
    finally:
        subprocess.run(["umount", str(folder)], check=False)
    assert main(["run", str(spec), "--store", str(store), "--serial"]) == 0
    _complete(store)


def test_fence_is_a_no_op_without_a_lease_and_refuses_a_stale_token(tmp_path):
    ref = StoreRef.of(tmp_path / "n.zarr")
    with fence(ref):  # no token: writes of single functions (tests, API use) are not fenced
        pass
    with Lease(ref) as lease:
        with fence(lease.ref):
            pass
        import dataclasses

        with (
            pytest.raises(StoreBusyError, match="lost its lease"),
            fence(dataclasses.replace(lease.ref, lease="x:1:y")),
        ):
            raise AssertionError("must not be reached")


def test_object_store_writes_are_fenced_by_the_lease_object(tmp_path):
    """On S3 (moto on loopback) the lease is an object beside the store: a run whose lease was
    taken over writes nothing more (its checks read the lease object), the holder writes on."""
    moto_server = pytest.importorskip("moto.server")
    import boto3

    moto = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        endpoint = f"http://127.0.0.1:{moto._server.server_port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s",
                     region_name="us-east-1").create_bucket(Bucket="fence")  # fmt: skip
        opts = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": endpoint}, "skip_instance_cache": True}
        spec = {"name": "s3f", "system": "spring_pendula", "integrators": ["explicit_vi"], "h": [0.01, 0.02],
                "T": 0.2, "dt_out": 0.1}  # fmt: skip
        from geosweep.sweeps.engine import run_sweep
        from geosweep.sweeps.plan import make_plan
        from geosweep.sweeps.store import ensure_store

        url = "s3://fence/s.zarr/"  # one store, one lease object, whatever the spelling
        old = Lease(StoreRef.of(url, opts), stale_after=0.05, heartbeat=60).acquire()
        assert old.path.endswith("fence/s.zarr.lease")
        old._stop.set()  # its driver is gone
        time.sleep(0.1)
        new = Lease(StoreRef.of(url.rstrip("/"), opts), stale_after=0.05).acquire()
        try:
            plan = make_plan(spec)
            with pytest.raises(StoreBusyError, match="lost its lease"):
                ensure_store(plan, old.ref)
            assert not StoreRef.of(url, opts).exists()  # nothing written by the old run
            assert ensure_store(plan, new.ref)
            cell = next(iter(plan.grid.cells()))
            models = {k: plan.models[k] for k in plan.combinations([cell])}
            fault = _run_part(plan.part(models={}), models, [cell], old.ref)
            assert fault.lost and int(open_results(url, opts).done.sum()) == 0
        finally:
            new.release()
        assert run_sweep(spec, url, serial=True, storage_options=opts).complete
    finally:
        moto.stop()


def test_lock_file_that_is_not_a_file_is_refused(tmp_path, capsys):
    spec, store = _spec_file(tmp_path), tmp_path / "k.zarr"
    Path(f"{store}.lease.lock").mkdir()
    assert main(["run", str(spec), "--store", str(store), "--serial"]) == 2
    _one_line(capsys.readouterr().err, "cannot be used as the lease's lock")


def test_prefect_task_does_not_retry_a_store_that_refuses_the_run():
    from prefect.states import Failed

    from geosweep.flows.sweep_flow import _retry_unless_refused
    from geosweep.sweeps.lease import LeaseLost, StoreWriteError

    for exc in (LeaseLost("lost"), StoreBusyError("busy"), StoreWriteError("full")):
        assert not _retry_unless_refused(None, None, Failed(data=exc))
    assert _retry_unless_refused(None, None, Failed(data=RuntimeError("a lost worker")))
