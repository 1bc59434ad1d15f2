"""Built-in skew-gradient systems (004 §2 and §4, spec §7) as compiled S(x), H(x), ∇H(x).

Nonholonomic systems are in adapted coordinates ζ = (q, ρ) on D* with S = Π(q, ρ) of 004
eq. (8) (reduced forms: the constraints hold by construction), except ``gearbox_canonical``:
canonical (q, p) ∈ R⁶ with the constraint enforced by a multiplier (004 eq. (15),
GONZALEZ-F) for the discrete gradients and, for the baselines, the constrained canonical field
written in skew form S = [[0, P], [−P, W]] (P the projector orthogonal to μ, W the
gyroscopic term built from b = (∂μ)ᵀp), which keeps μ·p invariant.
"""

from __future__ import annotations

import math

import numpy as np

from geosweep.kernels import linalg as la
from geosweep.kernels._jit import kjit
from geosweep.kernels.dg.model import LagrangianForm, SkewSystem, dg_energy, dg_extra, dg_grad, dg_skew
from geosweep.kernels.registry import Param, SystemDef


@kjit
def _zero(S):
    for i in range(S.shape[0]):
        for j in range(S.shape[1]):
            S[i, j] = 0.0


# ---- chaotic quartic nonholonomic system (004 §4.1) --------------------------------------
# x = (x, w_1..w_n, z_1..z_n, ρ_1..ρ_n, η_1..η_n), η = ρ_{n+1..2n}; p = [n]
@kjit(inline="always")
def _quartic_kappa(x, n):
    """κ = (w·η)/(1 + |w|²), the coefficient the quartic system's S, ∇H and constraint share."""
    nq = 2 * n + 1
    ww = 0.0
    wh = 0.0
    for i in range(n):
        ww += x[1 + i] ** 2
        wh += x[1 + i] * x[nq + n + i]
    return wh / (1.0 + ww)


@dg_skew
def quartic_skew(x, p, S):
    n = int(p[0])
    nq = 2 * n + 1
    _zero(S)
    kap = _quartic_kappa(x, n)
    for i in range(n):
        a, b = nq + i, nq + n + i  # ρ_i (X_i = ∂w_i) and η_i (X_{n+i} = w_i ∂x − ∂z_i)
        S[1 + i, a] = 1.0
        S[a, 1 + i] = -1.0
        S[0, b] = x[1 + i]
        S[b, 0] = -x[1 + i]
        S[1 + n + i, b] = -1.0
        S[b, 1 + n + i] = 1.0
        S[a, b] = -kap  # −C_ab^c ρ_c with [X_i, X_{n+i}] = ∂x = Σ_k w_k/(1+|w|²) X_{n+k} + …
        S[b, a] = kap


@dg_energy
def quartic_energy(x, p):
    n = int(p[0])
    nq = 2 * n + 1
    ww = 0.0
    wh = 0.0
    K = 0.0
    V = x[0] ** 2 + x[1 + n] ** 2 * x[2 + n] ** 2
    for i in range(n):
        w, z = x[1 + i], x[1 + n + i]
        ww += w * w
        wh += w * x[nq + n + i]
        K += x[nq + i] ** 2 + x[nq + n + i] ** 2
        V += w * w + z * z + w * w * z * z
    return 0.5 * (K - wh * wh / (1.0 + ww)) + 0.5 * V


@dg_grad
def quartic_grad(x, p, g):
    n = int(p[0])
    nq = 2 * n + 1
    kap = _quartic_kappa(x, n)
    g[0] = x[0]
    for i in range(n):
        w, z, eta = x[1 + i], x[1 + n + i], x[nq + n + i]
        g[1 + i] = w + w * z * z - kap * eta + kap * kap * w
        g[1 + n + i] = z + w * w * z
        g[nq + i] = x[nq + i]
        g[nq + n + i] = eta - kap * w
    z1, z2 = x[1 + n], x[2 + n]
    g[1 + n] += z1 * z2 * z2
    g[2 + n] += z1 * z1 * z2


@dg_extra
def quartic_extra(x, p, mode, out):
    """mode 0: |ẋ + Σ w_i ż_i| with q̇ = Σ_a X_a ∂H/∂ρ_a."""
    if mode != 0:
        return
    n = int(p[0])
    nq = 2 * n + 1
    kap = _quartic_kappa(x, n)
    xd = 0.0
    wzd = 0.0
    for i in range(n):
        y = x[nq + n + i] - kap * x[1 + i]
        xd += x[1 + i] * y
        wzd += x[1 + i] * (-y)
    out[0] = abs(xd + wzd)


# Lagrangian form (DLA integrators): q = (x, w_1..w_n, z_1..z_n), L = ½|q̇|² − V,
# constraint ẋ + Σ w_i ż_i = 0, i.e. A(q) = (1, 0, …, 0, w_1, …, w_n); p = [n]
@dg_energy
def quartic_V(q, p):
    n = int(p[0])
    V = q[0] ** 2 + q[1 + n] ** 2 * q[2 + n] ** 2
    for i in range(n):
        w, z = q[1 + i], q[1 + n + i]
        V += w * w + z * z + w * w * z * z
    return 0.5 * V


@dg_grad
def quartic_dV(q, p, g):
    n = int(p[0])
    g[0] = q[0]
    for i in range(n):
        w, z = q[1 + i], q[1 + n + i]
        g[1 + i] = w + w * z * z
        g[1 + n + i] = z + w * w * z
    z1, z2 = q[1 + n], q[2 + n]
    g[1 + n] += z1 * z2 * z2
    g[2 + n] += z1 * z1 * z2


@dg_extra
def quartic_A(q, p, mode, out):
    """mode 1: the constraint row A(q) = (1, 0_n, w)."""
    if mode != 1:
        return
    n = int(p[0])
    out[0] = 1.0
    for i in range(n):
        out[1 + i] = 0.0
        out[1 + n + i] = q[1 + i]


def quartic_basis(q: np.ndarray) -> np.ndarray:
    """The adapted basis of D as columns: X_i = ∂w_i, X_{n+i} = w_i ∂x − ∂z_i."""
    n = (q.shape[0] - 1) // 2
    X = np.zeros((2 * n + 1, 2 * n))
    for i in range(n):
        X[1 + i, i] = 1.0
        X[0, n + i] = q[1 + i]
        X[1 + n + i, n + i] = -1.0
    return X


def quartic(n: int = 3, initial_energy: float = 3.06, seed: int = 0) -> SkewSystem:
    """Random N(0, 1) state (seed) with q scaled until V < initial_energy/2, ρ rescaled to H = initial_energy."""
    energy = initial_energy
    rng = np.random.default_rng(seed)
    nq = 2 * n + 1
    x = rng.standard_normal(nq + 2 * n)
    p = np.array([float(n)])
    q = x.copy()
    q[nq:] = 0.0
    while quartic_energy(q, p) >= 0.5 * energy:
        q[:nq] *= 0.9
    x[:nq] = q[:nq]
    V = quartic_energy(q, p)
    x[nq:] *= math.sqrt((energy - V) / (quartic_energy(x, p) - V))
    labels = ("x",) + tuple(f"w{i + 1}" for i in range(n)) + tuple(f"z{i + 1}" for i in range(n))
    labels += tuple(f"rho{i + 1}" for i in range(2 * n))
    lag = LagrangianForm(nq, 1, quartic_V, quartic_dV, quartic_A, p, quartic_basis)
    return SkewSystem(
        "quartic", quartic_skew, quartic_energy, quartic_grad, x, p, labels, quartic_extra, True,
        info={"lagrangian": lag},
    )  # fmt: skip


# ---- Chaplygin sleigh (004 §4.2); x = (x1, x2, θ, ρ1, ρ2), p = [J, a, m] --------------------
@dg_skew
def sleigh_skew(x, p, S):
    J, a, m = p[0], p[1], p[2]
    I = J + m * a * a
    C = a * math.sqrt(m) / I
    _zero(S)
    S[0, 4] = math.cos(x[2]) / math.sqrt(m)
    S[1, 4] = math.sin(x[2]) / math.sqrt(m)
    S[2, 3] = 1.0 / math.sqrt(I)
    S[3, 4] = -C * x[3]
    for i in range(5):
        for j in range(i):
            S[i, j] = -S[j, i]


@dg_energy
def rho12_energy(x, p):
    n = x.shape[0]
    return 0.5 * (x[n - 2] ** 2 + x[n - 1] ** 2)


@dg_grad
def rho12_grad(x, p, g):
    n = x.shape[0]
    for i in range(n - 2):
        g[i] = 0.0
    g[n - 2] = x[n - 2]
    g[n - 1] = x[n - 1]


@dg_extra
def sleigh_extra(x, p, mode, out):
    """mode 0: |−ẋ1 sin θ + ẋ2 cos θ| (knife-edge constraint)."""
    if mode != 0:
        return
    m = p[2]
    v = x[4] / math.sqrt(m)
    out[0] = abs(-math.cos(x[2]) * v * math.sin(x[2]) + math.sin(x[2]) * v * math.cos(x[2]))


def sleigh(J=8.0, a=1.0, m=1.0, x1=-5.0, x2=0.0, theta=0.1, rho1=0.001, rho2=-0.6) -> SkewSystem:
    return SkewSystem(
        "chaplygin_sleigh", sleigh_skew, rho12_energy, rho12_grad, np.array([x1, x2, theta, rho1, rho2]),
        np.array([J, a, m]), ("x1", "x2", "theta", "rho1", "rho2"), sleigh_extra, True,
        info={"C": a * math.sqrt(m) / (J + m * a * a)}, separable=True,
    )  # fmt: skip


# ---- Euler–Poincaré–Suslov on so(3) (004 §4.3); x = (ρ1, ρ2), p = [I11, I22, I13, I23] ------
@dg_skew
def suslov_skew(x, p, S):
    k = p[2] / p[0] * x[0] + p[3] / p[1] * x[1]
    S[0, 0] = 0.0
    S[1, 1] = 0.0
    S[0, 1] = -k
    S[1, 0] = k


@dg_energy
def suslov_energy(x, p):
    return 0.5 * (x[0] ** 2 / p[0] + x[1] ** 2 / p[1])


@dg_grad
def suslov_grad(x, p, g):
    g[0] = x[0] / p[0]
    g[1] = x[1] / p[1]


def suslov(I11=1.0, I22=2.0, I13=0.3, I23=0.5, rho1=1.0, rho2=0.5) -> SkewSystem:
    return SkewSystem(
        "suslov", suslov_skew, suslov_energy, suslov_grad, np.array([rho1, rho2]), np.array([I11, I22, I13, I23]),
        ("rho1", "rho2"), separable=True,
    )  # fmt: skip


# ---- continuous gearbox driven by an asymmetric pendulum (004 §4.4) -----------------------
@dg_energy
def gear_V(x, p):
    return 0.5 * (x[0] ** 2 + x[1] ** 2) + math.cos(x[2]) - 0.2 * math.sin(2.0 * x[2])


@kjit
def _gear_dV(x, g):
    g[0] = x[0]
    g[1] = x[1]
    g[2] = -math.sin(x[2]) - 0.4 * math.cos(2.0 * x[2])


# reduced (GONZALEZ-R): x = (q1, q2, q3, ρ1, ρ2), orthonormal X1 = ∂q3, X2 = (−s ∂q1 + ∂q2)/r,
# s = sin q3, r = √(1 + s²); ∂X2/∂q3 ∝ μ, so C_ab^c ρ_c = 0 on D* and H = ½|ρ|² + V.
@dg_skew
def gear_r_skew(x, p, S):
    _zero(S)
    s = math.sin(x[2])
    r = math.sqrt(1.0 + s * s)
    S[2, 3] = 1.0
    S[0, 4] = -s / r
    S[1, 4] = 1.0 / r
    for i in range(5):
        for j in range(i):
            S[i, j] = -S[j, i]


@dg_energy
def gear_r_energy(x, p):
    return 0.5 * (x[3] ** 2 + x[4] ** 2) + gear_V(x, p)


@dg_grad
def gear_r_grad(x, p, g):
    _gear_dV(x, g)
    g[3] = x[3]
    g[4] = x[4]


@dg_extra
def gear_r_extra(x, p, mode, out):
    """mode 0: |p1 + sin(q3) p2| with p = X(q)ρ."""
    if mode != 0:
        return
    s = math.sin(x[2])
    r = math.sqrt(1.0 + s * s)
    out[0] = abs(-s * x[4] / r + s * (x[4] / r))


# canonical (GONZALEZ-F): z = (q, p) ∈ R⁶, μ = (1, sin q3, 0)
@dg_skew
def gear_c_skew(x, p, S):
    _zero(S)
    s = math.sin(x[2])
    mu = (1.0, s, 0.0)
    b = (0.0, 0.0, math.cos(x[2]) * x[4])  # b_j = Σ_i ∂_j μ_i p_i
    m2 = 1.0 + s * s
    for i in range(3):
        for j in range(3):
            P = (1.0 if i == j else 0.0) - mu[i] * mu[j] / m2
            S[i, 3 + j] = P
            S[3 + j, i] = -P
            S[3 + i, 3 + j] = -(mu[i] * b[j] - b[i] * mu[j]) / m2


@dg_energy
def gear_c_energy(x, p):
    return 0.5 * (x[3] ** 2 + x[4] ** 2 + x[5] ** 2) + gear_V(x, p)


@dg_grad
def gear_c_grad(x, p, g):
    _gear_dV(x, g)
    g[3] = x[3]
    g[4] = x[4]
    g[5] = x[5]


@dg_extra
def gear_c_extra(x, p, mode, out):
    """mode 0: |p1 + sin(q3) p2|; mode 1: the multiplier row (0, μ(q))."""
    if mode == 0:
        out[0] = abs(x[3] + math.sin(x[2]) * x[4])
    else:
        for i in range(6):
            out[i] = 0.0
        out[3] = 1.0
        out[4] = math.sin(x[2])


# reduced through the Householder basis (spec §6 GONZALEZ-R, 004 §3.3 and Algorithm 1): X(q) = the
# last m columns of Q in μ(q)ᵀ = QR (signs s = +1: μ_1 = 1 keeps the first pivot away from 0, so
# the basis is one smooth field along every trajectory and ρ can stay the state), ∂X by central
# differences (Remark 3.5, step δ), −C_ab^c ρ_c = (∂_i X_a^j X_b^i − ∂_i X_b^j X_a^i) p_j with p = Xρ.
_QR_DELTA = 1e-6


@kjit
def householder_basis(A, X):
    """X (n, m) ← the last m = n − k columns of Q in A = QR (A (n, k), Householder, signs +1)."""
    n, k = A.shape
    R = A.copy()
    Q = np.eye(n)
    w = np.empty(n)
    for j in range(k):
        nrm = 0.0
        for i in range(j, n):
            nrm += R[i, j] ** 2
        nrm = np.sqrt(nrm)
        for i in range(n):
            w[i] = R[i, j] if i >= j else 0.0
        w[j] += nrm
        wn = 0.0
        for i in range(j, n):
            wn += w[i] ** 2
        wn = np.sqrt(wn)
        for i in range(j, n):
            w[i] /= wn
        for c in range(k):
            d = 0.0
            for i in range(j, n):
                d += w[i] * R[i, c]
            for i in range(j, n):
                R[i, c] -= 2.0 * w[i] * d
        for r in range(n):
            d = 0.0
            for i in range(j, n):
                d += Q[r, i] * w[i]
            for i in range(j, n):
                Q[r, i] -= 2.0 * d * w[i]
    for r in range(n):
        for c in range(n - k):
            X[r, c] = Q[r, k + c]


@kjit
def _gear_X(q2, X):
    A = np.empty((3, 1))
    A[0, 0] = 1.0
    A[1, 0] = math.sin(q2)
    A[2, 0] = 0.0
    householder_basis(A, X)


@dg_skew
def gear_qr_skew(x, p, S):
    _zero(S)
    X = np.empty((3, 2))
    _gear_X(x[2], X)
    for i in range(3):
        for a in range(2):
            S[i, 3 + a] = X[i, a]
            S[3 + a, i] = -X[i, a]
    # only q3 moves the basis: ∂_3 X by central differences
    d = _QR_DELTA * max(1.0, abs(x[2]))
    Xp = np.empty((3, 2))
    Xm = np.empty((3, 2))
    _gear_X(x[2] + d, Xp)
    _gear_X(x[2] - d, Xm)
    pj = np.zeros(3)
    for j in range(3):
        pj[j] = X[j, 0] * x[3] + X[j, 1] * x[4]
    c = 0.0  # (∂_3 X_1 · p) X_2^3 − (∂_3 X_2 · p) X_1^3
    for j in range(3):
        c += ((Xp[j, 0] - Xm[j, 0]) * X[2, 1] - (Xp[j, 1] - Xm[j, 1]) * X[2, 0]) / (2.0 * d) * pj[j]
    S[3, 4] = c
    S[4, 3] = -c


@dg_extra
def gear_qr_extra(x, p, mode, out):
    """mode 0: |p1 + sin(q3) p2| with p = X(q)ρ."""
    if mode != 0:
        return
    X = np.empty((3, 2))
    _gear_X(x[2], X)
    p1 = X[0, 0] * x[3] + X[0, 1] * x[4]
    p2 = X[1, 0] * x[3] + X[1, 1] * x[4]
    out[0] = abs(p1 + math.sin(x[2]) * p2)


# Lagrangian form (DLA integrators): q ∈ R³, L = ½|q̇|² − V, A(q) = μ(q) = (1, sin q3, 0)
@dg_grad
def gear_dV(q, p, g):
    _gear_dV(q, g)


@dg_extra
def gear_A(q, p, mode, out):
    """mode 1: the constraint row μ(q) = (1, sin q3, 0)."""
    if mode != 1:
        return
    out[0] = 1.0
    out[1] = math.sin(q[2])
    out[2] = 0.0


def _gear_basis_reduced(q: np.ndarray) -> np.ndarray:
    s = math.sin(q[2])
    r = math.sqrt(1.0 + s * s)
    return np.array([[0.0, -s / r], [0.0, 1.0 / r], [1.0, 0.0]])


def _gear_basis_qr(q: np.ndarray) -> np.ndarray:
    X = np.empty((3, 2))
    _gear_X(float(q[2]), X)
    return X


def gearbox_state(seed: int = 0) -> np.ndarray:
    """Canonical (q, p): N(0, 1) draws (seed), p projected onto the constraint p1 + sin(q3) p2 = 0."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(3)
    pm = rng.standard_normal(3)
    mu = np.array([1.0, np.sin(q[2]), 0.0])
    pm = pm - mu * la.dot(mu, pm) / la.dot(mu, mu)
    return np.concatenate([q, pm])


def _gear_lagrangian(basis) -> LagrangianForm:
    return LagrangianForm(3, 1, gear_V, gear_dV, gear_A, np.zeros(1), basis)


#: the pendulum angle q3: V, the constraint and S are 2π-periodic in it, and a rotating pendulum's q3
#: grows without bound (7.9·10⁴ rad by t = 5·10⁴ from seed 2), so the steppers keep it in (−π, π]
_GEAR_ANGLES = (2,)
#: one stored state layout for the reduced, qr and canonical forms (a sweep over form stays labelled)
_GEAR_LAYOUT = ("q1", "q2", "q3", "rho1", "rho2", "p1", "p2", "p3")


def gearbox(form: str = "reduced", seed: int = 0) -> SkewSystem:
    z = gearbox_state(seed)
    if form == "reduced":
        s = np.sin(z[2])
        r = np.sqrt(1 + s * s)
        rho = np.array([z[5], (-s * z[3] + z[4]) / r])  # ρ_a = X_a·p
        return SkewSystem(
            "gearbox_reduced", gear_r_skew, gear_r_energy, gear_r_grad, np.concatenate([z[:3], rho]), np.zeros(1),
            ("q1", "q2", "q3", "rho1", "rho2"), gear_r_extra, True, "momentum",
            info={"lagrangian": _gear_lagrangian(_gear_basis_reduced)}, periodic=_GEAR_ANGLES, separable=True,
            layout=_GEAR_LAYOUT,
        )  # fmt: skip
    if form == "qr":
        X = np.empty((3, 2))
        _gear_X(z[2], X)
        return SkewSystem(
            "gearbox_qr", gear_qr_skew, gear_r_energy, gear_r_grad, np.concatenate([z[:3], la.matvec(X.T, z[3:])]),
            np.zeros(1), ("q1", "q2", "q3", "rho2", "rho1"), gear_qr_extra, True, "momentum",
            info={"lagrangian": _gear_lagrangian(_gear_basis_qr)}, periodic=_GEAR_ANGLES, separable=True,
            layout=_GEAR_LAYOUT,
        )  # fmt: skip  # the QR basis holds the reduced form's two columns swapped: its entries are ρ₂, ρ₁
    if form == "canonical":
        return SkewSystem(
            "gearbox_canonical", gear_c_skew, gear_c_energy, gear_c_grad, z, np.zeros(1),
            ("q1", "q2", "q3", "p1", "p2", "p3"), gear_c_extra, True, "momentum", n_multipliers=1,
            info={"lagrangian": _gear_lagrangian(None)}, periodic=_GEAR_ANGLES, separable=True,
            layout=_GEAR_LAYOUT,
        )  # fmt: skip
    raise ValueError(f"form must be 'reduced', 'qr' or 'canonical', got {form!r}")


# ---- rolling disk (004 §2); x = (x1, x2, θ, φ, ρ1, ρ2), p = [m, r, Jθ, Jφ] ------------------
@dg_skew
def disk_skew(x, p, S):
    _zero(S)
    r = p[1]
    S[0, 4] = r * math.cos(x[2])
    S[1, 4] = r * math.sin(x[2])
    S[2, 5] = 1.0
    S[3, 4] = 1.0
    for i in range(6):
        for j in range(i):
            S[i, j] = -S[j, i]


@dg_energy
def disk_energy(x, p):
    m, r, Jt, Jp = p[0], p[1], p[2], p[3]
    return 0.5 * (x[4] ** 2 / (m * r * r + Jp) + x[5] ** 2 / Jt)


@dg_grad
def disk_grad(x, p, g):
    m, r, Jt, Jp = p[0], p[1], p[2], p[3]
    for i in range(4):
        g[i] = 0.0
    g[4] = x[4] / (m * r * r + Jp)
    g[5] = x[5] / Jt


@dg_extra
def disk_extra(x, p, mode, out):
    """mode 0: max(|ẋ1 − r φ̇ cos θ|, |ẋ2 − r φ̇ sin θ|) with q̇ = Σ_a X_a ∂H/∂ρ_a."""
    if mode != 0:
        return
    m, r, Jp = p[0], p[1], p[3]
    y1 = x[4] / (m * r * r + Jp)
    c, s = math.cos(x[2]), math.sin(x[2])
    out[0] = max(abs(r * c * y1 - r * y1 * c), abs(r * s * y1 - r * y1 * s))


def rolling_disk(m=1.0, r=0.5, J_theta=0.25, J_phi=0.125, theta=0.0, rho1=1.0, rho2=0.5) -> SkewSystem:
    return SkewSystem(
        "rolling_disk", disk_skew, disk_energy, disk_grad, np.array([0.0, 0.0, theta, 0.0, rho1, rho2]),
        np.array([m, r, J_theta, J_phi]), ("x1", "x2", "theta", "phi", "rho1", "rho2"), disk_extra, True,
        separable=True,
    )  # fmt: skip


# ---- free rigid body on so(3)* (Lie–Poisson; Casimir ½|m|²); p = [I1, I2, I3, ε] ------------
@dg_skew
def body_skew(x, p, S):
    S[0, 0] = 0.0
    S[1, 1] = 0.0
    S[2, 2] = 0.0
    S[0, 1] = -x[2]
    S[1, 0] = x[2]
    S[0, 2] = x[1]
    S[2, 0] = -x[1]
    S[1, 2] = -x[0]
    S[2, 1] = x[0]


@dg_energy
def body_energy(x, p):
    return 0.5 * (x[0] ** 2 / p[0] + x[1] ** 2 / p[1] + x[2] ** 2 / p[2]) + 0.25 * p[3] * x[0] ** 4


@dg_grad
def body_grad(x, p, g):
    g[0] = x[0] / p[0] + p[3] * x[0] ** 3
    g[1] = x[1] / p[1]
    g[2] = x[2] / p[2]


@dg_extra
def body_extra(x, p, mode, out):
    """mode 0: the Casimir ½|m|²."""
    if mode == 0:
        out[0] = 0.5 * (x[0] ** 2 + x[1] ** 2 + x[2] ** 2)


def rigid_body(I1=1.0, I2=2.0, I3=3.0, quartic=0.5, m1=1.0, m2=0.5, m3=0.8) -> SkewSystem:
    return SkewSystem(
        "rigid_body", body_skew, body_energy, body_grad, np.array([m1, m2, m3]), np.array([I1, I2, I3, quartic]),
        ("m1", "m2", "m3"), body_extra, casimirs=("norm2",), separable=True,
    )  # fmt: skip


_F = "dg"
SYSTEMS = (
    SystemDef(
        name="nh_quartic",
        family=_F,
        doc="Chaotic quartic nonholonomic system (004 §4.1) in adapted coordinates (q, ρ) ∈ R^{4n+1}; "
        "random N(0, 1) state (seed) rescaled to the energy (spec §10.7).",
        params=(
            Param("n", int, 3, "1", "half the number of (w, z) pairs: Q = R^{2n+1}", ge=2, le=30),
            Param("initial_energy", float, 3.06, "1", "initial energy H", gt=0.0),
            Param("seed", int, 0, "1", "seed of the random initial state", ge=0),
        ),
        build=quartic,
        example={"h": [0.02, 0.01], "T": 100.0, "dt_out": 0.5},
        renamed={"energy": "initial_energy"},  # `energy` is the stored E(t)
    ),
    SystemDef(
        name="chaplygin_sleigh",
        family=_F,
        doc="Chaplygin sleigh (004 §4.2) in adapted coordinates (x1, x2, θ, ρ1, ρ2); defaults are the "
        "paper's Fig. 3 run (start near the unstable equilibrium ρ1 = 0, ρ2 < 0).",
        params=(
            Param("J", float, 8.0, "kg m^2", "moment of inertia about the centre of mass", gt=0.0),
            Param("a", float, 1.0, "m", "distance from the blade to the centre of mass"),
            Param("m", float, 1.0, "kg", "mass", gt=0.0),
            Param("x1", float, -5.0, "m", "initial blade contact point x1"),
            Param("x2", float, 0.0, "m", "initial blade contact point x2"),
            Param("theta", float, 0.1, "rad", "initial blade orientation θ"),
            Param("rho1", float, 0.001, "kg^(1/2) m / s", "initial ρ1 (rotation)"),
            Param("rho2", float, -0.6, "kg^(1/2) m / s", "initial ρ2 (along the blade)"),
        ),
        build=sleigh,
        example={"h": [0.5], "T": 200.0, "dt_out": 0.5},
    ),
    SystemDef(
        name="suslov",
        family=_F,
        doc="Euler–Poincaré–Suslov problem on so(3) (004 §4.3): constraint ω3 = 0, state (ρ1, ρ2).",
        params=(
            Param("I11", float, 1.0, "kg m^2", "inertia I11", gt=0.0),
            Param("I22", float, 2.0, "kg m^2", "inertia I22", gt=0.0),
            Param("I13", float, 0.3, "kg m^2", "inertia I13"),
            Param("I23", float, 0.5, "kg m^2", "inertia I23"),
            Param("rho1", float, 1.0, "kg m^2 / s", "initial ρ1"),
            Param("rho2", float, 0.5, "kg m^2 / s", "initial ρ2"),
        ),
        build=suslov,
        example={"h": [0.1, 0.05], "T": 50.0, "dt_out": 0.5},
    ),
    SystemDef(
        name="gearbox",
        family=_F,
        doc="Continuous gearbox driven by an asymmetric pendulum (004 §4.4, H = ½|p|² + V per spec §10.6): "
        "form 'reduced' (q, ρ) ∈ R⁵ (GONZALEZ-R: constraint exact; 'qr' the same with the Householder basis of "
        "004 §3.3 and a finite-difference ∂X) or 'canonical' (q, p) ∈ R⁶ "
        "(GONZALEZ-F with a multiplier: constraint approximate); the same random state (seed).",
        params=(
            Param(
                "form",
                str,
                "reduced",
                "1",
                "adapted coordinates (reduced, or qr: Householder basis) or canonical with a multiplier",
                choices=("reduced", "qr", "canonical"),
            ),
            Param("seed", int, 0, "1", "seed of the random initial state (p projected onto the constraint)", ge=0),
        ),  # fmt: skip
        build=gearbox,
        example={"h": [0.1], "T": 1000.0, "dt_out": 1.0},
    ),
    SystemDef(
        name="rolling_disk",
        family=_F,
        doc="Vertical rolling disk (unicycle, 004 §2) in adapted coordinates (x1, x2, θ, φ, ρ1, ρ2).",
        params=(
            Param("m", float, 1.0, "kg", "mass", gt=0.0),
            Param("r", float, 0.5, "m", "radius", gt=0.0),
            Param("J_theta", float, 0.25, "kg m^2", "moment of inertia about the vertical (θ) axis", gt=0.0),
            Param("J_phi", float, 0.125, "kg m^2", "moment of inertia about the rolling (φ) axis", gt=0.0),
            Param("theta", float, 0.0, "rad", "initial heading θ"),
            Param("rho1", float, 1.0, "kg m^2 / s", "ρ1 (rolling momentum, constant)"),
            Param("rho2", float, 0.5, "kg m^2 / s", "ρ2 (turning momentum, constant)"),
        ),
        build=rolling_disk,
        example={"h": [0.1], "T": 50.0, "dt_out": 0.5},
    ),
    SystemDef(
        name="rigid_body_lp",
        family=_F,
        doc="Free rigid body on so(3)* in Lie–Poisson form ṁ = m × ∇H, H = ½Σ m_i²/I_i + ¼ε m1⁴; "
        "Casimir ½|m|² (preserved exactly by S(x̄) schemes).",
        params=(
            Param("I1", float, 1.0, "kg m^2", "principal moment I1", gt=0.0),
            Param("I2", float, 2.0, "kg m^2", "principal moment I2", gt=0.0),
            Param("I3", float, 3.0, "kg m^2", "principal moment I3", gt=0.0),
            Param("quartic", float, 0.5, "1", "ε of the quartic term (0: the classical rigid body)"),
            Param("m1", float, 1.0, "kg m^2 / s", "initial m1"),
            Param("m2", float, 0.5, "kg m^2 / s", "initial m2"),
            Param("m3", float, 0.8, "kg m^2 / s", "initial m3"),
        ),
        build=rigid_body,
        example={"h": [0.05], "T": 100.0, "dt_out": 0.5},
    ),
)
