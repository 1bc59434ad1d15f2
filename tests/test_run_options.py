"""A run option that reaches the workers is three edits (issue 50 item 2): a field of
:class:`~geosweep.sweeps.run_options.RunOptions`, its flag in ``geosweep run``'s parser, and the code on
the worker that reads it. Here a toy option is added exactly that way — the field (a ``RunOptions`` with
one more field, registered as the run options), the flag (one ``add_argument``), the use (the worker's
``compute_cell`` records it) — and the value given is seen on a Dask worker thread (and in the driver)
through ``run_sweep``, the CLI and the Prefect flow; nothing else of geosweep is touched. The options of a
run travel to the workers in that one object, never in the plan."""

from __future__ import annotations

import argparse
import threading

import pytest

import geosweep.flows.cli as cli
from geosweep.sweeps import cells, run_options
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.execution import Execution
from geosweep.sweeps.plan import Plan
from geosweep.sweeps.run_options import RunOptions

#: cells computed alone (checkpointed segments: never together), a few of them
SPEC = {
    "name": "toy_option",
    "system": "double_pendulum",
    "integrators": ["rk4"],
    "h": [0.01, 0.005],
    "T": 1.0,
    "dt_out": 0.25,
    "checkpoint_every": 0.5,
}
TOML = (
    'name = "toy_option"\nsystem = "double_pendulum"\nintegrators = ["rk4"]\nh = [0.01, 0.005]\n'
    "T = 1.0\ndt_out = 0.25\ncheckpoint_every = 0.5\n"
)


class ToyOptions(RunOptions):
    """Edit 1, the field."""

    toy: str | None = None


@pytest.fixture
def toy(monkeypatch):
    """Registers the toy option (field, flag, use); yields what the workers saw: (value, thread name)."""
    monkeypatch.setattr(run_options, "RunOptions", ToyOptions)  # edit 1: the field
    real_parser = cli.build_parser

    def build_parser() -> argparse.ArgumentParser:  # edit 2: the flag
        parser = real_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices["run"].add_argument("--toy")
        return parser

    monkeypatch.setattr(cli, "build_parser", build_parser)
    seen: list[tuple[str | None, str]] = []
    real_cell = cells.compute_cell

    def compute_cell(*args, **kwargs):  # edit 3: the use, on the worker
        run = kwargs.get("run", args[9] if len(args) > 9 else None)
        seen.append((getattr(run, "toy", None), threading.current_thread().name))
        return real_cell(*args, **kwargs)

    monkeypatch.setattr(cells, "compute_cell", compute_cell)
    return seen


def _on_worker(seen: list, value: str) -> None:
    assert seen and {v for v, _ in seen} == {value}, seen
    assert all(name != threading.main_thread().name for _, name in seen), seen  # a Dask worker's thread
    seen.clear()


def test_run_options_are_not_in_the_plan():
    assert "threads_per_cell" not in Plan.model_fields
    assert Execution(threads_per_cell=3).run == RunOptions(threads_per_cell=3)


def test_a_toy_option_reaches_the_workers_through_run_sweep(toy, tmp_path):
    execution = Execution(n_workers=1, processes=False, in_driver_below=0.0, toy="api")
    assert run_sweep(SPEC, tmp_path / "api.zarr", execution=execution).complete
    _on_worker(toy, "api")
    assert run_sweep(SPEC, tmp_path / "serial.zarr", execution=Execution(serial=True, toy="here")).complete
    assert toy and {v for v, _ in toy} == {"here"}  # the local backend hands it to its cells too


def test_a_toy_option_reaches_the_workers_through_the_cli(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("GEOSWEEP_IN_DRIVER_BELOW", "0")  # a Dask run, however short
    spec = tmp_path / "toy.toml"
    spec.write_text(TOML)
    argv = ["run", str(spec), "--store", str(tmp_path / "cli.zarr"), "--no-prefect", "--threads", "--workers", "1"]
    assert cli.main([*argv, "--toy", "cli", "-q"]) == 0
    _on_worker(toy, "cli")


def test_a_toy_option_reaches_the_workers_through_the_prefect_flow(toy, tmp_path):
    from prefect.testing.utilities import prefect_test_harness

    from geosweep.flows.sweep_flow import sweep_flow

    execution = Execution(n_workers=1, processes=False, in_driver_below=0.0, toy="flow")
    with prefect_test_harness(server_startup_timeout=120):
        out = sweep_flow(SPEC, store=str(tmp_path / "flow.zarr"), execution=execution)
    assert out["ran"] == 2 and not out["errors"]
    _on_worker(toy, "flow")
