"""The chain as an :class:`geosweep.kernels.s2.model.S2System`, so the (S²)ⁿ variational integrators apply.

Inertia ``M_ij = μ_max(i,j) L_i L_j``; potential in the 001 convention (e3 **up**):
``V = Σ_i c_i e3·q_i`` with ``c_i = μ_i g L_i``, gradient ``c_i e3``. (Paper 000 and
``geosweep.kernels.systems.catalogue`` use e3 down, ``V = −Σ c_i e3·q_i``; same physics.) Rotations
about e3 leave V invariant, so ``symmetry="axis"`` with ``axis = e3``: the VI conserves
``J = e3·Σ_i π_i``.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels.chain.model import ChainModel
from geosweep.kernels.s2.model import S2System, s2_potential


@s2_potential(lazy=True)
def chain_gravity_potential(q, p, g):
    """``V = Σ_i p_i q_i·e3`` (e3 up), ``p_i = μ_i g L_i``."""
    V = 0.0
    for i in range(q.shape[0]):
        g[i, 0] = 0.0
        g[i, 1] = 0.0
        g[i, 2] = p[i]
        V += p[i] * q[i, 2]
    return V


def chain_as_s2(model: ChainModel) -> S2System:
    """Return ``model`` as an (S²)ⁿ system (same initial state, e3-up gravity)."""
    return S2System(
        name="pendulum_chain",
        M=model.inertia,
        potential=chain_gravity_potential,
        params=model.mu * model.g * model.L,
        q0=model.y0[:, :3],
        w0=model.y0[:, 3:],
        symmetry="axis",
        axis=np.array([0.0, 0.0, 1.0]),
        extras={"m": model.m.copy(), "L": model.L.copy(), "g": model.g, "ic": model.label},
    )
