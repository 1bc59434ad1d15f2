"""The adaptive controllers' default first trial step (:func:`geosweep.kernels.core.driver.starting_step`):
Hairer–Nørsett–Wanner's starting-step rule in the controller's norm, from f(y0), tol and the order —
the same for every final time T, a hand computation on Euler's rigid body, an explicit ``h0`` wins."""

from __future__ import annotations

import math

import pytest

from geosweep.kernels.registry import FAMILIES, INTEGRATORS, SYSTEMS, RunRequest, load_builtins

load_builtins()

#: a small system of each family with adaptive integrators
SMALL = {"ts2": "pendulum_chain", "top": "heavy_top", "quad": "two_quadrotors", "dg": "rigid_body_lp"}
ADAPTIVE = sorted(n for n, i in INTEGRATORS.items() if i.adaptive)


def _model(system: str, **params):
    sd = SYSTEMS[system]
    return sd.build(**{**{p.name: p.default for p in sd.params}, **params})


def _first(system: str, integrator: str, T: float, tol: float = 1e-6, **options):
    """(first trial step, trajectory after its first accepted step) of one cell."""
    sd = SYSTEMS[system]
    tr = FAMILIES[sd.family].start(_model(system), integrator, RunRequest(T=T, dt_out=0.1, tol=tol), options)
    tr.advance(1)
    return float(tr.out[0, -1]), tr


def _hand_rigid_body(tol: float, order: int) -> float:
    """The rule by hand for ṁ = m × ∇H(m), H = ½Σ m_i²/I_i + ¼ε m_1⁴ (rigid_body_lp's defaults)."""
    I1, I2, I3, eps = 1.0, 2.0, 3.0, 0.5
    y0 = [1.0, 0.5, 0.8]

    def f(m):
        g = [m[0] / I1 + eps * m[0] ** 3, m[1] / I2, m[2] / I3]
        return [m[1] * g[2] - m[2] * g[1], m[2] * g[0] - m[0] * g[2], m[0] * g[1] - m[1] * g[0]]

    f0 = f(y0)
    d0 = math.sqrt(sum(x * x for x in y0)) / tol
    d1 = math.sqrt(sum(x * x for x in f0)) / tol
    h = 0.01 * d0 / d1
    y1 = [a + h * b for a, b in zip(y0, f0)]
    d2 = math.sqrt(sum((a - b) ** 2 for a, b in zip(f(y1), f0))) / (tol * h)
    return min(100 * h, (0.01 / max(d1, d2)) ** (1 / (order + 1)))


@pytest.mark.parametrize("tol", [1e-4, 1e-8])
def test_rule_matches_a_hand_computation(tol):
    h0, tr = _first("rigid_body_lp", "dopri5_skew", 2.0, tol)
    assert h0 == pytest.approx(_hand_rigid_body(tol, 5), rel=1e-12)
    c = tr.costs()
    # three evaluations of the field for the rule, seven per DOPRI5 trial step
    assert c["f_evals"] == 3 + 7 * (c["steps"] + c["rejected_steps"])


@pytest.mark.parametrize("integrator", ADAPTIVE)
def test_first_step_does_not_depend_on_T(integrator):
    """Every adaptive integrator: the same first trial step (and first accepted step) for T and
    100 T — the old default T/100 differed by a factor 100."""
    system = SMALL[INTEGRATORS[integrator].family]
    h_short, a = _first(system, integrator, 0.4)
    h_long, b = _first(system, integrator, 40.0)
    assert 0.0 < h_short < 0.4 and h_long == h_short
    assert a.time == b.time and (a.S == b.S).all()
    assert a.costs()["f_evals"] == b.costs()["f_evals"]


def test_an_explicit_h0_wins():
    h0, tr = _first("rigid_body_lp", "dopri5_skew", 2.0, h0=0.125)
    assert h0 == 0.125
    c = tr.costs()
    assert c["f_evals"] == 7 * (c["steps"] + c["rejected_steps"])  # no evaluation for the rule
