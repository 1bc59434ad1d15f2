"""A user-defined (S²)ⁿ system, written exactly as the README shows (importable by workers)."""

import numpy as np

from geosweep.kernels.registry import Param, SystemDef, register_system
from geosweep.kernels.s2 import S2System, s2_potential


@s2_potential
def ring_coupling(q, p, g):
    """V = −k Σ_i q_i·q_{i+1} on a closed ring (rotation invariant: J conserved)."""
    n = q.shape[0]
    k = p[0]
    V = 0.0
    for i in range(n):
        g[i, 0] = 0.0
        g[i, 1] = 0.0
        g[i, 2] = 0.0
    for i in range(n):
        j = (i + 1) % n
        V -= k * (q[i, 0] * q[j, 0] + q[i, 1] * q[j, 1] + q[i, 2] * q[j, 2])
        for a in range(3):
            g[i, a] -= k * q[j, a]
            g[j, a] -= k * q[i, a]
    return V


def rotor_ring(n: int = 8, k: float = 1.0, spin: float = 1.0) -> S2System:
    t = 2 * np.pi * np.arange(n) / n
    q0 = np.stack([np.cos(t), np.sin(t), 0.3 * np.cos(3 * t)], axis=1)
    w0 = spin * np.stack([np.zeros(n), np.sin(2 * t), np.ones(n)], axis=1)
    return S2System("rotor_ring", np.eye(n), ring_coupling, [k], q0, w0, symmetry="full")


register_system(
    SystemDef(
        name="rotor_ring",
        family="s2",
        doc="Ring of unit rotors with nearest-neighbour coupling -k q_i·q_j.",
        params=(
            Param("n", int, 8, "1", "rotors", ge=2),
            Param("k", float, 1.0, "energy", "coupling", ge=0.0),
            Param("spin", float, 1.0, "1 / time", "initial spin scale"),
        ),
        build=rotor_ring,
    )
)
