"""Forces and inertial torques of the particle-binder torus and the SO(3) pendulum (spec §3, §4).

All quantities are inertial: ``F_i = −∂U/∂x_i``, ``τ_i = −∂U/∂ξ_i`` for ``R_i → exp(S(ξ_i)) R_i``.
Every pair quantity is computed once and applied as ``+f`` to i and ``−f`` to j.

``aux`` (length ``N_AUX``) receives, in order: the five potential parts
(torus: U_m, U_a, U_s, U_pp, U_pw; pendulum: U_grav, 0, 0, 0, 0), the contact counts
(non-bonded pp, bonded pp, wall) and the largest bond relative rotation angle ``max φ_ij``.

Torus float parameters ``p``: (K_m, K_a, K_s, K_pp, K_pw, wall_on, x_w, shear_literal).
Pendulum ``p``: (m, g); ``ρ0 = e3``.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.torus.rodrigues import compose, g_of, rot_all

N_AUX = 9
#: indices into the torus parameter vector
P_KM, P_KA, P_KS, P_KPP, P_KPW, P_WALL, P_XW, P_LITERAL = range(8)
N_P_TORUS = 8


@kjit
def _bonded(bpart, i, j):
    return bpart[i, 0] == j or bpart[i, 1] == j


@kjit
def _pair_contact(i, j, x, D, Kpp, F, bpart, aux):
    """Hertz contact of one pair (active for s = 1 − L/a > 0 strictly); returns U."""
    d0 = x[i, 0] - x[j, 0]
    d1 = x[i, 1] - x[j, 1]
    d2 = x[i, 2] - x[j, 2]
    a = 0.5 * (D[i] + D[j])
    LL = d0 * d0 + d1 * d1 + d2 * d2
    if not LL < a * a:
        return 0.0
    L = np.sqrt(LL)
    s = 1.0 - L / a
    if not s > 0.0:
        return 0.0
    rs = np.sqrt(s)
    s32 = s * rs
    f = (Kpp / a) * s32 / L
    F[i, 0] += f * d0
    F[i, 1] += f * d1
    F[i, 2] += f * d2
    F[j, 0] -= f * d0
    F[j, 1] -= f * d1
    F[j, 2] -= f * d2
    if _bonded(bpart, i, j):
        aux[6] += 1.0
    else:
        aux[5] += 1.0
    return 0.4 * Kpp * s * s32


@kjit
def torus_forces(x, alpha, R, p, D, bonds, d0, L0, bpart, nb_start, nb_list, use_nbl, F, tau, aux):
    """Fill ``F``, ``tau`` (n, 3) and ``aux`` at configuration (x, α); return total U.

    ``R`` (n, 3, 3) is workspace (overwritten with ``R(α_i)``). ``bonds`` (nb, 2) int64,
    ``d0`` (nb, 3) reference bond vectors ``x_i0 − x_j0``, ``L0`` (nb,) their lengths,
    ``bpart`` (n, 2) bonded partners (−1: none). Contacts: all pairs i < j in ascending
    order, or (``use_nbl``) the CSR neighbour list ``nb_start``/``nb_list`` holding a
    superset of the active pairs in the same order (bitwise-identical result).
    """
    n = x.shape[0]
    Km = p[P_KM]
    Ka = p[P_KA]
    Ks = p[P_KS]
    Kpp = p[P_KPP]
    Kpw = p[P_KPW]
    literal = p[P_LITERAL] != 0.0
    for k in range(N_AUX):
        aux[k] = 0.0
    for i in range(n):
        for c in range(3):
            F[i, c] = 0.0
            tau[i, c] = 0.0
    rot_all(alpha, R)
    Um = 0.0
    Ua = 0.0
    Us = 0.0
    phimax = 0.0
    for b in range(bonds.shape[0]):
        i = bonds[b, 0]
        j = bonds[b, 1]
        # --- bending/torsion: α_ij = (−α_i) ⊕ α_j, τ_i = K_m g(|α_ij|) α_ij = −τ_j
        r0, r1, r2, _ = compose(-alpha[i, 0], -alpha[i, 1], -alpha[i, 2], alpha[j, 0], alpha[j, 1], alpha[j, 2])
        na = np.sqrt(r0 * r0 + r1 * r1 + r2 * r2)
        phi = 2.0 * np.arctan(0.5 * na)
        if not phi <= phimax:
            phimax = phi
        Um += 0.5 * Km * phi * phi
        gk = Km * g_of(na)
        tau[i, 0] += gk * r0
        tau[i, 1] += gk * r1
        tau[i, 2] += gk * r2
        tau[j, 0] -= gk * r0
        tau[j, 1] -= gk * r1
        tau[j, 2] -= gk * r2
        # --- axial
        e0 = x[i, 0] - x[j, 0]
        e1 = x[i, 1] - x[j, 1]
        e2 = x[i, 2] - x[j, 2]
        L = np.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
        invL = 1.0 / L
        n0 = e0 * invL
        n1 = e1 * invL
        n2 = e2 * invL
        l0 = L0[b]
        strain = L / l0 - 1.0
        Ua += 0.5 * Ka * strain * strain
        fa = -(Ka / l0) * strain
        f0 = fa * n0
        f1 = fa * n1
        f2 = fa * n2
        # --- shear
        q0 = d0[b, 0]
        q1 = d0[b, 1]
        q2 = d0[b, 2]
        if not literal:
            il0 = 1.0 / l0
            ui0 = (R[i, 0, 0] * q0 + R[i, 0, 1] * q1 + R[i, 0, 2] * q2) * il0
            ui1 = (R[i, 1, 0] * q0 + R[i, 1, 1] * q1 + R[i, 1, 2] * q2) * il0
            ui2 = (R[i, 2, 0] * q0 + R[i, 2, 1] * q1 + R[i, 2, 2] * q2) * il0
            uj0 = (R[j, 0, 0] * q0 + R[j, 0, 1] * q1 + R[j, 0, 2] * q2) * il0
            uj1 = (R[j, 1, 0] * q0 + R[j, 1, 1] * q1 + R[j, 1, 2] * q2) * il0
            uj2 = (R[j, 2, 0] * q0 + R[j, 2, 1] * q1 + R[j, 2, 2] * q2) * il0
            wi = 1.0 - (ui0 * n0 + ui1 * n1 + ui2 * n2)
            wj = 1.0 - (uj0 * n0 + uj1 * n1 + uj2 * n2)
            Us += 0.25 * Ks * (wi * wi + wj * wj)
            # F_i = (K_s / 2L) P [w_i u_i + w_j u_j]
            w0 = wi * ui0 + wj * uj0
            w1 = wi * ui1 + wj * uj1
            w2 = wi * ui2 + wj * uj2
            wd = w0 * n0 + w1 * n1 + w2 * n2
            cs = 0.5 * Ks * invL
            f0 += cs * (w0 - wd * n0)
            f1 += cs * (w1 - wd * n1)
            f2 += cs * (w2 - wd * n2)
            ci = 0.5 * Ks * wi
            cj = 0.5 * Ks * wj
            tau[i, 0] += ci * (ui1 * n2 - ui2 * n1)
            tau[i, 1] += ci * (ui2 * n0 - ui0 * n2)
            tau[i, 2] += ci * (ui0 * n1 - ui1 * n0)
            tau[j, 0] += cj * (uj1 * n2 - uj2 * n1)
            tau[j, 1] += cj * (uj2 * n0 - uj0 * n2)
            tau[j, 2] += cj * (uj0 * n1 - uj1 * n0)
        else:
            # literal (53)-(55): c = (R_i d0)·(R_j d)/(L0 L)  (not frame-indifferent)
            a0 = R[i, 0, 0] * q0 + R[i, 0, 1] * q1 + R[i, 0, 2] * q2
            a1 = R[i, 1, 0] * q0 + R[i, 1, 1] * q1 + R[i, 1, 2] * q2
            a2 = R[i, 2, 0] * q0 + R[i, 2, 1] * q1 + R[i, 2, 2] * q2
            c0 = R[j, 0, 0] * n0 + R[j, 0, 1] * n1 + R[j, 0, 2] * n2
            c1 = R[j, 1, 0] * n0 + R[j, 1, 1] * n1 + R[j, 1, 2] * n2
            c2 = R[j, 2, 0] * n0 + R[j, 2, 1] * n1 + R[j, 2, 2] * n2
            il0 = 1.0 / l0
            w = 1.0 - (a0 * c0 + a1 * c1 + a2 * c2) * il0
            Us += 0.5 * Ks * w * w
            # g = R_jᵀ a / L0 ; F_i = K_s w P g / L
            g0 = (R[j, 0, 0] * a0 + R[j, 1, 0] * a1 + R[j, 2, 0] * a2) * il0
            g1 = (R[j, 0, 1] * a0 + R[j, 1, 1] * a1 + R[j, 2, 1] * a2) * il0
            g2 = (R[j, 0, 2] * a0 + R[j, 1, 2] * a1 + R[j, 2, 2] * a2) * il0
            gd = g0 * n0 + g1 * n1 + g2 * n2
            cs = Ks * w * invL
            f0 += cs * (g0 - gd * n0)
            f1 += cs * (g1 - gd * n1)
            f2 += cs * (g2 - gd * n2)
            ct = Ks * w * il0
            t0 = ct * (a1 * c2 - a2 * c1)
            t1 = ct * (a2 * c0 - a0 * c2)
            t2 = ct * (a0 * c1 - a1 * c0)
            tau[i, 0] += t0
            tau[i, 1] += t1
            tau[i, 2] += t2
            tau[j, 0] -= t0
            tau[j, 1] -= t1
            tau[j, 2] -= t2
        F[i, 0] += f0
        F[i, 1] += f1
        F[i, 2] += f2
        F[j, 0] -= f0
        F[j, 1] -= f1
        F[j, 2] -= f2
    # --- particle-particle contact
    Upp = 0.0
    if use_nbl:
        for i in range(n):
            for jj in range(nb_start[i], nb_start[i + 1]):
                Upp += _pair_contact(i, nb_list[jj], x, D, Kpp, F, bpart, aux)
    else:
        for i in range(n):
            for j in range(i + 1, n):
                Upp += _pair_contact(i, j, x, D, Kpp, F, bpart, aux)
    # --- wall: plane n = e1 at x_w, signed gap, zero-diameter partner
    Upw = 0.0
    if p[P_WALL] != 0.0:
        xw = p[P_XW]
        for i in range(n):
            r = 0.5 * D[i]
            s = 1.0 - (x[i, 0] - xw) / r
            if s > 0.0:
                s32 = s * np.sqrt(s)
                F[i, 0] += (Kpw / r) * s32
                Upw += 0.4 * Kpw * s * s32
                aux[7] += 1.0
    aux[0] = Um
    aux[1] = Ua
    aux[2] = Us
    aux[3] = Upp
    aux[4] = Upw
    aux[8] = phimax
    return Um + Ua + Us + Upp + Upw


@kjit
def pendulum_forces(x, alpha, R, p, F, tau, aux):
    """3-D pendulum (ρ0 = e3): ``U = −m g e3·Rρ0``, ``τ = m g (Rρ0) × e3``, ``F = 0``."""
    for k in range(N_AUX):
        aux[k] = 0.0
    for i in range(x.shape[0]):
        for c in range(3):
            F[i, c] = 0.0
    rot_all(alpha, R)
    mg = p[0] * p[1]
    U = 0.0
    for i in range(x.shape[0]):
        r0 = R[i, 0, 2]
        r1 = R[i, 1, 2]
        r2 = R[i, 2, 2]
        tau[i, 0] = mg * r1
        tau[i, 1] = -mg * r0
        tau[i, 2] = 0.0
        U -= mg * r2
    aux[0] = U
    return U
