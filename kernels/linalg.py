"""Small dense linear algebra for kernels (no allocation, no LAPACK call overhead)."""

from __future__ import annotations

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
