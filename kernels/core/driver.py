"""The shared, resumable trajectory driver (see :mod:`geosweep.kernels.core`, :mod:`~geosweep.kernels.core.signatures`).

Time grid: samples at ``t_s = s·dt_out``, ``s = 0..n_out``. Fixed step: ``n_out·stride`` steps
of size ``h``, ``t_k = k·h``, sample ``s`` after step ``k = s·stride``. Adaptive: the
controller of 001 eq. (33), ``h ← θ (tol/e)^α h`` after every trial step (factor clamped to
[fac_min, fac_max]; ``e = 0`` gives fac_max), accept iff ``e < tol``, last step clipped to hit
``T = n_out·dt_out``; samples come from the method's dense output (so the step sequence does
not depend on the output grid) or, without one, steps are clipped to hit every sample time.
The first trial step is ``fctl[F_H]`` when positive, else the starting-step rule of Hairer,
Nørsett & Wanner (I, §II.4) in the controller's own norm (:func:`starting_step`), which depends
on the initial state, ``tol`` and the order and not on ``T`` (its three evaluations of the
vector field count in ``info[I_EVALS]``); a stepper that declares no starting-step order starts
from ``dt_out``.

Every accepted step is observed; the observation columns feed the running summaries declared
by ``red`` (max, mean, max deviation from the initial value, first/last time positive) and,
when the family has an energy (column 0), |E − E0| statistics and the least-squares drift
slope. Snapshots store the state prefix ``S[:n_check]`` at every ``snap_every``-th sample.

Failures (one convention for every family): a step returning a non-zero status, a non-finite
observation or state prefix, a non-finite sample, or (adaptive) a step below ``h_min`` or more
than ``max_steps`` trials ends the run. Adaptive exception: a trial step that returns NONFINITE,
or whose error estimate or state prefix is non-finite (e.g. a first step too large for the
method's domain), is rejected and retried with ``h ← fac_min·h``, up to
``MAX_NONFINITE_REJECTS`` in a row (counted in ``acc``, so resumable) and while ``h ≥ h_min``;
then it ends the run as above; ``fail_step`` is the number of the failing step counted
from 1 (0: the initial state is invalid), the state keeps its last valid value, and samples not
reached stay as the caller filled them (NaN). The energy guard ``|E − E0| > blowup·|E0|`` is
checked after every accepted step (the state is finite and kept) and ends the run with
ENERGY_BLOWUP. Systems with ``E0 = 0`` have no relative guard.

Resumable: everything the loop carries lives in the caller's arrays (state, ``acc``, ``info``,
``out``, ``env``, ``snaps``, the controller's next step and the running envelope in ``acc``),
so calling again with a larger ``k_stop`` (accepted steps) or ``t_stop`` (time) continues
exactly where the last call stopped — a run in k segments is bitwise identical to one
uninterrupted run. The only step that depends on ``T`` is an adaptive dense-output method's last
one (clipped to land on ``T``): with ``ictl[C_HOLD] = 1`` the driver stops before it (and sets 2),
so that the state there can be kept and continued to a later ``T`` (:mod:`geosweep.sweeps.extension`).
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.core.fastcall import register_driver
from geosweep.kernels.core.layout import (
    A_E0,
    A_ERRMAX,
    A_FAIL_VALUE,
    A_H,
    A_HMAX,
    A_HMIN,
    A_MAX_ABS,
    A_NFREJ,
    A_OBS,
    A_SE,
    A_ST,
    A_STE,
    A_STT,
    A_SUM_ABS,
    A_T,
    C_ADAPTIVE,
    C_HAS_DENSE,
    C_HAS_ENERGY,
    C_HOLD,
    C_MAX_STEPS,
    C_N_CHECK,
    C_N_OUT,
    C_N_STEPS,
    C_SNAP_EVERY,
    C_START_ORDER,
    C_STRIDE,
    F_ALPHA,
    F_BLOWUP,
    F_DT_OUT,
    F_FAC_MAX,
    F_FAC_MIN,
    F_H,
    F_H_MIN,
    F_THETA,
    F_TOL,
    I_FAIL_INDEX,
    I_FAIL_STEP,
    I_INIT,
    I_K,
    I_NSAMP,
    I_NSNAP,
    I_REJECTED,
    I_STATUS,
    MODE_EULER,
    MODE_RATE,
    MODE_STEP,
    R_DEV,
    R_DEVNORM3,
    R_MAX,
    R_MEANMAX,
    R_WHENPOS,
    S_ERR,
    S_FAIL_INDEX,
    S_FAIL_VALUE,
    S_MODE,
)
from geosweep.kernels.core.signatures import contract_types
from geosweep.kernels.linalg import norm
from geosweep.kernels.status import Status

_OK = int(Status.OK)
_NONFINITE = int(Status.NONFINITE)
_NONCONV = int(Status.NONCONVERGED)
_BLOWUP = int(Status.ENERGY_BLOWUP)
#: adaptive: consecutive non-finite trial steps rejected (each cutting h by fac_min) before the
#: run fails as non-finite
MAX_NONFINITE_REJECTS = 10


@kjit
def _finite_prefix(x, n):
    """All of x[:n] finite (branch-free: x − x is NaN exactly for ±inf and NaN; vectorises)."""
    bad = False
    for i in range(n):
        bad |= (x[i] - x[i]) != 0.0
    return not bad


@kjit
def _obs_finite(obs, red, has_energy):
    """Energy and every reduced column finite (sample-only columns are checked at samples)."""
    bad = has_energy and not np.isfinite(obs[0])
    for j in range(obs.shape[0]):
        bad |= red[j] != 0 and (obs[j] - obs[j]) != 0.0
    return not bad


@kjit
def _init_reductions(obs, red, acc):
    for j in range(obs.shape[0]):
        b = A_OBS + 3 * j
        x = obs[j]
        acc[b + 2] = x
        r = red[j]
        if r == R_MAX or r == R_MEANMAX:
            acc[b] = x
            acc[b + 1] = x
        elif r == R_DEV or r == R_DEVNORM3:
            acc[b] = 0.0
            acc[b + 1] = 0.0
        elif r == R_WHENPOS:
            acc[b] = 0.0 if x > 0.0 else np.nan
            acc[b + 1] = 0.0 if x > 0.0 else np.nan
        else:
            acc[b] = np.nan
            acc[b + 1] = np.nan


@kjit
def _reduce(obs, red, acc, t):
    for j in range(obs.shape[0]):
        r = red[j]
        if r == 0:
            continue
        b = A_OBS + 3 * j
        x = obs[j]
        if r == R_MAX:
            if x > acc[b + 1]:
                acc[b + 1] = x
        elif r == R_MEANMAX:
            acc[b] += x
            if x > acc[b + 1]:
                acc[b + 1] = x
        elif r == R_DEV:
            d = abs(x - acc[b + 2])
            if d > acc[b + 1]:
                acc[b + 1] = d
        elif r == R_DEVNORM3:
            d = np.sqrt((x - acc[b + 2]) ** 2 + (obs[j + 1] - acc[b + 5]) ** 2 + (obs[j + 2] - acc[b + 8]) ** 2)
            if d > acc[b + 1]:
                acc[b + 1] = d
        elif r == R_WHENPOS:
            if x > 0.0:
                if not acc[b] == acc[b]:
                    acc[b] = t
                acc[b + 1] = t


@kjit
def _energy_stats(acc, E, t):
    dE = E - acc[A_E0]
    adE = abs(dE)
    acc[A_SUM_ABS] += adE
    if adE > acc[A_MAX_ABS]:
        acc[A_MAX_ABS] = adE
    acc[A_ST] += t
    acc[A_STT] += t * t
    acc[A_SE] += dE
    acc[A_STE] += t * dE
    return dE


@kjit
def _put_sample(out, s, obs, hstep):
    m = obs.shape[0]
    for c in range(m):
        out[s, c] = obs[c]
    out[s, m] = hstep


@kjit
def _env_reset(acc, red):
    e = A_OBS + 3 * red.shape[0]
    acc[e] = np.inf
    acc[e + 1] = -np.inf
    for j in range(red.shape[0]):
        acc[e + 2 + j] = -np.inf


@kjit
def _env_add(acc, red, dE, obs):
    e = A_OBS + 3 * red.shape[0]
    if dE < acc[e]:
        acc[e] = dE
    if dE > acc[e + 1]:
        acc[e + 1] = dE
    for j in range(red.shape[0]):
        if (red[j] == R_MAX or red[j] == R_MEANMAX) and obs[j] > acc[e + 2 + j]:
            acc[e + 2 + j] = obs[j]


@kjit
def _env_close(acc, red, env, s, has_energy):
    """Write the envelope of the interval ending at sample ``s`` and start the next one."""
    e = A_OBS + 3 * red.shape[0]
    env[s, 0] = acc[e] if has_energy else np.nan
    env[s, 1] = acc[e + 1] if has_energy else np.nan
    for j in range(red.shape[0]):
        env[s, 2 + j] = acc[e + 2 + j] if (red[j] == R_MAX or red[j] == R_MEANMAX) else np.nan
    _env_reset(acc, red)


@kjit
def _row_finite(out, s):
    for c in range(out.shape[1]):
        if not np.isfinite(out[s, c]):
            return False
    return True


@kjit
def _put_snapshot(snaps, i, x, n):
    if i < snaps.shape[0]:
        for c in range(n):
            snaps[i, c] = x[c]


@kjit
def _fail(info, acc, status, step_no, index, value):
    info[I_STATUS] = status
    info[I_FAIL_STEP] = step_no
    info[I_FAIL_INDEX] = index
    acc[A_FAIL_VALUE] = value
    return status


@kjit
def _ask(step, mode, cb, meth, h, S, Sn, p, work, iwork, info, sio):
    """``step`` in one of the starting-step modes (:mod:`~geosweep.kernels.core.layout` ``MODE_*``)."""
    sio[S_MODE] = mode
    sio[S_ERR] = 0.0
    st = step(cb, meth, h, S, Sn, p, work, iwork, info, sio)
    sio[S_MODE] = MODE_STEP
    return st


@kjit
def starting_step(step, cb, meth, order, tol, S, Sn, p, work, iwork, info, sio):
    """The first trial step of an adaptive run from state ``S`` (HNW I, §II.4, restated).

    The controller accepts ``‖e‖₂ < tol`` (absolute), so every scale is ``tol`` and every norm the
    2-norm of the coordinates the step's error estimate uses (the step's ``MODE_RATE``):
    ``d0 = ‖y0‖/tol``, ``d1 = ‖f(y0)‖/tol``; a trial ``h' = 0.01·d0/d1`` (``1e-6`` when either is
    below ``1e-5``), one explicit Euler (or exponential) step ``y1`` of size ``h'``,
    ``d2 = ‖f(y1) − f(y0)‖/(tol·h')``; then ``h1 = (0.01/max(d1, d2))^(1/(order+1))``
    (``max(1e-6, 1e-3·h')`` when that max is ≤ 1e-15) and the step ``min(100·h', h1)``, in the
    time units of the system. Uses ``Sn`` as scratch; three evaluations of f, counted by the step.
    A non-finite or failed trial falls back to ``h'`` (a failed ``f(y0)``: ``1e-6``; the first
    step then reports the failure).
    """
    n = S.shape[0]
    f0 = np.zeros(n)
    f1 = np.zeros(n)
    if _ask(step, MODE_RATE, cb, meth, 0.0, S, f0, p, work, iwork, info, sio) != _OK:
        return 1e-6
    d0 = sio[S_ERR] / tol
    d1 = norm(f0) / tol
    if not (np.isfinite(d0) and np.isfinite(d1)):
        return 1e-6
    htry = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    if _ask(step, MODE_EULER, cb, meth, htry, S, Sn, p, work, iwork, info, sio) != _OK:
        return htry
    if _ask(step, MODE_RATE, cb, meth, 0.0, Sn, f1, p, work, iwork, info, sio) != _OK:
        return htry
    for i in range(n):
        f1[i] -= f0[i]
    d2 = norm(f1) / (tol * htry)
    dmax = max(d1, d2)
    if not np.isfinite(dmax):
        return htry
    if dmax <= 1e-15:
        h1 = max(1e-6, htry * 1e-3)
    else:
        h1 = (0.01 / dmax) ** (1.0 / (order + 1.0))
    return min(100.0 * htry, h1)


def drive(step, observe, dense, cb, meth, ictl, fctl, k_stop, t_stop,
          S, Sn, Sd, p, work, iwork, red, acc, info, sio, obs, obs2, out, env, snaps):  # fmt: skip
    """Advance the trajectory in ``S`` until ``info[I_K] == k_stop`` accepted steps, the time
    reaches ``t_stop``, or the end.

    ``env`` (n_out + 1, 2 + n_obs) receives, for the output interval ending at each sample, the
    min and max of E − E0 and the max of every column with a MAX/MEANMAX reduction over every
    accepted step in the interval (and the sample itself): the envelope between point samples.

    Returns the status. On return ``S`` holds the current (last valid) state. See the module
    docstring for the time grid, the summaries and the failure convention.
    """
    adaptive = ictl[C_ADAPTIVE] != 0
    has_dense = ictl[C_HAS_DENSE] != 0
    n_out = ictl[C_N_OUT]
    stride = ictl[C_STRIDE]
    snap_every = ictl[C_SNAP_EVERY]
    n_check = ictl[C_N_CHECK]
    has_energy = ictl[C_HAS_ENERGY] != 0
    dt_out = fctl[F_DT_OUT]
    blowup = fctl[F_BLOWUP]
    T = n_out * dt_out
    n_total = ictl[C_N_STEPS]

    if info[I_INIT] == 0:
        for i in range(info.shape[0]):
            info[i] = 0
        info[I_FAIL_STEP] = -1
        info[I_FAIL_INDEX] = -1
        for i in range(acc.shape[0]):
            acc[i] = 0.0
        acc[A_FAIL_VALUE] = np.nan
        acc[A_HMIN] = np.inf
        acc[A_ERRMAX] = 0.0
        observe(cb, meth, S, p, work, True, obs)
        acc[A_E0] = obs[0] if has_energy else np.nan
        _init_reductions(obs, red, acc)
        h0 = fctl[F_H]
        if adaptive and not h0 > 0.0:
            if ictl[C_START_ORDER] > 0:
                h0 = starting_step(step, cb, meth, ictl[C_START_ORDER], fctl[F_TOL], S, Sn, p, work, iwork, info, sio)
            else:
                h0 = dt_out
        acc[A_H] = h0
        _put_sample(out, 0, obs, h0)
        _env_reset(acc, red)
        _env_add(acc, red, 0.0, obs)
        _env_close(acc, red, env, 0, has_energy)
        _put_snapshot(snaps, 0, S, n_check)
        info[I_NSAMP] = 1
        info[I_NSNAP] = 1
        info[I_INIT] = 1
        if not (_row_finite(out, 0) and _finite_prefix(S, n_check)):
            for c in range(out.shape[1]):
                out[0, c] = np.nan
            _fail(info, acc, _NONFINITE, 0, -1, obs[0])

    status = info[I_STATUS]
    E0 = acc[A_E0]
    guard = has_energy and blowup > 0.0 and E0 != 0.0 and np.isfinite(E0)
    swaps = 0
    while status == _OK and info[I_K] < k_stop and acc[A_T] < t_stop:
        k = info[I_K]
        t = acc[A_T]
        last = False
        t_next = T
        if adaptive:
            if not t < T or info[I_NSAMP] > n_out:
                break
            if k + info[I_REJECTED] >= ictl[C_MAX_STEPS]:
                status = _fail(info, acc, _NONCONV, k + 1, -1, t)
                break
            hcur = acc[A_H]
            if not has_dense:
                t_next = info[I_NSAMP] * dt_out
            last = hcur >= t_next - t
            if last and has_dense and ictl[C_HOLD] == 1:
                ictl[C_HOLD] = 2  # held before the step clipped to T: a longer run continues from here
                break
            hstep = t_next - t if last else hcur
        else:
            if k >= n_total:
                break
            hstep = fctl[F_H]
        sio[S_FAIL_INDEX] = -1.0
        sio[S_FAIL_VALUE] = np.nan
        sio[S_ERR] = 0.0
        st = step(cb, meth, hstep, S, Sn, p, work, iwork, info, sio)
        err = sio[S_ERR]
        if adaptive:
            # a non-finite trial (status, estimate or state) is rejected with the smallest factor,
            # up to MAX_NONFINITE_REJECTS in a row; after that it fails as below
            if st == _NONFINITE or not np.isfinite(err) or (st == _OK and not _finite_prefix(Sn, n_check)):
                acc[A_NFREJ] += 1.0
                hcut = fctl[F_FAC_MIN] * hstep
                if acc[A_NFREJ] <= MAX_NONFINITE_REJECTS and hcut >= fctl[F_H_MIN]:
                    info[I_REJECTED] += 1
                    acc[A_H] = hcut
                    continue
            else:
                acc[A_NFREJ] = 0.0
        if st != _OK:
            status = _fail(info, acc, st, k + 1, int(sio[S_FAIL_INDEX]), sio[S_FAIL_VALUE])
            break
        if adaptive:
            if not np.isfinite(err):
                status = _fail(info, acc, _NONFINITE, k + 1, -1, err)
                break
            if err > 0.0:
                fac = fctl[F_THETA] * (fctl[F_TOL] / err) ** fctl[F_ALPHA]
                fac = min(fctl[F_FAC_MAX], max(fctl[F_FAC_MIN], fac))
            else:
                fac = fctl[F_FAC_MAX]
            acc[A_H] = fac * hstep
            if not err < fctl[F_TOL]:
                info[I_REJECTED] += 1
                if acc[A_H] < fctl[F_H_MIN]:
                    status = _fail(info, acc, _NONCONV, k + 1, -1, acc[A_H])
                    break
                continue
            t_new = T if (last and has_dense) else (t_next if last else t + hstep)
        else:
            t_new = (k + 1) * hstep
        # observe the candidate state (every step); fixed step: full observation at samples
        at_sample = (not adaptive) and (k + 1) % stride == 0 and (k + 1) // stride <= n_out
        observe(cb, meth, Sn, p, work, at_sample, obs)
        if not (_obs_finite(obs, red, has_energy) and _finite_prefix(Sn, n_check)):
            status = _fail(info, acc, _NONFINITE, k + 1, -1, obs[0])
            break
        # samples (and snapshots) inside (t, t_new]; a non-finite sample fails the step
        s_first = info[I_NSAMP]
        s_next = s_first
        if adaptive:
            while s_next <= n_out and s_next * dt_out <= t_new:
                tk = s_next * dt_out
                if tk == t_new:
                    observe(cb, meth, Sn, p, work, True, obs2)
                    _put_snapshot(snaps, s_next // snap_every if s_next % snap_every == 0 else snaps.shape[0], Sn,
                                  n_check)  # fmt: skip
                else:
                    dense(cb, meth, (tk - t) / hstep, hstep, S, Sn, work, Sd)
                    observe(cb, meth, Sd, p, work, True, obs2)
                    _put_snapshot(snaps, s_next // snap_every if s_next % snap_every == 0 else snaps.shape[0], Sd,
                                  n_check)  # fmt: skip
                _put_sample(out, s_next, obs2, hstep)
                _env_add(acc, red, obs2[0] - E0, obs2)
                _env_close(acc, red, env, s_next, has_energy)
                s_next += 1
        elif at_sample:
            _put_sample(out, s_next, obs, hstep)
            if s_next % snap_every == 0:
                _put_snapshot(snaps, s_next // snap_every, Sn, n_check)
            s_next += 1
        bad = False
        for s in range(s_first, s_next):
            if not _row_finite(out, s):
                bad = True
        if bad:
            for s in range(s_first, s_next):
                for c in range(out.shape[1]):
                    out[s, c] = np.nan
                for c in range(env.shape[1]):
                    env[s, c] = np.nan
                if s % snap_every == 0 and s // snap_every < snaps.shape[0]:
                    for c in range(n_check):
                        snaps[s // snap_every, c] = np.nan
            status = _fail(info, acc, _NONFINITE, k + 1, -1, obs[0])
            break
        # accept
        S, Sn = Sn, S
        swaps += 1
        k += 1
        info[I_K] = k
        info[I_NSAMP] = s_next
        info[I_NSNAP] = (s_next - 1) // snap_every + 1
        acc[A_T] = t_new
        if hstep < acc[A_HMIN]:
            acc[A_HMIN] = hstep
        if hstep > acc[A_HMAX]:
            acc[A_HMAX] = hstep
        if adaptive and sio[S_ERR] > acc[A_ERRMAX]:
            acc[A_ERRMAX] = sio[S_ERR]
        _reduce(obs, red, acc, t_new)
        dE = obs[0] - E0
        if not adaptive or t_new > (s_next - 1) * dt_out:  # an adaptive step ending on a sample is in it already
            _env_add(acc, red, dE, obs)
        if at_sample:
            _env_close(acc, red, env, s_next - 1, has_energy)
        if has_energy:
            dE = _energy_stats(acc, obs[0], t_new)
            if guard and abs(dE) > blowup * abs(E0):
                status = _fail(info, acc, _BLOWUP, k, -1, dE)
                break
        if adaptive and acc[A_H] < fctl[F_H_MIN]:
            status = _fail(info, acc, _NONCONV, k + 1, -1, acc[A_H])
            break
    if swaps % 2 == 1:
        for i in range(S.shape[0]):
            Sn[i] = S[i]
    return status


#: process-wide state: str(callback type) -> the driver compiled for it (one compilation per process)
_DRIVERS: dict = {}
#: process-wide state: id(cb_type) -> (cb_type, driver): every stepper asks; str() of a type costs more
_BY_ID: dict = {}


def compile_driver(cb_type):
    """The driver compiled (or loaded from the on-disk cache) for a family's callback type."""
    hit = _BY_ID.get(id(cb_type))
    if hit is not None and hit[0] is cb_type:
        return hit[1]
    key = str(cb_type)
    if key not in _DRIVERS:
        _DRIVERS[key] = kjit(contract_types(cb_type)[3])(drive)
        register_driver(_DRIVERS[key], cb_type)
    _BY_ID[id(cb_type)] = (cb_type, _DRIVERS[key])
    return _DRIVERS[key]
