"""The (S²)ⁿ model: constant inertia ``M`` and a compiled potential.

State: ``q`` (n, 3) unit vectors, ``w`` (n, 3) angular velocities with ``q_i·w_i = 0``;
velocity ``q̇_i = w_i × q_i``. Lagrangian ``L = ½ Σ_ij M_ij q̇_i·q̇_j − V(q)``.
Energy ``E = T + V``; momentum map ``J = Σ_i q_i × Σ_j M_ij q̇_j`` (conserved when V is
rotation invariant; only ``axis·J`` when V is invariant about one axis).
"""

from __future__ import annotations

import types as pytypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numba import types

from geosweep.kernels import linalg as la
from geosweep.kernels._jit import kjit

#: Signature every (S²)ⁿ potential is compiled with: ``V = pot(q, p, g)``.
POTENTIAL_SIG = types.float64(types.float64[:, ::1], types.float64[::1], types.float64[:, ::1])
#: First-class function type of a potential (lets one cached driver serve every system).
PotentialType = types.FunctionType(POTENTIAL_SIG)

Symmetry = Literal["none", "axis", "full"]
SYMMETRY_CODES = {"none": 0, "axis": 1, "full": 2}


def s2_potential(fn=None, *, lazy: bool = False, threaded: bool | Callable = False):
    """Compile ``fn(q, p, g) -> V`` as an (S²)ⁿ potential (cached, nogil, float64).

    ``q`` is (n, 3), ``p`` a 1-D float64 parameter vector, ``g`` (n, 3) receives the
    ordinary R³ gradient ``∂V/∂q_i`` (any smooth extension off the sphere: only
    ``q_i × g_i`` is used by the integrators).

    By default the potential compiles at once (a mistake in it shows where it is defined).
    ``@s2_potential(lazy=True)`` compiles it on first use instead — the built-in systems do, so
    a run compiles only its own system's potential; :func:`compile_potentials` compiles them all.

    ``threaded=True``: ``fn`` may loop with ``numba.prange``; besides the ordinary (one-thread)
    compilation, where ``prange`` is ``range``, a copy is compiled with ``parallel=True`` (on
    first use) for runs with more than one thread per cell (:func:`threaded_potential`). Results
    stay bitwise identical for every thread count only if no floating-point sum runs across
    ``prange`` iterations: let each iteration write its own rows of ``g`` and its own entries
    of a per-body energy array, and add those up in a plain loop afterwards (see
    :func:`tests.custom_threaded.coulomb_sphere`). ``threaded=other_fn`` compiles ``other_fn``
    (same signature and values, written with ``prange``) as the threaded copy instead (see
    :func:`geosweep.kernels.systems.lj_sphere.lj_potential`).
    """
    if fn is None:
        return lambda f: s2_potential(f, lazy=lazy, threaded=threaded)
    if not lazy:
        disp = kjit(POTENTIAL_SIG)(fn)
        disp.compile_declared()  # at once, as documented (kjit leaves explicit signatures to first use)
    else:
        disp = kjit(fn)
        _LAZY.append(disp)
    if threaded:
        par = _renamed(fn, "__threaded") if threaded is True else threaded
        _THREADED[id(disp)] = (disp, kjit(parallel=True)(par))
    return disp


#: process-wide state: the potentials compiled lazily (``warm_for`` compiles them), in definition order
_LAZY: list = []
#: process-wide state: id(potential) -> (potential, its parallel=True copy), for ``@s2_potential(threaded=True)``
_THREADED: dict[int, tuple] = {}


def _renamed(fn, suffix: str):
    """``fn`` as a new function object named ``<name><suffix>`` (its own on-disk cache entry:
    Numba's cache key does not include compile flags, so two compilations of one function
    with and without ``parallel`` would overwrite each other)."""
    copy = pytypes.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + suffix, fn.__defaults__, fn.__closure__)
    copy.__qualname__ = fn.__qualname__ + suffix
    copy.__module__ = fn.__module__
    copy.__doc__ = fn.__doc__
    return copy


def threaded_potential(potential):
    """The ``parallel=True`` copy of a ``@s2_potential(threaded=True)`` potential, else None."""
    hit = _THREADED.get(id(potential))
    return hit[1] if hit is not None and hit[0] is potential else None


def compile_potentials(potentials=None) -> None:
    """Compile (or load from the cache) ``potentials`` (default: every one defined so far) that
    are lazily compiled, the others compiled when they were defined, and the threaded copies of
    those that have one (a run compiles them for any thread count, see ``warm_for``)."""
    chosen = list(_LAZY) + [v[0] for v in _THREADED.values()] if potentials is None else list(potentials)
    for disp in chosen:
        if any(disp is d for d in _LAZY):
            disp.compile(POTENTIAL_SIG)
    for disp in {id(d): d for d in chosen}.values():
        if (par := threaded_potential(disp)) is not None:
            par.compile(POTENTIAL_SIG)


@dataclass(frozen=True, eq=False)
class S2System:
    """A concrete (S²)ⁿ system with its initial condition.

    Attributes
    ----------
    name: label of the system (e.g. ``"lj_sphere"``).
    M: (n, n) symmetric positive-definite inertia matrix (scalars multiplying I₃).
    potential: compiled potential (see :func:`s2_potential`).
    params: 1-D float64 parameter vector passed to the potential.
    q0, w0: (n, 3) initial positions (unit vectors) and angular velocities.
    symmetry: ``"full"`` if V is invariant under all rotations (J conserved), ``"axis"`` if
        only under rotations about ``axis`` (``axis·J`` conserved), ``"none"`` otherwise.
    axis: unit vector used when ``symmetry == "axis"``.
    extras: system-specific constant data kept for diagnostics (not used by kernels).

    >>> import geosweep
    >>> s = geosweep.system("spring_pendula").model  # four pendula: SI units (kg, m, s; energies in J)
    >>> s.name, s.n, s.is_diagonal, s.q0.shape
    ('spring_pendula', 4, True, (4, 3))
    >>> q, w = s.initial_state()
    >>> round(s.energy(q, w), 6)
    -0.312356
    """

    name: str
    M: np.ndarray
    potential: Callable[..., Any]
    params: np.ndarray
    q0: np.ndarray
    w0: np.ndarray
    symmetry: Symmetry = "none"
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    extras: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        M = np.ascontiguousarray(self.M, dtype=np.float64)
        n = M.shape[0]
        if M.shape != (n, n) or not np.allclose(M, M.T, rtol=0, atol=0):
            raise ValueError(f"{self.name}: M must be a symmetric (n, n) matrix")
        for attr in ("q0", "w0"):
            a = np.ascontiguousarray(getattr(self, attr), dtype=np.float64)
            if a.shape != (n, 3):
                raise ValueError(f"{self.name}: {attr} must have shape ({n}, 3), got {a.shape}")
            object.__setattr__(self, attr, a)
        object.__setattr__(self, "M", M)
        object.__setattr__(self, "params", np.ascontiguousarray(self.params, dtype=np.float64).ravel())
        object.__setattr__(self, "axis", np.ascontiguousarray(self.axis, dtype=np.float64))
        if self.symmetry not in SYMMETRY_CODES:
            raise ValueError(f"{self.name}: symmetry must be one of {list(SYMMETRY_CODES)}")

    @property
    def n(self) -> int:
        return self.M.shape[0]

    @property
    def is_diagonal(self) -> bool:
        """True when M has no off-diagonal coupling (explicit VI applies)."""
        return bool(np.count_nonzero(self.M - np.diag(np.diag(self.M))) == 0)

    def initial_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Normalised q and tangent-projected ω: the t = 0 rule of every integrator."""
        return normalise_and_project(self.q0, self.w0)

    def potential_and_gradient(self, q: np.ndarray) -> tuple[float, np.ndarray]:
        q = np.ascontiguousarray(q, dtype=np.float64)
        g = np.empty_like(q)
        V = self.potential(q, self.params, g)
        return V, g

    def energy(self, q: np.ndarray, w: np.ndarray) -> float:
        V, _ = self.potential_and_gradient(q)
        return kinetic_energy(self.M, q, w) + V

    def momentum(self, q: np.ndarray, w: np.ndarray) -> np.ndarray:
        return momentum_map(self.M, q, w)


def normalise_and_project(q: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``q_i/|q_i|`` and ``w_i − (q_i·w_i) q_i`` (applied once, at t = 0 only)."""
    q = np.ascontiguousarray(q, dtype=np.float64).copy()
    w = np.ascontiguousarray(w, dtype=np.float64).copy()
    _normalise_project_inplace(q, w)
    return q, w


@kjit
def _normalise_project_inplace(q, w):
    for i in range(q.shape[0]):
        r = np.sqrt(q[i, 0] * q[i, 0] + q[i, 1] * q[i, 1] + q[i, 2] * q[i, 2])
        q[i, 0] /= r
        q[i, 1] /= r
        q[i, 2] /= r
        d = q[i, 0] * w[i, 0] + q[i, 1] * w[i, 1] + q[i, 2] * w[i, 2]
        w[i, 0] -= d * q[i, 0]
        w[i, 1] -= d * q[i, 1]
        w[i, 2] -= d * q[i, 2]


def kinetic_energy(M: np.ndarray, q: np.ndarray, w: np.ndarray) -> float:
    """``T = ½ Σ_ij M_ij (w_i×q_i)·(w_j×q_j)``."""
    qd = np.cross(w, q)
    return 0.5 * float(np.einsum("ij,ik,jk->", M, qd, qd))


def momentum_map(M: np.ndarray, q: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``J = Σ_i q_i × Σ_j M_ij q̇_j`` (= Σ m_i ω_i for diagonal M and tangent ω)."""
    qd = np.cross(w, q)
    return np.cross(q, la.matmul(M, qd)).sum(axis=0)


def gradient_fd_error(system: S2System, q: np.ndarray, step: float = 1e-6) -> float:
    """Max relative error of the potential's gradient against central differences."""
    q = np.ascontiguousarray(q, dtype=np.float64)
    _, g = system.potential_and_gradient(q)
    fd = np.empty_like(q)
    for i in range(q.shape[0]):
        for k in range(3):
            qp = q.copy()
            qm = q.copy()
            qp[i, k] += step
            qm[i, k] -= step
            fd[i, k] = (system.potential_and_gradient(qp)[0] - system.potential_and_gradient(qm)[0]) / (2 * step)
    scale = max(np.abs(g).max(), 1e-300)
    return float(np.abs(fd - g).max() / scale)
