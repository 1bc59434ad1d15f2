"""The N-link pendulum chain in Lie–Poisson form for the discrete gradients (spec pendulum_chain §4).

State x = (q_1..q_N, π_1..π_N) ∈ R^{6N} (q block first), π_i = (Rω)_i. Skew matrix, block by
block, B_i = [[0, −q̂_i], [−q̂_i, −π̂_i]] (the Lie–Poisson structure of (se(3)*)ᴺ, linear in x:
S(x̄) keeps the Casimirs |q_i|² and q_i·π_i exactly). H = ½ πᵀR̃(q)⁻¹π + U with
R̃ = Q̂ᵀ(M⊗I₃)Q̂ + diag(M_ii q_i q_iᵀ) (SPD for q_i ≠ 0, equal to R on (S²)ᴺ), solved densely
by the O(N) algorithm of the spec (tridiagonal G = M⁻¹ and a Thomas solve for the tensions;
the dense LU solve :func:`omega_dense` is kept as its test oracle). Parameter vector:
[N, M (N·N), μ_i g L_i (N), m (N), L (N)] with μ_i = Σ_{k≥i} m_k.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels import linalg as la
from geosweep.kernels._jit import kjit
from geosweep.kernels.chain.model import ChainModel, build_chain, chain_params, dense_R
from geosweep.kernels.dg.gradients import lu_factor, lu_solve
from geosweep.kernels.dg.model import SkewSystem, dg_energy, dg_extra, dg_grad, dg_skew
from geosweep.kernels.registry import SystemDef


@dg_skew
def lp_skew(x, p, S):
    n = int(p[0])
    o = 3 * n
    for i in range(S.shape[0]):
        for j in range(S.shape[1]):
            S[i, j] = 0.0
    for i in range(n):
        a = 3 * i
        q0, q1, q2 = x[a], x[a + 1], x[a + 2]
        w0, w1, w2 = x[o + a], x[o + a + 1], x[o + a + 2]
        # −q̂ in the (q, π) and (π, q) blocks, −π̂ in the (π, π) block
        for r, c, v in ((0, 1, q2), (0, 2, -q1), (1, 2, q0)):
            S[a + r, o + a + c] = v
            S[a + c, o + a + r] = -v
            S[o + a + r, a + c] = v
            S[o + a + c, a + r] = -v
        for r, c, v in ((0, 1, w2), (0, 2, -w1), (1, 2, w0)):
            S[o + a + r, o + a + c] = v
            S[o + a + c, o + a + r] = -v


@kjit
def omega_dense(x, p, w):
    """w ← R̃(q)⁻¹π by a dense LU (the test oracle of the O(N) solve); 0, or 1 if singular."""
    n = int(p[0])
    o = 3 * n
    R = np.zeros((o, o))
    for i in range(n):
        for j in range(n):
            mij = p[1 + i * n + j]
            qq = x[3 * i] * x[3 * j] + x[3 * i + 1] * x[3 * j + 1] + x[3 * i + 2] * x[3 * j + 2]
            for r in range(3):
                for c in range(3):
                    v = mij * ((qq if r == c else 0.0) - x[3 * j + r] * x[3 * i + c])
                    if i == j:
                        v += mij * x[3 * i + r] * x[3 * i + c]
                    R[3 * i + r, 3 * j + c] = v
    for k in range(o):
        w[k] = x[o + k]
    piv = np.empty(o, dtype=np.int64)
    if lu_factor(R, piv) != 0:
        return 1
    lu_solve(R, piv, w)
    return 0


@kjit
def _gapply(m, L, s, out):
    """out ← G s, G = M⁻¹ tridiagonal (spec pendulum_chain §1), per Cartesian component."""
    n = m.shape[0]
    for i in range(n):
        d = (1.0 / m[i] + (1.0 / m[i - 1] if i > 0 else 0.0)) / (L[i] * L[i])
        for c in range(3):
            v = d * s[3 * i + c]
            if i > 0:
                v -= s[3 * (i - 1) + c] / (m[i - 1] * L[i - 1] * L[i])
            if i < n - 1:
                v -= s[3 * (i + 1) + c] / (m[i] * L[i] * L[i + 1])
            out[3 * i + c] = v


@kjit
def _omega(x, p, w):
    """w ← R̃(q)⁻¹π in O(N) (spec pendulum_chain §4, any q_i ≠ 0); returns 0, or 1 if singular."""
    n = int(p[0])
    o = 3 * n
    b = 1 + n * n + n
    m = p[b : b + n]
    L = p[b + n : b + 2 * n]
    s = np.empty(o)
    t = np.empty(o)
    alpha = np.empty(n)
    nn = np.empty(n)
    for i in range(n):
        a = 3 * i
        q0, q1, q2 = x[a], x[a + 1], x[a + 2]
        r0, r1, r2 = x[o + a], x[o + a + 1], x[o + a + 2]
        ni = q0 * q0 + q1 * q1 + q2 * q2
        if not ni > 0.0:
            return 1
        nn[i] = ni
        alpha[i] = (q0 * r0 + q1 * r1 + q2 * r2) / (p[1 + i * n + i] * ni * ni)
        s[a] = (q1 * r2 - q2 * r1) / ni
        s[a + 1] = (q2 * r0 - q0 * r2) / ni
        s[a + 2] = (q0 * r1 - q1 * r0) / ni
    _gapply(m, L, s, t)
    # Thomas on K λ = −(q_i·t_i): K_ii = G_ii n_i, K_{i,i+1} = G_{i,i+1} q_i·q_{i+1}
    cp = np.empty(n)
    lam = np.empty(n)
    prev_c = 0.0
    prev_d = 0.0
    for i in range(n):
        a = 3 * i
        gii = (1.0 / m[i] + (1.0 / m[i - 1] if i > 0 else 0.0)) / (L[i] * L[i])
        diag = gii * nn[i]
        rhs = -(x[a] * t[a] + x[a + 1] * t[a + 1] + x[a + 2] * t[a + 2])
        low = 0.0
        if i > 0:
            low = -(x[a - 3] * x[a] + x[a - 2] * x[a + 1] + x[a - 1] * x[a + 2]) / (m[i - 1] * L[i - 1] * L[i])
        den = diag - low * prev_c
        if den == 0.0:
            return 1
        up = 0.0
        if i < n - 1:
            up = -(x[a] * x[a + 3] + x[a + 1] * x[a + 4] + x[a + 2] * x[a + 5]) / (m[i] * L[i] * L[i + 1])
        prev_c = up / den
        prev_d = (rhs - low * prev_d) / den
        cp[i] = prev_c
        lam[i] = prev_d
    for i in range(n - 2, -1, -1):
        lam[i] -= cp[i] * lam[i + 1]
    for i in range(n):
        for c in range(3):
            s[3 * i + c] += lam[i] * x[3 * i + c]
    _gapply(m, L, s, t)  # z
    for i in range(n):
        a = 3 * i
        q0, q1, q2 = x[a], x[a + 1], x[a + 2]
        z0, z1, z2 = t[a], t[a + 1], t[a + 2]
        w[a] = (z1 * q2 - z2 * q1) / nn[i] + alpha[i] * q0
        w[a + 1] = (z2 * q0 - z0 * q2) / nn[i] + alpha[i] * q1
        w[a + 2] = (z0 * q1 - z1 * q0) / nn[i] + alpha[i] * q2
    return 0


@kjit
def _mult(p, u, out):
    """out ← (M ⊗ I₃) u in O(N): M = (TΛ)ᵀ D_m (TΛ), prefix then suffix sums."""
    n = int(p[0])
    b = 1 + n * n + n
    m = p[b : b + n]
    L = p[b + n : b + 2 * n]
    for c in range(3):
        acc = 0.0
        for k in range(n):
            acc += L[k] * u[3 * k + c]
            out[3 * k + c] = acc  # P_k
        acc = 0.0
        for k in range(n - 1, -1, -1):
            acc += m[k] * out[3 * k + c]
            out[3 * k + c] = L[k] * acc


@dg_energy
def lp_energy(x, p):
    n = int(p[0])
    o = 3 * n
    w = np.empty(o)
    if _omega(x, p, w) != 0:
        return np.nan
    H = 0.0
    for k in range(o):
        H += 0.5 * x[o + k] * w[k]
    for i in range(n):
        H += p[1 + n * n + i] * x[3 * i + 2]
    return H


@dg_grad
def lp_grad(x, p, g):
    n = int(p[0])
    o = 3 * n
    w = np.empty(o)
    if _omega(x, p, w) != 0:
        for k in range(2 * o):
            g[k] = np.nan
        return
    u = np.empty(o)  # q_j × ω_j
    for j in range(n):
        a = 3 * j
        u[a] = x[a + 1] * w[a + 2] - x[a + 2] * w[a + 1]
        u[a + 1] = x[a + 2] * w[a] - x[a] * w[a + 2]
        u[a + 2] = x[a] * w[a + 1] - x[a + 1] * w[a]
    sm = np.empty(o)
    _mult(p, u, sm)  # Σ_j M_ij (q_j × ω_j)
    for i in range(n):
        a = 3 * i
        s0, s1, s2 = sm[a], sm[a + 1], sm[a + 2]
        mii = p[1 + i * n + i]
        qw = x[a] * w[a] + x[a + 1] * w[a + 1] + x[a + 2] * w[a + 2]
        g[a] = -(w[a + 1] * s2 - w[a + 2] * s1) - mii * qw * w[a]
        g[a + 1] = -(w[a + 2] * s0 - w[a] * s2) - mii * qw * w[a + 1]
        g[a + 2] = -(w[a] * s1 - w[a + 1] * s0) - mii * qw * w[a + 2] + p[1 + n * n + i]
        for c in range(3):
            g[o + a + c] = w[a + c]


@dg_extra
def lp_extra(x, p, mode, out):
    """mode 0: Casimirs max_i ||q_i|² − 1| and max_i |q_i·π_i|."""
    if mode != 0:
        return
    n = int(p[0])
    o = 3 * n
    c1 = 0.0
    c2 = 0.0
    for i in range(n):
        a = 3 * i
        c1 = max(c1, abs(x[a] ** 2 + x[a + 1] ** 2 + x[a + 2] ** 2 - 1.0))
        c2 = max(c2, abs(x[a] * x[o + a] + x[a + 1] * x[o + a + 1] + x[a + 2] * x[o + a + 2]))
    out[0] = c1
    out[1] = c2


def chain_lp(
    N: int = 3,
    masses: str = "unit",
    mass_seed: int = 0,
    length_mode: str = "unit",
    L_tot: float = 5.0,
    g: float = 9.81,
    ic: str = "paper",
    kappa: float = 0.5,
    seed: int = 0,
) -> SkewSystem:
    """The chain of :func:`geosweep.kernels.chain.model.build_chain` in (q, π) coordinates."""
    model = build_chain(
        N, masses=masses, length_mode=length_mode, L_tot=L_tot, g=g, ic=ic, kappa=kappa, seed=seed,
        mass_seed=mass_seed,
    )  # fmt: skip
    return from_chain(model)


def from_chain(model: ChainModel) -> SkewSystem:
    """``model`` (a :class:`geosweep.kernels.chain.model.ChainModel`) in (q, π) coordinates, π = R(q)ω."""
    N = model.n
    q, w = model.y0[:, :3], model.y0[:, 3:]
    pi = la.matvec(dense_R(model, q), w.ravel()).reshape(N, 3)
    mu = np.cumsum(model.m[::-1])[::-1]
    p = np.concatenate([[N], model.inertia.ravel(), mu * model.g * model.L, model.m, model.L])
    labels = tuple(f"q{i + 1}_{c}" for i in range(N) for c in "xyz") + tuple(
        f"pi{i + 1}_{c}" for i in range(N) for c in "xyz"
    )
    return SkewSystem(
        "pendulum_chain_lp", lp_skew, lp_energy, lp_grad, np.concatenate([q.ravel(), pi.ravel()]), p, labels,
        lp_extra, casimirs=("unit", "tangency"), info={"chain": model},
    )  # fmt: skip


SYSTEM = SystemDef(
    name="pendulum_chain_lp",
    family="dg",
    doc="N-link 3D pendulum chain (001 §5) in Lie–Poisson form x = (q, π) ∈ R^{6N} (spec pendulum_chain §4), "
    "for the discrete gradients side by side with the Lie group methods of pendulum_chain (same parameters "
    "and initial states). Casimirs |q_i|² − 1 and q_i·π_i; O(N) solve of R̃ω = π.",
    params=chain_params(3, 60),
    build=chain_lp,
    time_units="s",
    energy_units="J",
    example={"h": [0.01], "T": 1.0, "dt_out": 0.01},
)
