"""Lie group integrators on the shared driver: RKMK, commutator-free, Casas–Owren, ambient RK.

The group is a parameter: ``cb`` carries the system's algebra map ``f`` (Lie group kinds),
its ambient field ``F`` (``AMBIENT`` kind), its sample diagnostics, and the group action
``act(X, y, out)`` (``out = exp(X)·y``), ``dexpinv(U, V, out, mode)`` and the bracket
``bracket(U, V, out)`` of the algebra — SE(3)ᴺ acting on (TS²)ᴺ for the pendulum chain, any
group whose algebra elements and states are (N, 6) arrays otherwise. Each has the explicit
signature of :mod:`geosweep.kernels.lie.signatures`, so one cached binary serves every system. With the
built-in SE(3)ᴺ (``P_SE3`` in ``p``) and the exact dexp⁻¹, RKMK stages call the fused pair
:func:`geosweep.kernels.lie.se3.exp_act_keep` / :func:`geosweep.kernels.lie.se3.dexpinv_kept` directly: the
stage's exponential action keeps the dexp⁻¹ coefficients of the same U (one sin/cos pair of
|A|/2 per link for both; equal to the separate operations up to round-off).

The method is data (:meth:`geosweep.kernels.lie.tableaux.Method`, packed by :func:`method_record`):
a kind, Butcher arrays, embedded weights, dense-output polynomials and the commutator-free
stage/output encodings. RKMK(5,4) estimates its error as ``‖σ − σ̂‖₂`` in the algebra, CF
pairs and ambient pairs as ``‖y − ŷ‖₂``; methods with a second (3rd-order) estimator, DOP853,
combine ``e₅²/√(e₅² + 0.01 e₃²)`` as Hairer–Wanner do. Dense output applies the method's
continuous extension to the dexp⁻¹ equation, ``y(t + θh) = exp(σ(θh))·y``, so samples stay on
the manifold. Stages ``≥ s_main`` of an RKMK/ambient method feed only the dense output
(DOP853's 14–16): ``dense`` evaluates them once per step, only in steps that contain a sample.
The controller, sampling and failure rules are the driver's (:mod:`geosweep.kernels.core.driver`).

State ``S``: y (6N) | the first stage of the next step (6N, first-same-as-last methods) | a
flag telling whether that stage is valid (methods with dense-only stages: 1 + the evaluations
of those stages so far, see :func:`dense_evals`). The work array is [system scratch | stage
data | (dense-only stages) a copy of ``p``, its length, a per-step "stages done" flag]:
``observe`` touches only the system scratch, so ``dense`` can read the rest after it.
"""

from __future__ import annotations

import weakref

import numpy as np
from numba import carray, types

from geosweep.kernels._jit import kjit
from geosweep.kernels.core.driver import compile_driver
from geosweep.kernels.core.layout import I_EVALS, MODE_EULER, MODE_RATE, MODE_STEP, S_ERR, S_FAIL_VALUE, S_MODE
from geosweep.kernels.core.observables import Observable, obs_names, reductions
from geosweep.kernels.core.signatures import F2, contract_types
from geosweep.kernels.core.trajectory import Reductions, StepperSpec
from geosweep.kernels.core.views import _ptr, view2, view3
from geosweep.kernels.lie.se3 import DEXPINV_EXACT, bracket, dexpinv, dexpinv_kept, exp_act, exp_act_keep
from geosweep.kernels.lie.signatures import DiagType, FieldType
from geosweep.kernels.lie.tableaux import AMBIENT, CF, RKMK, RKMK4_2COMM, Method
from geosweep.kernels.linalg import all_finite as _finite
from geosweep.kernels.status import Status

_OK = int(Status.OK)
_NONFINITE = int(Status.NONFINITE)

ACT_SIG = types.void(F2, F2, F2)
DEXPINV_SIG = types.void(F2, F2, F2, types.int64)
BRACKET_SIG = types.void(F2, F2, F2)
ActType = types.FunctionType(ACT_SIG)
DexpinvType = types.FunctionType(DEXPINV_SIG)
BracketType = types.FunctionType(BRACKET_SIG)
#: (f, F, diag, act, dexpinv, bracket)
CB_TYPE = types.Tuple((FieldType, FieldType, DiagType, ActType, DexpinvType, BracketType))
_STEP_SIG, _OBS_SIG, _DENSE_SIG, _ = contract_types(CB_TYPE)


# ---- SE(3)ᴺ acting on (TS²)ᴺ, as first-class functions ---------------------------------
@kjit(ACT_SIG)
def se3_act(X, y, out):
    exp_act(X, y, out)


@kjit(DEXPINV_SIG)
def se3_dexpinv(U, V, out, mode):
    dexpinv(U, V, out, mode)


@kjit(BRACKET_SIG)
def se3_bracket(U, V, out):
    bracket(U, V, out)


SE3_GROUP = (se3_act, se3_dexpinv, se3_bracket)

# ---- the method record ------------------------------------------------------------------
M_KIND, M_DMODE, M_FSAL, M_S, M_SMAIN, M_DENSE, M_NP, M_ADAPTIVE, M_EST = range(9)
M_HEAD = 9
_JMAX = 2  # exponentials per CF stage/output (tableaux._JMAX)


#: process-wide state: method -> its packed float64 records per mode, shared by every stepper
_RECORDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def method_record(m: Method, adaptive: bool) -> np.ndarray:
    """The float64 record of a :class:`Method` (header, A, b, b̂, P, CF encodings, b̂₃), packed once
    per method and mode: steppers share it, and nothing writes to it."""
    per_mode = _RECORDS.setdefault(m, {})
    rec = per_mode.get(adaptive)
    if rec is None:
        rec = per_mode[adaptive] = _pack_record(m, adaptive)
    return rec


def _pack_record(m: Method, adaptive: bool) -> np.ndarray:
    A, b, bhat, P, sbase, snexp, salpha, obase, onexp, obeta = m.arrays()
    s = m.stages
    head = np.zeros(M_HEAD)
    head[M_KIND] = m.kind
    head[M_DMODE] = m.dexp_mode
    head[M_FSAL] = float(m.fsal)
    head[M_S] = s
    head[M_SMAIN] = m.s_main
    head[M_DENSE] = float(m.P is not None)
    head[M_NP] = P.shape[1]
    head[M_ADAPTIVE] = float(adaptive)
    head[M_EST] = float(m.bhat3 is not None)
    bhat3 = m.bhat3 if m.bhat3 is not None else np.zeros(s)
    parts = [head, A.ravel(), b, bhat, P.ravel(), sbase, snexp, salpha.ravel(), obase, onexp, obeta.ravel(), bhat3]
    return np.ascontiguousarray(np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in parts]))


@kjit
def _unpack(meth):
    s = int(meth[M_S])
    npol = int(meth[M_NP])
    o = M_HEAD
    A = view2(meth, o, s, s)
    o += s * s
    b = meth[o : o + s]
    o += s
    bhat = meth[o : o + s]
    o += s
    P = view2(meth, o, s, npol)
    o += s * npol
    sbase = meth[o : o + s]
    o += s
    snexp = meth[o : o + s]
    o += s
    salpha = view3(meth, o, s, _JMAX, s)
    o += s * _JMAX * s
    obase = meth[o : o + 2]
    o += 2
    onexp = meth[o : o + 2]
    o += 2
    obeta = view3(meth, o, 2, _JMAX, s)
    return A, b, bhat, P, sbase, snexp, salpha, obase, onexp, obeta


@kjit
def _bhat3(meth):
    s = int(meth[M_S])
    o = M_HEAD + s * s + 2 * s + s * int(meth[M_NP]) + 2 * s + s * _JMAX * s + 4 + 2 * _JMAX * s
    return meth[o : o + s]


@kjit
def _lazy(meth):
    """Stages ≥ s_main of an RKMK/ambient method only feed its dense output (DOP853's 14–16)."""
    k = int(meth[M_KIND])
    return (k == RKMK or k == AMBIENT) and int(meth[M_SMAIN]) < int(meth[M_S])


# ---- model vector and work layout ---------------------------------------------------------
P_NWC, P_N, P_SE3 = 0, 1, 2  # P_SE3: 1 if the group is the built-in SE(3)ᴺ (fused RKMK stages)
P_HEAD = 4


@kjit
def _stage_views(work, nwc, n, s):
    o = nwc
    kraw = view3(work, o, s, n, 6)
    o += s * n * 6
    kt = view3(work, o, s, n, 6)
    o += s * n * 6
    Ys = view3(work, o, s, n, 6)
    o += s * n * 6
    U = view2(work, o, n, 6)
    o += n * 6
    Y = view2(work, o, n, 6)
    o += n * 6
    sig = view2(work, o, n, 6)
    o += n * 6
    sh = view2(work, o, n, 6)
    o += n * 6
    W = work[o : o + s]
    return kraw, kt, Ys, U, Y, sig, sh, W


def work_size(nwc: int, n: int, s: int, n_lazy_p: int = 0) -> int:
    """[system scratch (nwc) | stage data | p copy (n_lazy_p) | n_lazy_p | flag]; the last three
    only for methods with dense-only stages (``n_lazy_p = len(p)``, see :func:`make_stepper`)."""
    return nwc + 3 * s * n * 6 + 4 * n * 6 + s + (n_lazy_p + 2 if n_lazy_p else 0)


work_size_jit = kjit(work_size)


# ---- single steps (ported from the pre-contract driver, group operations from ``cb``) -----
@kjit
def _flat(a):
    """A C-contiguous (n, 6) array as a 1-D view of its 6n entries (no copy, no reshape call)."""
    return carray(_ptr(a[0], 0), a.shape[0] * 6)


@kjit
def _lincomb(coef, K, nterms, h, out):
    """out = h Σ_{j<nterms} coef[j] K[j] (zero coefficients skipped). Each entry is summed in
    the order j = 0, 1, …; the flat loops vectorise (≈ 10× faster than (n, 6) indexing) and
    give the same bits."""
    o = _flat(out)
    m = o.shape[0]
    for e in range(m):
        o[e] = 0.0
    for j in range(nterms):
        a = coef[j]
        if a != 0.0:
            ha = h * a
            Kj = _flat(K[j])
            for e in range(m):
                o[e] += ha * Kj[e]


@kjit
def _lincomb_diff(b, bhat, K, nterms, h, out):
    """out = h Σ_{j<nterms} (b_j − b̂_j) K[j]; returns ‖out‖₂²."""
    o = _flat(out)
    m = o.shape[0]
    for e in range(m):
        o[e] = 0.0
    for j in range(nterms):
        a = b[j] - bhat[j]
        if a != 0.0:
            ha = h * a
            Kj = _flat(K[j])
            for e in range(m):
                o[e] += ha * Kj[e]
    s = 0.0
    for e in range(m):
        s += o[e] * o[e]
    return s


@kjit
def _copy(src, dst):
    a = _flat(src)
    d = _flat(dst)
    for e in range(a.shape[0]):
        d[e] = a[e]


@kjit
def _add(y, U, out):
    """out = y + U (entrywise; flat, vectorised)."""
    a = _flat(y)
    u = _flat(U)
    o = _flat(out)
    for e in range(o.shape[0]):
        o[e] = a[e] + u[e]


@kjit
def _dist(a, b):
    s = 0.0
    for i in range(a.shape[0]):
        for c in range(6):
            d = a[i, c] - b[i, c]
            s += d * d
    return np.sqrt(s)


@kjit
def _rkmk_step(fmap, act, dexpinv_, p, wc, A, b, bhat, dmode, fsal, have_k1, want_err, y, h, kraw, kt, U, Y, sig, sh,
               yn, s, bhat3, est, fused):  # fmt: skip
    """One RKMK step over the first ``s`` stages; returns (status, error estimate, f evaluations).
    ``est = 1``: DOP853's combination of the 5th- (``bhat``) and 3rd-order (``bhat3``) estimates.
    ``fused``: the group is SE(3)ᴺ with the exact dexp⁻¹, and each stage's exponential action
    keeps its dexp⁻¹ coefficients in ``sh`` (free until the error estimate) for the same U."""
    nev = 0
    if not have_k1:
        nev += 1
        if fmap(y, p, wc, kraw[0]) != 0:
            return _NONFINITE, 0.0, nev
    _copy(kraw[0], kt[0])
    for i in range(1, s):
        _lincomb(A[i], kt, i, h, U)
        if fused:
            exp_act_keep(U, y, Y, sh)
        else:
            act(U, y, Y)
        nev += 1
        if fmap(Y, p, wc, kraw[i]) != 0:
            return _NONFINITE, 0.0, nev
        if fused:
            dexpinv_kept(U, kraw[i], kt[i], sh)
        else:
            dexpinv_(U, kraw[i], kt[i], dmode)
    if fsal:
        _copy(U, sig)
        _copy(Y, yn)
    else:
        _lincomb(b, kt, s, h, sig)
        act(sig, y, yn)
    err = 0.0
    if want_err:
        if est == 0:
            _lincomb(bhat, kt, s, h, sh)
            err = _dist(sig, sh)
        else:
            err = _err853(b, bhat, bhat3, kt, s, h, sh)
    return _OK, err, nev


@kjit
def _err853(b, bhat5, bhat3, K, s, h, scratch):
    """Hairer–Wanner's DOP853 estimate e₅²/√(e₅² + 0.01 e₃²) (≈ e₅²/(0.1 e₃) = O(h⁸)) with
    e_p = ‖h Σ_j (b_j − b̂_pj) K_j‖₂."""
    e5 = _lincomb_diff(b, bhat5, K, s, h, scratch)
    e3 = _lincomb_diff(b, bhat3, K, s, h, scratch)
    den = e5 + 0.01 * e3
    return e5 / np.sqrt(den) if den > 0.0 else 0.0


@kjit
def _cf_apply(act, base, nexp, beta, kraw, nk, h, y, Ys, X, out):
    """out = ∏_j exp(h Σ_k beta[j, k] f_k) · (y or Y_base)."""
    if base < 0:
        _copy(y, out)
    else:
        _copy(Ys[base], out)
    for j in range(nexp):
        _lincomb(beta[j], kraw, nk, h, X)
        act(X, out, out)


@kjit
def _cf_step(fmap, act, p, wc, sbase, snexp, salpha, obase, onexp, obeta, nst, want_err, y, h, kraw, Ys, X, yn, yh):
    nev = 0
    for r in range(nst):
        _cf_apply(act, int(sbase[r]), int(snexp[r]), salpha[r], kraw, r, h, y, Ys, X, Ys[r])
        nev += 1
        if fmap(Ys[r], p, wc, kraw[r]) != 0:
            return _NONFINITE, 0.0, nev
    _cf_apply(act, int(obase[0]), int(onexp[0]), obeta[0], kraw, nst, h, y, Ys, X, yn)
    err = 0.0
    if want_err:
        _cf_apply(act, int(obase[1]), int(onexp[1]), obeta[1], kraw, nst, h, y, Ys, X, yh)
        err = _dist(yn, yh)
    return _OK, err, nev


@kjit
def _two_comm_step(fmap, act, bracket_, p, wc, y, h, kt, X, Y, C, yn):
    """RKMK4 with two commutators (Casas–Owren); kt[j] holds h f_j."""
    n = y.shape[0]
    if fmap(y, p, wc, kt[0]) != 0:
        return _NONFINITE, 0.0, 1
    for j in range(4):
        if j > 0:
            if j == 1:
                for i in range(n):
                    for c in range(6):
                        X[i, c] = 0.5 * kt[0, i, c]
            elif j == 2:
                bracket_(kt[0], kt[1], C)
                for i in range(n):
                    for c in range(6):
                        X[i, c] = 0.5 * kt[1, i, c] - 0.125 * C[i, c]
            else:
                _copy(kt[2], X)
            act(X, y, Y)
            if fmap(Y, p, wc, kt[j]) != 0:
                return _NONFINITE, 0.0, j + 1
        for i in range(n):
            for c in range(6):
                kt[j, i, c] *= h
    bracket_(kt[0], kt[3], C)
    for i in range(n):
        for c in range(6):
            X[i, c] = (kt[0, i, c] + 2.0 * kt[1, i, c] + 2.0 * kt[2, i, c] + kt[3, i, c] - 0.5 * C[i, c]) / 6.0
    act(X, y, yn)
    return _OK, 0.0, 4


@kjit
def _ambient_step(ffield, p, wc, A, b, bhat, fsal, have_k1, want_err, y, h, kraw, U, Y, yn, s, bhat3, est):
    n = y.shape[0]
    nev = 0
    if not have_k1:
        nev += 1
        if ffield(y, p, wc, kraw[0]) != 0:
            return _NONFINITE, 0.0, nev
    for i in range(1, s):
        _lincomb(A[i], kraw, i, h, U)
        _add(y, U, Y)
        nev += 1
        if ffield(Y, p, wc, kraw[i]) != 0:
            return _NONFINITE, 0.0, nev
    if fsal:
        _copy(Y, yn)
    else:
        _lincomb(b, kraw, s, h, U)
        _add(y, U, yn)
    err = 0.0
    if want_err and est != 0:
        err = _err853(b, bhat, bhat3, kraw, s, h, U)
    elif want_err:
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
def _start_mode(fmap, ffield, act, ambient, mode, pp, wc, h, S, Sn, n, info, sio):
    """The driver's starting-step modes: ``MODE_RATE`` writes the algebra element f(y) (RKMK, CF:
    their error is measured in the algebra or on y with steps ``h·f``) or the ambient field F(y)
    into ``Sn[:6N]`` (the rest 0) and ``‖y‖₂`` into ``sio[S_ERR]``; ``MODE_EULER`` writes
    ``exp(h f(y))·y`` (ambient: ``y + h F(y)``) with no first-stage cache. One evaluation each."""
    n6 = 6 * n
    y = view2(S, 0, n, 6)
    for i in range(Sn.shape[0]):
        Sn[i] = 0.0
    out = view2(Sn, 0, n, 6)
    field = view2(Sn, n6, n, 6) if mode == MODE_EULER else out  # the rate (Euler: in the unused cache)
    info[I_EVALS] += 1
    bad = (ffield(y, pp, wc, field) if ambient else fmap(y, pp, wc, field)) != 0
    if bad or not _finite(field):
        return _NONFINITE
    if mode == MODE_RATE:
        s = 0.0
        for e in range(n6):
            s += S[e] * S[e]
        sio[S_ERR] = np.sqrt(s)
        return _OK
    for r in range(n):
        for c in range(6):
            field[r, c] *= h
    if ambient:
        _add(y, field, out)
    else:
        act(field, y, out)
    for e in range(n6, Sn.shape[0]):
        Sn[e] = 0.0
    return _OK if _finite(out) else _NONFINITE


# ---- the contract functions ---------------------------------------------------------------
@kjit(_STEP_SIG)
def lie_step(cb, meth, h, S, Sn, p, work, iwork, info, sio):
    fmap, ffield, diagfn, act, dexpinv_, bracket_ = cb
    nwc = int(p[P_NWC])
    n = int(p[P_N])
    pp = p[P_HEAD:]
    wc = work[0:nwc]
    kind = int(meth[M_KIND])
    mode = int(sio[S_MODE])
    if mode != MODE_STEP:
        return _start_mode(fmap, ffield, act, kind == AMBIENT, mode, pp, wc, h, S, Sn, n, info, sio)
    s = int(meth[M_S])
    fsal = meth[M_FSAL] != 0.0
    adaptive = meth[M_ADAPTIVE] != 0.0
    A, b, bhat, P, sbase, snexp, salpha, obase, onexp, obeta = _unpack(meth)
    bhat3 = _bhat3(meth)
    est = int(meth[M_EST])
    kraw, kt, Ys, U, Y, sig, sh, W = _stage_views(work, nwc, n, s)
    n6 = 6 * n
    y = view2(S, 0, n, 6)
    yn = view2(Sn, 0, n, 6)
    have_k1 = fsal and S[2 * n6] != 0.0
    if have_k1:
        _copy(view2(S, n6, n, 6), kraw[0])
    lazy = _lazy(meth)
    sm = int(meth[M_SMAIN]) if lazy else s  # stages the step itself evaluates
    if lazy:  # the dense stages need p (dense() does not receive it) and a per-step "done" flag
        mw = work.shape[0]
        npp = p.shape[0]
        if mw < work_size_jit(nwc, n, s, npp):  # a caller that sized work without the tail
            sio[S_FAIL_VALUE] = mw
            return _NONFINITE
        for i in range(npp):
            work[mw - 2 - npp + i] = p[i]
        work[mw - 2] = npp
        work[mw - 1] = 0.0
    if kind == RKMK:
        st, err, ev = _rkmk_step(
            fmap, act, dexpinv_, pp, wc, A, b, bhat, int(meth[M_DMODE]), fsal, have_k1, adaptive, y, h, kraw, kt, U,
            Y, sig, sh, yn, sm, bhat3, est, p[P_SE3] != 0.0 and int(meth[M_DMODE]) == DEXPINV_EXACT,
        )  # fmt: skip
    elif kind == CF:
        nst = s if adaptive else int(meth[M_SMAIN])
        st, err, ev = _cf_step(
            fmap, act, pp, wc, sbase, snexp, salpha, obase, onexp, obeta, nst, adaptive, y, h, kraw, Ys, U, yn, sh
        )
    elif kind == RKMK4_2COMM:
        st, err, ev = _two_comm_step(fmap, act, bracket_, pp, wc, y, h, kt, U, Y, sig, yn)
    else:
        st, err, ev = _ambient_step(
            ffield, pp, wc, A, b, bhat, fsal, have_k1, adaptive, y, h, kraw, U, Y, yn, sm, bhat3, est
        )
    info[I_EVALS] += ev
    sio[S_ERR] = err
    if st != _OK:
        return st
    if fsal:
        _copy(kraw[sm - 1], view2(Sn, n6, n, 6))
        # the flag is 1 + the dense-stage evaluations so far (lazy methods; see lie_dense)
        Sn[2 * n6] = S[2 * n6] if (lazy and S[2 * n6] >= 1.0) else 1.0
    else:
        Sn[2 * n6] = 0.0
    return _OK


@kjit(_OBS_SIG)
def lie_observe(cb, meth, S, p, work, full, obs):
    fmap, ffield, diagfn, act, dexpinv_, bracket_ = cb
    nwc = int(p[P_NWC])
    n = int(p[P_N])
    diagfn(view2(S, 0, n, 6), p[P_HEAD:], work[0:nwc], obs)


@kjit(_DENSE_SIG)
def lie_dense(cb, meth, theta, h, S, Sn, work, Sd):
    """``y(t + θh)``: RKMK ``exp(h Σ w_i(θ) k̃_i)·y``, ambient ``y + h Σ w_i(θ) k_i``."""
    fmap, ffield, diagfn, act, dexpinv_, bracket_ = cb
    s = int(meth[M_S])
    A, b, bhat, P, sbase, snexp, salpha, obase, onexp, obeta = _unpack(meth)
    n = (S.shape[0] - 1) // 12  # state size 12N + 1; the stage data sit at the end of work

    n6 = 6 * n
    ambient = int(meth[M_KIND]) == AMBIENT
    y = view2(S, 0, n, 6)
    out = view2(Sd, 0, n, 6)
    mw = work.shape[0]
    lazy = _lazy(meth)
    tail = int(work[mw - 2]) + 2 if lazy else 0
    nwc = mw - tail - (3 * s * n6 + 4 * n6 + s)
    kraw, kt, Ys, U, Y, sig, sh, W = _stage_views(work, nwc, n, s)
    if lazy and work[mw - 1] == 0.0:  # the dense-only stages, once per step
        pp = work[mw - tail + P_HEAD : mw - 2]
        wc = work[0:nwc]
        fused = work[mw - tail + P_SE3] != 0.0 and int(meth[M_DMODE]) == DEXPINV_EXACT
        for i in range(int(meth[M_SMAIN]), s):
            _lincomb(A[i], kt if not ambient else kraw, i, h, U)
            if ambient:
                for r in range(n):
                    for c in range(6):
                        Y[r, c] = y[r, c] + U[r, c]
                bad = ffield(Y, pp, wc, kraw[i]) != 0
            elif fused:
                exp_act_keep(U, y, Y, sh)
                bad = fmap(Y, pp, wc, kraw[i]) != 0
                dexpinv_kept(U, kraw[i], kt[i], sh)
            else:
                act(U, y, Y)
                bad = fmap(Y, pp, wc, kraw[i]) != 0
                dexpinv_(U, kraw[i], kt[i], int(meth[M_DMODE]))
            Sn[2 * n6] += 1.0
            if bad:  # a NaN sample: the driver fails the step as non-finite
                for r in range(n):
                    for c in range(6):
                        out[r, c] = np.nan
                return
        work[mw - 1] = 1.0
    for i in range(s):
        w = 0.0
        tp = theta
        for m in range(P.shape[1]):
            w += P[i, m] * tp
            tp *= theta
        W[i] = w
    if ambient:
        _lincomb(W, kraw, s, h, U)
        for r in range(n):
            for c in range(6):
                out[r, c] = y[r, c] + U[r, c]
    else:
        _lincomb(W, kt, s, h, U)
        act(U, y, out)


#: The columns every system on (N, 6) states observes through its ``diag`` callback, with their
#: running reductions (the families using this stepper attach what they store from them with
#: :func:`geosweep.kernels.core.observables.with_outputs`; a family may give a column its own meaning,
#: e.g. the heavy top's Casimirs).
OBSERVABLES: tuple[Observable, ...] = (
    Observable("energy"),
    Observable("L", (Reductions.DEVNORM3, Reductions.NONE, Reductions.DEV), columns=("L_x", "L_y", "L_z")),
    Observable("unit_error", Reductions.MEANMAX),
    Observable("tangency_error", Reductions.MAX),
)
OBS_NAMES = obs_names(OBSERVABLES)
_RED = reductions(OBSERVABLES)  # the same for every model: copied into each stepper
#: process-wide state: (system callbacks, group) -> their joined tuple, one object per pair, so the driver binds a
#: stepper of the same functions without walking them again (:mod:`geosweep.kernels.core.fastcall`)
_CALLBACKS: dict[tuple, tuple] = {}


def _callbacks(system_cb: tuple, group: tuple) -> tuple:
    """``(*system_cb, *group)``, the same tuple object for the same compiled functions."""
    key = (*map(id, system_cb), *map(id, group))  # the kept tuple keeps them alive: an id names one object
    found = _CALLBACKS.get(key)
    if found is None:
        found = _CALLBACKS[key] = (*system_cb, *group)
    return found


def make_stepper(
    system_cb: tuple, params: np.ndarray, n: int, nwc: int, method: Method, adaptive: bool, group: tuple = SE3_GROUP
) -> StepperSpec:
    """The driver's view of a system on (N, 6) states: ``system_cb`` = (f, F, diag) compiled with the
    signatures of :mod:`geosweep.kernels.lie.signatures`, ``params`` its parameter vector, ``nwc`` its
    scratch size, ``group`` = (act, dexpinv, bracket) (default SE(3)ᴺ on (TS²)ᴺ)."""
    if adaptive and method.bhat is None:
        raise ValueError(f"{method.name} has no embedded formula; cannot run adaptively")
    red = _RED.copy()
    head = np.zeros(P_HEAD)
    head[P_NWC] = nwc
    head[P_N] = n
    head[P_SE3] = float(group is SE3_GROUP)
    p = np.ascontiguousarray(np.concatenate([head, params]))
    lazy = method.kind in (RKMK, AMBIENT) and method.s_main < method.stages
    return StepperSpec(
        drive=compile_driver(CB_TYPE),
        step=lie_step,
        observe=lie_observe,
        dense=lie_dense,
        cb=_callbacks(system_cb, group),
        meth=method_record(method, adaptive),
        p=p,
        work_size=work_size(nwc, n, method.stages, p.shape[0] if lazy else 0),
        iwork_size=1,
        state_size=12 * n + 1,
        n_check=6 * n,
        obs_names=OBS_NAMES,
        red=red,
        has_dense=method.P is not None,
        start_order=method.order if adaptive else 0,
    )


def dense_evals(S: np.ndarray) -> int:
    """f-evaluations of the dense-only stages so far (methods with such stages; else 0): the
    driver's ``f_evals`` counts the stages of the steps, these are counted in the state."""
    return int(max(S[-1] - 1.0, 0.0))


def initial_state(y0: np.ndarray) -> np.ndarray:
    y0 = np.ascontiguousarray(y0, dtype=np.float64)
    n = y0.shape[0]
    S = np.zeros(12 * n + 1)
    S[: 6 * n] = y0.ravel()
    return S
