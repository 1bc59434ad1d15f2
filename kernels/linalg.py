"""Small dense linear algebra for kernels (no LAPACK call overhead) and the products every stored
value is computed with (the same bits on every CPU: see :func:`dot`)."""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit


@kjit
def lu_solve_inplace(a, b):
    """Solve ``a x = b`` by Gaussian elimination with partial pivoting (physical row swaps).

    ``a`` (m, m) is overwritten by its LU factors, ``b`` (m,) by the solution. Returns 0 on
    success, 1 if a zero or non-finite pivot was met (singular or corrupted matrix).
    """
    m = a.shape[0]
    for k in range(m):
        p = k
        big = abs(a[k, k])
        for r in range(k + 1, m):
            v = abs(a[r, k])
            if v > big:
                big = v
                p = r
        if not big > 0.0:
            return 1
        if p != k:
            for c in range(m):
                tmp = a[k, c]
                a[k, c] = a[p, c]
                a[p, c] = tmp
            tmp = b[k]
            b[k] = b[p]
            b[p] = tmp
        inv = 1.0 / a[k, k]
        for r in range(k + 1, m):
            f = a[r, k] * inv
            if f != 0.0:
                a[r, k] = f
                for c in range(k + 1, m):
                    a[r, c] -= f * a[k, c]
                b[r] -= f * b[k]
    for k in range(m - 1, -1, -1):
        s = b[k]
        for c in range(k + 1, m):
            s -= a[k, c] * b[c]
        b[k] = s / a[k, k]
    return 0


@kjit
def all_finite(a):
    """True if every entry of the 2-D array ``a`` is finite.

    ``x − x`` is 0 for finite x and NaN for ±inf or NaN; the branch-free OR over the rows
    vectorises (about 5× faster than an early-exit ``isfinite`` loop)."""
    bad = False
    for i in range(a.shape[0]):
        for k in range(a.shape[1]):
            bad |= (a[i, k] - a[i, k]) != 0.0
    return not bad


#: the stall rule of :func:`newton_converged`: a solve whose update stops contracting
#: (‖Δ_k‖ > STALL_RATIO·‖Δ_{k−1}‖) within STALL_FLOOR·scale has reached its round-off floor
STALL_RATIO = 0.5
STALL_FLOOR = 1e3
_EPS = np.finfo(np.float64).eps


@kjit(inline="always")
def newton_converged(dx, dx_prev, it, scale, min_stall_it, inclusive):
    """The stop test of every Newton-type solve in the kernels (discrete gradients, DLA, SLGI).

    ``dx``: the norm of iteration ``it``'s update, ``dx_prev`` the previous one (inf before the
    first), ``scale``: the tolerance in the update's units (e.g. tol·max(1, ‖x‖)). Converged when
    ``dx ≤ scale``; also accepted as stalled at round-off when ``it ≥ min_stall_it``,
    ``dx ≤ STALL_FLOOR·scale`` and the update stopped contracting: ``dx > STALL_RATIO·dx_prev``
    (``dx ≥ …`` with ``inclusive``). The two stall parameters keep each caller's iterates as they
    were: the discrete-gradient and DLA solves use (3, False), the SLGI Newton (1, True).
    NaN never converges."""
    if dx <= scale:
        return True
    if it < min_stall_it or not dx <= STALL_FLOOR * scale:
        return False
    if inclusive:
        return dx >= STALL_RATIO * dx_prev
    return dx > STALL_RATIO * dx_prev


@kjit(inline="always")
def newton_at_round_off(dx, dx_prev, scale, xs, fraction):
    """The stricter stop of a solve whose residual accumulates (the discrete gradients' multiplier
    forms): after :func:`newton_converged` accepted iteration ``dx`` at ``scale``, stop once the
    solve was accepted as stalled (``dx > scale``), the updates stopped contracting (their
    round-off floor, ``dx > STALL_RATIO·dx_prev``), or the error left after the last update,
    ``dx²/dx_prev`` under linear contraction, is at most ``fraction·ε·xs`` (``xs``: the state's
    scale, e.g. max(1, ‖x‖∞)). A residual of the tolerance's size left each step in one direction
    adds up over a long run; one at this level stays below the steps' own rounding."""
    if dx > scale or dx > STALL_RATIO * dx_prev:
        return True
    return dx * dx <= fraction * _EPS * xs * dx_prev


# ---- products whose rounding does not depend on the machine ---------------------------------------
# NumPy's ``@``/``dot``, ``linalg.norm`` of a vector and ``linalg.solve`` (and Numba's, inside compiled
# code) call BLAS/LAPACK, and OpenBLAS picks its kernels for the CPU at run time (Haswell, SkylakeX,
# Sandybridge, …), each summing in its own order: the same cell gave different last bits on an
# AVX-512 Intel node and an AMD one. Every value a cell stores is computed with these instead:
# plain loops, each sum taken in index order (no ``fastmath``: the order is the written one).


@kjit
def dot(a, b):
    """``Σ_i a_i b_i`` of two 1-D arrays, summed in index order."""
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    return s


@kjit
def matvec(a, x):
    """``a @ x`` for a 2-D ``a`` (m, k) and 1-D ``x`` (k,): a new (m,) array, each row summed in index order."""
    m, k = a.shape
    out = np.empty(m)
    for r in range(m):
        s = 0.0
        for c in range(k):
            s += a[r, c] * x[c]
        out[r] = s
    return out


@kjit
def matmul(a, b):
    """``a @ b`` for 2-D ``a`` (m, k) and ``b`` (k, n): a new (m, n) array, each entry summed in index order."""
    m, k = a.shape
    n = b.shape[1]
    out = np.empty((m, n))
    for r in range(m):
        for c in range(n):
            s = 0.0
            for j in range(k):
                s += a[r, j] * b[j, c]
            out[r, c] = s
    return out


@kjit
def norm(x):
    """Euclidean norm of a 1-D array: ``sqrt(dot(x, x))``."""
    return np.sqrt(dot(x, x))


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a⁻¹ b`` for a square ``a`` and 1-D ``b`` by :func:`lu_solve_inplace` on copies (partial
    pivoting). As ``numpy.linalg.solve``: NaN where ``a`` or ``b`` holds a non-finite entry,
    ``numpy.linalg.LinAlgError`` for a singular ``a``."""
    lu = np.array(a, dtype=np.float64, order="C")
    x = np.array(b, dtype=np.float64, order="C")
    if not (np.isfinite(lu).all() and np.isfinite(x).all()):
        return np.full(x.shape, np.nan)
    if lu_solve_inplace(lu, x):
        raise np.linalg.LinAlgError("singular matrix")
    return x
