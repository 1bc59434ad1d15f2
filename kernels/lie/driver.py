"""One compiled trajectory driver for every Lie group and ambient method.

The driver is generic in the system: it receives the algebra map ``f`` (Lie group kinds),
the ambient field ``F`` (``AMBIENT`` kind) and a diagnostics function as first-class
function arguments (:mod:`kernels.lie.signatures`), and the method as arrays
(:meth:`kernels.lie.tableaux.Method.arrays`). The group is SE(3)^N acting on (TS²)^N
(:mod:`kernels.lie.se3`). It is compiled once with an explicit signature, so the on-disk
cache is hit across processes.

Fixed step (``adaptive = 0``): ``nsteps`` steps of size ``h``; sample ``k`` after step
``k·stride``. Variable step (``adaptive = 1``): ``h`` is the output interval Δt_out and
``nsteps`` the number of output intervals, ``T = nsteps·h``. The controller of 001 eq. (33):
``h ← θ (tol/e)^α h`` after every trial step (factor clamped to [fac_min, fac_max]; e = 0
gives fac_max), accept iff ``e < tol``, first step ``h0``, last step clipped to hit T
exactly. The error ``e`` is ``‖σ − σ̂‖₂`` in se(3)^N ≅ R^{6N} (RKMK), ``‖y − ŷ‖₂`` in R^{6N}
(CF pairs, ambient). Samples at ``t_k = k·Δt_out`` come from **dense output** when the
method has one (RKMK(5,4): the Dormand–Prince continuous extension applied to the dexp⁻¹
equation, ``y(t_n+θh) = exp(σ(θh))·y_n``, which stays on (TS²)^N; ambient DOPRI5: the usual
interpolant), so the step sequence does not depend on the output grid. Methods without dense
output (CF pairs) instead clip steps to hit every sample time exactly.

``out`` rows are the system's diagnostics followed by one extra last column, which the driver
fills with the step in force at that sample (adaptive: the accepted step whose interval
contains the sample time; row 0: the first trial step).

Failure: a non-finite value or failed f evaluation ends the run with ``Status.NONFINITE``;
a step size below ``h_min`` or more than ``max_steps`` trial steps ends it with
``Status.NONCONVERGED``. The state keeps its last valid value; samples not reached are
left untouched (the caller pre-fills NaN). Diagnostics are evaluated only at samples; a
sample with a non-finite diagnostic fails the step that produced it (so completed samples are
always finite), other steps only check that the new state is finite.
"""

from __future__ import annotations

import numpy as np
from numba import types

from kernels._jit import kjit
from kernels.lie.se3 import bracket, dexpinv, exp_act
from kernels.lie.signatures import DiagType, FieldType
from kernels.linalg import all_finite as _finite
from kernels.status import Status

_OK = int(Status.OK)
_NONFINITE = int(Status.NONFINITE)
_NONCONV = int(Status.NONCONVERGED)

#: iopt entries
IOPT_FIELDS = ("kind", "dexp_mode", "fsal", "s_main", "has_dense", "adaptive", "max_steps")
#: ctrl entries
CTRL_FIELDS = ("tol", "theta", "alpha", "h0", "fac_min", "fac_max", "h_min")
#: summary entries written by the driver
SUMMARY_FIELDS = ("h_min_used", "h_max_used", "t_end", "max_err_est")
#: info entries written by the driver
INFO_FIELDS = ("status", "fail_step", "steps", "rejected", "f_evals", "samples")


@kjit
def _lincomb(coef, K, nterms, h, out):
    """out = h Σ_{j<nterms} coef[j] K[j] (zero coefficients skipped)."""
    n = out.shape[0]
    for i in range(n):
        for c in range(6):
            out[i, c] = 0.0
    for j in range(nterms):
        a = coef[j]
        if a != 0.0:
            ha = h * a
            Kj = K[j]
            for i in range(n):
                for c in range(6):
                    out[i, c] += ha * Kj[i, c]


@kjit
def _copy(src, dst):
    for i in range(src.shape[0]):
        for c in range(6):
            dst[i, c] = src[i, c]


@kjit
def _row_finite(r):
    for c in range(r.shape[0]):
        if not np.isfinite(r[c]):
            return False
    return True


@kjit
def _dist(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        for c in range(6):
            d = a[i, c] - b[i, c]
            s += d * d
    return np.sqrt(s)


@kjit
def _rkmk_step(fmap, p, work, A, b, bhat, dmode, fsal, have_k1, want_err, y, h, kraw, kt, U, Y, sig, sh, yn):
    """One RKMK step; returns (status, error estimate, f evaluations)."""
    s = A.shape[0]
    nev = 0
    if not have_k1:
        if fmap(y, p, work, kraw[0]) != 0:
            return _NONFINITE, 0.0, nev + 1
        nev += 1
    _copy(kraw[0], kt[0])
    for i in range(1, s):
        _lincomb(A[i], kt, i, h, U)
        exp_act(U, y, Y)
        nev += 1
        if fmap(Y, p, work, kraw[i]) != 0:
            return _NONFINITE, 0.0, nev
        dexpinv(U, kraw[i], kt[i], dmode)
    if fsal:
        _copy(U, sig)
        _copy(Y, yn)
    else:
        _lincomb(b, kt, s, h, sig)
        exp_act(sig, y, yn)
    err = 0.0
    if want_err:
        _lincomb(bhat, kt, s, h, sh)
        err = _dist(sig, sh)
    return _OK, err, nev


@kjit
def _cf_apply(base, nexp, beta, kraw, nk, h, y, Ys, X, out):
    """out = ∏_j exp(h Σ_k beta[j, k] f_k) · (y or Y_base)."""
    if base < 0:
        _copy(y, out)
    else:
        _copy(Ys[base], out)
    for j in range(nexp):
        _lincomb(beta[j], kraw, nk, h, X)
        exp_act(X, out, out)


@kjit
def _cf_step(fmap, p, work, sbase, snexp, salpha, obase, onexp, obeta, nst, want_err, y, h, kraw, Ys, X, yn, yh):
    nev = 0
    for r in range(nst):
        _cf_apply(sbase[r], snexp[r], salpha[r], kraw, r, h, y, Ys, X, Ys[r])
        nev += 1
        if fmap(Ys[r], p, work, kraw[r]) != 0:
            return _NONFINITE, 0.0, nev
    _cf_apply(obase[0], onexp[0], obeta[0], kraw, nst, h, y, Ys, X, yn)
    err = 0.0
    if want_err:
        _cf_apply(obase[1], onexp[1], obeta[1], kraw, nst, h, y, Ys, X, yh)
        err = _dist(yn, yh)
    return _OK, err, nev


@kjit
def _two_comm_step(fmap, p, work, y, h, kt, X, Y, C, yn):
    """RKMK4 with two commutators (Casas–Owren); kt[j] holds h f_j."""
    n = y.shape[0]
    if fmap(y, p, work, kt[0]) != 0:
        return _NONFINITE, 0.0, 1
    for j in range(4):
        if j > 0:
            if j == 1:
                for i in range(n):
                    for c in range(6):
                        X[i, c] = 0.5 * kt[0, i, c]
            elif j == 2:
                bracket(kt[0], kt[1], C)
                for i in range(n):
                    for c in range(6):
                        X[i, c] = 0.5 * kt[1, i, c] - 0.125 * C[i, c]
            else:
                _copy(kt[2], X)
            exp_act(X, y, Y)
            if fmap(Y, p, work, kt[j]) != 0:
                return _NONFINITE, 0.0, j + 1
        for i in range(n):
            for c in range(6):
                kt[j, i, c] *= h
    bracket(kt[0], kt[3], C)
    for i in range(n):
        for c in range(6):
            X[i, c] = (kt[0, i, c] + 2.0 * kt[1, i, c] + 2.0 * kt[2, i, c] + kt[3, i, c] - 0.5 * C[i, c]) / 6.0
    exp_act(X, y, yn)
    return _OK, 0.0, 4


@kjit
def _ambient_step(ffield, p, work, A, b, bhat, fsal, have_k1, want_err, y, h, kraw, U, Y, yn):
    s = A.shape[0]
    n = y.shape[0]
    nev = 0
    if not have_k1:
        nev += 1
        if ffield(y, p, work, kraw[0]) != 0:
            return _NONFINITE, 0.0, nev
    for i in range(1, s):
        _lincomb(A[i], kraw, i, h, U)
        for r in range(n):
            for c in range(6):
                Y[r, c] = y[r, c] + U[r, c]
        nev += 1
        if ffield(Y, p, work, kraw[i]) != 0:
            return _NONFINITE, 0.0, nev
    if fsal:
        _copy(Y, yn)
    else:
        _lincomb(b, kraw, s, h, U)
        for r in range(n):
            for c in range(6):
                yn[r, c] = y[r, c] + U[r, c]
    err = 0.0
    if want_err:
        e2 = 0.0
        for r in range(n):
            for c in range(6):
                d = 0.0
                for j in range(s):
                    d += (b[j] - bhat[j]) * kraw[j, r, c]
                e2 += (h * d) ** 2
        err = np.sqrt(e2)
    if not _finite(yn):
        return _NONFINITE, err, nev
    return _OK, err, nev


@kjit
def _dense(kind, P, th, y, h, K, W, U, out):
    """Dense output at y(t_n + θh): RKMK ``exp(h Σ w_i(θ) k̃_i)·y``, ambient ``y + h Σ w_i(θ) k_i``."""
    s = P.shape[0]
    for i in range(s):
        w = 0.0
        tp = th
        for m in range(P.shape[1]):
            w += P[i, m] * tp
            tp *= th
        W[i] = w
    _lincomb(W, K, s, h, U)
    if kind == 3:
        for r in range(y.shape[0]):
            for c in range(6):
                out[r, c] = y[r, c] + U[r, c]
    else:
        exp_act(U, y, out)


_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_F3 = types.float64[:, :, ::1]
_I1 = types.int64[::1]
RUN_SIG = types.int64(
    FieldType,
    FieldType,
    DiagType,
    _F1,
    _F1,
    _F2,
    _F1,
    _F1,
    _F2,
    _I1,
    _I1,
    _F3,
    _I1,
    _I1,
    _F3,
    _I1,
    _F1,
    _F2,
    types.float64,
    types.int64,
    types.int64,
    _F2,
    _F1,
    types.int64[::1],
)


@kjit(RUN_SIG)
def run_lie(
    fmap,
    ffield,
    diagfn,
    p,
    work,
    A,
    b,
    bhat,
    P,
    sbase,
    snexp,
    salpha,
    obase,
    onexp,
    obeta,
    iopt,
    ctrl,
    y,
    h,
    nsteps,
    stride,
    out,
    summary,
    info,
):
    """Integrate in place on ``y`` (N, 6); see the module docstring. Returns the status.

    ``out`` (n_samples, n_diag) receives ``diagfn`` at every sample (row k ↔ t_k).
    """
    kind = iopt[0]
    dmode = iopt[1]
    fsal = iopt[2] != 0
    s_main = iopt[3]
    has_dense = iopt[4] != 0
    adaptive = iopt[5] != 0
    max_steps = iopt[6]
    tol = ctrl[0]
    theta = ctrl[1]
    alpha = ctrl[2]
    fac_min = ctrl[4]
    fac_max = ctrl[5]
    h_min = ctrl[6]
    n = y.shape[0]
    s = A.shape[0]
    kraw = np.zeros((s, n, 6))
    kt = np.zeros((s, n, 6))
    Ys = np.zeros((s, n, 6))
    U = np.zeros((n, 6))
    Y = np.zeros((n, 6))
    sig = np.zeros((n, 6))
    sh = np.zeros((n, 6))
    yn = np.zeros((n, 6))
    ytmp = np.zeros((n, 6))
    W = np.zeros(s)
    nsamp = out.shape[0]
    for i in range(summary.shape[0]):
        summary[i] = np.nan
    for i in range(info.shape[0]):
        info[i] = 0
    info[1] = -1
    status = _OK
    nev = 0
    n_acc = 0
    n_rej = 0
    hmin_used = np.inf
    hmax_used = 0.0
    max_err = 0.0
    diagfn(y, p, work, out[0])
    samples = 1
    nst = s if (adaptive or kind != 1) else s_main
    want_err = adaptive
    have_k1 = False
    t = 0.0
    T = nsteps * h
    hcur = ctrl[3] if adaptive else h
    if adaptive and not hcur > 0.0:
        hcur = T / 100.0
    hcol = out.shape[1] - 1  # the last column records the step in force at each sample
    out[0, hcol] = hcur
    k_out = 1
    hnew = hcur
    t_next = T
    while True:
        if adaptive:
            if not t < T or k_out > nsteps:
                break
            if n_acc + n_rej >= max_steps:
                status = _NONCONV
                info[1] = n_acc + 1
                break
            t_next = T
            if not has_dense:  # clip to the next sample time
                t_next = k_out * h
            last = hcur >= t_next - t
            hstep = t_next - t if last else hcur
        else:
            if n_acc >= nsteps:
                break
            hstep = h
            last = False
        if kind == 0:
            st, err, ev = _rkmk_step(
                fmap, p, work, A, b, bhat, dmode, fsal, have_k1, want_err, y, hstep, kraw, kt, U, Y, sig, sh, yn
            )
        elif kind == 1:
            st, err, ev = _cf_step(
                fmap, p, work, sbase, snexp, salpha, obase, onexp, obeta, nst, want_err, y, hstep, kraw, Ys, U, yn, sh
            )
        elif kind == 2:
            st, err, ev = _two_comm_step(fmap, p, work, y, hstep, kt, U, Y, sig, yn)
        else:
            st, err, ev = _ambient_step(ffield, p, work, A, b, bhat, fsal, have_k1, want_err, y, hstep, kraw, U, Y, yn)
        nev += ev
        if st == _OK and not (_finite(yn) and np.isfinite(err)):
            st = _NONFINITE
        if st != _OK:
            status = st
            info[1] = n_acc + 1
            break
        accept = True
        if adaptive:
            if err > 0.0:
                fac = theta * (tol / err) ** alpha
                fac = min(fac_max, max(fac_min, fac))
            else:
                fac = fac_max
            accept = err < tol
            hnew = fac * hstep
        if accept:
            # samples first: a sample with a non-finite diagnostic fails the step (y kept)
            bad = False
            k_first = k_out
            if adaptive:
                t_new = T if (last and has_dense) else (t_next if last else t + hstep)
                while k_out <= nsteps and k_out * h <= t_new:
                    tk = k_out * h
                    if tk == t_new:
                        diagfn(yn, p, work, out[k_out])
                    else:
                        _dense(kind, P, (tk - t) / hstep, y, hstep, kraw if kind == 3 else kt, W, U, ytmp)
                        diagfn(ytmp, p, work, out[k_out])
                    out[k_out, hcol] = hstep
                    if not _row_finite(out[k_out]):
                        bad = True
                    k_out += 1
            elif (n_acc + 1) % stride == 0:
                k_first = (n_acc + 1) // stride
                k_out = k_first + 1
                diagfn(yn, p, work, out[k_first])
                out[k_first, hcol] = hstep
                bad = not _row_finite(out[k_first])
            if bad:
                for k in range(k_first, k_out):
                    for c in range(out.shape[1]):
                        out[k, c] = np.nan
                status = _NONFINITE
                info[1] = n_acc + 1
                break
            samples += k_out - k_first
            n_acc += 1
            if hstep < hmin_used:
                hmin_used = hstep
            if hstep > hmax_used:
                hmax_used = hstep
            if err > max_err:
                max_err = err
            if adaptive:
                t = t_new
            _copy(yn, y)
            if fsal:
                _copy(kraw[s - 1], kraw[0])
                have_k1 = True
        else:
            n_rej += 1
        if adaptive:
            hcur = hnew
            if hcur < h_min:
                status = _NONCONV
                info[1] = n_acc + 1
                break
    summary[0] = hmin_used if n_acc > 0 else np.nan
    summary[1] = hmax_used if n_acc > 0 else np.nan
    summary[2] = t if adaptive else n_acc * h
    summary[3] = max_err if adaptive else np.nan
    info[0] = status
    info[2] = n_acc
    info[3] = n_rej
    info[4] = nev
    info[5] = min(samples, nsamp)
    return status
