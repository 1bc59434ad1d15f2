"""Explicit rescaled-Rodrigues variational integrators on SE(3)ⁿ (spec §2) with the trajectory loop in Numba.

Maps (``METHODS``; codes are stable), all with one force/torque evaluation per step (FSAL):

* ``v2_exact``   — (23): half-kick, drift with the exact increment
  ``Δα = 2h b/(1 + √(1 − h²|b|²))``, ``b = Ω + (h/2J)τ``; needs ``h²|b|² < 1`` (else DOMAIN,
  reason ``rotation_increment``). Second order.
* ``v2_newmark`` — (25): the same with ``Δα = h b``; no validity condition. Second order,
  production default.
* ``v1``         — (27): symplectic-Euler structure, ``Δα = h Ω_{k+1}``. First order; stored
  (x, v) are staggered by O(h).

Attitudes update as ``α_{k+1} = α_k ⊕ Δα`` (inertial increment, ``R_{k+1} = R(Δα) R_k``);
``den = 4 − α·Δα == 0``, non-finite or ``|α| > 1e12`` → CHART_SINGULAR. A failed step
keeps the last valid state; samples after it stay NaN (the caller pre-fills).
Energy blow-up (``|E − E0| > blowup·|E0|`` at a sample) ends the run with ENERGY_BLOWUP
(``fail_reason`` also tells the four spec §2.5 reasons apart).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kernels._jit import kjit
from kernels.linalg import all_finite as _finite
from kernels.status import Status
from kernels.torus.forces import N_AUX, pendulum_forces, torus_forces
from kernels.torus.model import SE3Model
from kernels.torus.neighbours import PAIRS_PER_BODY, build, needs_rebuild
from kernels.torus.rodrigues import ALPHA_MAX, compose

METHODS: dict[str, int] = {"v2_exact": 0, "v2_newmark": 1, "v1": 2}

#: Columns of the per-sample array written by the driver.
SAMPLE_FIELDS: tuple[str, ...] = (
    "KE_trans", "KE_rot", "U_0", "U_1", "U_2", "U_3", "U_4", "E_total",
    "P_x", "P_y", "P_z", "L_x", "L_y", "L_z", "Ls_x", "Ls_y", "Ls_z",
    "n_contact_pp", "n_contact_bonded_pp", "n_contact_wall",
    "max_abs_alpha", "max_bond_angle", "max_hb2", "qnorm_integrand",
    "rho_dot_Omega", "e3_dot_Omega", "rho_norm_error",
)
SUMMARY_FIELDS: tuple[str, ...] = (
    "E0", "max_rel_dE", "max_abs_dE", "drift_slope", "max_abs_alpha", "max_hb2", "max_bond_angle",
    "first_wall_t", "last_wall_t", "fail_value",
    "dP_max_x", "dP_max_y", "dP_max_z", "dL_max_x", "dL_max_y", "dL_max_z",
    "dP_free_x", "dP_free_y", "dP_free_z", "dL_free_x", "dL_free_y", "dL_free_z",
)
INFO_FIELDS: tuple[str, ...] = (
    "status", "fail_step", "fail_reason", "fail_index", "steps_done", "force_evals", "nbl_rebuilds",
)
FAIL_REASONS: dict[int, str] = {
    0: "none", 1: "rotation_increment", 2: "chart_singular", 3: "nonfinite", 4: "energy_blowup",
}
_NF = len(SAMPLE_FIELDS)
_NS = len(SUMMARY_FIELDS)
_NI = len(INFO_FIELDS)
_OK = int(Status.OK)
_DOMAIN = int(Status.DOMAIN)
_NONFINITE = int(Status.NONFINITE)
_CHART = int(Status.CHART_SINGULAR)
_BLOWUP = int(Status.ENERGY_BLOWUP)
_ALPHA2_MAX = ALPHA_MAX * ALPHA_MAX


@kjit
def _forces(kind, x, a, R, p, D, bonds, d0, L0, bpart, nbl, nb_start, nb_list, F, T, aux):
    if kind == 1:
        return pendulum_forces(x, a, R, p, F, T, aux)
    return torus_forces(x, a, R, p, D, bonds, d0, L0, bpart, nb_start, nb_list, nbl, F, T, aux)


@kjit
def _momenta(m, J, x, v, W, PL):
    """PL[0:3] = P = m Σ v; PL[3:6] = L = Σ (m x × v + J Ω); PL[6:9] = Σ J Ω."""
    for c in range(9):
        PL[c] = 0.0
    for i in range(x.shape[0]):
        PL[0] += m * v[i, 0]
        PL[1] += m * v[i, 1]
        PL[2] += m * v[i, 2]
        PL[3] += m * (x[i, 1] * v[i, 2] - x[i, 2] * v[i, 1]) + J * W[i, 0]
        PL[4] += m * (x[i, 2] * v[i, 0] - x[i, 0] * v[i, 2]) + J * W[i, 1]
        PL[5] += m * (x[i, 0] * v[i, 1] - x[i, 1] * v[i, 0]) + J * W[i, 2]
        PL[6] += J * W[i, 0]
        PL[7] += J * W[i, 1]
        PL[8] += J * W[i, 2]


@kjit
def _kinetic(m, J, v, W):
    kt = 0.0
    kr = 0.0
    for i in range(v.shape[0]):
        kt += v[i, 0] * v[i, 0] + v[i, 1] * v[i, 1] + v[i, 2] * v[i, 2]
        kr += W[i, 0] * W[i, 0] + W[i, 1] * W[i, 1] + W[i, 2] * W[i, 2]
    return 0.5 * m * kt, 0.5 * J * kr


@kjit
def _write_sample(row, method, h, m, J, x, v, a, W, T, R, aux, PL):
    """Fill one row of SAMPLE_FIELDS from the current (accepted) state."""
    kt, kr = _kinetic(m, J, v, W)
    row[0] = kt
    row[1] = kr
    U = 0.0
    for c in range(5):
        row[2 + c] = aux[c]
        U += aux[c]
    row[7] = kt + kr + U
    for c in range(9):
        row[8 + c] = PL[c]
    row[17] = aux[5]
    row[18] = aux[6]
    row[19] = aux[7]
    amax = 0.0
    hb2 = 0.0
    qn = 0.0
    cb = h / J if method == 2 else 0.5 * h / J
    for i in range(x.shape[0]):
        aa = a[i, 0] * a[i, 0] + a[i, 1] * a[i, 1] + a[i, 2] * a[i, 2]
        if aa > amax:
            amax = aa
        b0 = W[i, 0] + cb * T[i, 0]
        b1 = W[i, 1] + cb * T[i, 1]
        b2 = W[i, 2] + cb * T[i, 2]
        s = h * h * (b0 * b0 + b1 * b1 + b2 * b2)
        if s > hb2:
            hb2 = s
        th = 2.0 * np.arctan(0.5 * np.sqrt(aa))
        qn += (x[i, 0] * x[i, 0] + x[i, 1] * x[i, 1] + x[i, 2] * x[i, 2]
               + v[i, 0] * v[i, 0] + v[i, 1] * v[i, 1] + v[i, 2] * v[i, 2]
               + th * th + W[i, 0] * W[i, 0] + W[i, 1] * W[i, 1] + W[i, 2] * W[i, 2])
    row[20] = np.sqrt(amax)
    row[21] = aux[8]
    row[22] = hb2
    row[23] = qn
    # pendulum invariants of body 0 (ρ = R e3): ρ·Ω, e3·Ω, |ρ| − 1
    r0 = R[0, 0, 2]
    r1 = R[0, 1, 2]
    r2 = R[0, 2, 2]
    row[24] = r0 * W[0, 0] + r1 * W[0, 1] + r2 * W[0, 2]
    row[25] = W[0, 2]
    row[26] = np.sqrt(r0 * r0 + r1 * r1 + r2 * r2) - 1.0


@kjit
def _snapshot(snap, s, x, v, a, W):
    for i in range(x.shape[0]):
        for c in range(3):
            snap[s, i, c] = x[i, c]
            snap[s, i, 3 + c] = v[i, c]
            snap[s, i, 6 + c] = a[i, c]
            snap[s, i, 9 + c] = W[i, c]


@kjit
def run_se3(method, kind, h, nsteps, stride, m, J, blowup, p, D, bonds, d0, L0, bpart, use_nbl, skin,
            x, v, a, W, out, snap_steps, snap, summary, info):
    """Integrate ``nsteps`` steps in place on (x, v, α, Ω); returns the status code.

    ``out`` (nsteps//stride + 1, len(SAMPLE_FIELDS)) and ``snap`` (len(snap_steps), n, 12:
    x, v, α, Ω) must be pre-filled with NaN; ``snap_steps`` ascending step indices.
    ``summary``/``info`` follow SUMMARY_FIELDS/INFO_FIELDS. Nothing allocates in the loop.
    """
    n = x.shape[0]
    xn = np.empty((n, 3))
    vn = np.empty((n, 3))
    an = np.empty((n, 3))
    Wn = np.empty((n, 3))
    F = np.empty((n, 3))
    T = np.empty((n, 3))
    Fn = np.empty((n, 3))
    Tn = np.empty((n, 3))
    R = np.empty((n, 3, 3))
    aux = np.empty(N_AUX)
    PL = np.empty(9)
    PL0 = np.empty(9)
    PLprev = np.empty(9)
    PLref = np.empty(9)
    dmax = np.zeros(6)
    dfree = np.zeros(6)
    # neighbour-list workspace
    nn = n if use_nbl else 1
    xref = np.full((nn, 3), np.inf)
    head = np.empty(max(27, 8 * nn), dtype=np.int64)
    nxt = np.empty(nn, dtype=np.int64)
    cell = np.empty(nn, dtype=np.int64)
    tmp = np.empty(nn, dtype=np.int64)
    nb_start = np.zeros(nn + 1, dtype=np.int64)
    nb_list = np.empty(PAIRS_PER_BODY * nn, dtype=np.int64)
    rc = 0.0
    for i in range(D.shape[0]):
        rc = max(rc, D[i])
    rc += skin
    half_skin = 0.5 * skin
    rebuilds = 0

    for s_ in range(_NS):
        summary[s_] = np.nan
    for s_ in range(_NI):
        info[s_] = 0
    info[1] = -1
    info[3] = -1

    nbl = False
    if use_nbl:
        nbl = build(x, rc, xref, head, nxt, cell, nb_start, nb_list, tmp) == 0
        rebuilds += 1
    U = _forces(kind, x, a, R, p, D, bonds, d0, L0, bpart, nbl, nb_start, nb_list, F, T, aux)
    evals = 1
    kt, kr = _kinetic(m, J, v, W)
    E0 = kt + kr + U
    summary[0] = E0
    _momenta(m, J, x, v, W, PL0)
    for c in range(9):
        PLprev[c] = PL0[c]
        PLref[c] = PL0[c]
    status = _OK
    reason = 0
    fail_value = np.nan
    if not (np.isfinite(E0) and _finite(F) and _finite(T)):
        status = _NONFINITE
        reason = 3
        info[1] = 0
    isnap = 0
    nsnap = snap_steps.shape[0]
    if status == _OK:
        _write_sample(out[0], method, h, m, J, x, v, a, W, T, R, aux, PL0)
        while isnap < nsnap and snap_steps[isnap] <= 0:
            _snapshot(snap, isnap, x, v, a, W)
            isnap += 1
    wall_prev = aux[7]
    first_wall = np.nan
    last_wall = np.nan
    if wall_prev > 0.0:
        first_wall = 0.0
        last_wall = 0.0
    in_window = False
    max_abs = 0.0
    st = 0.0
    stt = 0.0
    se = 0.0
    ste = 0.0
    amax2 = 0.0
    hb2max = 0.0
    phimax = aux[8]
    for i in range(n):
        aa = a[i, 0] * a[i, 0] + a[i, 1] * a[i, 1] + a[i, 2] * a[i, 2]
        if aa > amax2:
            amax2 = aa
    k_done = 0
    hm2 = 0.5 * h / m
    hJ2 = 0.5 * h / J
    hh2m = 0.5 * h * h / m

    for k in range(1, nsteps + 1):
        if status != _OK:
            break
        st_ = _OK
        idx = -1
        # ---- position/attitude update (writes only the *n buffers)
        for i in range(n):
            if method == 2:
                for c in range(3):
                    vn[i, c] = v[i, c] + (h / m) * F[i, c]
                    Wn[i, c] = W[i, c] + (h / J) * T[i, c]
                    xn[i, c] = x[i, c] + h * vn[i, c]
                b0 = Wn[i, 0]
                b1 = Wn[i, 1]
                b2 = Wn[i, 2]
                sb = h * h * (b0 * b0 + b1 * b1 + b2 * b2)
                fac = h
            else:
                for c in range(3):
                    xn[i, c] = x[i, c] + h * v[i, c] + hh2m * F[i, c]
                b0 = W[i, 0] + hJ2 * T[i, 0]
                b1 = W[i, 1] + hJ2 * T[i, 1]
                b2 = W[i, 2] + hJ2 * T[i, 2]
                Wn[i, 0] = b0  # b kept in Wn until the second half-kick
                Wn[i, 1] = b1
                Wn[i, 2] = b2
                sb = h * h * (b0 * b0 + b1 * b1 + b2 * b2)
                if method == 0:
                    if not sb < 1.0:
                        st_ = _DOMAIN
                        reason = 1
                        idx = i
                        fail_value = sb
                        break
                    fac = 2.0 * h / (1.0 + np.sqrt(1.0 - sb))
                else:
                    fac = h
            if not np.isfinite(sb):
                st_ = _NONFINITE
                reason = 3
                idx = i
                fail_value = sb
                break
            if sb > hb2max:
                hb2max = sb
            c0, c1, c2, den = compose(a[i, 0], a[i, 1], a[i, 2], fac * b0, fac * b1, fac * b2)
            aa = c0 * c0 + c1 * c1 + c2 * c2
            if den == 0.0 or not aa <= _ALPHA2_MAX:
                st_ = _CHART
                reason = 2
                idx = i
                fail_value = np.sqrt(aa)
                break
            if aa > amax2:
                amax2 = aa
            an[i, 0] = c0
            an[i, 1] = c1
            an[i, 2] = c2
        if st_ == _OK:
            # ---- forces at (x_{k+1}, α_{k+1})
            if use_nbl:
                if needs_rebuild(xn, xref, half_skin):
                    nbl = build(xn, rc, xref, head, nxt, cell, nb_start, nb_list, tmp) == 0
                    rebuilds += 1
                    if not nbl:
                        xref[0, 0] = np.inf  # retry at the next evaluation
            U = _forces(kind, xn, an, R, p, D, bonds, d0, L0, bpart, nbl, nb_start, nb_list, Fn, Tn, aux)
            evals += 1
            if method != 2:
                for i in range(n):
                    for c in range(3):
                        vn[i, c] = v[i, c] + hm2 * (F[i, c] + Fn[i, c])
                        Wn[i, c] = Wn[i, c] + hJ2 * Tn[i, c]
            kt, kr = _kinetic(m, J, vn, Wn)
            E = kt + kr + U
            if not (np.isfinite(E) and _finite(xn) and _finite(Fn) and _finite(Tn)):
                st_ = _NONFINITE
                reason = 3
                fail_value = E
        if st_ != _OK:
            status = st_
            info[1] = k
            info[3] = idx
            break
        # ---- accept: swap buffers
        x, xn = xn, x
        v, vn = vn, v
        a, an = an, a
        W, Wn = Wn, W
        F, Fn = Fn, F
        T, Tn = Tn, T
        k_done = k
        t = k * h
        dE = E - E0
        adE = abs(dE)
        if adE > max_abs:
            max_abs = adE
        st += t
        stt += t * t
        se += dE
        ste += t * dE
        if aux[8] > phimax:
            phimax = aux[8]
        _momenta(m, J, x, v, W, PL)
        for c in range(6):
            dd = abs(PL[c] - PL0[c])
            if dd > dmax[c]:
                dmax[c] = dd
        wall_now = aux[7]
        if wall_now > 0.0:
            if not first_wall == first_wall:
                first_wall = t
            last_wall = t
        if wall_prev == 0.0 and wall_now == 0.0:
            if not in_window:
                for c in range(6):
                    PLref[c] = PLprev[c]
                in_window = True
            for c in range(6):
                dd = abs(PL[c] - PLref[c])
                if dd > dfree[c]:
                    dfree[c] = dd
        else:
            in_window = False
        wall_prev = wall_now
        for c in range(6):
            PLprev[c] = PL[c]
        if k % stride == 0:
            _write_sample(out[k // stride], method, h, m, J, x, v, a, W, T, R, aux, PL)
            if blowup > 0.0 and E0 != 0.0 and adE > blowup * abs(E0):
                status = _BLOWUP
                reason = 4
                info[1] = k
                fail_value = dE
        while isnap < nsnap and snap_steps[isnap] <= k:
            if snap_steps[isnap] == k:
                _snapshot(snap, isnap, x, v, a, W)
            isnap += 1

    # final (last valid) state into the caller's arrays
    if k_done % 2 == 1:
        xn[:, :] = x
        vn[:, :] = v
        an[:, :] = a
        Wn[:, :] = W
    cnt = k_done + 1
    summary[1] = max_abs / abs(E0) if E0 != 0.0 else np.nan
    summary[2] = max_abs
    den = cnt * stt - st * st
    summary[3] = (cnt * ste - st * se) / den if den > 0.0 else np.nan
    summary[4] = np.sqrt(amax2)
    summary[5] = hb2max
    summary[6] = phimax
    summary[7] = first_wall
    summary[8] = last_wall
    summary[9] = fail_value
    for c in range(6):
        summary[10 + c] = dmax[c]
        summary[16 + c] = dfree[c]
    info[0] = status
    info[2] = reason
    info[4] = k_done
    info[5] = evals
    info[6] = rebuilds
    return status


# --------------------------------------------------------------------------------------
# Python entry point
# --------------------------------------------------------------------------------------
@dataclass
class Trajectory:
    """Result of :func:`integrate`.

    ``time`` (K,) and ``samples`` (K, len(SAMPLE_FIELDS)) every ``stride`` steps (NaN after a
    failure); ``snap_time`` (S,) and ``snap`` (S, n, 12) = (x, v, α, Ω) snapshots; final (or
    last valid) state ``x, v, alpha, Omega``; ``summary``/``info`` dicts; ``wall_time`` in s.
    """

    time: np.ndarray
    samples: np.ndarray
    snap_time: np.ndarray
    snap: np.ndarray
    x: np.ndarray
    v: np.ndarray
    alpha: np.ndarray
    Omega: np.ndarray
    summary: dict[str, float]
    info: dict[str, int]
    wall_time: float

    def field(self, name: str) -> np.ndarray:
        """One sample column by name (see :data:`SAMPLE_FIELDS`)."""
        return self.samples[:, SAMPLE_FIELDS.index(name)]

    @property
    def P(self) -> np.ndarray:
        return self.samples[:, 8:11]

    @property
    def L(self) -> np.ndarray:
        return self.samples[:, 11:14]

    @property
    def status(self) -> Status:
        return Status(self.info["status"])

    @property
    def fail_reason(self) -> str:
        return FAIL_REASONS[self.info["fail_reason"]]


def snapshot_steps(h: float, n_steps: int, interval: float) -> np.ndarray:
    """Step indices nearest to t = 0, interval, 2·interval, … ≤ n_steps·h (int64)."""
    if interval <= 0:
        return np.zeros(1, dtype=np.int64)
    t_end = n_steps * h
    ns = int(np.floor(t_end / interval * (1.0 + 1e-12))) + 1
    steps = np.rint(np.arange(ns) * interval / h).astype(np.int64)
    return np.unique(np.clip(steps, 0, n_steps))


def integrate(
    model: SE3Model,
    method: str,
    h: float,
    n_steps: int,
    stride: int = 1,
    *,
    snapshot_interval: float = 1.0,
    blowup: float = 0.5,
    x0: np.ndarray | None = None,
    v0: np.ndarray | None = None,
    alpha0: np.ndarray | None = None,
    Omega0: np.ndarray | None = None,
) -> Trajectory:
    """Integrate ``model`` with ``method`` for ``n_steps`` steps of size ``h``.

    ``stride``: steps between samples; ``snapshot_interval``: time between full-state
    snapshots (≤ 0: only t = 0); ``blowup``: relative energy-error threshold (≤ 0 disables).
    Initial-state overrides default to the model's.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    if not h > 0 or n_steps < 0 or stride < 1:
        raise ValueError("need h > 0, n_steps >= 0, stride >= 1")

    def _state(a, default):
        return np.array(default if a is None else a, dtype=np.float64, order="C").reshape(model.n, 3)

    x = _state(x0, model.x0)
    v = _state(v0, model.v0)
    al = _state(alpha0, model.alpha0)
    W = _state(Omega0, model.Omega0)
    ns = n_steps // stride + 1
    out = np.full((ns, _NF), np.nan)
    ss = snapshot_steps(h, n_steps, snapshot_interval)
    snap = np.full((len(ss), model.n, 12), np.nan)
    summary = np.empty(_NS)
    info = np.empty(_NI, dtype=np.int64)
    t0 = time.perf_counter()
    run_se3(
        METHODS[method], int(model.kind), float(h), int(n_steps), int(stride), float(model.m),
        float(model.J), float(blowup), model.p, model.D, model.bonds, model.d0, model.L0, model.bpart,
        bool(model.use_nbl), float(model.skin), x, v, al, W, out, ss, snap, summary, info,
    )
    wall = time.perf_counter() - t0
    return Trajectory(
        time=np.arange(ns) * (stride * h), samples=out, snap_time=ss * h, snap=snap,
        x=x, v=v, alpha=al, Omega=W,
        summary=dict(zip(SUMMARY_FIELDS, summary.tolist())),
        info=dict(zip(INFO_FIELDS, info.tolist())),
        wall_time=wall,
    )


def evaluate(model: SE3Model, x: np.ndarray, alpha: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """One force evaluation at (x, α): ``(U, F, τ, aux)`` (all-pairs contacts; tests, diagnostics)."""
    x = np.array(x, dtype=np.float64, order="C").reshape(model.n, 3)
    a = np.array(alpha, dtype=np.float64, order="C").reshape(model.n, 3)
    F = np.empty_like(x)
    T = np.empty_like(x)
    R = np.empty((model.n, 3, 3))
    aux = np.empty(N_AUX)
    nb = np.zeros(1, dtype=np.int64)
    U = _forces(int(model.kind), x, a, R, model.p, model.D, model.bonds, model.d0, model.L0, model.bpart,
                False, nb, nb, F, T, aux)
    return float(U), F, T, aux
