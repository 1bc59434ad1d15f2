"""One execution object (issue 24 item 4): the execution options are built once, from the command
line or from ``run_sweep``'s keywords, into :class:`geosweep.sweeps.execution.Execution`, and
only that module starts a Dask cluster."""

from __future__ import annotations

import re
from pathlib import Path

from geosweep.flows.cli import build_parser
from geosweep.sweeps.execution import Execution
from geosweep.sweeps.run_options import RunOptions

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("geosweep", "kernels", "sweeps", "flows", "analysis", "deploy")


def test_only_the_execution_module_builds_a_local_cluster():
    builders = sorted(
        str(path.relative_to(ROOT))
        for folder in SOURCES
        for path in (ROOT / folder).rglob("*.py")
        if re.search(r"\bLocalCluster\(", path.read_text())
    )
    assert builders == ["sweeps/execution.py"]


def test_execution_is_read_from_the_command_line():
    args = build_parser().parse_args(
        ["run", "s.toml", "--workers", "3", "--processes", "--slice-seconds", "5", "--threads-per-cell", "2"]
    )
    assert Execution.from_args(args) == Execution(n_workers=3, processes=True, slice_seconds=5.0, threads_per_cell=2)
    args = build_parser().parse_args(["run", "s.toml", "--serial"])
    assert Execution.from_args(args) == Execution(serial=True)
    args = build_parser().parse_args(["run", "s.toml", "--address", "tcp://h:8786"])
    assert Execution.from_args(args) == Execution(address="tcp://h:8786")
    assert (
        Execution(threads_per_cell=2).run
        == RunOptions(threads_per_cell=2)
        == Execution.from_args(build_parser().parse_args(["run", "s.toml", "--threads-per-cell", "2"])).run
    )


def test_run_sweep_builds_its_execution_from_keywords(tmp_path):
    """The keyword API and an explicit Execution run the same sweep, bitwise."""
    from geosweep.sweeps.engine import run_sweep
    from geosweep.sweeps.store import open_results

    spec = {"name": "ex", "system": "double_pendulum", "integrators": ["rk4"], "h": [0.01, 0.005], "T": 1.0}
    spec["dt_out"] = 0.25
    a = run_sweep(spec, tmp_path / "a.zarr", serial=True, slice_seconds=0.5)
    b = run_sweep(spec, tmp_path / "b.zarr", execution=Execution(serial=True, slice_seconds=0.5))
    assert a.complete and b.complete
    da, db = open_results(str(tmp_path / "a.zarr")), open_results(str(tmp_path / "b.zarr"))
    for name in ("status", "energy_error", "final_state"):
        assert da[name].equals(db[name]), name


def test_local_worker_processes_keep_glibc_memory_thresholds(monkeypatch):
    """geosweep's local worker processes start without Dask's ``MALLOC_TRIM_THRESHOLD_`` (page faults
    of every shard's temporary arrays, ~7 % of a run of short cells) and with its other variables,
    also when this process has the variable (a nanny of an earlier Dask cluster copies it into its own
    process's environment); Dask's configuration and this process's environment are left as they were."""
    import os

    import dask
    from distributed import Client

    from geosweep.sweeps.execution import local_cluster

    before = dask.config.get("distributed.nanny.pre-spawn-environ")
    assert "MALLOC_TRIM_THRESHOLD_" in before  # Dask's default, which this changes
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")  # as an earlier nanny leaves it
    with local_cluster(1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
        env = next(iter(client.run(lambda: dict(os.environ)).values()))
    assert "MALLOC_TRIM_THRESHOLD_" not in env
    assert env.get("OMP_NUM_THREADS") == "1"
    assert dask.config.get("distributed.nanny.pre-spawn-environ") == before
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"


def test_durations_from_the_environment_share_one_parser(monkeypatch):
    import pytest

    from geosweep.sweeps.env_seconds import env_seconds
    from geosweep.sweeps.first_worker import first_worker_seconds

    monkeypatch.setenv("GEOSWEEP_TEST_SECONDS", " ")
    assert env_seconds("GEOSWEEP_TEST_SECONDS", 7.0, zero=False) == 7.0
    monkeypatch.setenv("GEOSWEEP_TEST_SECONDS", "0")
    assert env_seconds("GEOSWEEP_TEST_SECONDS", 7.0, zero=True) == 0.0
    for bad, zero in (("0", False), ("-1", True), ("nan", True), ("soon", True)):
        monkeypatch.setenv("GEOSWEEP_TEST_SECONDS", bad)
        with pytest.raises(ValueError, match=rf"^GEOSWEEP_TEST_SECONDS='{bad}': must be a number of seconds"):
            env_seconds("GEOSWEEP_TEST_SECONDS", 7.0, zero=zero)
    monkeypatch.setenv("GEOSWEEP_FIRST_WORKER_TIMEOUT", "x")
    with pytest.raises(ValueError, match=r">= 0 \(0: wait as long as it takes\)$"):
        first_worker_seconds()
