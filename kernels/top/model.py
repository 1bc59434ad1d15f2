"""The heavy top (001 §3.4.4, spec heavy_top_quadrotors §2): data and Python-side formulas.

A rigid body pivots about a fixed point O under gravity. ``Q ∈ SO(3)`` maps body to space,
``X`` is the unit body vector from O to the centre of mass at distance ``ℓ``, ``𝕀`` the diagonal
body inertia about O (used literally, no parallel-axis term: spec D2). ``e3 = (0, 0, 1)`` points
**up** and gravity is ``−g e3`` (spec D1), so the potential is ``M g ℓ e3·(Q X)``.

Formulations (spec §2.2–2.4): A ``(Q, π)`` on T*SO(3) right-trivialised, π = QΠ spatial
momentum; B ``(Γ, Π)`` on se(3)* (Lie–Poisson), Γ = Qᵀe3; C ``(Q, q, π, p)`` on
T*(SO(3) × R³) with the quadratic Hamiltonian, ``p ≡ −M g ℓ X``.

Parameter vector ``p`` shared by every kernel of the family (:data:`P_*` indices):
``[Mgℓ, 1/𝕀₁, 1/𝕀₂, 1/𝕀₃, X (3), J3(0), S(0), 𝕀₁, 𝕀₂, 𝕀₃]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geosweep.kernels import linalg as la

P_MGL, P_IINV, P_X, P_J30, P_S0, P_I = 0, 1, 4, 7, 8, 9
N_PARAMS = 12
E3 = np.array([0.0, 0.0, 1.0])


@dataclass(frozen=True, eq=False)
class TopModel:
    """One heavy top with its initial state ``Q(0) = I``, ``Π(0) = 𝕀 Ω(0)``.

    ``M`` kg, ``ell`` m, ``g`` m/s², ``inertia`` (3,) kg m², ``X`` (3,) unit body vector,
    ``Omega0`` (3,) rad/s body rate at t = 0.
    """

    M: float
    ell: float
    g: float
    inertia: np.ndarray
    X: np.ndarray
    Omega0: np.ndarray
    name: str = "heavy_top"

    @property
    def mgl(self) -> float:
        return self.M * self.g * self.ell

    @property
    def Pi0(self) -> np.ndarray:
        return self.inertia * self.Omega0

    @property
    def params(self) -> np.ndarray:
        p = np.zeros(N_PARAMS)
        p[P_MGL] = self.mgl
        p[P_IINV : P_IINV + 3] = 1.0 / self.inertia
        p[P_X : P_X + 3] = self.X
        p[P_J30] = la.dot(self.Pi0, E3)  # Q(0) = I: π(0) = Π(0), Γ(0) = e3
        p[P_S0] = la.dot(self.Pi0, self.X)
        p[P_I : P_I + 3] = self.inertia
        return p

    # ---- Python-side formulas (tests, references) ------------------------------------------
    def energy_A(self, Q: np.ndarray, pi: np.ndarray) -> float:
        Pi = la.matvec(Q.T, pi)
        return float(0.5 * la.dot(Pi, Pi / self.inertia) + self.mgl * la.dot(E3, la.matvec(Q, self.X)))

    def energy_B(self, Gamma: np.ndarray, Pi: np.ndarray) -> float:
        return float(0.5 * la.dot(Pi, Pi / self.inertia) + self.mgl * la.dot(Gamma, self.X))

    def rhs_A(self, Q: np.ndarray, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ambient (Q̇, π̇) of 001 (21)–(22): Q̇ = ω̂Q, ω = Q𝕀⁻¹Qᵀπ, π̇ = Mgℓ e3 × QX."""
        w = la.matvec(Q, la.matvec(Q.T, pi) / self.inertia)
        return la.matmul(hat(w), Q), self.mgl * np.cross(E3, la.matvec(Q, self.X))

    def rhs_B(self, Gamma: np.ndarray, Pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ambient (Γ̇, Π̇) of 001 (23)–(24)."""
        Om = Pi / self.inertia
        return np.cross(Gamma, Om), np.cross(Pi, Om) + self.mgl * np.cross(Gamma, self.X)

    def reference(self, T: float, formulation: str = "A", tol: float = 1e-13) -> np.ndarray:
        """State at T from SciPy DOP853 (rtol = atol = ``tol``) on the ambient ODE:
        A → ``(vec Q, π)`` (12,), B → ``(Γ, Π)`` (6,)."""
        from scipy.integrate import solve_ivp

        if formulation == "B":

            def rhs(t, y):
                return np.concatenate(self.rhs_B(y[:3], y[3:]))

            y0 = np.concatenate([E3, self.Pi0])
        else:

            def rhs(t, y):
                dQ, dpi = self.rhs_A(y[:9].reshape(3, 3), y[9:])
                return np.concatenate([dQ.ravel(), dpi])

            y0 = np.concatenate([np.eye(3).ravel(), self.Pi0])
        sol = solve_ivp(rhs, (0.0, T), y0, method="DOP853", rtol=tol, atol=tol)
        if not sol.success:
            raise RuntimeError(f"reference integration failed: {sol.message}")
        return sol.y[:, -1]


def hat(a: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def heavy_top(
    M: float = 15.0,
    ell: float = 2.0,
    g: float = 9.81,
    I1: float = 0.234375,
    I2: float = 0.46875,
    I3: float = 0.234375,
    Omega1: float = 0.0,
    Omega2: float = 150.0,
    Omega3: float = -4.61538,
) -> TopModel:
    """001 §3.4.4 with spec D1–D3: X = e2, Q(0) = I, Π(0) = 𝕀 Ω(0); the defaults give a fast
    symmetric (Lagrange) top with H0 = 5275.933796782547 J."""
    return TopModel(
        M=float(M),
        ell=float(ell),
        g=float(g),
        inertia=np.array([I1, I2, I3], dtype=np.float64),
        X=np.array([0.0, 1.0, 0.0]),
        Omega0=np.array([Omega1, Omega2, Omega3], dtype=np.float64),
    )
