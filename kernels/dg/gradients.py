"""Discrete gradients (004 §3.1, spec §6) and a small LU factorisation, compiled.

Each discrete gradient ∇̄H(x, x') satisfies ∇̄H(x, x')·(x' − x) = H(x') − H(x) and
∇̄H(x, x) = ∇H(x):

* ``AVF`` (mean value, eq. (11)): ∫₀¹ ∇H((1 − ξ)x + ξx') dξ by s-point Gauss–Legendre
  (exact for polynomial H of degree ≤ 2s);
* ``GONZALEZ`` (midpoint, eq. (12)): ∇H(x̄) plus the correction along Δx = x' − x; below
  |Δx|² ≤ max(1e-28, (10ε‖x‖)²) it is ∇H(x̄);
* ``ITOH_ABE`` (coordinate increments, eq. (13)): difference quotients of H along the
  coordinates in turn. Where |x'_i − x_i| ≤ 0.1·max(1, |x_i|) the quotient is evaluated as the
  mean of ∂_iH over the coordinate segment (the s-point Gauss–Legendre rule: the same number
  for H polynomial of degree ≤ 2s − 1 along it, else within O(|Δx_i|^{2s})). The plain
  quotient loses ε|H|/|Δx_i| to cancellation, which at h = 0.01 leaves a residual noise of
  ~1e-13 and stalls the solve at tol = 1e-14 (the spec's switch to ∂_iH below 1e-12 does not
  help there). Not symmetric: order 1;
* ``MIDPOINT``: ∇H(x̄) (not a discrete gradient unless H is quadratic; the implicit midpoint
  rule).
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit

AVF, GONZALEZ, ITOH_ABE, MIDPOINT = 0, 1, 2, 3
_EPS = np.finfo(np.float64).eps
#: Itoh–Abe: increments below IA_SMALL·max(1, |x_i|) use the quadrature form of the quotient
IA_SMALL = 0.1


@kjit
def discrete_gradient(cb, p, kind, nodes, weights, s, x, xn, g, y, t):
    """``g`` ← ∇̄H(x, xn) of ``kind``; ``y``, ``t`` are (N,) scratch. Returns the number of
    ∇H and H evaluations."""
    skew, energy, grad, extra = cb
    n = x.shape[0]
    if kind == AVF:
        for i in range(n):
            g[i] = 0.0
        for j in range(s):
            c = nodes[j]
            for i in range(n):
                y[i] = x[i] + c * (xn[i] - x[i])
            grad(y, p, t)
            w = weights[j]
            for i in range(n):
                g[i] += w * t[i]
        return s
    if kind == GONZALEZ or kind == MIDPOINT:
        for i in range(n):
            y[i] = 0.5 * (x[i] + xn[i])
        grad(y, p, g)
        if kind == MIDPOINT:
            return 1
        dd = 0.0
        gd = 0.0
        xx = 0.0
        for i in range(n):
            d = xn[i] - x[i]
            dd += d * d
            gd += g[i] * d
            xx += x[i] * x[i]
        if dd > max(1e-28, 100.0 * _EPS * _EPS * xx):
            c = (energy(xn, p) - energy(x, p) - gd) / dd
            for i in range(n):
                g[i] += c * (xn[i] - x[i])
            return 3
        return 1
    # Itoh–Abe
    ev = 1
    for i in range(n):
        y[i] = x[i]
    hp = energy(y, p)
    for i in range(n):
        d = xn[i] - x[i]
        xi = x[i]
        if abs(d) > IA_SMALL * max(1.0, abs(xi)):
            y[i] = xn[i]
            hn = energy(y, p)
            g[i] = (hn - hp) / d
        else:  # mean of ∂_iH along the segment: no cancellation in H(·) − H(·)
            a = 0.0
            for j in range(s):
                y[i] = xi + nodes[j] * d
                grad(y, p, t)
                a += weights[j] * t[i]
            g[i] = a
            y[i] = xn[i]
            hn = energy(y, p)
            ev += s
        ev += 1
        hp = hn
    return ev


@kjit
def lu_factor(a, piv):
    """LU with partial pivoting in place (``piv`` receives the row swaps); 0, or 1 if singular."""
    m = a.shape[0]
    for k in range(m):
        r = k
        big = abs(a[k, k])
        for i in range(k + 1, m):
            if abs(a[i, k]) > big:
                big = abs(a[i, k])
                r = i
        piv[k] = r
        if not big > 0.0 or not np.isfinite(big):
            return 1
        if r != k:
            for c in range(m):
                tmp = a[k, c]
                a[k, c] = a[r, c]
                a[r, c] = tmp
        inv = 1.0 / a[k, k]
        for i in range(k + 1, m):
            f = a[i, k] * inv
            a[i, k] = f
            if f != 0.0:
                for c in range(k + 1, m):
                    a[i, c] -= f * a[k, c]
    return 0


@kjit
def lu_solve(a, piv, b):
    """Solve with the factors of :func:`lu_factor`; ``b`` is overwritten by the solution."""
    m = a.shape[0]
    for k in range(m):
        r = piv[k]
        if r != k:
            tmp = b[k]
            b[k] = b[r]
            b[r] = tmp
    for k in range(m):
        s = b[k]
        for c in range(k):
            s -= a[k, c] * b[c]
        b[k] = s
    for k in range(m - 1, -1, -1):
        s = b[k]
        for c in range(k + 1, m):
            s -= a[k, c] * b[c]
        b[k] = s / a[k, k]


def gauss_legendre(s: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the s-point Gauss–Legendre rule on [0, 1]."""
    x, w = np.polynomial.legendre.leggauss(s)
    return 0.5 * (x + 1.0), 0.5 * w
