"""Every unusable input is refused through the real CLI with ONE line naming the problem and
exit 2, no traceback, before any work (issue 11 point 7; S3 cases: tests/test_deploy.py)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.plan import make_plan

REPO = Path(__file__).resolve().parent.parent
SPEC = """name = "errs"
system = "spring_pendula"
integrators = ["explicit_vi", "rk4"]
h = [0.01]
T = 0.2
dt_out = 0.1
"""
SPEC_DICT = {"name": "errs", "system": "spring_pendula", "integrators": ["explicit_vi", "rk4"], "h": [0.01],
             "T": 0.2, "dt_out": 0.1}  # fmt: skip


def geosweep(*args: str, cwd: Path, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    """``geosweep ARGS`` in a fresh process (the console script's code path); (result, seconds)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("PREFECT_API_URL", None)  # the default path would start Prefect's temporary server
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "geosweep.flows.cli", *args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=timeout)  # fmt: skip
    return p, time.monotonic() - t0


def assert_one_line(p: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, nothing on stdout, one line on stderr that contains ``words``."""
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2, p.stderr[-3000:]
    assert "Traceback" not in p.stderr and p.stdout.strip() == "", p.stderr[-3000:] + p.stdout[-1000:]
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture()
def spec(tmp_path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(SPEC)
    return path


def test_spec_with_invalid_utf8(tmp_path):
    (tmp_path / "bad.toml").write_bytes(b'name = "caf\xe9"\nsystem = "spring_pendula"\n')
    p, _ = geosweep("run", "bad.toml", cwd=tmp_path)
    assert_one_line(p, "bad.toml", "not UTF-8", "0xe9")


def test_spec_path_at_dev_zero_is_not_read_fully(tmp_path):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    p, _ = geosweep("run", "/dev/zero", cwd=tmp_path)  # refused by its suffix, before reading
    assert_one_line(p, "zero", ".toml, .yaml or .yml")
    (tmp_path / "zero.toml").symlink_to("/dev/zero")  # a spec suffix: a device is refused before reading
    p, seconds = geosweep("run", "zero.toml", cwd=tmp_path)
    assert_one_line(p, "zero.toml", "not a regular file")
    (tmp_path / "big.toml").write_bytes(b"#" * (5 * 2**20))  # a regular file: read with a size cap
    p, _ = geosweep("run", "big.toml", cwd=tmp_path)
    assert_one_line(p, "big.toml", "larger than")
    assert seconds < 60


def test_store_path_is_a_regular_file(tmp_path, spec):
    (tmp_path / "results.zarr").write_text("not a store")
    p, _ = geosweep("run", spec.name, "--store", "results.zarr", "--serial", cwd=tmp_path)
    assert_one_line(p, "results.zarr", "is a file")
    p, _ = geosweep("status", "results.zarr", cwd=tmp_path)
    assert_one_line(p, "results.zarr")
    assert (tmp_path / "results.zarr").read_text() == "not a store"


def test_store_path_under_a_file(tmp_path, spec):
    (tmp_path / "plain").write_text("x")
    p, _ = geosweep("run", spec.name, "--store", "plain/deeper/s.zarr", "--serial", cwd=tmp_path)
    assert_one_line(p, "plain/deeper/s.zarr", "is a file")
    assert (tmp_path / "plain").read_text() == "x" and not list(tmp_path.glob("plain*.lease"))


def test_store_path_is_a_non_zarr_directory(tmp_path, spec):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "holiday.jpg").write_bytes(b"\xff\xd8")
    p, _ = geosweep("run", spec.name, "--store", "photos", "--serial", cwd=tmp_path)
    assert_one_line(p, "photos", "not a zarr store")
    assert os.listdir(tmp_path / "photos") == ["holiday.jpg"]


@contextlib.contextmanager
def read_only_dir(path: Path):
    """``path`` as a read-only directory: a read-only tmpfs mount when running as root (root ignores
    permission bits), else mode 0o555."""
    path.mkdir()
    if os.geteuid() != 0:
        (path / "s.zarr").mkdir()
        path.chmod(0o555)
        (path / "s.zarr").chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
            (path / "s.zarr").chmod(0o755)
        return
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(path)], capture_output=True).returncode != 0:
        pytest.skip("running as root without permission to mount a read-only file system")
    try:
        (path / "s.zarr").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True, capture_output=True)
        yield path
    finally:
        subprocess.run(["umount", str(path)], capture_output=True)


def test_store_path_read_only(tmp_path, spec):
    with read_only_dir(tmp_path / "ro") as ro:
        p, _ = geosweep("run", spec.name, "--store", str(ro / "s.zarr"), "--serial", cwd=tmp_path)
        assert_one_line(p, "s.zarr", "read-only")
        p, _ = geosweep("run", spec.name, "--store", str(ro / "new.zarr"), "--serial", cwd=tmp_path)
        assert_one_line(p, "new.zarr", "read-only")


def test_unreachable_scheduler_address(tmp_path, spec):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p, seconds = geosweep("run", spec.name, "--store", "s.zarr", "--address", f"tcp://127.0.0.1:{port}", cwd=tmp_path)
    assert_one_line(p, f"tcp://127.0.0.1:{port}", "Dask scheduler")
    assert seconds < 60 and not (tmp_path / "s.zarr").exists()


def test_status_on_damaged_stores(tmp_path):
    store = tmp_path / "d.zarr"
    assert run_sweep(SPEC_DICT, store, serial=True).complete
    p, _ = geosweep("status", "d.zarr", cwd=tmp_path)
    assert p.returncode == 0 and "cells complete: 2/2" in p.stdout, p.stderr

    # a flag array deleted: named, and `verify --repair` rebuilds it without recomputing anything
    import shutil

    shutil.rmtree(store / "done")
    p, _ = geosweep("status", "d.zarr", cwd=tmp_path)
    assert_one_line(p, "d.zarr", "done", "missing", "verify")
    p, _ = geosweep("verify", "d.zarr", "--repair", cwd=tmp_path)
    assert p.returncode == 0 and "2 cell(s) verified, 0 to recompute" in p.stdout, p.stdout + p.stderr
    p, _ = geosweep("status", "d.zarr", cwd=tmp_path)
    assert p.returncode == 0 and "cells complete: 2/2" in p.stdout, p.stderr

    # an undecodable flag chunk
    chunk = next(f for f in sorted((store / "status").rglob("*")) if f.is_file() and f.name != "zarr.json")
    chunk.write_bytes(b"\x00not zstd at all")
    p, _ = geosweep("status", "d.zarr", cwd=tmp_path)
    assert_one_line(p, "d.zarr", "damaged")

    # unreadable root metadata
    (store / "zarr.json").write_text("{ truncated")
    p, _ = geosweep("status", "d.zarr", cwd=tmp_path)
    assert_one_line(p, "d.zarr", "damaged", "zarr.json")


# ---- size limits known once the models are built: store bytes and memory per task ---------------
BIG = {"name": "big", "system": "lj_sphere", "integrators": ["explicit_vi"], "h": [0.01], "T": 200.0,
       "dt_out": 0.01, "snapshot_dt": 0.01, "params": {"level": 3}}  # fmt: skip


def test_estimated_store_bytes_and_task_memory_are_bounded():
    """642 bodies, a full state every 0.01 up to T: ≈ 0.62 GB per cell (snapshots) — 200 step sizes make a
    124 GB store (limit 100 GB); T = 400 makes one cell need ≈ 3.7 GB in its task (limit 2 GB)."""
    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.spec import LIMITS, SpecError

    many_h = {**BIG, "h": [0.01 / k for k in range(1, 201)]}
    with pytest.raises(SpecError) as e:
        make_plan(many_h)
    assert e.value.problems[0][0] == "store_bytes"
    msg = str(e.value)
    assert "\n" not in msg and "estimated store size 124 GB (200 cells" in msg and "limit 100 GB" in msg
    assert "[limits] store_bytes" in msg
    plan = make_plan({**many_h, "limits": {"store_bytes": 2e11}})  # the explicit override
    est = plan.size_estimate()
    assert 1.2e11 < est["store_bytes"] < 1.3e11 and est["task_memory_bytes"] < LIMITS["task_memory_bytes"]
    # the estimate is the template's real size: snapshot_state alone is snapshots × bodies × 6 × 8 bytes
    assert est["cell_bytes"] >= plan.sizes["snapshot"] * plan.sizes["body"] * 6 * 8

    long = {**BIG, "T": 400.0}
    with pytest.raises(SpecError) as e:
        make_plan(long)
    assert e.value.problems == [(e.value.problems[0][0], e.value.problems[0][1])]
    field, reason = e.value.problems[0]
    assert field == "task_memory_bytes" and "estimated memory per task 3.71 GB" in reason and "limit 2 GB" in reason
    assert make_plan({**long, "limits": {"task_memory_bytes": 8e9}}).grid.size == 1


def test_size_limit_through_the_cli(tmp_path):
    toml = 'name = "big"\nsystem = "lj_sphere"\nintegrators = ["explicit_vi"]\nh = [0.01]\nT = 400.0\n'
    (tmp_path / "big.toml").write_text(toml + "dt_out = 0.01\nsnapshot_dt = 0.01\n[params]\nlevel = 3\n")
    p, _ = geosweep("run", "big.toml", "--store", "big.zarr", "--serial", cwd=tmp_path, timeout=300)
    assert p.returncode == 2 and "task_memory_bytes" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "big.zarr").exists()


@pytest.mark.parametrize("workers", ["-1", "0", "two"])
def test_workers_must_be_at_least_one(workers, capsys):
    from geosweep.flows.cli import main

    with pytest.raises(SystemExit) as e:
        main(["run", "s.toml", "--workers", workers])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "argument --workers: must be" in err and "Traceback" not in err


def _tbb_loads() -> bool:
    from geosweep.sweeps.numba_env import _loadable

    return _loadable("tbb")


#: Numba's threading settings that fail inside Numba (its import, or its layer's start in a cell)
NUMBA_ENV = [
    pytest.param({"NUMBA_THREADING_LAYER": "tbb"}, "NUMBA_THREADING_LAYER='tbb'", "cannot be loaded", id="tbb"),
    pytest.param({"NUMBA_THREADING_LAYER": "bogus"}, "NUMBA_THREADING_LAYER='bogus'", "workqueue", id="bogus"),
    pytest.param({"NUMBA_NUM_THREADS": "0"}, "NUMBA_NUM_THREADS='0'", ">= 1", id="zero-threads"),
]


@pytest.mark.parametrize("env,name,reason", NUMBA_ENV)
def test_a_bad_numba_threading_environment_is_refused_before_the_store(tmp_path, spec, monkeypatch, env, name, reason):
    """An unknown or unloadable threading layer, or no threads: one line naming the variable, exit 2,
    no store and no lease (before: Numba's traceback, after the store was created)."""
    if env.get("NUMBA_THREADING_LAYER") == "tbb" and _tbb_loads():
        pytest.skip("Intel TBB loads here")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # threads inside the cell: the threading layer starts in the run (what an unloadable one fails)
    spec.write_text(SPEC.replace('"spring_pendula"', '"lj_sphere"') + "[params]\nlevel = 1\n")
    p, _ = geosweep("run", spec.name, "--store", "s.zarr", "--serial", "--threads-per-cell", "2", cwd=tmp_path)
    assert_one_line(p, name, reason)
    assert not (tmp_path / "s.zarr").exists() and not list(tmp_path.glob("s.zarr*"))


def test_a_file_where_the_store_keeps_its_checkpoints_is_refused(tmp_path, spec):
    """A file named ``_checkpoints`` in a store (or ``_carries``): one line naming it, exit 2, the
    store unchanged (before: FileExistsError from the first checkpoint a cell saved)."""
    from geosweep.sweeps.store import StoreRef, ensure_store

    spec.write_text(SPEC.replace("T = 0.2", "T = 0.4") + "checkpoint_every = 0.1\n")
    store = tmp_path / "s.zarr"
    assert ensure_store(make_plan(str(spec)), StoreRef.of(store))  # a new store, no cell run yet
    for name in ("_checkpoints", "_carries"):
        (store / name).write_text("not a folder")
        p, _ = geosweep("run", spec.name, "--store", "s.zarr", "--serial", cwd=tmp_path)
        assert_one_line(p, str(store / name), "is a file", "damaged")
        assert (store / name).read_text() == "not a folder"
        (store / name).unlink()
    p, _ = geosweep("run", spec.name, "--store", "s.zarr", "--serial", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]


def test_serve_refuses_an_extend_by_that_is_not_a_positive_duration(tmp_path, spec):
    """``--extend-by`` 0 (before: silently a dated nightly), negative or not finite (before: accepted
    until the night ran): one line naming the option, exit 2, before the Prefect server is looked for
    (no PREFECT_API_URL here: that refusal would come next)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"PREFECT_HOME": str(tmp_path)}
    for value in ("0", "-1", "nan", "inf"):
        p = subprocess.run(
            [sys.executable, "-m", "geosweep.flows.cli", "serve", str(spec), "--store-root", str(tmp_path / "r"),
             "--extend-by", value],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        line = assert_one_line(p, f"--extend-by {float(value)!r}: must be a finite duration > 0")
        assert "PREFECT_API_URL" not in line
    assert not (tmp_path / "r").exists()
