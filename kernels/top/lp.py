"""Formulation B: the Lie–Poisson heavy top on se(3)* through the group-generic Lie stepper.

State ``y`` (1, 6) = ``(Γ, Π)``. The coadjoint action of SE(3) on se(3)* is exactly the
(TS²) action of :mod:`geosweep.kernels.lie.se3` with ``(q, ω) := (Γ, Π)`` (spec §2.3), so the stepper's
SE(3) group callbacks are reused as they are; this module supplies the algebra map
``f_B(Π, Γ) = (−𝕀⁻¹Π, −Mgℓ X)`` (rotation, translation), the ambient field of 001 (23)–(24)
and the sample diagnostics. Every RKMK/CF method then stays on the coadjoint orbit, i.e.
keeps both Casimirs |Γ|² and Π·Γ to round-off.

Diagnostics row (the stepper's six columns, reused with these meanings):
``[H, S = Π·X, |Γ|² − 1, C2 = Π·Γ, ||Γ|² − 1|, |S − S(0)|]`` — the stepper reduces column 3 to
max|C2 − C2(0)|, column 4 to mean/max and column 5 to max over every step.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.lie.signatures import DIAG_SIG, FIELD_SIG
from geosweep.kernels.status import Status
from geosweep.kernels.top.model import P_IINV, P_MGL, P_S0, P_X

_NONFINITE = int(Status.NONFINITE)
NWC = 1  # scratch entries the callbacks need (none; the stepper wants a positive size)


@kjit(FIELD_SIG)
def top_f(y, p, work, out):
    """Algebra map ``f_B = (−𝕀⁻¹Π, −Mgℓ X) ∈ se(3)``."""
    mgl = p[P_MGL]
    for c in range(3):
        out[0, c] = -p[P_IINV + c] * y[0, 3 + c]
        out[0, 3 + c] = -mgl * p[P_X + c]
    return 0 if np.isfinite(out[0, 0] + out[0, 1] + out[0, 2]) else _NONFINITE


@kjit(FIELD_SIG)
def top_F(y, p, work, out):
    """Ambient field ``Γ̇ = Γ × Ω``, ``Π̇ = Π × Ω + Mgℓ Γ × X`` with ``Ω = 𝕀⁻¹Π``."""
    mgl = p[P_MGL]
    G0, G1, G2 = y[0, 0], y[0, 1], y[0, 2]
    P0, P1, P2 = y[0, 3], y[0, 4], y[0, 5]
    O0, O1, O2 = p[P_IINV] * P0, p[P_IINV + 1] * P1, p[P_IINV + 2] * P2
    X0, X1, X2 = p[P_X], p[P_X + 1], p[P_X + 2]
    out[0, 0] = G1 * O2 - G2 * O1
    out[0, 1] = G2 * O0 - G0 * O2
    out[0, 2] = G0 * O1 - G1 * O0
    out[0, 3] = P1 * O2 - P2 * O1 + mgl * (G1 * X2 - G2 * X1)
    out[0, 4] = P2 * O0 - P0 * O2 + mgl * (G2 * X0 - G0 * X2)
    out[0, 5] = P0 * O1 - P1 * O0 + mgl * (G0 * X1 - G1 * X0)
    s = 0.0
    for c in range(6):
        s += out[0, c]
    return 0 if np.isfinite(s) else _NONFINITE


@kjit(DIAG_SIG)
def top_diag(y, p, work, out):
    """``out = [H, S, |Γ|² − 1, Π·Γ, ||Γ|² − 1|, |S − S(0)|]``; returns H."""
    G0, G1, G2 = y[0, 0], y[0, 1], y[0, 2]
    P0, P1, P2 = y[0, 3], y[0, 4], y[0, 5]
    ke = 0.5 * (p[P_IINV] * P0 * P0 + p[P_IINV + 1] * P1 * P1 + p[P_IINV + 2] * P2 * P2)
    H = ke + p[P_MGL] * (G0 * p[P_X] + G1 * p[P_X + 1] + G2 * p[P_X + 2])
    S = P0 * p[P_X] + P1 * p[P_X + 1] + P2 * p[P_X + 2]
    c1 = G0 * G0 + G1 * G1 + G2 * G2 - 1.0
    out[0] = H
    out[1] = S
    out[2] = c1
    out[3] = P0 * G0 + P1 * G1 + P2 * G2
    out[4] = abs(c1)
    out[5] = abs(S - p[P_S0])
    return H
