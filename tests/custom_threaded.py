"""A user-defined (S²)ⁿ potential that runs on several threads (importable by workers)."""

import numba
import numpy as np

from geosweep.kernels.s2 import S2System, s2_potential


@s2_potential(threaded=True)
def coulomb_sphere(q, p, g):
    """V = k Σ_{i<j} 1/|q_i − q_j| (Thomson problem): per-row sums in prange, then Σ_i in order."""
    n = q.shape[0]
    k = p[0]
    e = np.empty(n)
    for i in numba.prange(n):  # each iteration writes only row i of g and e[i]
        gx = 0.0
        gy = 0.0
        gz = 0.0
        v = 0.0
        for j in range(n):
            if j != i:
                dx = q[i, 0] - q[j, 0]
                dy = q[i, 1] - q[j, 1]
                dz = q[i, 2] - q[j, 2]
                ir = 1.0 / np.sqrt(dx * dx + dy * dy + dz * dz)
                v += ir
                c = -k * ir * ir * ir
                gx += c * dx
                gy += c * dy
                gz += c * dz
        g[i, 0] = gx
        g[i, 1] = gy
        g[i, 2] = gz
        e[i] = v
    V = 0.0
    for i in range(n):
        V += e[i]
    return 0.5 * k * V


def charged_sphere(level: int = 1, k: float = 1e-2, spin: float = 1.0) -> S2System:
    """Charges on icosphere vertices, a rigid spin about z plus a shear (rotation invariant: J conserved)."""
    from geosweep.kernels.systems.icosphere import icosphere

    q0, _ = icosphere(level)
    w0 = spin * np.stack([0.3 * q0[:, 2], np.zeros(len(q0)), np.ones(len(q0))], axis=1)
    return S2System("charged_sphere", np.eye(len(q0)), coulomb_sphere, [k], q0, w0, symmetry="full")
