"""The Python processes geosweep starts (Prefect's temporary server, the compile helpers of
``systems``/``serve``, Dask worker processes) do not put the working directory on ``sys.path``
(issue 23 item 7): a ``uvicorn.py`` or ``yaml.py`` lying there is never run. Real processes: the
console script on its default (Prefect) path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

SPEC = """name = "safe"
system = "spring_pendula"
integrators = ["explicit_vi"]
h = [0.01]
T = 0.1
dt_out = 0.05
"""


@pytest.mark.parametrize("name", ["uvicorn", "yaml"])  # the server's module; one a spec's compile imports
def test_modules_in_the_working_directory_do_not_run(tmp_path, name):
    marker = tmp_path / "executed"
    (tmp_path / f"{name}.py").write_text(
        f"with open({str(marker)!r}, 'a') as f:\n    f.write({name!r} + '\\n')\nraise SystemExit(7)\n"
    )
    (tmp_path / "s.toml").write_text(SPEC)
    exe = shutil.which("geosweep")
    cmd = [exe] if exe else [sys.executable, "-P", "-m", "geosweep.flows.cli"]
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}  # the temporary server is started
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # a cold stamp: the spec's kernels are warmed too
    if name == "yaml":  # a cold Numba cache too: "compiling kernels" proves the compile ran
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    p = subprocess.run([*cmd, "run", "s.toml", "--store", "s.zarr", "--workers", "1"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert not marker.exists(), f"ran from the working directory: {marker.read_text()}"
    assert p.returncode == 0, p.stderr[-3000:]
    assert "cells complete: 1/1" in p.stdout
    assert name != "yaml" or "compiling kernels" in p.stderr


def test_dask_worker_processes_do_not_run_modules_of_the_working_directory(tmp_path, dask_path):
    """``--processes``: Dask spawns its workers with ``python -c`` (the working directory first on
    sys.path); a ``multiprocessing.py`` there would run in every worker."""
    marker = tmp_path / "executed"
    (tmp_path / "multiprocessing.py").write_text(
        f"with open({str(marker)!r}, 'a') as f:\n    f.write('multiprocessing\\n')\nraise SystemExit(7)\n"
    )
    (tmp_path / "s.toml").write_text(SPEC)
    exe = shutil.which("geosweep")
    cmd = [exe] if exe else [sys.executable, "-P", "-m", "geosweep.flows.cli"]
    p = subprocess.run([*cmd, "run", "s.toml", "--store", "s.zarr", "--workers", "1", "--processes", "--no-prefect"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert not marker.exists(), f"ran from the working directory: {marker.read_text()}"
    assert p.returncode == 0 and "cells complete: 1/1" in p.stdout, p.stderr[-3000:]


def test_the_flag_keeps_pythonpath(tmp_path):
    """``-P`` (not ``-I``): PYTHONPATH, where plugins may live, still reaches the helpers."""
    from geosweep.flows.firstrun import SAFE_PATH

    (tmp_path / "plugin_dir").mkdir()
    (tmp_path / "plugin_dir" / "my_plugin_mod.py").write_text("VALUE = 42\n")
    (tmp_path / "my_cwd_mod.py").write_text("VALUE = 1\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "plugin_dir")}
    code = "import my_plugin_mod\ntry:\n    import my_cwd_mod\nexcept ImportError:\n    print('ok')\n"
    p = subprocess.run([sys.executable, *SAFE_PATH, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
