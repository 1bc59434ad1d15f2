"""Every execution choice and every costly input of a run made once (issue 50 item 2): one
``geosweep run`` reads its spec file once, computes the cells' cost array once and decides which cells
are computed together once (on the cells left to run, inside ``run_sweep``: the CLI decides nothing),
and a resumed store is checked without building the store's template."""

from __future__ import annotations

import pytest

import geosweep.flows.cli as cli
from geosweep.sweeps import spec_file as spec_mod
from geosweep.sweeps import together
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.plan import Plan
from geosweep.sweeps.store import lifecycle

TOML = 'name = "once"\nsystem = "double_pendulum"\nintegrators = ["rk4"]\nh = [0.01, 0.005]\nT = 1.0\ndt_out = 0.25\n'


def _counting(monkeypatch, owner, name: str) -> list:
    calls: list = []
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.mark.parametrize(
    "flags", [["--serial"], ["--no-prefect", "--threads", "--workers", "1"]], ids=["serial", "dask"]
)
def test_one_run_reads_its_spec_and_computes_its_costs_once(tmp_path, monkeypatch, flags):
    monkeypatch.setenv("GEOSWEEP_IN_DRIVER_BELOW", "0")  # the Dask run goes to Dask
    reads = _counting(monkeypatch, spec_mod, "_read_regular_file")
    costs = _counting(monkeypatch, Plan, "cost_array")
    joint = _counting(monkeypatch, together, "joint_mask")
    spec = tmp_path / "once.toml"
    spec.write_text(TOML)
    assert cli.main(["run", str(spec), "--store", str(tmp_path / "s.zarr"), "-q", *flags]) == 0
    assert len(reads) == 1 and len(costs) == 1, (len(reads), len(costs))
    assert len(joint) == (0 if "--serial" in flags else 1)


def test_a_resumed_store_is_checked_without_its_template(tmp_path, monkeypatch):
    built = _counting(monkeypatch, lifecycle, "store_template")
    first = run_sweep({"name": "once", "system": "double_pendulum", "integrators": ["rk4"], "h": [0.01], "T": 1.0,
                       "dt_out": 0.25}, tmp_path / "s.zarr", serial=True)  # fmt: skip
    assert first.complete and len(built) == 1
    again = run_sweep({"name": "once", "system": "double_pendulum", "integrators": ["rk4"], "h": [0.01], "T": 1.0,
                       "dt_out": 0.25}, tmp_path / "s.zarr", serial=True)  # fmt: skip
    assert again.ran == 0 and len(built) == 1
