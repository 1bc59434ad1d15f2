"""The nightly end to end against a real ``prefect server`` on 127.0.0.1.

``geosweep serve`` registers a deployment whose cron fires every minute; the server's scheduler
creates the runs, ``serve`` executes one, and the night's dated store, its report and the
comparison with an earlier night appear. A night with too many failed cells fails in Prefect.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
import zarr

from geosweep.sweeps.engine import run_sweep

SPEC = {
    "name": "nightly-e2e",
    "system": "spring_pendula",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.01, 0.005],
    "T": 1.0,
    "dt_out": 0.05,
}
SPEC_TOML = """name = "nightly-e2e"
system = "spring_pendula"
integrators = ["explicit_vi", "rk4"]
h = [0.01, 0.005]
T = 1.0
dt_out = 0.05
"""
#: 4 of 6 cells fail (explicit VI leaves its domain, RK2 blows up at the two large steps)
FAILING = {
    "name": "nightly-fails",
    "system": "spring_pendula",
    "integrators": ["explicit_vi", "rk2"],
    "h": [0.2, 0.1, 0.01],
    "T": 4.0,
    "dt_out": 0.2,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _geosweep_cmd() -> list[str]:
    import shutil

    exe = shutil.which("geosweep")
    return [exe] if exe else [sys.executable, "-m", "geosweep.flows.cli"]


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return proc.returncode


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``prefect server start`` on a free loopback port with its own database; yields (api url, env)."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    log = open(home / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        ["prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, (home / "server.log").read_text()[-3000:]
        time.sleep(0.5)
    else:
        _stop(proc)
        pytest.fail("prefect server did not start in 120 s")
    try:
        yield url, env | {"PREFECT_API_URL": url}
    finally:
        _stop(proc)
        log.close()


def _flow_runs(url: str, deployment_id: str) -> list[dict]:
    body = {"flow_runs": {"deployment_id": {"any_": [deployment_id]}}, "sort": "EXPECTED_START_TIME_ASC"}
    r = httpx.post(f"{url}/flow_runs/filter", json=body, timeout=10)
    r.raise_for_status()
    return r.json()


def test_serve_runs_the_scheduled_night_with_report_and_comparison(server, tmp_path):
    url, env = server
    spec = tmp_path / "nightly.toml"
    spec.write_text(SPEC_TOML)
    root = tmp_path / "nightly"
    today = dt.datetime.now(dt.UTC).date()
    # an earlier night, with one value changed as if the code had changed since
    earlier = root / "nightly-e2e" / f"{today - dt.timedelta(days=3)}.zarr"
    assert run_sweep(SPEC, earlier, serial=True).complete
    zarr.open_group(str(earlier), mode="r+")["max_abs_energy_error"][1, 0] = 1.0

    t0 = time.monotonic()
    serve = subprocess.Popen(
        [*_geosweep_cmd(), "serve", str(spec), "--store-root", str(root), "--cron", "* * * * *", "--workers", "2"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        dep = None
        while time.monotonic() - t0 < 60 and dep is None:
            r = httpx.get(f"{url}/deployments/name/geosweep-nightly/nightly-nightly-e2e", timeout=10)
            dep = r.json() if r.status_code == 200 else None
            assert serve.poll() is None, serve.stdout.read()[-3000:]
            time.sleep(1)
        assert dep is not None and dep["schedules"][0]["schedule"]["cron"] == "* * * * *"
        done = None
        while time.monotonic() - t0 < 180 and done is None:
            runs = _flow_runs(url, dep["id"])
            final = [r for r in runs if r["state_type"] in ("COMPLETED", "FAILED", "CRASHED")]
            done = final[0] if final else None
            assert serve.poll() is None, serve.stdout.read()[-3000:]
            time.sleep(2)
        assert done is not None, f"no run finished within 180 s: {[r['state_type'] for r in runs]}"
        assert done["auto_scheduled"]  # created by the server's scheduler, not by hand
        assert done["state_type"] == "COMPLETED", done["state"]
        children = psutil.Process(serve.pid).children(recursive=True)
    finally:
        code = _stop(serve)
    out = serve.stdout.read()
    night = root / "nightly-e2e" / f"{dt.date.fromisoformat(done['expected_start_time'][:10])}.zarr"
    assert int(zarr.open_group(str(night), mode="r")["done"][...].sum()) == 4
    index = (night.parent / f"{night.name}.report" / "index.md").read_text()
    assert "## Comparison with the previous night" in index and earlier.name in index
    assert "1 of 4 cells changed" in index and "| integrator=rk4, h=0.01 | max_abs_energy_error | 1 |" in index
    assert (night.parent / f"{night.name}.report" / "status_map.png").exists()
    # interrupted: one line, exit 143, nothing left running
    assert code == 143, out[-3000:]
    assert "Traceback" not in out and "interrupted" in out and "distributed.worker" not in out
    time.sleep(1)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    print(f"night executed {time.monotonic() - t0:.0f} s after serve started")


def test_a_night_with_too_many_failed_cells_fails_in_prefect(server, tmp_path):
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from geosweep.flows.deployments import nightly_flow

    url, _ = server
    with temporary_settings(updates={PREFECT_API_URL: url}):
        state = nightly_flow(FAILING, str(tmp_path), n_workers=2, return_state=True)
        assert state.is_failed()
        assert "4 of 6 cells failed (67% > max_failed_share 50%)" in state.message
        day = (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=1)).isoformat()
        ok = nightly_flow(FAILING, str(tmp_path), n_workers=2, max_failed_share=0.7, day=day)
        APILogWorker.drain_all(timeout=10)  # before the server stops
    assert ok["failed"] == 4 and ok["runnable"] == 6
    assert ok["changed_cells"] == 0 and ok["comparison"].startswith("0 of 6 cells changed")  # against tonight's
    assert (tmp_path / "nightly-fails" / f"{day}.zarr.report" / "index.md").exists()


def test_an_extending_nightly_grows_one_store_and_fails_when_cells_fail(server, tmp_path):
    """``extend_by``: each night continues the same store by ΔT (bitwise a run to the new T), its
    report compares the summaries with the previous night's, and the night whose longer T makes
    too many cells fail fails in Prefect."""
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from geosweep.flows.deployments import nightly_flow
    from geosweep.sweeps.extension import typed
    from tests.sweep_util import assert_stores_bitwise_equal

    # RK4 at h = 0.01 passes its tiny energy guard at t = 0.02, at h = 0.005 only at t = 0.94
    spec = {**SPEC, "name": "nightly-grows", "T": 0.5, "integrator_options": {"rk4": {"blowup": 1e-7}}}
    url, _ = server
    kw = {"n_workers": 2, "extend_by": 1.0, "max_failed_share": 0.3}
    with temporary_settings(updates={PREFECT_API_URL: url}):
        first = nightly_flow(spec, str(tmp_path), **kw)
        second = nightly_flow(spec, str(tmp_path), return_state=True, **kw)
        APILogWorker.drain_all(timeout=10)
    assert first["failed"] == 1 and first["runnable"] == 4 and first["previous"] is None
    assert second.is_failed() and "2 of 4 cells failed (50% > max_failed_share 30%)" in second.message
    base = tmp_path / "nightly-grows"
    store = base / "extended.zarr"
    g = zarr.open_group(str(store), mode="r")
    assert g.attrs["T"] == 1.5 and (base / "extended.nights" / "T0.5.zarr").is_dir()
    index = (base / "extended.zarr.report" / "index.md").read_text()
    # what changed as T grew: the summaries of the cells still running, and one status (RK4, h = 0.005)
    assert "Comparison with the previous night" in index
    assert re.search(r"[1-4] of 4 cells changed since \S*T0\.5\.zarr\S* \(1 in status", index), index[:2000]
    direct = tmp_path / "direct.zarr"
    run_sweep(typed(json.loads(g.attrs["spec"])), direct, serial=True)
    assert_stores_bitwise_equal(str(store), str(direct))


def test_serve_refuses_without_a_prefect_server(tmp_path):
    spec = tmp_path / "nightly.toml"
    spec.write_text(SPEC_TOML)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"PREFECT_HOME": str(tmp_path)}
    p = subprocess.run(
        [*_geosweep_cmd(), "serve", str(spec), "--store-root", str(tmp_path / "r")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and "PREFECT_API_URL" in p.stderr and "--temporary" in p.stderr
    assert "Traceback" not in p.stderr


def test_prefect_yaml_parameters_are_nightly_flow_parameters():
    import inspect

    import yaml

    from geosweep.flows.deployments import nightly_flow

    doc = yaml.safe_load((Path(__file__).resolve().parent.parent / "deploy" / "prefect.yaml").read_text())
    (dep,) = doc["deployments"]
    accepted = set(inspect.signature(nightly_flow.fn).parameters)
    assert set(dep["parameters"]) <= accepted and {"max_failed_share", "compare_rtol"} <= set(dep["parameters"])


LONG_TOML = """name = "nightly-killed"
system = "lj_sphere"
integrators = ["explicit_vi", "rk4"]
h = 0.005
T = 200.0
dt_out = 1.0
checkpoint_every = 10.0
[params]
level = 2
omega = [3.25, 2.0]
"""


def _state(url: str, run_id: str) -> str:
    return httpx.get(f"{url}/flow_runs/{run_id}", timeout=10).json()["state_type"]


def test_a_killed_night_is_marked_crashed_and_a_rerun_resumes(server, tmp_path):
    """The served run's whole process group is SIGKILLed (like a walltime or scancel): the server's
    crash-detection automation marks it Crashed once its heartbeats stop, and a rerun resumes the
    night's store, keeping what the killed run finished."""
    url, env = server
    spec = tmp_path / "killed.toml"
    spec.write_text(LONG_TOML)
    root = tmp_path / "nightly"
    cmd = [*_geosweep_cmd(), "serve", str(spec), "--store-root", str(root), "--cron", "0 3 1 1 *", "--workers", "2"]
    cmd += ["--heartbeat", "30", "--crash-after", "35"]
    t0 = time.monotonic()
    serve = subprocess.Popen(
        cmd,
        env=env | {"PREFECT_RUNNER_POLL_FREQUENCY": "2"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        dep = None
        while time.monotonic() - t0 < 90 and dep is None:
            r = httpx.get(f"{url}/deployments/name/geosweep-nightly/nightly-nightly-killed", timeout=10)
            dep = r.json() if r.status_code == 200 else None
            assert serve.poll() is None, serve.stdout.read()[-3000:]
            time.sleep(1)
        assert dep is not None
        autos = httpx.post(f"{url}/automations/filter", json={}, timeout=10).json()
        assert any(a["name"].startswith("geosweep: crash") and a["enabled"] for a in autos)
        run = httpx.post(f"{url}/deployments/{dep['id']}/create_flow_run", json={}, timeout=10).json()
        while time.monotonic() - t0 < 150 and _state(url, run["id"]) != "RUNNING":
            assert serve.poll() is None, serve.stdout.read()[-3000:]
            time.sleep(1)
        assert _state(url, run["id"]) == "RUNNING"
        store = root / "nightly-killed"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(store.glob("*.zarr/_checkpoints/*.npz")):
            time.sleep(0.5)  # some cell is under way: the kill loses work in progress
    finally:
        os.killpg(serve.pid, signal.SIGKILL)  # no handler runs: nothing reports the run's end
        serve.wait(10)
    killed_at = time.monotonic()
    while time.monotonic() - killed_at < 120 and _state(url, run["id"]) == "RUNNING":
        time.sleep(2)
    assert _state(url, run["id"]) == "CRASHED", (
        f"still {_state(url, run['id'])} {time.monotonic() - killed_at:.0f} s after the kill"
    )
    print(f"marked Crashed {time.monotonic() - killed_at:.0f} s after the kill")

    (night,) = store.glob("*.zarr")
    assert (night.parent / f"{night.name}.lease").exists()  # the dead run's lease is still there
    res = run_sweep(str(spec), night, n_workers=2)  # the rerun: takes the dead run's lease over
    assert res.complete and res.resumed >= 1 and res.skipped + res.ran == res.total


def test_night_summaries_of_distinct_T_never_share_a_name_and_old_names_still_read(tmp_path):
    """An extending nightly keeps each night's summaries as ``extended.nights/T<T>.zarr``: named by the
    shortest text that reads back as exactly T (``T{T:g}`` before: 6 digits, 100000 and 100000.5 shared
    ``T100000.zarr``, 1234567 and 1234568 ``T1.23457e+06.zarr``); folders written under the old names,
    and new ones, are read back at their T, other names ignored."""
    from geosweep.flows.nights import _night_summaries, night_summary_name

    Ts = [0.5, 1.0, 1e5, 1e5 + 0.5, 1234567.0, 1234568.0, 1e16, 1e16 + 2.0, 0.1 + 0.2, 0.3]
    names = [night_summary_name(T) for T in Ts]
    assert len(set(names)) == len(Ts)
    assert night_summary_name(0.5) == "T0.5.zarr"  # the names of earlier nights at such T are unchanged
    nights = tmp_path / "extended.nights"
    for name in [*names, "T2e+06.zarr", "Tabc.zarr", "notes.txt"]:  # T2e+06: a T{T:g} name of before
        (nights / name).mkdir(parents=True)
    found = dict(_night_summaries(str(nights), None))
    assert sorted(found) == sorted([*Ts, 2e6])
    assert all(found[T] == str(nights / night_summary_name(T)) for T in Ts)
