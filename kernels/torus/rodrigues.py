"""Rescaled Rodrigues parameters α = 2 tan(φ/2) n̂ for SO(3) (spec torus §1).

Conventions: ``R(α)`` maps body → inertial; composition ``α1 ⊕ α2`` satisfies
``R(α1 ⊕ α2) = R(α2) R(α1)`` (the second argument acts last, from the left), so
``α_{k+1} = α_k ⊕ Δα`` applies an inertial-frame increment ``R_{k+1} = R(Δα) R_k``.
No trigonometry in ``R(α)`` or ``⊕``; the chart is singular only at rotation angle π.

Scalar kernels take and return plain floats (no allocation); array helpers at the bottom
are for tests and output conversion only.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels import linalg as la
from geosweep.kernels._jit import kjit

#: Threshold below which ``g(n) = 2 arctan(n/2)/n`` uses its series ``1 − n²/12``.
G_SERIES_BELOW = 1e-4
#: ``|α|`` above which the accumulated attitude counts as chart-singular (§1.4).
ALPHA_MAX = 1e12


@kjit
def g_of(n: float) -> float:
    """``g(n) = 2 arctan(n/2)/n`` with ``g(0) = 1``; ``θ = g(|α|) α``."""
    if n < G_SERIES_BELOW:
        return 1.0 - n * n / 12.0
    return 2.0 * np.arctan(0.5 * n) / n


@kjit
def compose(a0, a1, a2, b0, b1, b2):
    """``α ⊕ β = 4/(4 − α·β) [α + β − ½ α × β]``; returns (c0, c1, c2, den).

    ``R(α ⊕ β) = R(β) R(α)``. ``den = 4 − α·β`` is returned so callers can guard the
    chart singularity (``den == 0``: composed rotation angle π).
    """
    den = 4.0 - (a0 * b0 + a1 * b1 + a2 * b2)
    f = 4.0 / den
    c0 = f * (a0 + b0 - 0.5 * (a1 * b2 - a2 * b1))
    c1 = f * (a1 + b1 - 0.5 * (a2 * b0 - a0 * b2))
    c2 = f * (a2 + b2 - 0.5 * (a0 * b1 - a1 * b0))
    return c0, c1, c2, den


@kjit
def rot_into(a0, a1, a2, R, i):
    """Write ``R(α) = I + c[S(α) + ½ S(α)²]``, ``c = 4/(4+|α|²)``, into ``R[i]`` (3×3)."""
    aa = a0 * a0 + a1 * a1 + a2 * a2
    c = 4.0 / (4.0 + aa)
    hc = 0.5 * c
    d = 1.0 - hc * aa
    R[i, 0, 0] = d + hc * a0 * a0
    R[i, 1, 1] = d + hc * a1 * a1
    R[i, 2, 2] = d + hc * a2 * a2
    p01 = hc * a0 * a1
    p02 = hc * a0 * a2
    p12 = hc * a1 * a2
    R[i, 0, 1] = p01 - c * a2
    R[i, 1, 0] = p01 + c * a2
    R[i, 0, 2] = p02 + c * a1
    R[i, 2, 0] = p02 - c * a1
    R[i, 1, 2] = p12 - c * a0
    R[i, 2, 1] = p12 + c * a0


@kjit
def rot_all(alpha, R):
    """``R[i] = R(α_i)`` for every body; ``alpha`` (n, 3), ``R`` (n, 3, 3)."""
    for i in range(alpha.shape[0]):
        rot_into(alpha[i, 0], alpha[i, 1], alpha[i, 2], R, i)


# --------------------------------------------------------------------------------------
# array helpers (tests, output conversion; allocate freely)
# --------------------------------------------------------------------------------------
def skew(a: np.ndarray) -> np.ndarray:
    """``S(a)`` with ``S(a) b = a × b``."""
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def rot(alpha: np.ndarray) -> np.ndarray:
    """``R(α)`` as a (3, 3) array (or (n, 3, 3) for an (n, 3) input)."""
    a = np.ascontiguousarray(np.atleast_2d(alpha), dtype=np.float64)
    R = np.empty((a.shape[0], 3, 3))
    rot_all(a, R)
    return R[0] if np.ndim(alpha) == 1 else R


def oplus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``α ⊕ β`` for single vectors (``R(α ⊕ β) = R(β) R(α)``)."""
    c0, c1, c2, _ = compose(float(a[0]), float(a[1]), float(a[2]), float(b[0]), float(b[1]), float(b[2]))
    return np.array([c0, c1, c2])


def alpha_to_theta(alpha: np.ndarray) -> np.ndarray:
    """Rotation vector ``θ = g(|α|) α`` (angle ``2 arctan(|α|/2)`` < π)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    n = np.linalg.norm(alpha, axis=-1, keepdims=True)
    safe = np.where(n < G_SERIES_BELOW, 1.0, n)
    g = np.where(n < G_SERIES_BELOW, 1.0 - n * n / 12.0, 2.0 * np.arctan(0.5 * safe) / safe)
    return g * alpha


def theta_to_alpha(theta: np.ndarray) -> np.ndarray:
    """``α = 2 tan(φ/2) θ/φ`` for ``φ = |θ| < π``."""
    theta = np.asarray(theta, dtype=np.float64)
    p = np.linalg.norm(theta, axis=-1, keepdims=True)
    safe = np.where(p < G_SERIES_BELOW, 1.0, p)
    f = np.where(p < G_SERIES_BELOW, 1.0 + p * p / 12.0, 2.0 * np.tan(0.5 * safe) / safe)
    return f * theta


def expm_so3(theta: np.ndarray) -> np.ndarray:
    """``exp(S(θ))`` by the Rodrigues formula (trigonometric reference for tests)."""
    theta = np.asarray(theta, dtype=np.float64)
    p = float(la.norm(theta))
    K = skew(theta)
    if p < 1e-8:
        return np.eye(3) + K + 0.5 * la.matmul(K, K)
    return np.eye(3) + np.sin(p) / p * K + (1.0 - np.cos(p)) / (p * p) * la.matmul(K, K)


def alpha_to_quat(alpha: np.ndarray) -> np.ndarray:
    """Unit quaternion (scalar first) ``q = (2, α)/√(4 + |α|²)``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    s = np.sqrt(4.0 + np.sum(alpha * alpha, axis=-1, keepdims=True))
    return np.concatenate([2.0 / s, alpha / s], axis=-1)


def quat_to_alpha(q: np.ndarray) -> np.ndarray:
    """``α = 2 q_vec / q_0`` (sign of q irrelevant)."""
    q = np.asarray(q, dtype=np.float64)
    return 2.0 * q[..., 1:] / q[..., :1]
