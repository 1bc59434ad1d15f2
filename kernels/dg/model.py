"""Skew-gradient models ẋ = S(x)∇H(x) in Rᴺ: compiled callbacks and the model record.

A system supplies four compiled functions (signatures below; ``x`` the state (N,), ``p`` its
parameter vector):

* ``skew(x, p, S)`` writes the skew-symmetric (N, N) matrix S(x);
* ``energy(x, p) -> H(x)``;
* ``grad(x, p, g)`` writes ∇H(x) into ``g`` (N,);
* ``extra(x, p, mode, out)``: ``mode = 0`` writes the observed invariants — ``out[0]`` the
  constraint residual (when the model has one), then its Casimirs; ``mode = 1`` writes the k
  constraint rows c_α(x) ∈ Rᴺ (k·N entries, row after row) of a *multiplier form* (004
  eq. (15): canonical z = (q, p), c_α = (0, μ^α(q))). Systems without either write nothing.

Decorate them with :func:`dg_skew`, :func:`dg_energy`, :func:`dg_grad`, :func:`dg_extra` (or
use :func:`no_extra`). One compiled driver serves every system (first-class function types).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import types

from geosweep.kernels import linalg as la
from geosweep.kernels._jit import kjit
from geosweep.kernels.core.signatures import F1, F2

SKEW_SIG = types.void(F1, F1, F2)
ENERGY_SIG = types.float64(F1, F1)
GRAD_SIG = types.void(F1, F1, F1)
EXTRA_SIG = types.void(F1, F1, types.int64, F1)
SkewType = types.FunctionType(SKEW_SIG)
EnergyType = types.FunctionType(ENERGY_SIG)
GradType = types.FunctionType(GRAD_SIG)
ExtraType = types.FunctionType(EXTRA_SIG)
#: (skew, energy, grad, extra): the family's callback type
CB_TYPE = types.Tuple((SkewType, EnergyType, GradType, ExtraType))


def dg_skew(fn):
    """Compile ``fn(x, p, S)`` (writes S(x), skew-symmetric (N, N))."""
    return kjit(SKEW_SIG)(fn)


def dg_energy(fn):
    """Compile ``fn(x, p) -> H(x)``."""
    return kjit(ENERGY_SIG)(fn)


def dg_grad(fn):
    """Compile ``fn(x, p, g)`` (writes ∇H(x))."""
    return kjit(GRAD_SIG)(fn)


def dg_extra(fn):
    """Compile ``fn(x, p, mode, out)`` (invariants for mode 0, multiplier rows for mode 1)."""
    return kjit(EXTRA_SIG)(fn)


@dg_extra
def no_extra(x, p, mode, out):
    """For systems with no constraint residual, Casimir or multiplier form."""


_TWO_PI = 2.0 * math.pi


@kjit
def reduce_angles(p, m, x):
    """Reduce the periodic entries of ``x`` to (−π, π]: their m indices are the last m entries of the
    model vector ``p``. Entries already in range are left untouched (bitwise); one wrap subtracts
    fl(2π) exactly (Sterbenz)."""
    last = p.shape[0] - m
    for j in range(m):
        i = int(p[last + j])
        a = x[i]
        if a > math.pi or a <= -math.pi:
            x[i] = a - _TWO_PI * math.ceil((a - math.pi) / _TWO_PI)


def with_angles(p: np.ndarray, periodic: tuple[int, ...]) -> np.ndarray:
    """The model vector ``p`` (header slot 3 free) with ``periodic`` appended and counted in ``p[3]``."""
    out = np.concatenate([p, np.asarray(periodic, dtype=np.float64)])
    out[3] = float(len(periodic))
    return np.ascontiguousarray(out)


@dataclass(frozen=True, eq=False)
class SkewSystem:
    """A concrete skew-gradient system with its initial state.

    ``labels`` name the N state entries; ``has_constraint``: ``extra`` mode 0 writes a
    constraint residual in ``out[0]`` (units ``constraint_units``); ``casimirs``: names of the
    Casimirs that follow it; ``n_multipliers`` k > 0 marks a multiplier form (004 eq. (15),
    N = 2n even, S = canonical J for the discrete gradient methods; the baselines integrate
    ẋ = S(x)∇H(x) with the model's S, which must be the constrained canonical field there).
    ``periodic``: indices of angles on which S, H and the invariants depend 2π-periodically; the
    steppers keep them in (−π, π] (the initial state and every accepted step), so an angle that
    grows without bound (a rotating pendulum) keeps its absolute precision. ``separable``: H is
    additively separable, H(x) = Σ_i h_i(x_i); the Itoh–Abe discrete gradient then equals AVF's and
    the method is symmetric, order 2 (order 1 otherwise). ``layout``: the stored state labels, a
    superset of ``labels`` that every variant of one system shares (every gearbox form), so that a
    sweep over the variants stores one labelled ``state`` layout; entries a variant does not carry
    are NaN (empty: ``labels``).

    >>> import geosweep
    >>> rb = geosweep.system("rigid_body_lp").model  # the free rigid body, x = body angular momentum
    >>> rb.N, rb.labels, rb.casimirs
    (3, ('m1', 'm2', 'm3'), ('norm2',))
    >>> x = rb.x0
    >>> bool(abs((rb.f(x) * rb.gradH(x)).sum()) < 1e-15)  # dH/dt = ∇H·S∇H = 0: S is skew
    True
    """

    name: str
    skew: Callable[..., Any]
    energy: Callable[..., Any]
    grad: Callable[..., Any]
    x0: np.ndarray
    params: np.ndarray
    labels: tuple[str, ...]
    extra: Callable[..., Any] = no_extra
    has_constraint: bool = False
    constraint_units: str = "1"
    casimirs: tuple[str, ...] = ()
    n_multipliers: int = 0
    info: dict = field(default_factory=dict)
    periodic: tuple[int, ...] = ()
    separable: bool = False
    layout: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        x0 = np.ascontiguousarray(self.x0, dtype=np.float64).ravel()
        object.__setattr__(self, "x0", x0)
        object.__setattr__(self, "params", np.ascontiguousarray(self.params, dtype=np.float64).ravel())
        if len(self.labels) != x0.shape[0]:
            raise ValueError(f"{self.name}: {len(self.labels)} labels for a state of {x0.shape[0]} entries")
        if self.n_multipliers and x0.shape[0] % 2:
            raise ValueError(f"{self.name}: a multiplier form needs a canonical state (q, p) of even length")
        if not np.all(np.isfinite(x0)):
            raise ValueError(f"{self.name}: the initial state is not finite")
        if len(set(self.stored_labels)) != len(self.stored_labels) or not set(self.labels) <= set(self.stored_labels):
            raise ValueError(f"{self.name}: layout {self.layout} must hold every label {self.labels} once")
        if any(not 0 <= i < x0.shape[0] for i in self.periodic) or len(set(self.periodic)) != len(self.periodic):
            raise ValueError(f"{self.name}: periodic {self.periodic} must be distinct state indices")

    @property
    def stored_labels(self) -> tuple[str, ...]:
        """The labels of the stored ``state`` entries (``layout``, else ``labels``)."""
        return self.layout or self.labels

    def to_layout(self, x: np.ndarray) -> np.ndarray:
        """A state in the system's coordinates → (1, len(stored_labels)), NaN where not carried."""
        if not self.layout:
            return np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(1, -1))
        out = np.full((1, len(self.layout)), np.nan)
        out[0, [self.layout.index(lab) for lab in self.labels]] = x
        return out

    @property
    def N(self) -> int:
        return int(self.x0.shape[0])

    @property
    def cb(self) -> tuple:
        return (self.skew, self.energy, self.grad, self.extra)

    @property
    def n_invariants(self) -> int:
        return int(self.has_constraint) + len(self.casimirs)

    # ---- Python views (tests, checks) --------------------------------------------------
    def S(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros((self.N, self.N))
        self.skew(np.ascontiguousarray(x, dtype=np.float64), self.params, out)
        return out

    def H(self, x: np.ndarray) -> float:
        return float(self.energy(np.ascontiguousarray(x, dtype=np.float64), self.params))

    def gradH(self, x: np.ndarray) -> np.ndarray:
        g = np.zeros(self.N)
        self.grad(np.ascontiguousarray(x, dtype=np.float64), self.params, g)
        return g

    def f(self, x: np.ndarray) -> np.ndarray:
        """The vector field S(x)∇H(x)."""
        return la.matvec(self.S(x), self.gradH(x))

    def invariants(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros(max(self.n_invariants, 1))
        self.extra(np.ascontiguousarray(x, dtype=np.float64), self.params, 0, out)
        return out[: self.n_invariants]

    def gradient_fd_error(self, x: np.ndarray, eps: float = 1e-6) -> float:
        """max_i |∂_i H − central difference| / max(1, |∇H|∞) at ``x`` (checks ``grad`` against ``energy``)."""
        x = np.asarray(x, dtype=np.float64)
        g = self.gradH(x)
        fd = np.empty(self.N)
        for i in range(self.N):
            e = np.zeros(self.N)
            e[i] = eps
            fd[i] = (self.H(x + e) - self.H(x - e)) / (2 * eps)
        return float(np.abs(g - fd).max() / max(1.0, np.abs(g).max()))


@dataclass(frozen=True, eq=False)
class LagrangianForm:
    """The Lagrangian description of a nonholonomic system with a unit mass matrix, for the
    discrete Lagrange–d'Alembert integrators of :mod:`geosweep.kernels.dg.dla`:
    L(q, q̇) = ½|q̇|² − V(q) on Q = Rⁿ with k linear velocity constraints A(q)q̇ = 0.

    Compiled callbacks on q (n,) and the parameter vector ``params``: ``potential(q, p) -> V``
    (:func:`dg_energy`), ``potential_grad(q, p, g)`` writes ∇V (:func:`dg_grad`),
    ``constraint(q, p, mode, out)`` (:func:`dg_extra`) writes the k rows of A(q) (row after row)
    for ``mode = 1``. ``basis(q) -> X`` (n, n − k) maps the system's state when it is in adapted
    coordinates x = (q, ρ), ρ = Xᵀp (None: the state is canonical, x = (q, p)).
    """

    n: int
    k: int
    potential: Callable[..., Any]
    potential_grad: Callable[..., Any]
    constraint: Callable[..., Any]
    params: np.ndarray
    basis: Callable[[np.ndarray], np.ndarray] | None = None

    def to_canonical(self, x: np.ndarray) -> np.ndarray:
        """The system's state x → z = (q, p), p = q̇ (p = X(XᵀX)⁻¹ρ from adapted coordinates)."""
        x = np.asarray(x, dtype=np.float64)
        if self.basis is None:
            return x.copy()
        q = x[: self.n]
        X = self.basis(q)
        return np.concatenate([q, la.matvec(X, la.solve(la.matmul(X.T, X), x[self.n :]))])

    def from_canonical(self, z: np.ndarray) -> np.ndarray:
        """z = (q, p) → the system's state (ρ = X(q)ᵀp in adapted coordinates)."""
        z = np.asarray(z, dtype=np.float64)
        if self.basis is None:
            return z.copy()
        q = z[: self.n]
        return np.concatenate([q, la.matvec(self.basis(q).T, z[self.n :])])
