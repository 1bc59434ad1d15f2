"""The implicit variational integrator of geosweep.kernels.s2 applied to the chain (spec §7, §9)."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.chain.integrate import _integrate as integrate_lie
from geosweep.kernels.chain.model import ChainModel, build_chain
from geosweep.kernels.chain.s2_bridge import chain_as_s2
from geosweep.kernels.s2.integrate import _integrate as integrate_s2
from geosweep.kernels.status import Status


def _low_energy_chain(n: int = 3) -> ChainModel:
    """A regular (quasi-periodic) 3D motion near the hanging equilibrium."""
    th = np.array([0.5, -0.3, 0.4, 0.2])[:n]
    q = np.stack([np.sin(th), 0 * th, -np.cos(th)], axis=1)
    w = np.cross(q, np.tile([0.3, 0.8, 0.1], (n, 1)))
    return ChainModel(m=np.ones(n), L=np.ones(n), g=9.81, y0=np.hstack([q, w]))


@pytest.mark.parametrize("model", [build_chain(3, ic="twisted"), build_chain(4, masses="random", ic="random")])
def test_s2_view_has_same_invariants(model: ChainModel) -> None:
    s = chain_as_s2(model)
    q, w = s.initial_state()
    d = model.diagnostics(model.y0)
    assert abs(s.energy(q, w) - d[0]) <= 1e-12 * abs(d[0])
    assert np.allclose(s.momentum(q, w), d[1:4], rtol=0, atol=1e-12 * np.abs(d[1:4]).max())


def test_vi_tracks_the_lie_group_solution() -> None:
    """Same ODE (e3-up gravity sign included): VI and RKMK4 agree to O(h²) over T = 0.5."""
    model = build_chain(3, ic="twisted")
    diffs = []
    for h in (0.01, 0.005):
        n = int(round(0.5 / h))
        tr = integrate_s2(chain_as_s2(model), "implicit_vi", h, n, n)
        ref = integrate_lie(model, "rkmk4", 1e-3, 500, 500).y
        diffs.append(max(np.abs(tr.q - ref[:, :3]).max(), np.abs(tr.w - ref[:, 3:]).max()))
    assert diffs[0] <= 0.05
    assert 3.0 <= diffs[0] / diffs[1] <= 5.0


@pytest.mark.parametrize("model", [_low_energy_chain(), build_chain(3, ic="twisted")], ids=["low", "twisted"])
def test_vi_energy_error_scales_as_h2(model: ChainModel) -> None:
    s = chain_as_s2(model)
    errs = []
    for h in (0.02, 0.01, 0.005):
        tr = integrate_s2(s, "implicit_vi", h, int(round(2.0 / h)), 1)
        assert tr.status == Status.OK
        errs.append(tr.summary["max_rel_dE"])
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 3.5) & (ratios < 4.5)), ratios


def test_vi_energy_bounded_no_drift_and_J_conserved() -> None:
    """T = 200, h = 0.01: mean energy error in the last 10 % equals that of the first 10 %
    (bounded oscillation), unlike RKMK4 which drifts; J = e3·L conserved to ≤ 1e-9 relative."""
    model = _low_energy_chain()
    tr = integrate_s2(chain_as_s2(model), "implicit_vi", 0.01, 20_000, 1)
    assert tr.status == Status.OK
    dE = tr.energy_error / abs(tr.summary["E0"])
    k = len(dE) // 10
    drift_vi = abs(dE[-k:].mean() - dE[:k].mean())
    assert np.abs(dE).max() <= 1e-3
    assert drift_vi <= 0.1 * np.abs(dE).max()
    J = tr.momentum[:, 2]
    assert abs(J[0]) > 0.1
    assert np.abs(J - J[0]).max() <= 1e-9 * abs(J[0])
    assert tr.summary["max_unit_error"] <= 1e-13
    r = integrate_lie(model, "rkmk4", 0.01, 20_000, 1)
    dE4 = (r.energy - r.energy[0]) / abs(r.energy[0])
    assert abs(dE4[-k:].mean() - dE4[:k].mean()) > 5 * abs(dE4[:k].mean())  # RKMK4 does drift


def test_vi_twisted_chain_conserves_J() -> None:
    model = build_chain(3, ic="twisted")
    tr = integrate_s2(chain_as_s2(model), "implicit_vi", 0.01, 2_000, 10)
    J = tr.momentum[:, 2]
    assert np.abs(J - J[0]).max() <= 1e-9 * abs(J[0])
