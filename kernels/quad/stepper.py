"""The quadrotor system on the group-generic Lie stepper: callbacks, a step wrapper that
turns a singular controller into its own failure, and the controlled system's observations.

The stepper of :mod:`geosweep.kernels.lie.stepper` is used as it is (RKMK, CF, Casas–Owren, ambient RK,
the adaptive pairs); this module only supplies ``cb`` = (f, F, diag, act, dexpinv, bracket)
and a ``StepperSpec`` with its own observation columns (no energy: the inputs do work, spec §6).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.core.layout import S_FAIL_INDEX, S_FAIL_VALUE
from geosweep.kernels.core.observables import Observable, columns, obs_names, reductions
from geosweep.kernels.core.trajectory import Reductions, StepperSpec
from geosweep.kernels.core.views import view2
from geosweep.kernels.lie.signatures import DIAG_SIG, FIELD_SIG
from geosweep.kernels.lie.stepper import _OBS_SIG, _STEP_SIG, P_HEAD, lie_step
from geosweep.kernels.lie.stepper import make_stepper as lie_make_stepper
from geosweep.kernels.lie.tableaux import Method
from geosweep.kernels.quad import model as qm
from geosweep.kernels.quad.group import quad_act, quad_bracket, quad_dexpinv
from geosweep.kernels.status import Status

N_ROWS = 8
NWC = 1 + qm.N_CL  # flag + closed-loop scratch
_SINGULAR = int(Status.CONTROLLER_SINGULAR)  # the control law is undefined: its own status
_NONFINITE = int(Status.NONFINITE)


@kjit(inline="always")
def _common_rows(y, p, work, cl, out):
    """What f and F share: the closed loop into ``cl`` (True if singular: the violated condition
    + 1 in ``work[0]``), ``out`` zeroed, the translational row (v, v̇) and ṫ = 1."""
    code = qm.closed_loop(y, p, cl)
    if code >= 0:
        work[0] = 1.0 + code
        return True
    for r in range(N_ROWS):
        for c in range(6):
            out[r, c] = 0.0
    for c in range(3):
        out[0, c] = y[0, 3 + c]
        out[0, 3 + c] = cl[qm.C_VDOT + c]
    out[7, 0] = 1.0
    return False


@kjit(inline="always")
def _finite_code(out):
    """0 if every entry of ``out`` is finite, else NONFINITE."""
    s = 0.0
    for r in range(N_ROWS):
        for c in range(6):
            s += out[r, c]
    return 0 if np.isfinite(s) else _NONFINITE


@kjit(FIELD_SIG)
def quad_f(y, p, work, out):
    """Algebra map f(P, t) (spec §3.4): (v, v̇, R1Ω1, Ω̇1, R2Ω2, Ω̇2, ω_i, q_i × ω̇_i, 1)."""
    cl = work[1 : 1 + qm.N_CL]
    if _common_rows(y, p, work, cl, out):
        return _SINGULAR
    for blk in range(2):
        r = 1 + 2 * blk
        Om = y[r + 1, 3:6]
        for i in range(3):  # spatial angular velocity R Ω (R rows: entries 3i..3i+2)
            s = 0.0
            for j in range(3):
                k = 3 * i + j
                s += y[r + k // 6, k % 6] * Om[j]
            out[r, i] = s
            out[r, 3 + i] = cl[qm.C_OM1DOT + 3 * blk + i]
    for i in range(2):
        q = y[5 + i, 0:3]
        wd = cl[qm.C_W1DOT + 3 * i : qm.C_W1DOT + 3 * i + 3]
        for c in range(3):
            out[5 + i, c] = y[5 + i, 3 + c]
        out[5 + i, 3] = q[1] * wd[2] - q[2] * wd[1]
        out[5 + i, 4] = q[2] * wd[0] - q[0] * wd[2]
        out[5 + i, 5] = q[0] * wd[1] - q[1] * wd[0]
    return _finite_code(out)


@kjit(FIELD_SIG)
def quad_F(y, p, work, out):
    """Ambient field (ẏ, v̇, Ṙ1 = R1Ω̂1, Ω̇1, …, q̇_i = ω_i × q_i, ω̇_i, ṫ = 1) on R⁴⁸."""
    cl = work[1 : 1 + qm.N_CL]
    if _common_rows(y, p, work, cl, out):
        return _SINGULAR
    for blk in range(2):
        r = 1 + 2 * blk
        O0, O1, O2 = y[r + 1, 3], y[r + 1, 4], y[r + 1, 5]
        for i in range(3):  # row i of R Ω̂: (R_i1 Ω2 − R_i2 Ω1, R_i2 Ω0 − R_i0 Ω2, R_i0 Ω1 − R_i1 Ω0)
            k = 3 * i
            a0 = y[r + k // 6, k % 6]
            a1 = y[r + (k + 1) // 6, (k + 1) % 6]
            a2 = y[r + (k + 2) // 6, (k + 2) % 6]
            d = (a1 * O2 - a2 * O1, a2 * O0 - a0 * O2, a0 * O1 - a1 * O0)
            for j in range(3):
                out[r + (k + j) // 6, (k + j) % 6] = d[j]
        for c in range(3):
            out[r + 1, 3 + c] = cl[qm.C_OM1DOT + 3 * blk + c]
    for i in range(2):
        q = y[5 + i, 0:3]
        w = y[5 + i, 3:6]
        out[5 + i, 0] = w[1] * q[2] - w[2] * q[1]
        out[5 + i, 1] = w[2] * q[0] - w[0] * q[2]
        out[5 + i, 2] = w[0] * q[1] - w[1] * q[0]
        for c in range(3):
            out[5 + i, 3 + c] = cl[qm.C_W1DOT + 3 * i + c]
    return _finite_code(out)


@kjit(DIAG_SIG)
def quad_diag(y, p, work, out):
    """Unused (the family observes with :func:`quad_observe`); the cb tuple needs a diag."""
    return 0.0


@kjit(_STEP_SIG)
def quad_step(cb, meth, h, S, Sn, p, work, iwork, info, sio):
    """``lie_step``; a singular controller (spec D17) at any stage ends the run with status
    ``controller_singular`` and the violated condition (0: |F_d|, 1: |s_d × F_d|, 2: |a|) as both
    ``fail_index`` and ``fail_value`` (the Lie stepper itself would report ``nonfinite``)."""
    work[0] = 0.0
    st = lie_step(cb, meth, h, S, Sn, p, work, iwork, info, sio)
    if st != 0 and work[0] > 0.0:
        sio[S_FAIL_INDEX] = work[0] - 1.0
        sio[S_FAIL_VALUE] = work[0] - 1.0
        return _SINGULAR
    return st


_R = Reductions


def _pair(name: str, reduction: int = Reductions.NONE) -> Observable:
    """One column per quadrotor/link (``name_1``, ``name_2``), each with ``reduction``."""
    return Observable(name, (reduction, reduction), columns=(f"{name}_1", f"{name}_2"))


def _momentum(i: int) -> Observable:
    """R_i J_i Ω_i (3 columns; max |· − ·(0)| over every step, DEVNORM3)."""
    return Observable(f"rot_mom_{i}", (_R.DEVNORM3, _R.NONE, _R.NONE), columns=tuple(f"rot_mom_{i}_{c}" for c in "xyz"))


#: The observation columns of the controlled system (spec §6) and their running reductions:
#: ``obs_names``, ``red`` and the column numbers ``quad_observe`` writes come from here (the
#: family attaches what a cell stores from them).
OBSERVABLES: tuple[Observable, ...] = (
    Observable("mech_energy"), Observable("e_y"), _pair("psi"), _pair("e_q"), _pair("thrust", _R.MAX),
    _pair("tension"), _pair("unit_err", _R.MAX), _pair("tang_err", _R.MAX), _pair("orth_err", _R.MAX),
    _pair("det_err", _R.MAX), _pair("rot_ke", _R.DEV), _momentum(1), _momentum(2), _pair("neg_tension", _R.MAX),
    Observable("singular"),
)  # fmt: skip
OBS_NAMES = obs_names(OBSERVABLES)
RED = reductions(OBSERVABLES)
_COL = columns(OBSERVABLES)
O_E_Y, O_PSI, O_EQ, O_THRUST, O_TENSION, O_UNIT, O_TANG, O_ORTH, O_DET = (
    _COL[c] for c in ("e_y", "psi_1", "e_q_1", "thrust_1", "tension_1", "unit_err_1", "tang_err_1", "orth_err_1",
                      "det_err_1")
)  # fmt: skip
O_ROT_KE, O_ROT_MOM, O_NEG_TENSION, O_SINGULAR = (
    _COL[c] for c in ("rot_ke_1", "rot_mom_1_x", "neg_tension_1", "singular")
)


@kjit(_OBS_SIG)
def quad_observe(cb, meth, S, p, work, full, obs):
    """The controlled system's observations (spec §6). Where the controller is singular the
    control-dependent columns (ψ, e_q, thrust, tension) are 0 and ``singular`` is 1."""
    pp = p[P_HEAD:]
    y = view2(S, 0, N_ROWS, 6)
    cl = work[1 : 1 + qm.N_CL]
    code = qm.closed_loop(y, pp, cl)
    ok = code < 0
    t = y[7, 0]
    yd = np.empty(3)
    yd1 = np.empty(3)
    yd2 = np.empty(3)
    qm.desired(t, yd, yd1, yd2)
    e2 = 0.0
    for c in range(3):
        e2 += (y[0, c] - yd[c]) ** 2
    my = pp[qm.P_MY]
    g = pp[qm.P_G]
    E = 0.5 * my * qm._dot(y[0, 3:6], y[0, 3:6]) - my * g * y[0, 2]
    for i in range(2):
        mi = pp[qm.P_M1 + i]
        Li = pp[qm.P_L1 + i]
        q = y[5 + i, 0:3]
        w = y[5 + i, 3:6]
        qd = np.empty(3)
        qm._cross(w, q, qd)
        vi = np.empty(3)
        for c in range(3):
            vi[c] = y[0, 3 + c] - Li * qd[c]
        E += 0.5 * mi * qm._dot(vi, vi) - mi * g * (y[0, 2] - Li * q[2])
        r = 1 + 2 * i
        R = np.empty((3, 3))
        for k in range(9):
            R[k // 3, k % 3] = y[r + k // 6, k % 6]
        Om = y[r + 1, 3:6]
        J = pp[qm.P_J1 + 3 * i : qm.P_J1 + 3 * i + 3]
        ke = 0.0
        JO = np.empty(3)
        for c in range(3):
            JO[c] = J[c] * Om[c]
            ke += 0.5 * Om[c] * JO[c]
        E += ke
        obs[O_ROT_KE + i] = ke
        for c in range(3):
            obs[O_ROT_MOM + 3 * i + c] = R[c, 0] * JO[0] + R[c, 1] * JO[1] + R[c, 2] * JO[2]
        orth = 0.0
        for a in range(3):
            for b in range(3):
                s = R[0, a] * R[0, b] + R[1, a] * R[1, b] + R[2, a] * R[2, b]
                if a == b:
                    s -= 1.0
                orth = max(orth, abs(s))
        obs[O_ORTH + i] = orth
        det = (
            R[0, 0] * (R[1, 1] * R[2, 2] - R[1, 2] * R[2, 1])
            - R[0, 1] * (R[1, 0] * R[2, 2] - R[1, 2] * R[2, 0])
            + R[0, 2] * (R[1, 0] * R[2, 1] - R[1, 1] * R[2, 0])
        )
        obs[O_DET + i] = abs(1.0 - det)
        obs[O_UNIT + i] = abs(1.0 - qm._dot(q, q))
        obs[O_TANG + i] = abs(qm._dot(q, w))
        if ok:
            qid = cl[qm.C_Q1D + 3 * i : qm.C_Q1D + 3 * i + 3]
            obs[O_PSI + i] = 1.0 - qm._dot(q, qid)
            eq = np.empty(3)
            qm._cross(qid, q, eq)
            obs[O_EQ + i] = np.sqrt(qm._dot(eq, eq))
            u = cl[qm.C_U1 + 3 * i : qm.C_U1 + 3 * i + 3]
            obs[O_THRUST + i] = np.sqrt(qm._dot(u, u))
            obs[O_TENSION + i] = cl[qm.C_TEN + i]
        else:
            obs[O_PSI + i] = 0.0
            obs[O_EQ + i] = 0.0
            obs[O_THRUST + i] = 0.0
            obs[O_TENSION + i] = 0.0
        obs[O_NEG_TENSION + i] = -obs[O_TENSION + i]
    obs[0] = E
    obs[O_E_Y] = np.sqrt(e2)
    obs[O_SINGULAR] = 0.0 if ok else 1.0


def make_stepper(params: np.ndarray, method: Method, adaptive: bool) -> StepperSpec:
    """The driver's view of the quadrotors with ``method`` (any tableau of :mod:`geosweep.kernels.lie.tableaux`):
    the Lie stepper's own spec (work layout, method record) with this module's step wrapper and
    observations, and no energy column."""
    base = lie_make_stepper(
        (quad_f, quad_F, quad_diag), params, N_ROWS, NWC, method, adaptive, (quad_act, quad_dexpinv, quad_bracket)
    )
    return dataclasses.replace(
        base, step=quad_step, observe=quad_observe, obs_names=OBS_NAMES, red=RED, has_energy=False
    )


def initial_state(y0: np.ndarray) -> np.ndarray:
    """Stepper state from the (8, 6) initial state (the first-stage cache empty)."""
    S = np.zeros(12 * N_ROWS + 1)
    S[: 6 * N_ROWS] = np.ascontiguousarray(y0, dtype=np.float64).ravel()
    return S
