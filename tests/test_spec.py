"""Spec validation: every malformed spec is refused before any work, naming its field."""

from __future__ import annotations

import copy
import os

import pytest

from geosweep.kernels.registry import RunRequest
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.spec import SpecError, load_spec

GOOD = {
    "name": "spec-test",
    "system": "spring_pendula",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.01, 0.005],
    "T": 1.0,
    "dt_out": 0.05,
    "params": {"kappa12": [10.0, 20.0], "g": 9.81},
}


def spec_with(**changes):
    s = copy.deepcopy(GOOD)
    for k, v in changes.items():
        if v is ...:
            s.pop(k)
        else:
            s[k] = v
    return s


MALFORMED = [
    # (spec, field named in the message, reason fragment)
    (spec_with(colour="red"), "colour", "unknown field"),
    (spec_with(name=...), "name", "required"),
    (spec_with(name="bad name!"), "name", "pattern"),
    (spec_with(system="lj_cube"), "system", "unknown system"),
    (spec_with(integrators=[]), "integrators", "at least 1"),
    (spec_with(integrators=["explicit_vi", "leapfrog"]), "integrators[1]", "unknown integrator"),
    (spec_with(integrators=["rk4", "rk4"]), "integrators", "unique"),
    (spec_with(system="double_pendulum", params={}, integrators=["explicit_vi"]), "integrators[0]", "diagonal"),
    (spec_with(h=[0.01, -0.005]), "h[1]", "> 0"),
    (spec_with(h=[0.0]), "h[0]", "> 0"),
    (spec_with(h=["small"]), "h[0]", "number"),
    (spec_with(h=[0.003]), "h[0]", "not an integer"),
    (spec_with(dt_out=0.0125), "h[0]", "not a multiple"),
    (spec_with(T=-1.0), "T", "positive"),
    (spec_with(T=1.03, h=[0.01]), "dt_out", "not an integer"),
    (spec_with(dt_out=2.0), "dt_out", "<= T"),
    (spec_with(params={"kappa99": 1.0}), "params.kappa99", "unknown parameter"),
    (spec_with(snapshot_dt=0.07), "snapshot_dt", "multiple of dt_out"),
    (spec_with(params={"kappa12": "stiff"}), "params.kappa12", "number"),
    (spec_with(params={"kappa12": [10.0, -1.0]}), "params.kappa12[1]", ">= 0"),
    (spec_with(params={"kappa12": [10.0, 10.0]}), "params.kappa12", "unique"),
    (spec_with(params={"kappa12": []}), "params.kappa12", "at least one"),
    (spec_with(integrator_options={"rk4": {"tol": 1e-9}}), "integrator_options.rk4.tol", "unknown option"),
    (spec_with(integrator_options={"implicit_vi": {"tol": 1e-9}}), "integrator_options.implicit_vi", "not one of"),
    (
        spec_with(system="elastic_rod", params={"kick_rod": 12}, integrators=["implicit_vi"], h=[0.01]),
        "params",
        "kick_rod",
    ),
    (
        spec_with(system="lj_sphere", params={"sense": "sideways"}, integrators=["explicit_vi"], h=[0.01]),
        "params.sense",
        "one of",
    ),
    (
        spec_with(
            system="elastic_rod",
            params={},
            integrators=["implicit_vi"],
            h=[0.01],
            integrator_options={"implicit_vi": {"maxit": 0}},
        ),
        "integrator_options.implicit_vi.maxit",
        ">= 1",
    ),
]


def test_good_spec_is_accepted():
    spec = load_spec(GOOD)
    assert spec.n_steps(0.005) == 200 and spec.n_time == 21
    assert spec.param_combinations() == [{"g": 9.81, "kappa12": 10.0}, {"g": 9.81, "kappa12": 20.0}]


@pytest.mark.parametrize(
    ("spec", "field", "reason"), MALFORMED, ids=[f"{i:02d}-{m[1]}" for i, m in enumerate(MALFORMED)]
)
def test_malformed_spec_is_refused_naming_the_field(spec, field, reason, tmp_path):
    assert len(MALFORMED) >= 15
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    fields = [f for f, _ in err.value.problems]
    assert field in fields, f"{field!r} not named in {err.value}"
    assert reason.lower() in str(err.value).lower()
    # refused before any work: run_sweep writes nothing
    store = tmp_path / "never.zarr"
    with pytest.raises(SpecError):
        run_sweep(spec, store, serial=True)
    assert not os.path.exists(store)


def test_every_problem_is_reported_at_once():
    bad = spec_with(h=[-1.0], params={"kappa12": "x"}, colour=1)
    with pytest.raises(SpecError) as err:
        load_spec(bad)
    assert {"colour"} <= {f for f, _ in err.value.problems}
    bad = spec_with(h=[-1.0], params={"kappa12": "x"})
    with pytest.raises(SpecError) as err:
        load_spec(bad)
    assert {"h[0]", "params.kappa12"} <= {f for f, _ in err.value.problems}


def test_toml_and_yaml_files_load_to_the_same_spec(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text(
        'name = "spec-test"\nsystem = "spring_pendula"\nintegrators = ["explicit_vi", "rk4"]\n'
        "h = [0.01, 0.005]\nT = 1.0\ndt_out = 0.05\n[params]\nkappa12 = [10.0, 20.0]\ng = 9.81\n"
    )
    yml = tmp_path / "s.yaml"
    yml.write_text(
        "name: spec-test\nsystem: spring_pendula\nintegrators: [explicit_vi, rk4]\nh: [0.01, 0.005]\n"
        "T: 1.0\ndt_out: 0.05\nparams: {kappa12: [10.0, 20.0], g: 9.81}\n"
    )
    a, b, c = load_spec(toml), load_spec(yml), load_spec(GOOD)
    assert a.spec_hash == b.spec_hash == c.spec_hash


def test_broken_files_name_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed\n")
    with pytest.raises(SpecError, match="bad.toml is not valid TOML"):
        load_spec(bad)
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.toml")
    other = tmp_path / "spec.json"
    other.write_text("{}")
    with pytest.raises(SpecError, match="use a .toml"):
        load_spec(other)


def test_cells_get_a_run_request_with_h_or_tol():
    """Fixed step: the cell's h; adaptive: the cell's tol (not in the options); snapshots in output intervals."""
    plan = make_plan(
        {
            "name": "requests",
            "system": "pendulum_chain",
            "integrators": ["rkmk4", "rkmk45"],
            "h": [0.01, 0.005],
            "tol": [1e-6, 1e-8],
            "T": 1.0,
            "dt_out": 0.05,
            "snapshot_dt": 0.25,
            "params": {"N": 2},
        }
    )
    grid = plan.grid
    assert grid.dims == ("integrator", "h", "tol")
    req, opts = plan.request((0, 1, 0))
    assert req == RunRequest(1.0, 0.05, h=0.005, snapshot_every=5)
    assert (req.n_steps, req.stride, req.n_snapshots) == (200, 10, 5)
    req, opts = plan.request((1, 0, 1))
    assert req == RunRequest(1.0, 0.05, tol=1e-8, snapshot_every=5) and req.adaptive
    assert "tol" not in opts
    assert [grid.applicable(c) for c in [(0, 1, 0), (0, 1, 1), (1, 0, 1), (1, 1, 1)]] == [True, False, True, False]
    assert plan.sizes["time"] == 21 and plan.sizes["snapshot"] == 5 == plan.spec.n_snapshots
    # without snapshot_dt: states at t = 0 and t = T only
    plan = make_plan(GOOD)
    req, _ = plan.request((0, 0, 0))
    assert req.snapshot_every == 0 and req.n_snapshots == 2 == plan.sizes["snapshot"]


def test_plan_holds_one_model_per_parameter_combination():
    plan = make_plan(GOOD)
    assert list(plan.models) == [(0,), (1,)]
    assert plan.model((1, 1, 1)) is plan.models[(1,)]
    assert make_plan(plan) is plan
    part = plan.part([(0, 0, 1), (1, 1, 1)])
    assert list(part.models) == [(1,)] and part.spec is plan.spec
    assert plan.model_dump() == {
        "spec": load_spec(GOOD).model_dump(mode="json"),
        "cells": 8,
        "dims": {"integrator": 2, "h": 2, "kappa12": 2},
    }


def test_every_problem_of_a_spec_is_listed_in_the_checks_order():
    """``check_spec`` runs its checks in one order (system, integrators, their options, h/tol, times,
    parameters) and lists every problem found, each naming its field, in that order."""
    from geosweep.sweeps.spec_checks import CHECKS

    assert [c.__name__ for c in CHECKS] == [
        "_system", "_integrators", "_integrator_options", "_h_or_tol", "_tolerances", "_times", "_params",
    ]  # fmt: skip
    many = {
        "name": "many",
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "rkmk4", "bogus", "rkmk45"],
        "h": [0.01, 0.003, 0.01],
        "tol": [1e-6, -1.0],
        "T": 0.1,
        "dt_out": 0.02,
        "checkpoint_every": 0.013,
        "snapshot_dt": 0.03,
        "params": {"N": [2, 2.0], "bogus": 1, "g": [], "seed": 2**70},
        "integrator_options": {"rkmk45": {"tol": 1e-3, "nope": 1}, "cf4": {}},
    }
    with pytest.raises(SpecError) as e:
        load_spec(many)
    assert [f for f, _ in e.value.problems] == [
        "integrators", "integrators[2]", "integrator_options.rkmk45.tol", "integrator_options.rkmk45.nope",
        "integrator_options.cf4", "tol[1]", "integrator_options.rkmk45.tol", "h", "h[1]", "h[1]", "checkpoint_every",
        "snapshot_dt", "params.N", "params.N[1]", "params.bogus", "params.g", "params.seed",
    ]  # fmt: skip
    lines = str(e.value).splitlines()
    assert lines[0] == "invalid sweep spec 'many':" and len(lines) == 18
    assert "  - h[1]: T/h = 33.3333333333 is not an integer (T = 0.1, h = 0.003)" in lines
    assert "  - params.N: axis values must be unique (by value: 10 == 10.0, -0.0 == 0.0)" in lines
    assert "  - integrator_options.rkmk45.tol: tol is a sweep axis: set the spec's tol list" in lines
    assert "  - params.seed: integer 1180591620717411303424 is outside the 64-bit range [-2**63, 2**63 - 1]" in lines
