"""Chain parameters, initial-condition families and the dense (test-oracle) formulas.

Spec pendulum_chain §1–2, §5, §8. Conventions: e3 = (0, 0, 1) points **up** (paper 001),
``U = Σ μ_i g L_i e3·q_i``; state ``y`` (N, 6) with rows ``(q_i, ω_i)``, ``q̇_i = ω_i × q_i``.
Units: lengths m, masses kg, g m/s², time s, energy J.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from geosweep.kernels import linalg as la
from geosweep.kernels.chain.rhs import pack_params, work_size
from geosweep.kernels.registry import Param

IC_FAMILIES = ("paper", "twisted", "random", "horizontal_rest")
LENGTH_MODES = ("unit", "scaled")
_S = np.sqrt(2.0) / 2.0


@dataclass(frozen=True, eq=False)
class ChainModel:
    """One concrete chain with its initial state.

    ``m``, ``L`` (N,) masses and lengths; ``g`` gravity; ``y0`` (N, 6) initial state on
    (TS²)^N; ``label`` describes the IC. ``params`` is the packed kernel parameter vector.
    """

    m: np.ndarray
    L: np.ndarray
    g: float
    y0: np.ndarray
    label: str = ""
    params: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        m = np.ascontiguousarray(self.m, dtype=np.float64)
        L = np.ascontiguousarray(self.L, dtype=np.float64)
        y0 = np.ascontiguousarray(self.y0, dtype=np.float64)
        if m.ndim != 1 or m.shape != L.shape or y0.shape != (m.size, 6):
            raise ValueError("need m, L of shape (N,) and y0 of shape (N, 6)")
        if (m <= 0).any() or (L <= 0).any():
            raise ValueError("masses and lengths must be positive")
        object.__setattr__(self, "m", m)
        object.__setattr__(self, "L", L)
        object.__setattr__(self, "y0", y0)
        object.__setattr__(self, "params", pack_params(self.g, m, L))

    @property
    def n(self) -> int:
        return self.m.size

    @property
    def mu(self) -> np.ndarray:
        return np.cumsum(self.m[::-1])[::-1].copy()

    @property
    def inertia(self) -> np.ndarray:
        """Scalar inertia ``M_ij = μ_max(i,j) L_i L_j`` (N, N)."""
        idx = np.arange(self.n)
        return self.mu[np.maximum.outer(idx, idx)] * np.outer(self.L, self.L)

    def work(self, dense: bool = False) -> np.ndarray:
        return np.zeros(work_size(self.n, dense))

    def diagnostics(self, y: np.ndarray) -> np.ndarray:
        """``[E, L_x, L_y, L_z, max|1−q·q|, max|q·ω|]`` at state ``y``."""
        from geosweep.kernels.chain.rhs import N_DIAG, chain_diag

        out = np.empty(N_DIAG)
        chain_diag(np.ascontiguousarray(y, dtype=np.float64), self.params, self.work(), out)
        return out


def lengths(n: int, length_mode: str = "unit", L_tot: float = 5.0) -> np.ndarray:
    """``unit``: L_i = 1; ``scaled``: L_i = L_tot / N."""
    if length_mode == "unit":
        return np.ones(n)
    if length_mode == "scaled":
        return np.full(n, L_tot / n)
    raise ValueError(f"length_mode must be one of {LENGTH_MODES}")


def initial_state(n: int, ic: str = "paper", kappa: float = 0.5, seed: int = 0) -> np.ndarray:
    """(N, 6) initial state of an IC family (spec §8).

    ``paper``: q_i = (√2/2, 0, √2/2), ω_i = e2 (planar). ``twisted``: ω_i = e2 + κ(−√2/2, 0, √2/2).
    ``random``: q_i = normalised U(0,1)³, ω_i = q_i × v_i with v_i ~ U(0,1)³ (seeded).
    ``horizontal_rest``: q_i = e1, ω_i = 0.
    """
    y = np.zeros((n, 6))
    if ic in ("paper", "twisted"):
        y[:, 0] = _S
        y[:, 2] = _S
        y[:, 4] = 1.0
        if ic == "twisted":
            y[:, 3] = -kappa * _S
            y[:, 5] = kappa * _S
    elif ic == "random":
        rng = np.random.default_rng(seed)
        q = rng.random((n, 3))
        q /= np.sqrt(np.add.reduce(q * q, axis=1, keepdims=True))  # np.linalg.norm's own arithmetic
        v = rng.random((n, 3))
        y[:, :3] = q
        # q × v by components: np.cross's own arithmetic (bitwise the same), without its per-call overhead
        y[:, 3] = q[:, 1] * v[:, 2] - q[:, 2] * v[:, 1]
        y[:, 4] = q[:, 2] * v[:, 0] - q[:, 0] * v[:, 2]
        y[:, 5] = q[:, 0] * v[:, 1] - q[:, 1] * v[:, 0]
    elif ic == "horizontal_rest":
        y[:, 0] = 1.0
    else:
        raise ValueError(f"ic must be one of {IC_FAMILIES}")
    return y


def build_chain(
    n: int = 2,
    *,
    masses: str | np.ndarray = "unit",
    length_mode: str = "unit",
    L_tot: float = 5.0,
    g: float = 9.81,
    ic: str = "paper",
    kappa: float = 0.5,
    seed: int = 0,
    mass_seed: int | None = None,
) -> ChainModel:
    """Build a chain. ``masses``: ``"unit"`` (all 1), ``"random"`` (U(0.5, 1.5)) or ``"e1"``
    (1 + 10 U(0,1), the E1 convergence data), drawn with ``mass_seed`` (default: ``seed``), or an
    explicit array; ``seed`` also seeds ``ic = "random"``."""
    if isinstance(masses, str):
        if masses not in ("unit", "random", "e1"):
            raise ValueError("masses must be 'unit', 'random', 'e1' or an array")
        if masses == "unit":  # no generator: a sweep of many seeds builds one model per seed
            m = np.ones(n)
        else:
            rng = np.random.default_rng((seed if mass_seed is None else mass_seed) + 10_000)
            m = rng.random(n) + 0.5 if masses == "random" else 1.0 + 10.0 * rng.random(n)
    else:
        m = np.asarray(masses, dtype=np.float64)
    L = lengths(n, length_mode, L_tot)
    label = f"{ic}(kappa={kappa})" if ic == "twisted" else (f"random(seed={seed})" if ic == "random" else ic)
    return ChainModel(m=m, L=L, g=g, y0=initial_state(n, ic, kappa, seed), label=label)


# --------------------------------------------------------------------------------------
# dense numpy formulas (test oracle; O(N³))
# --------------------------------------------------------------------------------------
def _hat(a: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def dense_R(model: ChainModel, q: np.ndarray) -> np.ndarray:
    """Block matrix R(q) (3N, 3N): R_ii = M_ii I, R_ij = M_ij q̂_iᵀ q̂_j."""
    n = model.n
    M = model.inertia
    R = np.zeros((3 * n, 3 * n))
    for i in range(n):
        for j in range(n):
            R[3 * i : 3 * i + 3, 3 * j : 3 * j + 3] = (
                M[i, i] * np.eye(3) if i == j else M[i, j] * la.matmul(_hat(q[i]).T, _hat(q[j]))
            )
    return R


def dense_accel(model: ChainModel, y: np.ndarray) -> np.ndarray:
    """ω̇ = R(q)⁻¹ b(q, ω) with the dense formula of spec §2 (N, 3)."""
    n = model.n
    q, w = y[:, :3], y[:, 3:]
    M = model.inertia
    e3 = np.array([0.0, 0.0, 1.0])
    b = np.zeros((n, 3))
    for i in range(n):
        for j in range(n):
            if j != i:
                b[i] += M[i, j] * la.dot(w[j], w[j]) * np.cross(q[i], q[j])
        b[i] -= model.mu[i] * model.g * model.L[i] * np.cross(q[i], e3)
    return la.solve(dense_R(model, q), b.ravel()).reshape(n, 3)


def dense_F(model: ChainModel, y: np.ndarray) -> np.ndarray:
    """Ambient vector field F(y) = (ω_i × q_i, ω̇_i), dense (N, 6)."""
    return np.hstack([np.cross(y[:, 3:], y[:, :3]), dense_accel(model, y)])


def dense_f(model: ChainModel, y: np.ndarray) -> np.ndarray:
    """Algebra map f(y) = (ω_i, q_i × ω̇_i), dense (N, 6)."""
    return np.hstack([y[:, 3:], np.cross(y[:, :3], dense_accel(model, y))])


def dense_energy(model: ChainModel, y: np.ndarray) -> float:
    """E = ½ ωᵀ R(q) ω + U(q)."""
    w = y[:, 3:].ravel()
    return 0.5 * la.dot(w, la.matvec(dense_R(model, y[:, :3]), w)) + float(
        model.g * la.dot(model.mu * model.L, y[:, 2])
    )


def chain_params(n_default: int, n_max: int) -> tuple[Param, ...]:
    """The chain's system parameters (the keywords of :func:`build_chain`), declared once for every
    form of the chain (``pendulum_chain`` on (TS²)ᴺ, ``pendulum_chain_lp`` in Lie–Poisson form);
    the forms differ only in the default and the largest ``N``."""
    return (
        Param("N", int, n_default, "1", "number of links", ge=1, le=n_max),
        Param(
            "masses",
            str,
            "unit",
            "1",
            "unit: m_i = 1 kg; random: U(0.5, 1.5) kg (mass_seed)",
            choices=("unit", "random"),
        ),
        Param("mass_seed", int, 0, "1", "seed of the random masses", ge=0),
        Param("length_mode", str, "unit", "1", "unit: L_i = 1 m; scaled: L_i = L_tot / N", choices=LENGTH_MODES),
        Param("L_tot", float, 5.0, "m", "total length for length_mode = scaled", gt=0.0),
        Param("g", float, 9.81, "m / s^2", "gravitational acceleration", ge=0.0),
        Param("ic", str, "paper", "1", "initial condition family (spec pendulum_chain §8)", choices=IC_FAMILIES),
        Param("kappa", float, 0.5, "rad / s", "twist κ of ic = twisted"),
        Param("seed", int, 0, "1", "seed of ic = random", ge=0),
    )
