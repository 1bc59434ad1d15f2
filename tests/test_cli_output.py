"""What ``geosweep`` prints: --quiet, --log-level, plain progress lines in a log file, the summary
table on every path, and Ctrl-C/SIGTERM as one line with exit 130/143 and no process left behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
import xarray as xr
import zarr

from geosweep.flows.cli import main
from geosweep.flows.output import progress_line, progress_reporter
from geosweep.sweeps.engine import Progress

SPEC = """
name = "out-test"
system = "spring_pendula"
integrators = ["explicit_vi", "rk2"]
h = [0.01]
T = 1.0
dt_out = 0.1
"""
#: 16 cells of ~0.7 s each: long enough to be interrupted in the middle
LONG = """
name = "out-long"
system = "lj_sphere"
integrators = ["rk4"]
h = [0.0025]
T = 1.5
dt_out = 0.05
[params]
omega = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4, 2.6, 2.8, 3.0]
"""
#: LONG's cells: two store shards of eight, one cell per slice. The shards' models are copied to both
#: workers, so both run the first shard's slices before the second's: the first shard is written
#: half-way, well before the end (when each worker was tied to the shard whose models it held, both
#: shards were written in the same second, done 0 → 16, and the interrupt found nothing to stop).
N_LONG = 16


def _cmd() -> list[str]:
    exe = shutil.which("geosweep")
    return [exe] if exe else [sys.executable, "-m", "geosweep.flows.cli"]


def test_quiet_and_log_level(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    assert main(["run", str(spec), "--store", str(tmp_path / "a.zarr"), "--serial", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.strip() == str(tmp_path / "a.zarr")
    assert main(["run", str(spec), "--store", str(tmp_path / "b.zarr"), "--serial", "--log-level", "warning"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "cells complete: 2/2" in out  # the summary table is a result, not a log line
    assert main(["run", str(spec), "--store", str(tmp_path / "c.zarr"), "--serial"]) == 0
    out, err = capsys.readouterr()
    assert "geosweep: store " in err and "geosweep: cells 2/2 (100%)" in err and "cells complete: 2/2" in out
    with pytest.raises(SystemExit):
        main(["status", str(tmp_path / "a.zarr"), "--log-level", "chatty"])
    assert main(["validate", str(spec), "-q"]) == 0


def test_progress_lines_without_a_terminal():
    import io

    stream = io.StringIO()
    hook, close = progress_reporter(tty=False, every=3600, stream=stream)
    hook(Progress(0, 10, 0, 0.0, 0))
    hook(Progress(5, 10, 1, 20.0, 0))  # within `every`: not printed
    hook(Progress(10, 10, 1, 40.0, 0))
    close()
    lines = stream.getvalue().splitlines()
    assert lines == [
        "geosweep: cells 0/10 (0%), 0 failed, elapsed 0s",
        "geosweep: cells 10/10 (100%), 1 failed, elapsed 40s",
    ]
    assert "\r" not in stream.getvalue()
    p = Progress(3, 10, 0, 90.0, 1)
    assert progress_line(p) == "cells 3/10 (30%), 0 failed, elapsed 1m30s, ETA 5m15s"
    if hasattr(p, "steps_total"):
        p.steps_done, p.steps_total = 50, 200
        assert progress_line(p).startswith("cells 3/10 (30%), steps 25%, ")


def test_no_prefect_run_prints_plain_progress_and_the_summary(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    p = subprocess.run(
        [*_cmd(), "run", str(spec), "--store", str(tmp_path / "s.zarr"), "--no-prefect", "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "\r" not in p.stderr and "distributed." not in p.stderr
    assert re.search(r"^geosweep: cells 2/2 \(100%\), (steps 100%, )?0 failed, elapsed \d+s$", p.stderr, re.M)
    assert "cells complete: 2/2" in p.stdout and "| explicit_vi |" in p.stdout


def _cells_done(store) -> int:
    try:
        return int(zarr.open_group(str(store), mode="r")["done"][...].sum())
    except (FileNotFoundError, KeyError):
        return 0


def _interrupt(args: list[str], cwd, sig: int, env: dict | None = None) -> tuple[int, str, list[psutil.Process], float]:
    """Start ``geosweep ARGS``, send ``sig`` once a cell of ``cwd/l.zarr`` is done; (exit code, output, children,
    seconds from the signal to the exit)."""
    proc = subprocess.Popen(
        [*_cmd(), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    t0 = time.monotonic()
    try:
        while _cells_done(cwd / "l.zarr") < 1:
            assert proc.poll() is None, "".join(lines)[-3000:]
            assert time.monotonic() - t0 < 120, "".join(lines)[-3000:]
            time.sleep(0.1)
        children = psutil.Process(proc.pid).children(recursive=True)
        for c in children:
            try:
                c.info = {"cmdline": " ".join(c.cmdline())}
            except psutil.Error:  # ended (a zombie until reaped) since the listing
                c.info = {"cmdline": ""}
        t_sig = time.monotonic()
        proc.send_signal(sig)
        proc.wait(60)
        stop = time.monotonic() - t_sig
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    reader.join(10)
    time.sleep(0.5)
    return proc.returncode, "".join(lines), children, stop


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def test_ctrl_c_stops_a_run_with_one_line_and_the_rerun_resumes(tmp_path):
    (tmp_path / "long.toml").write_text(LONG)
    args = ["run", "long.toml", "--store", "l.zarr", "--no-prefect", "--processes", "--workers", "2"]
    code, out, children, stop = _interrupt(args, tmp_path, signal.SIGINT)
    assert code == 130, out[-3000:]
    assert out.strip().splitlines()[-1] == "geosweep: interrupted; rerun the same command to resume"
    assert "Traceback" not in out and "distributed." not in out and "WARNING" not in out
    assert len(children) >= 2 and not _alive(children)  # the worker processes are gone
    assert stop < 10
    done = int(xr.open_zarr(tmp_path / "l.zarr")["done"].sum())
    assert 1 <= done < N_LONG
    p = subprocess.run([*_cmd(), *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"{done}/{N_LONG} cells already complete, {N_LONG - done} to run" in p.stderr
    assert f"cells complete: {N_LONG}/{N_LONG}" in p.stdout


def test_sigterm_on_the_prefect_path_leaves_no_prefect_server(tmp_path):
    (tmp_path / "long.toml").write_text(LONG)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # the temporary server: a child process
    code, out, children, stop = _interrupt(
        ["run", "long.toml", "--store", "l.zarr", "--workers", "2"], tmp_path, signal.SIGTERM, env
    )
    assert code == 143, out[-3000:]
    assert out.strip().splitlines()[-1] == "geosweep: interrupted; rerun the same command to resume"
    assert "Traceback" not in out and "Crash detected" not in out and "distributed." not in out
    assert any("prefect" in c.info["cmdline"] or "uvicorn" in c.info["cmdline"] for c in children), children
    assert not _alive(children)
    assert stop < 15  # Prefect records the crash and stops its server; no wait for running cells


def test_first_run_says_it_compiles(tmp_path):
    """A cold Numba cache is announced once, after the spec is valid; a warm cache (even with no
    geosweep stamp) and a refused spec say nothing about compiling."""
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    bad = tmp_path / "bad.toml"
    bad.write_text(SPEC + "[integrator_options.rk4]\nblowup = 0.1\n")  # rk4 is not in the spec
    refused = subprocess.run([*_cmd(), "validate", str(bad)], capture_output=True, text=True, timeout=300, env=env)
    assert refused.returncode == 2 and "compiling" not in refused.stderr, refused.stderr
    first = subprocess.run([*_cmd(), "validate", str(spec)], capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0 and re.match(r"geosweep: compiling kernels \(first run only, ~\d+ s\)", first.stderr)
    assert first.stderr.count("compiling") == 1 and "this validate compiled the kernels" in first.stdout
    again = subprocess.run([*_cmd(), "validate", str(spec)], capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0 and "compiling" not in again.stderr
    assert list((tmp_path / "cache" / "geosweep").glob("kernels-compiled-*"))
    # a new geosweep cache (no stamp) on the same, warm Numba cache: nothing compiles, nothing is said
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache2")
    fresh = subprocess.run([*_cmd(), "run", str(spec), "--no-prefect", "--store", str(tmp_path / "s.zarr")],
                           capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    for noise in ("compiling kernels", "kernels compiled", "compiled its kernels", "ready in", "warm in"):
        assert noise not in fresh.stderr, fresh.stderr


def test_a_spec_run_compiles_in_its_own_process(tmp_path):
    """No helper process for a spec's kernels (it gained no overlap and loaded the cache twice: a fresh
    checkout's first ``--no-prefect`` run on a warm Numba cache spent ~2–4 s in it); the stamp is set."""
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # no stamp; the suite's Numba cache is warm
    args = ["run", str(spec), "--no-prefect", "--serial", "--store", str(tmp_path / "s.zarr")]
    proc = subprocess.Popen([*_cmd(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[str] = set()
    while proc.poll() is None:
        try:
            seen |= {" ".join(c.cmdline()) for c in psutil.Process(proc.pid).children(recursive=True)}
        except psutil.Error:
            pass
        time.sleep(0.02)
    out, err = proc.communicate()
    assert proc.returncode == 0 and "cells complete: 2/2" in out, err[-2000:]
    assert not any("firstrun" in c for c in seen), seen
    assert list((tmp_path / "cache" / "geosweep").glob("kernels-compiled-*"))
