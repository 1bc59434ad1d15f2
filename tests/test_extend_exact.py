"""Extending or growing a store is exactly a direct run of the spec as the user wrote it with the new
T or axes — every family, every built-in method, adaptive ones included (their default first step
does not depend on T) — and a store written before that rule still extends exactly (its first steps
pinned to T₁/100). The store's ``integrator_options`` attribute always agrees with its ``spec``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from geosweep import sweeps
from geosweep.kernels.registry import INTEGRATORS, load_builtins
from geosweep.kernels.vocabulary import RUN_DEPENDENT
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.extension import typed
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store import FIRST_STEP_ATTR, StoreRef, consolidate, integrator_options_attr
from tests.sweep_util import assert_stores_bitwise_equal

load_builtins()

#: one small system per family, with every integrator the family runs
SMALL = {
    "s2": {"system": "spring_pendula", "h": [0.01], "T": 0.2, "dt_out": 0.05},
    "se3": {"system": "torus", "h": [2e-3], "T": 0.04, "dt_out": 0.02},
    "ts2": {"system": "pendulum_chain", "h": [0.01], "tol": [1e-6], "T": 0.2, "dt_out": 0.05, "params": {"N": 2}},
    "top": {"system": "heavy_top", "h": [2.5e-4], "tol": [1e-8], "T": 0.01, "dt_out": 0.005},
    "quad": {"system": "two_quadrotors", "h": [0.005], "tol": [1e-8], "T": 0.04, "dt_out": 0.02},
    "dg": {"system": "gearbox", "h": [0.1], "tol": [1e-7], "T": 1.0, "dt_out": 0.5},
}


def _methods(family: str) -> list[str]:
    return [n for n, i in INTEGRATORS.items() if i.serves(family)]


def _spec(family: str, **extra) -> dict:
    spec = {"name": f"exact-{family}", "integrators": _methods(family), **SMALL[family], **extra}
    if not any(INTEGRATORS[n].adaptive for n in spec["integrators"]):
        spec.pop("tol", None)
    return spec


def _differing(a: Path, b: Path) -> list[tuple[str, str]]:
    """(variable, integrator) pairs whose values differ between two stores of the same grid."""
    da, db = xr.open_zarr(a), xr.open_zarr(b)
    out = []
    for name in da.data_vars:
        if name in RUN_DEPENDENT or "integrator" not in da[name].dims:
            continue
        for integ in da.integrator.values:
            x, y = da[name].sel(integrator=integ).values, db[name].sel(integrator=integ).values
            if not (np.array_equal(x, y, equal_nan=True) if x.dtype.kind == "f" else np.array_equal(x, y)):
                out.append((name, str(integ)))
    return out


def _assert_same_as_direct(grown: Path, spec: dict, tmp_path: Path) -> None:
    """``grown`` equals, bitwise, a store computed from t = 0 with ``spec`` (the user's own), and
    records that spec."""
    direct = tmp_path / "direct.zarr"
    run_sweep(spec, direct, serial=True)
    assert _differing(grown, direct) == []
    assert_stores_bitwise_equal(str(grown), str(direct))
    ga, da = zarr.open_group(str(grown), mode="r").attrs, zarr.open_group(str(direct), mode="r").attrs
    assert ga["spec_hash"] == da["spec_hash"]
    assert json.loads(ga["integrator_options"]) == json.loads(da["integrator_options"])


@pytest.mark.parametrize("family", sorted(SMALL))
def test_extend_equals_a_direct_run_of_the_users_spec(tmp_path, family):
    spec = _spec(family)
    store = tmp_path / "a.zarr"
    run_sweep(spec, store, serial=True)
    res = sweeps.extend(store, T=2 * spec["T"], serial=True)
    assert res.complete and res.resumed == res.ran > 0
    _assert_same_as_direct(store, {**spec, "T": 2 * spec["T"]}, tmp_path)


@pytest.mark.parametrize("family", sorted(SMALL))
def test_grow_along_axes_and_T_equals_a_direct_run(tmp_path, family):
    """``run --grow``: integrators appended (and a tolerance, or a step size where no method is
    adaptive) with a longer T."""
    spec = _spec(family)
    methods = spec["integrators"]
    adaptive = [n for n in methods if INTEGRATORS[n].adaptive]
    first = sorted({methods[0], *adaptive[:1]}, key=methods.index)  # a fixed-step and an adaptive one
    small = {**spec, "integrators": first}
    store = tmp_path / "a.zarr"
    run_sweep(small, store, serial=True)
    big = {**spec, "integrators": first + [n for n in methods if n not in first], "T": 2 * spec["T"]}
    if adaptive:
        big["tol"] = [*spec["tol"], spec["tol"][0] / 10]
    else:
        big["h"] = [*spec["h"], spec["h"][0] / 2]
    res = run_sweep(big, store, serial=True, grow=True)
    assert res.complete and 0 < res.resumed < res.ran
    _assert_same_as_direct(store, big, tmp_path)


def _as_written_before_the_rule(store: Path, spec: dict) -> None:
    """Make ``store`` (computed with ``h0`` = T/100 given) what a geosweep of the T/100 default
    wrote for ``spec`` without ``h0``: its spec, hash and options attributes, no rule attribute."""
    plan = make_plan(spec)
    g = zarr.open_group(str(store), mode="r+")
    attrs = dict(g.attrs)
    attrs.pop(FIRST_STEP_ATTR)
    legacy_options = json.loads(integrator_options_attr(plan))
    for opts in legacy_options.values():
        if "h0" in opts:
            opts["h0"] = 0.0
    attrs.update(
        spec=plan.spec.canonical_json(),
        spec_hash=plan.spec.spec_hash,
        integrator_options=json.dumps(legacy_options, sort_keys=True),
    )
    g.attrs.put(attrs)
    consolidate(StoreRef.of(store))


def test_a_store_from_before_the_rule_extends_exactly_with_h0_pinned(tmp_path):
    spec = {"name": "legacy", **SMALL["ts2"], "integrators": ["rkmk4", "rkmk45", "dopri5_ambient"]}
    T1 = spec["T"]
    pinned = {n: {"h0": T1 / 100} for n in ("rkmk45", "dopri5_ambient")}
    store = tmp_path / "old.zarr"
    run_sweep({**spec, "integrator_options": pinned}, store, serial=True)
    _as_written_before_the_rule(store, spec)
    sweeps.extend(store, T=2 * T1, serial=True)
    attrs = zarr.open_group(str(store), mode="r").attrs
    stored = json.loads(attrs["spec"])
    assert {n: o["h0"] for n, o in stored["integrator_options"].items()} == {n: T1 / 100 for n in pinned}
    assert FIRST_STEP_ATTR not in attrs
    _assert_same_as_direct(store, {**spec, "T": 2 * T1, "integrator_options": pinned}, tmp_path)
    # extended once more: the pinned h0 stays (the user's spec without it still names the store)
    res = run_sweep({**spec, "T": 3 * T1}, store, serial=True, grow=True)
    assert res.complete and res.resumed == res.ran > 0
    (tmp_path / "direct.zarr").rename(tmp_path / "direct2.zarr")
    _assert_same_as_direct(store, {**spec, "T": 3 * T1, "integrator_options": pinned}, tmp_path)


def test_integrator_options_attribute_agrees_with_the_spec(tmp_path):
    """Created, extended and grown: the attribute is the options the stored spec's cells run with."""
    spec = {"name": "attrs", **SMALL["ts2"], "integrators": ["rkmk4", "rkmk45"]}
    spec["integrator_options"] = {"rkmk45": {"h0": 0.01}}
    store = tmp_path / "a.zarr"

    def check() -> None:
        attrs = zarr.open_group(str(store), mode="r").attrs
        assert json.loads(attrs["integrator_options"]) == json.loads(
            integrator_options_attr(make_plan(typed(json.loads(attrs["spec"]))))
        )

    run_sweep(spec, store, serial=True)
    check()
    sweeps.extend(store, T=2 * spec["T"], serial=True)
    check()
    more = ["rkmk4", "rkmk45", "dopri5_ambient"]
    run_sweep({**spec, "T": 3 * spec["T"], "integrators": more}, store, serial=True, grow=True)
    check()
