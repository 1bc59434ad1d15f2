"""The discrete gradients of paper 004 on the ``pendulum_chain`` of the ts2 family.

The chain runs in its Lie–Poisson form x = (q, π) ∈ R^{6N} (:mod:`geosweep.kernels.dg.chain_lp`, π = R(q)ω)
with the dg family's steppers, observed the way the ts2 family observes its Lie group methods:
the columns ``energy`` (the form's H, equal to the chain's E on (TS²)ᴺ), ``L_x``, ``L_y``, ``L_z``
(angular momentum about the pivot), ``unit_error`` = max_i |√(q_i·q_i) − 1|, ``tangency_error``
= max_i |q_i·ω_i| with ω = R̃(q)⁻¹π, plus the two Casimirs of the form (max_i ||q_i|² − 1| and
max_i |q_i·π_i|, as deviations from their initial values). States handed back to the chain
family (``final_state``, snapshots) are (q_i, ω_i) per link, like the Lie group methods'.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.chain.model import ChainModel
from geosweep.kernels.core.cells import start_trajectory
from geosweep.kernels.core.observables import Observable, obs_names, reductions
from geosweep.kernels.core.signatures import contract_types
from geosweep.kernels.core.trajectory import Reductions, StepperSpec, Trajectory
from geosweep.kernels.dg.chain_lp import _omega, from_chain
from geosweep.kernels.dg.model import CB_TYPE, SkewSystem
from geosweep.kernels.dg.steppers import P_HEAD, make_stepper
from geosweep.kernels.lie.stepper import OBSERVABLES as LIE_OBSERVABLES
from geosweep.kernels.registry import RunRequest

_, _OBS_SIG, _, _ = contract_types(CB_TYPE)

#: the Lie stepper's columns (the chain observed as by its Lie group methods) and the form's two
#: Casimirs max_i ||q_i|² − 1| and max_i |q_i·π_i|, each reduced as a deviation from its initial value
OBSERVABLES: tuple[Observable, ...] = (
    *LIE_OBSERVABLES,
    Observable("casimir", (Reductions.DEV, Reductions.DEV), columns=("casimir_unit", "casimir_tangency")),
)
OBS_NAMES = obs_names(OBSERVABLES)


@kjit(_OBS_SIG)
def chain_lp_observe(cb, meth, S, p, work, full, obs):
    """The columns of :data:`OBS_NAMES` at x = S (all NaN where R̃(q) is singular)."""
    pp = p[P_HEAD:]
    n = int(pp[0])
    o = 3 * n
    x = S[: 2 * o]
    w = np.empty(o)
    if _omega(x, pp, w) != 0:
        for j in range(obs.shape[0]):
            obs[j] = np.nan
        return
    H = 0.0  # the same sums in the same order as lp_energy: bitwise its H
    for k in range(o):
        H += 0.5 * x[o + k] * w[k]
    for i in range(n):
        H += pp[1 + n * n + i] * x[3 * i + 2]
    b = 1 + n * n + n
    x0 = x1 = x2 = v0 = v1 = v2 = 0.0
    J0 = J1 = J2 = 0.0
    ue = te = c1 = c2 = 0.0
    for k in range(n):
        a = 3 * k
        m = pp[b + k]
        Lk = pp[b + n + k]
        q0, q1, q2 = x[a], x[a + 1], x[a + 2]
        w0, w1, w2 = w[a], w[a + 1], w[a + 2]
        x0 += Lk * q0
        x1 += Lk * q1
        x2 += Lk * q2
        v0 += Lk * (w1 * q2 - w2 * q1)
        v1 += Lk * (w2 * q0 - w0 * q2)
        v2 += Lk * (w0 * q1 - w1 * q0)
        J0 += m * (x1 * v2 - x2 * v1)
        J1 += m * (x2 * v0 - x0 * v2)
        J2 += m * (x0 * v1 - x1 * v0)
        qq = q0 * q0 + q1 * q1 + q2 * q2
        ue = max(ue, abs(np.sqrt(qq) - 1.0))
        te = max(te, abs(q0 * w0 + q1 * w1 + q2 * w2))
        c1 = max(c1, abs(qq - 1.0))
        c2 = max(c2, abs(q0 * x[o + a] + q1 * x[o + a + 1] + q2 * x[o + a + 2]))
    obs[0] = H
    obs[1] = J0
    obs[2] = J1
    obs[3] = J2
    obs[4] = ue
    obs[5] = te
    obs[6] = c1
    obs[7] = c2


def chain_dg_stepper(system: SkewSystem, integrator: str, options: dict) -> StepperSpec:
    """The dg stepper of ``integrator`` on the chain's (q, π) form, observed as a chain."""
    base = make_stepper(
        system,
        integrator,
        quad_points=int(options.get("quad_points", 6)),
        solver=str(options.get("solver", "newton")),
        tol=float(options.get("nl_tol", 1e-14)),
        maxit=int(options.get("maxit", 50)),
    )
    red = reductions(OBSERVABLES)  # |L − L0|, |J − J0|, the constraint errors, the Casimirs' drifts
    return dataclasses.replace(base, observe=chain_lp_observe, obs_names=OBS_NAMES, red=red)


def start(model: ChainModel, integrator: str, request: RunRequest, options: dict) -> Trajectory:
    """A resumable trajectory of one ts2 cell run by a discrete-gradient method."""
    if request.adaptive:
        raise ValueError(f"{integrator} needs a request with h")
    system = from_chain(model)
    return start_trajectory(chain_dg_stepper(system, integrator, options), system.x0, request, options)


def to_bodies(model: ChainModel, p: np.ndarray):
    """x = (q, π) ∈ R^{6N} → (N, 6) rows (q_i, ω_i) (ω NaN where R̃(q) is singular); ``p`` the
    form's parameter vector."""
    n = model.n

    def convert(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        w = np.empty(3 * n)
        if _omega(x, p, w) != 0:
            w[:] = np.nan
        return np.ascontiguousarray(np.hstack([x[: 3 * n].reshape(n, 3), w.reshape(n, 3)]))

    return convert


def cost_per_step(model: ChainModel, integrator: str) -> float:
    """Rough single-core seconds per step: a finite-difference Jacobian of 6N dense fields
    (O(N²) each), an LU of (6N)² and ~6 iterations."""
    n6 = 6 * model.n
    field = 5e-9 * n6 * n6 + 5e-8
    return (n6 + 8) * field + 3e-10 * n6**3 + 2e-7
