"""The SE(3)ⁿ family on the shared driver: the explicit rescaled-Rodrigues maps (23), (25), (27).

Every map costs one force/torque evaluation per step (the forces at the new configuration are
kept in the state for the next step):

* ``v2_exact``   — (23): half-kick, drift with the exact increment
  ``Δα = 2h b/(1 + √(1 − h²|b|²))``, ``b = Ω + (h/2J)τ``; needs ``h²|b|² < 1`` (else DOMAIN).
* ``v2_newmark`` — (25): the same with ``Δα = h b``; no validity condition.
* ``v1``         — (27): symplectic-Euler structure, ``Δα = h Ω_{k+1}``; first order.

Attitudes update as ``α_{k+1} = α_k ⊕ Δα``; ``den = 4 − α·Δα == 0``, non-finite or
``|α| > ALPHA_MAX`` → CHART_SINGULAR.

State ``S``: x | v | α | Ω | F | τ (each 3n) | aux (potential parts, contact counts, max bond
angle) | P, L, L_spin of the state (9) | contact-free window: reference P, L (6), max drifts
(6), in-window flag | max h²|b|² of the last step | Verlet reference positions (3n) | list-ok
flag. Snapshots cover (x, v, α, Ω). ``cb`` carries the model's arrays (D, bonds, d0, L0,
bpart); the Verlet list itself is scratch (``iwork``), rebuilt from the stored reference
positions when a run resumes in a new process, so segments stay bitwise identical.
"""

from __future__ import annotations

import numpy as np
from numba import types

from geosweep.kernels._jit import kjit
from geosweep.kernels.core.driver import compile_driver
from geosweep.kernels.core.layout import I_EVALS, I_EXTRA, S_FAIL_INDEX, S_FAIL_VALUE
from geosweep.kernels.core.observables import (
    Derived,
    Max,
    MaxEach,
    Observable,
    RunValues,
    Samples,
    columns,
    obs_names,
    reductions,
)
from geosweep.kernels.core.signatures import F1, F2, contract_types
from geosweep.kernels.core.trajectory import Reductions, StepperSpec
from geosweep.kernels.core.views import view2, view3
from geosweep.kernels.linalg import all_finite as _finite
from geosweep.kernels.registry import Diagnostic
from geosweep.kernels.status import Status
from geosweep.kernels.torus.forces import N_AUX, pendulum_forces, torus_forces
from geosweep.kernels.torus.model import SYS_PENDULUM, SE3Model
from geosweep.kernels.torus.neighbours import PAIRS_PER_BODY, build, needs_rebuild
from geosweep.kernels.torus.rodrigues import ALPHA_MAX, compose, rot_into

METHODS: dict[str, int] = {"v2_exact": 0, "v2_newmark": 1, "v1": 2}
#: the model arrays passed as ``cb``: (D, bonds, d0, L0, bpart)
CB_TYPE = types.Tuple((F1, types.int64[:, ::1], F2, F1, types.int64[:, ::1]))
_STEP_SIG, _OBS_SIG, _DENSE_SIG, _ = contract_types(CB_TYPE)

# model vector header
P_KIND, P_M, P_J, P_NBL, P_SKIN, P_RC, P_N = range(7)
P_HEAD = 8

_E = "energy"
_C = ("time", "component")
_EVERY = "every step"


def _torus(model: SE3Model) -> bool:
    return model.kind != SYS_PENDULUM


def _pendulum(model: SE3Model) -> bool:
    return model.kind == SYS_PENDULUM


def _ts(name: str, units: str, long_name: str, rank: int = 0, when=None) -> Samples:
    """A time series stored from one column (``rank`` orders it among the family's series)."""
    return Samples(Diagnostic(name, ("time",), units, long_name), rank=rank, when=when)


def energy_error_38(t: np.ndarray, E: np.ndarray) -> float:
    """Paper (38) by the trapezoid rule over the finite samples (NaN if fewer than two)."""
    ok = np.isfinite(E)
    t = t[ok]
    E = E[ok]
    if len(t) < 2 or E[0] == 0.0:
        return float("nan")
    return float(np.sqrt(np.trapezoid((E - E[0]) ** 2, t)) / (abs(E[0]) * np.sqrt(t[-1] - t[0])))


def _energy_error_38(traj, model, integrator, obs) -> np.float64:
    return np.float64(energy_error_38(traj.sample_times, traj.samples("energy")))


def _steps_per_second(traj, model, integrator, obs) -> np.float64:
    wall = traj.wall_time
    return np.float64(traj.steps / wall if wall > 0 else np.nan)


def _drift_free(k: int):
    """The max drift of P (k = 0) or L (k = 1) within contact-free windows, kept in the state."""

    def value(traj, model, integrator, obs) -> np.ndarray:
        o = _offsets(model.n)["dfree"] + 3 * k
        return traj.S[o : o + 3].copy()

    return value


def _nbl_rebuilds(traj, model, integrator, obs) -> np.int64:
    return np.int64(traj.costs()["extra_counter"] + int(bool(model.use_nbl)))


# store order: shared series (rank 0), the system's series (1), shared summaries (3), torus summaries (4)
_T, _P = _torus, _pendulum
#: The observation columns, their running reductions over every step and what a cell stores from
#: them (for the torus, the pendulum or both: ``when``), declared once: ``obs_names``, ``red``, the
#: column numbers ``se3_observe`` writes, the store's diagnostics and the cell's values come from here.
OBSERVABLES: tuple[Observable, ...] = (
    Observable("energy"),
    RunValues("error_38", outputs=(Derived(Diagnostic(
        "energy_error_38", (), "1", "paper (38): [∫(E−E0)² dt]^½ / (|E0| √(t_N − t_0)), trapezoid rule",
        computed_over="samples",
    ), fn=_energy_error_38),)),
    Observable("KE_trans", outputs=(_ts("KE_trans", _E, "translational kinetic energy ½ m Σ|v_i|²", 1, _T),)),
    Observable("KE_rot", outputs=(_ts("KE_rot", _E, "rotational kinetic energy ½ J Σ|Ω_i|²"),)),
    Observable("U", columns=("U_0", "U_1", "U_2", "U_3", "U_4"), outputs=(  # the five energy terms (aux[0:5])
        Samples(Diagnostic("U_m", ("time",), _E, "bending/torsion energy U^m"), rank=1, when=_T, column=0),
        Samples(Diagnostic("U_a", ("time",), _E, "axial energy U^a"), rank=1, when=_T, column=1),
        Samples(Diagnostic("U_s", ("time",), _E, "shear energy U^s"), rank=1, when=_T, column=2),
        Samples(Diagnostic("U_pp", ("time",), _E, "particle-particle contact energy U^pp"), rank=1, when=_T, column=3),
        Samples(Diagnostic("U_pw", ("time",), _E, "particle-wall contact energy U^pw"), rank=1, when=_T, column=4),
        Samples(Diagnostic("U_grav", ("time",), _E, "gravitational energy −m g e3·R ρ0"), rank=1, when=_P, column=0),
    )),
    Observable("P", (Reductions.DEV,) * 3, columns=("P_x", "P_y", "P_z"), outputs=(
        Samples(Diagnostic("P", _C, "momentum", "linear momentum Σ m v_i"), rank=1, when=_T),
        MaxEach(Diagnostic("P_drift_max", ("component",), "momentum", "max_k |P_k − P_0| per component",
                           computed_over=_EVERY), rank=4, when=_T),
    )),
    Observable("L", (Reductions.DEV,) * 3, columns=("L_x", "L_y", "L_z"), outputs=(
        Samples(Diagnostic("L", _C, "angular momentum",
                           "angular momentum Σ (m x_i × v_i + J Ω_i) about the origin"), rank=1, when=_T),
        Samples(Diagnostic("L", _C, "angular momentum", "spin angular momentum J Ω (only e3·L is conserved)"),
                rank=1, when=_P),  # pendulum: x = v = 0, so L = J Ω
        MaxEach(Diagnostic("L_drift_max", ("component",), "angular momentum", "max_k |L_k − L_0| per component",
                           computed_over=_EVERY), rank=4, when=_T),
    )),
    Observable("L_spin", columns=("Ls_x", "Ls_y", "Ls_z"), outputs=(
        Samples(Diagnostic("L_spin", _C, "angular momentum", "spin angular momentum Σ J Ω_i (paper (34))"),
                rank=1, when=_T),
    )),
    Observable("n_contact_pp", outputs=(
        _ts("n_contact_pp", "1", "active non-bonded particle-particle contacts", 1, _T),
    )),
    Observable("n_contact_bonded_pp", outputs=(
        _ts("n_contact_bonded_pp", "1", "active contacts between bonded neighbours", 1, _T),
    )),
    Observable("n_contact_wall", Reductions.WHENPOS, (
        _ts("n_contact_wall", "1", "active particle-wall contacts", 1, _T),
        Max(Diagnostic("first_wall_contact_t", (), "time", "first time with a wall contact (NaN if none)",
                       computed_over=_EVERY), rank=4, when=_T, what="first"),
        Max(Diagnostic("last_wall_contact_t", (), "time", "last time with a wall contact (NaN if none)",
                       computed_over=_EVERY), rank=4, when=_T, what="last"),
    )),
    Observable("max_abs_alpha", Reductions.MAX, (
        _ts("max_abs_alpha", "1", "max_i |α_i| (chart margin; singular at ∞)"),
        Max(Diagnostic("max_abs_alpha_run", (), "1", "max over steps and bodies of |α_i|", computed_over=_EVERY)),
    )),
    Observable("max_bond_angle", Reductions.MAX, (
        _ts("max_bond_angle", "rad", "max over bonds of the relative rotation angle φ_ij", 1, _T),
        Max(Diagnostic("max_bond_angle_run", (), "rad", "max over steps of max φ_ij", computed_over=_EVERY),
            rank=4, when=_T),
    )),
    Observable("max_hb2", outputs=(_ts("max_hb2", "1", "max_i h²|b_i|² of the next step ((23) needs < 1)"),)),
    Observable("qnorm_integrand", outputs=(
        _ts("qnorm_integrand", "1", "Σ_i (|x_i|² + |v_i|² + |θ_i|² + |Ω_i|²) (paper (36) integrand)"),
    )),
    Observable("rho_dot_Omega", outputs=(_ts("rho_dot_Omega", "1 / time", "R ρ0 · Ω (conserved, = 0)", 1, _P),)),
    Observable("e3_dot_Omega", outputs=(_ts("e3_dot_Omega", "1 / time", "e3 · Ω (conserved)", 1, _P),)),
    Observable("rho_norm_error", outputs=(
        _ts("rho_norm_error", "1", "|R ρ0| − 1 (orthogonality check)", 1, _P),
    )),
    Observable("hb2_step", Reductions.MAX, (
        Max(Diagnostic("max_hb2_run", (), "1", "max over steps and bodies of h²|b_i|²", computed_over=_EVERY)),
    )),
    RunValues("timing", outputs=(
        Derived(Diagnostic("steps_per_second", (), "1 / s", "completed steps per wall-clock second"),
                fn=_steps_per_second),
        Derived(Diagnostic("P_drift_free", ("component",), "momentum",
                           "max drift of P within wall-contact-free windows", computed_over=_EVERY),
                rank=4, when=_T, fn=_drift_free(0)),
        Derived(Diagnostic("L_drift_free", ("component",), "angular momentum",
                           "max drift of L within contact-free windows", computed_over=_EVERY),
                rank=4, when=_T, fn=_drift_free(1)),
        Derived(Diagnostic("nbl_rebuilds", (), "1", "neighbour-list builds (0: all-pairs)", "int64"),
                rank=4, when=_T, fn=_nbl_rebuilds),
    )),
)  # fmt: skip
OBS_NAMES = obs_names(OBSERVABLES)
_COL = columns(OBSERVABLES)
O_KE_TRANS, O_KE_ROT, O_U, O_PL = _COL["KE_trans"], _COL["KE_rot"], _COL["U_0"], _COL["P_x"]  # PL: P, L, L_spin
O_PP, O_BONDED, O_WALL, O_ALPHA, O_BOND = (
    _COL[c] for c in ("n_contact_pp", "n_contact_bonded_pp", "n_contact_wall", "max_abs_alpha", "max_bond_angle")
)
O_HB2, O_QNORM, O_RHO_OMEGA, O_E3_OMEGA, O_RHO_NORM, O_HB2_STEP = (
    _COL[c] for c in ("max_hb2", "qnorm_integrand", "rho_dot_Omega", "e3_dot_Omega", "rho_norm_error", "hb2_step")
)

_OK = int(Status.OK)
_DOMAIN = int(Status.DOMAIN)
_NONFINITE = int(Status.NONFINITE)
_CHART = int(Status.CHART_SINGULAR)
_ALPHA2_MAX = ALPHA_MAX * ALPHA_MAX


def _offsets(n: int) -> dict[str, int]:
    names = [("x", 3 * n), ("v", 3 * n), ("a", 3 * n), ("W", 3 * n), ("F", 3 * n), ("T", 3 * n)]
    names += [("aux", N_AUX), ("PL", 9), ("PLref", 6), ("dfree", 6), ("inwin", 1), ("hb2", 1)]
    names += [("xref", 3 * n), ("nblok", 1), ("ke", 2), ("amax", 1)]
    off, out = 0, {}
    for k, size in names:
        out[k] = off
        off += size
    out["size"] = off
    return out


def state_size(n: int) -> int:
    return _offsets(n)["size"]


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
def _views(S, n):
    n3 = 3 * n
    x = view2(S, 0, n, 3)
    v = view2(S, n3, n, 3)
    a = view2(S, 2 * n3, n, 3)
    W = view2(S, 3 * n3, n, 3)
    F = view2(S, 4 * n3, n, 3)
    T = view2(S, 5 * n3, n, 3)
    o = 6 * n3
    aux = S[o : o + N_AUX]
    o += N_AUX
    PL = S[o : o + 9]
    PLref = S[o + 9 : o + 15]
    dfree = S[o + 15 : o + 21]
    o += 21
    xref = view2(S, o + 2, n, 3)
    return x, v, a, W, F, T, aux, PL, PLref, dfree, o, xref


@kjit
def _iwork_views(iwork, n):
    """(ok flag, head, nxt, cell, tmp, nb_start, nb_list) of the Verlet-list scratch."""
    nh = max(27, 8 * n)
    o = 1
    head = iwork[o : o + nh]
    o += nh
    nxt = iwork[o : o + n]
    o += n
    cell = iwork[o : o + n]
    o += n
    tmp = iwork[o : o + n]
    o += n
    nb_start = iwork[o : o + n + 1]
    o += n + 1
    nb_list = iwork[o : o + PAIRS_PER_BODY * n]
    return head, nxt, cell, tmp, nb_start, nb_list


def iwork_size(n: int) -> int:
    return 1 + max(27, 8 * n) + 4 * n + 1 + PAIRS_PER_BODY * n


@kjit
def _forces(kind, x, a, R, fp, cb, nbl, nb_start, nb_list, F, T, aux):
    D, bonds, d0, L0, bpart = cb
    if kind == 1:
        return pendulum_forces(x, a, R, fp, F, T, aux)
    return torus_forces(x, a, R, fp, D, bonds, d0, L0, bpart, nb_start, nb_list, nbl, F, T, aux)


@kjit(_STEP_SIG)
def se3_step(cb, meth, h, S, Sn, p, work, iwork, info, sio):
    n = int(p[P_N])
    kind = int(p[P_KIND])
    m = p[P_M]
    J = p[P_J]
    use_nbl = p[P_NBL] != 0.0
    fp = p[P_HEAD:]
    method = int(meth[0])
    x, v, a, W, F, T, aux, PL, PLref, dfree, o, xref = _views(S, n)
    xn, vn, an, Wn, Fn, Tn, auxn, PLn, PLrefn, dfreen, on, xrefn = _views(Sn, n)
    R = view3(work, 0, n, 3, 3)
    hm2 = 0.5 * h / m
    hJ2 = 0.5 * h / J
    hh2m = 0.5 * h * h / m
    hb2max = 0.0
    amax2 = 0.0
    # ---- position/attitude update (writes only Sn)
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
                    sio[S_FAIL_INDEX] = i
                    sio[S_FAIL_VALUE] = sb
                    return _DOMAIN
                fac = 2.0 * h / (1.0 + np.sqrt(1.0 - sb))
            else:
                fac = h
        if not np.isfinite(sb):
            sio[S_FAIL_INDEX] = i
            sio[S_FAIL_VALUE] = sb
            return _NONFINITE
        if sb > hb2max:
            hb2max = sb
        c0, c1, c2, den = compose(a[i, 0], a[i, 1], a[i, 2], fac * b0, fac * b1, fac * b2)
        aa = c0 * c0 + c1 * c1 + c2 * c2
        if den == 0.0 or not aa <= _ALPHA2_MAX:
            sio[S_FAIL_INDEX] = i
            sio[S_FAIL_VALUE] = np.sqrt(aa)
            return _CHART
        an[i, 0] = c0
        an[i, 1] = c1
        an[i, 2] = c2
        if aa > amax2:
            amax2 = aa
    # ---- forces at (x_{k+1}, α_{k+1}), with the Verlet list when enabled
    head, nxt, cell, tmp, nb_start, nb_list = _iwork_views(iwork, n)
    nbl = False
    if use_nbl:  # (without the list, the reference slots stay 0 in both state buffers)
        for i in range(n):
            for c in range(3):
                xrefn[i, c] = xref[i, c]
        Sn[on + 2 + 3 * n] = S[o + 2 + 3 * n]
        ok = Sn[on + 2 + 3 * n] != 0.0
        if ok and iwork[0] == 0:  # a resumed run: rebuild the list of the last build
            xb = view2(work, 9 * n, n, 3)
            for i in range(n):
                for c in range(3):
                    xb[i, c] = xrefn[i, c]
            build(xb, p[P_RC], xrefn, head, nxt, cell, nb_start, nb_list, tmp)
            iwork[0] = 1
        if needs_rebuild(xn, xrefn, 0.5 * p[P_SKIN]):
            ok = build(xn, p[P_RC], xrefn, head, nxt, cell, nb_start, nb_list, tmp) == 0
            info[I_EXTRA] += 1
            iwork[0] = 1
            if not ok:
                xrefn[0, 0] = np.inf  # retry at the next evaluation
        Sn[on + 2 + 3 * n] = 1.0 if ok else 0.0
        nbl = ok
    U = _forces(kind, xn, an, R, fp, cb, nbl, nb_start, nb_list, Fn, Tn, auxn)
    info[I_EVALS] += 1
    if method != 2:
        for i in range(n):
            for c in range(3):
                vn[i, c] = v[i, c] + hm2 * (F[i, c] + Fn[i, c])
                Wn[i, c] = Wn[i, c] + hJ2 * Tn[i, c]
    e = on + 3 + 3 * n  # kinetic energies and max |α|² of the new state (read by observe)
    Sn[e], Sn[e + 1] = _kinetic(m, J, vn, Wn)
    Sn[e + 2] = amax2
    if not (np.isfinite(U) and _finite(Fn) and _finite(Tn)):
        sio[S_FAIL_VALUE] = U
        return _NONFINITE
    # ---- momenta and the contact-free windows (drift of P, L away from the wall)
    _momenta(m, J, xn, vn, Wn, PLn)
    inwin = S[o] != 0.0
    for c in range(6):
        PLrefn[c] = PLref[c]
        dfreen[c] = dfree[c]
    if aux[7] == 0.0 and auxn[7] == 0.0:
        if not inwin:
            for c in range(6):
                PLrefn[c] = PL[c]
            inwin = True
        for c in range(6):
            dd = abs(PLn[c] - PLrefn[c])
            if dd > dfreen[c]:
                dfreen[c] = dd
    else:
        inwin = False
    Sn[on] = 1.0 if inwin else 0.0
    Sn[on + 1] = hb2max
    return _OK


@kjit(_OBS_SIG)
def se3_observe(cb, meth, S, p, work, full, obs):
    n = int(p[P_N])
    J = p[P_J]
    x, v, a, W, F, T, aux, PL, PLref, dfree, o, xref = _views(S, n)
    e = o + 3 + 3 * n
    kt = S[e]
    kr = S[e + 1]
    U = 0.0
    for c in range(5):
        obs[O_U + c] = aux[c]
        U += aux[c]
    obs[0] = kt + kr + U
    obs[O_KE_TRANS] = kt
    obs[O_KE_ROT] = kr
    for c in range(9):
        obs[O_PL + c] = PL[c]
    obs[O_PP] = aux[5]
    obs[O_BONDED] = aux[6]
    obs[O_WALL] = aux[7]
    obs[O_ALPHA] = np.sqrt(S[e + 2])
    obs[O_BOND] = aux[8]
    obs[O_HB2_STEP] = S[o + 1]
    if not full:
        return
    h = meth[1]
    cb_ = h / J if int(meth[0]) == 2 else 0.5 * h / J
    hb2 = 0.0
    qn = 0.0
    for i in range(n):
        aa = a[i, 0] * a[i, 0] + a[i, 1] * a[i, 1] + a[i, 2] * a[i, 2]
        b0 = W[i, 0] + cb_ * T[i, 0]
        b1 = W[i, 1] + cb_ * T[i, 1]
        b2 = W[i, 2] + cb_ * T[i, 2]
        s = h * h * (b0 * b0 + b1 * b1 + b2 * b2)
        if s > hb2:
            hb2 = s
        th = 2.0 * np.arctan(0.5 * np.sqrt(aa))
        qn += (x[i, 0] * x[i, 0] + x[i, 1] * x[i, 1] + x[i, 2] * x[i, 2]
               + v[i, 0] * v[i, 0] + v[i, 1] * v[i, 1] + v[i, 2] * v[i, 2]
               + th * th + W[i, 0] * W[i, 0] + W[i, 1] * W[i, 1] + W[i, 2] * W[i, 2])  # fmt: skip
    obs[O_HB2] = hb2
    obs[O_QNORM] = qn
    # pendulum invariants of body 0 (ρ = R e3): ρ·Ω, e3·Ω, |ρ| − 1
    R = view3(work, 12 * n, 1, 3, 3)
    rot_into(a[0, 0], a[0, 1], a[0, 2], R, 0)
    r0 = R[0, 0, 2]
    r1 = R[0, 1, 2]
    r2 = R[0, 2, 2]
    obs[O_RHO_OMEGA] = r0 * W[0, 0] + r1 * W[0, 1] + r2 * W[0, 2]
    obs[O_E3_OMEGA] = W[0, 2]
    obs[O_RHO_NORM] = np.sqrt(r0 * r0 + r1 * r1 + r2 * r2) - 1.0


@kjit(_DENSE_SIG)
def se3_no_dense(cb, meth, theta, h, S, Sn, work, Sd):
    """The SE(3)ⁿ maps are fixed-step: no dense output."""
    for i in range(Sd.shape[0]):
        Sd[i] = np.nan


@kjit
def _init(cb, p, S, iwork, work):
    """Forces, momenta and (optionally) the first Verlet list at the initial state; returns builds."""
    n = int(p[P_N])
    x, v, a, W, F, T, aux, PL, PLref, dfree, o, xref = _views(S, n)
    head, nxt, cell, tmp, nb_start, nb_list = _iwork_views(iwork, n)
    R = view3(work, 0, n, 3, 3)
    nbl = False
    builds = 0
    for i in range(n):
        for c in range(3):
            xref[i, c] = np.inf if p[P_NBL] != 0.0 else 0.0
    if p[P_NBL] != 0.0:
        nbl = build(x, p[P_RC], xref, head, nxt, cell, nb_start, nb_list, tmp) == 0
        builds = 1
        iwork[0] = 1
    S[o + 2 + 3 * n] = 1.0 if nbl else 0.0
    _forces(int(p[P_KIND]), x, a, R, p[P_HEAD:], cb, nbl, nb_start, nb_list, F, T, aux)
    _momenta(p[P_M], p[P_J], x, v, W, PL)
    for c in range(6):
        PLref[c] = PL[c]
        dfree[c] = 0.0
    S[o] = 0.0
    S[o + 1] = 0.0
    e = o + 3 + 3 * n
    S[e], S[e + 1] = _kinetic(p[P_M], p[P_J], v, W)
    amax = 0.0
    for i in range(n):
        aa = a[i, 0] * a[i, 0] + a[i, 1] * a[i, 1] + a[i, 2] * a[i, 2]
        if aa > amax:
            amax = aa
    S[e + 2] = amax
    return builds


def model_vector(model: SE3Model) -> np.ndarray:
    head = np.zeros(P_HEAD)
    head[P_KIND] = model.kind
    head[P_M] = model.m
    head[P_J] = model.J
    head[P_NBL] = float(bool(model.use_nbl))
    head[P_SKIN] = model.skin
    head[P_RC] = (float(np.max(model.D)) if len(model.D) else 0.0) + model.skin
    head[P_N] = model.n
    return np.ascontiguousarray(np.concatenate([head, model.p]))


def model_arrays(model: SE3Model) -> tuple:
    c = np.ascontiguousarray
    return (
        c(model.D, dtype=np.float64),
        c(model.bonds, dtype=np.int64).reshape(-1, 2),
        c(model.d0, dtype=np.float64).reshape(-1, 3),
        c(model.L0, dtype=np.float64),
        c(model.bpart, dtype=np.int64).reshape(-1, 2),
    )


def make_stepper(model: SE3Model, method: str, h: float) -> StepperSpec:
    """The driver's view of ``model`` integrated with map ``method`` at step ``h``."""
    n = model.n
    red = reductions(OBSERVABLES, model)
    return StepperSpec(
        drive=compile_driver(CB_TYPE),
        step=se3_step,
        observe=se3_observe,
        dense=se3_no_dense,
        cb=model_arrays(model),
        meth=np.array([float(METHODS[method]), float(h)]),
        p=model_vector(model),
        work_size=12 * n + 9,
        iwork_size=iwork_size(n),
        state_size=state_size(n),
        n_check=12 * n,
        obs_names=OBS_NAMES,
        red=red,
        extra={"evals0": 1},
    )


def initial_state(stepper: StepperSpec, x, v, alpha, Omega) -> tuple[np.ndarray, int]:
    """Flat initial state (forces, momenta, first Verlet list evaluated); also the builds done."""
    n = int(stepper.p[P_N])
    S = np.zeros(stepper.state_size)
    for k, arr in enumerate((x, v, alpha, Omega)):
        S[3 * n * k : 3 * n * (k + 1)] = np.asarray(arr, dtype=np.float64).ravel()
    iwork = np.zeros(stepper.iwork_size, dtype=np.int64)
    work = np.zeros(stepper.work_size)
    builds = _init(stepper.cb, stepper.p, S, iwork, work)
    return S, int(builds)
