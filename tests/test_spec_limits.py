"""Bounded, strictly typed specs refused before any work, and sweep identity by value."""

from __future__ import annotations

import pytest

from geosweep.sweeps.spec import SpecError, load_spec, parse_spec

BASE = {
    "name": "lim",
    "system": "spring_pendula",
    "integrators": ["explicit_vi"],
    "h": [0.01],
    "T": 1.0,
    "dt_out": 0.1,
}


def _refused(change: dict, field: str, words: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_spec({**BASE, **change})
    fields = [f for f, _ in e.value.problems]
    assert any(f.startswith(field) for f in fields), e.value.problems
    assert words in str(e.value), str(e.value)


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"h": [1e-300], "T": 1.0, "dt_out": 1.0}, "h", "steps_per_cell"),
        ({"h": [1e-3], "T": 1e9, "dt_out": 1e3}, "h", "steps per cell"),
        ({"dt_out": 1e-9, "h": [1e-9]}, "dt_out", "samples_per_cell"),
        ({"params": {f"kappa{k}": list(range(1, 400)) for k in ("12", "23", "34", "41")}}, "params", "cells"),
        ({"h": [True]}, "h", "valid number"),
        ({"T": "0.2"}, "T", "valid number"),
        ({"params": {"kappa12": [10, 10.0]}}, "params.kappa12", "unique"),
        ({"limits": {"bogus": 1.0}}, "limits.bogus", "unknown limit"),
    ],
)
def test_refused_before_any_work(change, field, words):
    _refused(change, field, words)


def test_a_limit_can_be_raised_explicitly():
    spec = {**BASE, "dt_out": 1e-4, "h": [1e-4], "T": 2000.0}  # 2·10⁷ samples per cell
    with pytest.raises(SpecError):
        parse_spec(spec)
    assert parse_spec({**spec, "limits": {"samples_per_cell": 1e8, "samples_total": 1e8}}).T == 2000.0


def test_model_sizes_are_bounded():
    with pytest.raises(SpecError) as e:
        load_spec({**BASE, "system": "pendulum_chain", "integrators": ["rkmk4"], "params": {"N": 10**8}})
    assert "params.N" in str(e.value)
    with pytest.raises(SpecError):
        load_spec({**BASE, "system": "torus", "integrators": ["v2_newmark"], "h": [0.001], "params": {"N_p": 10**6}})
    with pytest.raises(SpecError) as e:
        load_spec({**BASE, "system": "double_pendulum", "integrators": ["implicit_vi"],
                   "integrator_options": {"implicit_vi": {"maxit": 10**30}}})  # fmt: skip
    assert "maxit" in str(e.value)


def test_identity_by_value_not_spelling():
    a = parse_spec({**BASE, "params": {"kappa12": [0, 3.25]}})
    b = parse_spec({**BASE, "params": {"kappa12": [0.0, 3.25]}, "description": "another text"})
    c = parse_spec({**BASE, "params": {"kappa12": [0.0, 3.25]}, "checkpoint_every": 0.5})
    assert a.spec_hash == b.spec_hash == c.spec_hash
    d = parse_spec({**BASE, "params": {"kappa12": [0.0, 3.5]}})
    assert d.spec_hash != a.spec_hash
    assert parse_spec({**BASE, "T": 1, "h": [1], "dt_out": 1}).T == 1.0  # an integer is a number
