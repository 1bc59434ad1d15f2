"""A user-defined skew-gradient system, written as the README shows, sweeps like a built-in one."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from geosweep.kernels.dg import SkewSystem, dg_energy, dg_grad, dg_skew
from geosweep.kernels.registry import SYSTEMS, Param, SystemDef, register_system
from geosweep.sweeps.engine import run_sweep


# Lotka–Volterra: u̇ = u(v − 2), v̇ = v(1 − u) = S(x)∇H with S = [[0, uv], [−uv, 0]],
# H = u − ln u + v − 2 ln v (not polynomial; S not constant)
@dg_skew
def lv_skew(x, p, S):
    S[0, 0] = 0.0
    S[1, 1] = 0.0
    S[0, 1] = x[0] * x[1]
    S[1, 0] = -x[0] * x[1]


@dg_energy
def lv_energy(x, p):
    return x[0] - p[1] * math.log(x[0]) + x[1] - p[0] * math.log(x[1])


@dg_grad
def lv_grad(x, p, g):
    g[0] = 1.0 - p[1] / x[0]
    g[1] = 1.0 - p[0] / x[1]


def lotka_volterra(a: float = 2.0, b: float = 1.0, u0: float = 1.0, v0: float = 0.5) -> SkewSystem:
    return SkewSystem("lotka_volterra", lv_skew, lv_energy, lv_grad, [u0, v0], [a, b], ("u", "v"))


register_system(
    SystemDef(
        name="lotka_volterra",
        family="dg",
        doc="Lotka–Volterra u̇ = u(v − a), v̇ = v(b − u) in skew-gradient form.",
        params=(
            Param("a", float, 2.0, "1", "prey equilibrium v*", gt=0.0),
            Param("b", float, 1.0, "1", "predator equilibrium u*", gt=0.0),
            Param("u0", float, 1.0, "1", "initial u", gt=0.0),
            Param("v0", float, 0.5, "1", "initial v", gt=0.0),
        ),
        build=lotka_volterra,
    )
)


def test_user_system_checks_and_sweep(tmp_path):
    m = lotka_volterra()
    assert m.gradient_fd_error(m.x0 + 0.1) < 1e-8
    np.testing.assert_allclose(m.f(m.x0), [1.0 * (0.5 - 2.0), 0.5 * (1.0 - 1.0)], atol=1e-15)
    spec = {
        "name": "lv",
        "system": "lotka_volterra",
        "integrators": ["dg_gonzalez", "dg_itoh_abe", "rk4_skew"],
        "h": [0.05],
        "T": 50.0,
        "dt_out": 0.5,
        "params": {"v0": [0.5, 3.0]},
    }
    result = run_sweep(spec, tmp_path / "lv.zarr", serial=True)
    assert result.complete and result.ran == 6 and SYSTEMS["lotka_volterra"].family == "dg"
    ds = xr.open_zarr(tmp_path / "lv.zarr")
    assert (ds.status == 0).all()
    dg = ds.max_rel_energy_error.sel(integrator=["dg_gonzalez", "dg_itoh_abe"])
    assert float(dg.max()) < 1e-13
    assert float(ds.max_rel_energy_error.sel(integrator="rk4_skew").min()) > 1e-9
