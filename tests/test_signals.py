"""Interrupts and hangs with real processes: a signal raised where Python swallows exceptions (a GC
callback) still stops the run, a second signal still works, a terminal's Ctrl-C (SIGINT to the whole
process group) and SIGTERM stop ``geosweep run`` with one line on every path, and a paused worker of
an ``--address`` cluster is named within a bounded time."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from tests.proc_util import store_files, wait_for_scheduler
from tests.test_cli_output import LONG, N_LONG, _alive, _cells_done, _cmd

#: a process that gets SIGTERM while Python code runs inside a GC callback (as distributed's GC
#: diary does), or whose library swallows the first KeyboardInterrupt
SCRIPT = textwrap.dedent(
    """
    import gc, os, signal, sys, threading, time
    from geosweep.flows.output import Interrupts

    sent = []

    def signal_inside_gc(phase, info):
        if phase == "start" and not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)  # the handler runs here, inside the GC callback

    def swallowing_library():
        try:
            time.sleep(5)
        except BaseException:
            print("swallowed", flush=True)

    late = threading.Event()  # set once the main thread has slept 5 s: a signal delivered only after its wait
    threading.Timer(5.0, late.set).start()
    with Interrupts() as it:
        try:
            if sys.argv[1] == "gc":
                gc.callbacks.append(signal_inside_gc)
                gc.collect()
            else:
                threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
                threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
                swallowing_library()
            time.sleep(10)
            print("not interrupted", flush=True)
        except KeyboardInterrupt:
            it.caught()
            print("interrupted", it.exit_code, "late" if late.is_set() else "at once", flush=True)
            os._exit(it.exit_code)
    """
)


@pytest.mark.parametrize("case", ["gc", "second"])
def test_no_signal_is_lost(tmp_path, case):
    """A SIGTERM inside a GC callback ("Exception ignored" before) and a second signal after a
    swallowed first one both stop the process — at once, also while it sleeps — with exit 143 from the
    first signal, nothing printed."""
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(script), case], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "interrupted 143 at once", (p.stdout, p.stderr)
    assert p.returncode == 143 and p.stderr == ""


def _worker_processes(pid: int) -> list[psutil.Process]:
    """The ``--processes`` workers among ``pid``'s children (one that has just exited is no worker)."""
    out = []
    for c in psutil.Process(pid).children(recursive=True):
        try:
            if "multiprocessing.spawn" in " ".join(c.cmdline()):
                out.append(c)
        except psutil.Error:  # ended (a zombie until reaped) between the listing and the look
            pass
    return out


def _workers_older_than(pid: int, seconds: float) -> bool:
    workers = _worker_processes(pid)
    return len(workers) >= 2 and all(time.time() - w.create_time() > seconds for w in workers)


def _run_and_signal_group(args: list[str], cwd, sig: int, env: dict | None = None, ready=None):
    """Start ``geosweep ARGS`` in a process group of its own and send ``sig`` to the whole group (as a
    terminal's Ctrl-C does) once ``ready(pid)`` (default: a cell of ``cwd/l.zarr`` is done): (exit code,
    output, the processes it had started)."""
    ready = ready or (lambda pid: _cells_done(cwd / "l.zarr") >= 1)
    proc = subprocess.Popen(
        [*_cmd(), *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    t0 = time.monotonic()
    try:
        while not ready(proc.pid):
            assert proc.poll() is None, "".join(lines)[-3000:]
            assert time.monotonic() - t0 < 240, "".join(lines)[-3000:]
            time.sleep(0.1)
        children = psutil.Process(proc.pid).children(recursive=True)
        for c in children:
            try:
                c.info = {"cmdline": " ".join(c.cmdline())}
            except psutil.Error:  # ended (a zombie until reaped) since the listing
                c.info = {"cmdline": ""}
        os.killpg(proc.pid, sig)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    reader.join(10)
    time.sleep(1.0)
    return proc.returncode, "".join(lines), children


#: SIGTERM to the group is ``slow``: CI keeps SIGINT to the group here and SIGTERM to the process on the
#: same Prefect path (``test_cli_output.test_sigterm_on_the_prefect_path_leaves_no_prefect_server``)
@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_a_terminal_interrupt_on_the_prefect_path_is_one_line_and_the_rerun_resumes(tmp_path, sig):
    """SIGINT/SIGTERM to the whole process group of ``geosweep run`` (default Prefect path, its temporary
    server): one line, exit 130/143, no traceback, no process left; the rerun completes the store without
    rewriting the shards finished before."""
    (tmp_path / "long.toml").write_text(LONG)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # the temporary server: a child
    args = ["run", "long.toml", "--store", "l.zarr", "--workers", "2"]
    code, out, children = _run_and_signal_group(args, tmp_path, sig, env)
    assert code == 128 + sig, out[-3000:]
    assert out.strip().splitlines()[-1] == "geosweep: interrupted; rerun the same command to resume"
    assert "Traceback" not in out and "Error" not in out and "Crash detected" not in out, out[-3000:]
    assert any("uvicorn" in c.info["cmdline"] for c in children), [c.info for c in children]
    assert not _alive(children), [c.info for c in _alive(children)]
    done = _cells_done(tmp_path / "l.zarr")
    assert 1 <= done < N_LONG
    if sig != signal.SIGINT:
        return
    before = {k: v for k, v in store_files(tmp_path / "l.zarr").items() if "/c/" in k}
    p = subprocess.run([*_cmd(), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"{done}/{N_LONG} cells already complete, {N_LONG - done} to run" in p.stderr
    assert f"cells complete: {N_LONG}/{N_LONG}" in p.stdout
    after = store_files(tmp_path / "l.zarr")
    assert {k: after.get(k) for k in before} == before  # the finished shards were not written again


def test_ctrl_c_with_worker_processes_prints_no_worker_traceback(tmp_path):
    """SIGINT to the whole group while ``--processes`` workers start (importing) and later while they run
    cells: the one line and exit 130 only — the workers ignore SIGINT and the driver stops them."""
    (tmp_path / "long.toml").write_text(LONG)
    args = ["run", "long.toml", "--store", "l.zarr", "--workers", "2", "--processes", "--no-prefect"]
    for starting in (True, False):
        shutil.rmtree(tmp_path / "l.zarr", ignore_errors=True)
        # as soon as both worker processes exist (their interpreters starting: SIGINT blocked from their
        # first instruction, sweeps.execution.local_cluster; before, 4 runs in 6 printed a traceback from
        # the site module), or once a cell is done
        ready = (lambda pid: _workers_older_than(pid, 0.0)) if starting else None
        code, out, children = _run_and_signal_group(args, tmp_path, signal.SIGINT, ready=ready)
        assert code == 130, out[-3000:]
        assert out.strip().splitlines()[-1] == "geosweep: interrupted; rerun the same command to resume"
        assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-3000:]
        assert not _alive(children)
        assert starting or _cells_done(tmp_path / "l.zarr") < N_LONG


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd: list[str], env: dict, log) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for_line(lines: list[str], text: str, proc: subprocess.Popen, seconds: float = 240) -> None:
    t0 = time.monotonic()
    while not any(text in line for line in lines):
        assert proc.poll() is None, "".join(lines)[-3000:]
        assert time.monotonic() - t0 < seconds, "".join(lines)[-3000:]
        time.sleep(0.1)


def _wait_for_slices(address: str, proc: subprocess.Popen, lines: list[str], seconds: float = 240) -> None:
    """Until the scheduler reports a slice of the run processing on a worker (asked, not slept for)."""
    from distributed import Client

    t0 = time.monotonic()
    with Client(address, timeout=30) as client:
        while not any("slice" in str(key) for keys in client.processing().values() for key in keys):
            assert proc.poll() is None, "".join(lines)[-3000:]
            assert time.monotonic() - t0 < seconds, "".join(lines)[-3000:]
            time.sleep(0.1)


#: the paused-worker cases: (workers, Prefect path, the scheduler's worker-ttl). With two workers the
#: run waits for the ttl before it reruns the paused worker's slices: CI runs it with a ttl of 12 s
#: (still twice the 6 s after which the worker is named); the 20 s variant is ``slow``
PAUSED = [
    (1, False, "20s"),
    (1, True, "20s"),
    pytest.param(2, False, "12s", id="2-False-short-ttl"),
    pytest.param(2, False, "20s", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("workers,prefect,ttl", PAUSED)
def test_a_paused_worker_of_an_address_cluster_is_named_and_never_hangs_the_run(tmp_path, workers, prefect, ttl):
    """A real ``dask scheduler`` and ``dask worker`` processes; one worker is paused (SIGSTOP) while it runs
    slices. Its name is printed after ``GEOSWEEP_WORKER_TIMEOUT`` s without heartbeat; with no other worker
    the run stops with one line and exit 1 (on the Prefect path too: no retry, no Prefect traceback), with
    another one the run goes on and completes once the scheduler removes the paused worker (its
    worker-ttl) and reruns its slices."""
    (tmp_path / "long.toml").write_text(LONG)
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": ttl, "GEOSWEEP_WORKER_TIMEOUT": "6"}
    env.pop("PREFECT_API_URL", None)
    log = open(tmp_path / "cluster.log", "w")
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    procs = [_start([*dask, "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"], env, log)]
    wait_for_scheduler(address, procs[0])
    worker_cmd = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny", "--no-dashboard"]
    run = None
    try:
        for _ in range(workers):
            procs.append(_start([*worker_cmd, "--nthreads", "2", "--resources", "geosweep-slice=1"], env, log))
        args = [*_cmd(), "run", "long.toml", "--store", "l.zarr", "--address", address]
        args += [] if prefect else ["--no-prefect"]
        run = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(iter(run.stdout.readline, "")), daemon=True).start()
        _wait_for_line(lines, f"on {workers} workers", run)
        _wait_for_slices(address, run, lines)
        paused = procs[1]
        os.kill(paused.pid, signal.SIGSTOP)
        _wait_for_line(lines, "no heartbeat for 6 s", run, seconds=120)
        code = run.wait(300)
        out = "".join(lines)
        assert re.search(r"worker tcp://127\.0\.0\.1:\d+: no heartbeat for 6 s \(paused", out), out[-3000:]
        assert "Traceback" not in out and "Retry" not in out, out[-3000:]
        if workers == 1:
            assert code == 1, out[-3000:]
            last = out.strip().splitlines()[-1]
            assert last.startswith("geosweep: no Dask worker has answered for 6 s (tcp://127.0.0.1:"), out[-3000:]
            assert "rerun the same command to resume" in last
            assert _cells_done(tmp_path / "l.zarr") < N_LONG
        else:
            assert code == 0, out[-3000:]
            assert f"cells complete: {N_LONG}/{N_LONG}" in out
    finally:
        for p in [run, *procs]:
            if p is not None and p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait(10)
        log.close()


def _read_into(proc: subprocess.Popen, lines: list[str]) -> None:
    lines.extend(iter(proc.stdout.readline, ""))


@pytest.mark.parametrize("runs", [3, pytest.param(8, marks=pytest.mark.slow)])
def test_sigterm_at_random_instants_always_stops_the_run_with_one_line(tmp_path, runs):
    """``runs`` runs (threads, no Prefect), each sent one SIGTERM at a random instant (seeded) within 3 s of
    its first line, run i in the i-th of ``runs`` equal parts of those 3 s — setup, warm-up, cells, shard
    writes: every run exits 143 with the one line, nothing swallowed ("Exception ignored") and no
    traceback. CI sends 3; the 8-run variant is ``slow``."""
    import random

    (tmp_path / "long.toml").write_text(LONG)
    rng = random.Random(23)
    for i in range(runs):
        store = f"s{i}.zarr"
        proc = subprocess.Popen(
            [*_cmd(), "run", "long.toml", "--store", store, "--no-prefect", "--workers", "2"], cwd=tmp_path,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        lines: list[str] = []
        threading.Thread(target=_read_into, args=(proc, lines), daemon=True).start()
        try:
            _wait_for_line(lines, "geosweep: ", proc)
            time.sleep(3.0 * (i + rng.random()) / runs)
            os.killpg(proc.pid, signal.SIGTERM)
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.2)
        out = "".join(lines)
        assert code == 143, (i, out[-3000:])
        assert out.strip().splitlines()[-1] == "geosweep: interrupted; rerun the same command to resume", (i, out)
        assert "Traceback" not in out and "Exception ignored" not in out, (i, out[-3000:])


@pytest.mark.parametrize("value", ["abc", "0", "-5"])
def test_a_bad_worker_timeout_is_refused_in_one_line(tmp_path, monkeypatch, capsys, value):
    from geosweep.flows.cli import main

    (tmp_path / "s.toml").write_text(LONG)
    monkeypatch.setenv("GEOSWEEP_WORKER_TIMEOUT", value)
    assert main(["run", str(tmp_path / "s.toml"), "--store", str(tmp_path / "s.zarr"), "--no-prefect"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"geosweep: GEOSWEEP_WORKER_TIMEOUT={value!r}: must be a number of seconds > 0"]
    assert not (tmp_path / "s.zarr").exists()


#: two short cells: the run computes them in the driver (no Dask cluster), in ~1 s
SHORT = """name = "sig-short"
system = "spring_pendula"
integrators = ["explicit_vi", "rk4"]
h = [0.01]
T = 0.2
dt_out = 0.1
"""
LINE = "geosweep: interrupted; rerun the same command to resume"


def _signalled(tmp_path, args: list[str], sig: int, when, env: dict | None = None) -> tuple[int, str]:
    """``geosweep ARGS`` in a process group of its own, ``sig`` sent to the group once ``when(lines, t)``
    is true (``lines``: its output so far, ``t``: seconds since it started): (exit code, output)."""
    env = {k: v for k, v in (env or os.environ).items() if k != "PREFECT_API_URL"}
    proc = subprocess.Popen(
        [*_cmd(), *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    threading.Thread(target=_read_into, args=(proc, lines), daemon=True).start()
    t0 = time.monotonic()
    try:
        while not when(lines, time.monotonic() - t0):
            if proc.poll() is not None:  # ended before the instant came
                break
            assert time.monotonic() - t0 < 240, "".join(lines)[-3000:]
            time.sleep(0.005)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        code = proc.wait(120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    time.sleep(0.2)  # the reader's last lines
    return code, "".join(lines)


def _paused(point: str):
    return lambda lines, t: any(f"geosweep-test: paused at {point}" in line for line in lines)


def _assert_interrupted(code: int, out: str, sig: int) -> None:
    assert code == 128 + sig, out[-3000:]
    assert out.strip().splitlines()[-1] == LINE, out[-3000:]
    assert "Traceback" not in out and "Error" not in out and "Exception ignored" not in out, out[-3000:]


def _rerun_equals_a_direct_run(tmp_path, store: str) -> None:
    """The same command again (in the driver, no Prefect) completes the store, equal to a direct run."""
    from geosweep.sweeps.engine import run_sweep
    from tests.sweep_util import assert_stores_bitwise_equal

    p = subprocess.run([*_cmd(), "run", "short.toml", "--store", store, "--no-prefect"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0 and "cells complete: 2/2" in p.stdout, p.stderr[-3000:]
    assert run_sweep(str(tmp_path / "short.toml"), tmp_path / "direct.zarr", serial=True).complete
    assert_stores_bitwise_equal(str(tmp_path / store), str(tmp_path / "direct.zarr"))


#: instants of a run: (test-hook point or None, Prefect path, signal); "import": while geosweep's modules
#: import (the first instruction of the command on), "prefect-start": while Prefect's temporary server
#: starts, "flow-start": inside Prefect's flow engine, "tail": after the last in-driver cell, before the
#: run's record. SIGINT/SIGTERM alternate over them; Prefect's flow start (~20 s) runs once
INSTANTS = [
    ("import", False, signal.SIGINT),
    ("import", False, signal.SIGTERM),
    ("prefect-start", True, signal.SIGINT),
    ("flow-start", True, signal.SIGTERM),
    ("tail", False, signal.SIGTERM),
    ("tail", False, signal.SIGINT),
]
#: CI runs each instant once (SIGTERM during the imports is also test_a_signal_while_the_command_imports…)
SLOW_INSTANTS = {("import", signal.SIGTERM), ("tail", signal.SIGINT)}
INSTANT_PARAMS = [
    pytest.param(p, pf, s, id=f"{p}-{signal.Signals(s).name}", marks=[pytest.mark.slow] * ((p, s) in SLOW_INSTANTS))
    for p, pf, s in INSTANTS
]


@pytest.mark.parametrize("point,prefect,sig", INSTANT_PARAMS)
def test_a_signal_at_a_named_instant_is_the_one_line_and_the_rerun_completes(tmp_path, point, prefect, sig):
    """A signal to the whole group (a terminal's Ctrl-C, or SIGTERM) at each instant the command stops at
    (``GEOSWEEP_TEST_PAUSE``): the one line, exit 130/143, no traceback; the rerun completes the store,
    bitwise equal to a direct run (a run stopped before its record is resumed cleanly)."""
    (tmp_path / "short.toml").write_text(SHORT)
    args = ["run", "short.toml", "--store", "s.zarr", *([] if prefect else ["--no-prefect"])]
    code, out = _signalled(tmp_path, args, sig, _paused(point), {**os.environ, "GEOSWEEP_TEST_PAUSE": point})
    assert f"geosweep-test: paused at {point}" in out, out[-3000:]
    _assert_interrupted(code, out, sig)
    _rerun_equals_a_direct_run(tmp_path, "s.zarr")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_command_imports_is_the_one_line(tmp_path, sig):
    """0.3 s after the start (importing geosweep takes seconds): before, SIGINT printed a
    KeyboardInterrupt traceback and SIGTERM killed the command without a line."""
    (tmp_path / "short.toml").write_text(SHORT)
    code, out = _signalled(tmp_path, ["run", "short.toml", "--store", "s.zarr", "--no-prefect"], sig,
                           lambda lines, t: t > 0.3)  # fmt: skip
    _assert_interrupted(code, out, sig)
    assert not (tmp_path / "s.zarr").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_the_last_line_of_a_run_is_never_a_silent_death(tmp_path, sig):
    """The signal as soon as an in-driver run printed its results (the command is leaving): before, the
    interpreter's finalisation (~0.5 s, the default handlers back) died with -15/-2 and no line; now the
    command has either left with 0 or says the one line with 130/143. Three runs."""
    (tmp_path / "short.toml").write_text(SHORT)
    for i in range(3):
        args = ["run", "short.toml", "--store", f"s{i}.zarr", "--no-prefect"]
        code, out = _signalled(tmp_path, args, sig, lambda lines, t: any("results:" in line for line in lines))
        assert code in (0, 128 + sig), (code, out[-3000:])
        assert code == 0 or out.strip().splitlines()[-1] == LINE, out[-3000:]
        assert "Traceback" not in out
        assert "cells complete: 2/2" in out


def test_after_the_one_line_no_prefect_service_logs():
    """Prefect's services log through a logger whose ``isEnabledFor`` ignores ``logging.disable`` (its events
    worker failing to send a heartbeat once the temporary server stopped printed an ERROR after the one
    line): :func:`quiet_logging` silences it too, :func:`loud_logging` brings it back."""
    import logging

    import prefect._internal.concurrency  # noqa: F401 - creates prefect._internal.concurrency's SafeLogger

    from geosweep.flows.output import loud_logging, quiet_logging

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("prefect._internal.concurrency")
    handler = Keep()
    logger.addHandler(handler)
    try:
        quiet_logging()
        logger.error("Service %r failed to process item %r", "EventsWorker", "heartbeat")
        assert records == []
        loud_logging()
        logger.error("after")
        assert [r.getMessage() for r in records] == ["after"]
    finally:
        loud_logging()
        logger.removeHandler(handler)
