"""The ``quad`` family: two quadrotors carrying a point mass (001 §6, spec heavy_top_quadrotors §3–6).

A family of its own: the state is a product R⁶ × (SO(3) × R³)² × (TS²)² (plus the time), acted
on by R⁶ × (SO(3) × R³)² × SE(3)² (:mod:`kernels.quad.group`); it is controlled, so it stores
tracking errors, controls, tensions and constraint residuals instead of energy errors (the
``energy`` column is the mechanical energy, which the inputs change; its error fields are NaN).

Integrators: the Lie group methods of :mod:`kernels.lie.tableaux` through the shared Lie
stepper (``quad_*``), the classical RK4 and DOPRI5 on the ambient R⁴² as baselines. Stored
state: the spec's 42-vector ``[y, v, vec R1, Ω1, vec R2, Ω2, q1, ω1, q2, ω2]`` (one body).
"""

from __future__ import annotations

import numpy as np

from kernels.core.cells import (
    ADAPTIVE_PARAMS,
    COMMON_DIAGNOSTICS,
    REFERENCE_PARAMS,
    common_values,
    finish,
    make_run,
    start_trajectory,
)
from kernels.core.trajectory import Trajectory
from kernels.lie import tableaux
from kernels.lie.methods import LieAction
from kernels.lie.stepper import dense_evals
from kernels.quad import stepper as qs
from kernels.quad.model import pack_params
from kernels.registry import CellResult, Diagnostic, FamilyDef, Param, RunRequest, SystemDef

_EVERY = "every step"
STATE_LABELS = (
    "y_x", "y_y", "y_z", "v_x", "v_y", "v_z",
    *(f"R1_{i}{j}" for i in (1, 2, 3) for j in (1, 2, 3)), "Omega1_x", "Omega1_y", "Omega1_z",
    *(f"R2_{i}{j}" for i in (1, 2, 3) for j in (1, 2, 3)), "Omega2_x", "Omega2_y", "Omega2_z",
    "q1_x", "q1_y", "q1_z", "w1_x", "w1_y", "w1_z", "q2_x", "q2_y", "q2_z", "w2_x", "w2_y", "w2_z",
)  # fmt: skip
ATTITUDE_MODES = ("free_tumble", "free_rest", "code_const")
INITIAL = ("paper", "controller_singular")

OWN = (
    Diagnostic("e_y", ("time",), "m", "tracking error |y − y_d|"),
    Diagnostic("psi", ("time", "link"), "1", "link direction error Ψ_i = 1 − q_i·q_id (link 0, 1 = quadrotor 1, 2)"),
    Diagnostic("e_q", ("time", "link"), "1", "|q_id × q_i|"),
    Diagnostic("thrust", ("time", "link"), "N", "|u_i|"),
    Diagnostic("tension", ("time", "link"), "N", "link tension t_i (> 0: in tension)"),
    Diagnostic("unit_err", ("time", "link"), "1", "|1 − q_i·q_i|"),
    Diagnostic("tang_err", ("time", "link"), "1 / s", "|q_i·ω_i|"),
    Diagnostic("orth_err", ("time", "link"), "1", "max|R_iᵀR_i − I| (quadrotor i)"),
    Diagnostic("det_err", ("time", "link"), "1", "|1 − det R_i| (quadrotor i)"),
    Diagnostic("rot_ke", ("time", "link"), "J", "½ Ω_iᵀJ_iΩ_i (conserved in the free attitude modes)"),
    Diagnostic("rot_mom", ("time", "link", "component"), "kg m^2 / s", "R_i J_i Ω_i (conserved in free modes)"),
    Diagnostic("e_y_final", (), "m", "|y(T) − y_d(T)|"),
    Diagnostic("psi_final", ("link",), "1", "Ψ_i(T)"),
    Diagnostic("max_thrust", ("link",), "N", "max |u_i| over every step", computed_over=_EVERY),
    Diagnostic("max_thrust_time", ("link",), "s", "time of the sampled max |u_i|", computed_over="samples"),
    Diagnostic("min_tension", ("link",), "N", "min t_i over every step", computed_over=_EVERY),
    Diagnostic("min_tension_time", ("link",), "s", "time of the sampled min t_i", computed_over="samples"),
    Diagnostic("max_unit_err", ("link",), "1", "max |1 − q_i·q_i|", computed_over=_EVERY),
    Diagnostic("max_tang_err", ("link",), "1 / s", "max |q_i·ω_i|", computed_over=_EVERY),
    Diagnostic("max_orth_err", ("link",), "1", "max |R_iᵀR_i − I|", computed_over=_EVERY),
    Diagnostic("max_det_err", ("link",), "1", "max |1 − det R_i|", computed_over=_EVERY),
    Diagnostic("max_rot_ke_drift", ("link",), "J", "max |rot_ke − rot_ke(0)|", computed_over=_EVERY),
    Diagnostic("max_rot_mom_drift", ("link",), "kg m^2 / s", "max |rot_mom − rot_mom(0)|", computed_over=_EVERY),
    Diagnostic(
        "global_error", ("block",), "1",
        "‖·‖₂ of y(T) − y_ref(T) (DOP853, rtol = atol = ref_tol); block 0: the whole 42-vector, 1: (y, v), "
        "2: (R_i, Ω_i), 3: (q_i, ω_i); NaN unless option global_error is true",
    ),
)  # fmt: skip
BLOCKS = ("all", "y_v", "R_Omega", "q_w")


def diagnostics(model) -> tuple[Diagnostic, ...]:
    return COMMON_DIAGNOSTICS + OWN


def sizes(model) -> dict[str, int]:
    return {"body": 1, "state": 42, "link": 2, "component": 3, "block": len(BLOCKS)}


class QuadModel:
    """Parameters (``params``, see :mod:`kernels.quad.model`) and the (8, 6) initial state ``y0``."""

    def __init__(self, params: np.ndarray, y0: np.ndarray, attitude_mode: str) -> None:
        self.params = params
        self.y0 = np.ascontiguousarray(y0, dtype=np.float64)
        self.attitude_mode = attitude_mode
        self.name = "two_quadrotors"

    def rhs(self, t: float, x: np.ndarray) -> np.ndarray:
        """Ambient field on the 42-vector (for SciPy references)."""
        y = np.zeros((8, 6))
        y[:7] = x.reshape(7, 6)
        y[7, 0] = t
        out = np.empty((8, 6))
        work = np.zeros(qs.NWC)
        if qs.quad_F(y, self.params, work, out) != 0:
            raise FloatingPointError("controller singular or non-finite field")
        return out[:7].ravel().copy()

    def reference(self, T: float, tol: float = 1e-13) -> np.ndarray:
        from scipy.integrate import solve_ivp

        sol = solve_ivp(self.rhs, (0.0, T), self.y0[:7].ravel(), method="DOP853", rtol=tol, atol=tol)
        if not sol.success:
            raise RuntimeError(f"reference integration failed: {sol.message}")
        return sol.y[:, -1]


def two_quadrotors(
    attitude_mode: str = "free_tumble",
    initial: str = "paper",
    m_y: float = 0.4,
    m1: float = 0.755,
    m2: float = 0.755,
    L1: float = 0.6,
    L2: float = 0.8,
    k_y: float = 12.0,
    k_v: float = 5.0,
    k_q: float = 16.0,
    k_w: float = 5.0,
    g: float = 9.81,
) -> QuadModel:
    """Spec D7–D14: e3 down, J_i = diag(0.0820, 0.0845, 0.1377) kg m², r_1d = (sin 30°, 0, cos 30°),
    r_2d = (−sin 30°, 0, cos 30°), s_d = −e2; y(0) = (−2, 0, 0), q_1(0) = (sin 80°, 0, cos 80°),
    q_2(0) = (−sin 80°, 0, cos 80°), R_i(0) = I; attitude mode as in D13. ``initial =
    "controller_singular"`` starts at y(0) = y_d(0) + (ÿ_d(0) − g e3)/k_y, v(0) = ẏ_d(0), where
    F_d(0) = 0 (the failure path of spec §10 item 11)."""
    if attitude_mode not in ATTITUDE_MODES:
        raise ValueError(f"attitude_mode must be one of {list(ATTITUDE_MODES)}")
    J = np.array([0.0820, 0.0845, 0.1377])
    s30, c30 = np.sin(np.pi / 6), np.cos(np.pi / 6)
    Mc = np.ones(3) if attitude_mode == "code_const" else np.zeros(3)
    p = pack_params(m_y, m1, m2, L1, L2, J, J, g, k_y, k_v, k_q, k_w, [s30, 0.0, c30], [-s30, 0.0, c30],
                    [0.0, -1.0, 0.0], Mc, Mc)  # fmt: skip
    y0 = np.zeros((8, 6))
    if initial == "paper":
        y0[0, 0:3] = (-2.0, 0.0, 0.0)
    elif initial == "controller_singular":
        y0[0, 0:3] = np.array([-2.5, 0.0, 6.25 - 7.0]) + (np.array([0.0, 0.0, 2.0 - g])) / k_y
        y0[0, 3:6] = (1.0, 0.0, -5.0)
    else:
        raise ValueError(f"initial must be one of {list(INITIAL)}")
    for r in (1, 3):  # R_i = I: rows (1, 0, 0, 0, 1, 0) and (0, 0, 1, Ω)
        y0[r] = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
        y0[r + 1, 0:3] = (0.0, 0.0, 1.0)
    if attitude_mode == "free_tumble":
        y0[2, 3:6] = (0.5, -0.3, 1.0)
        y0[4, 3:6] = (-0.4, 0.6, -0.8)
    s80, c80 = np.sin(np.deg2rad(80.0)), np.cos(np.deg2rad(80.0))
    y0[5, 0:3] = (s80, 0.0, c80)
    y0[6, 0:3] = (-s80, 0.0, c80)
    return QuadModel(p, y0, attitude_mode)


def start(model: QuadModel, integrator: str, request: RunRequest, options: dict) -> Trajectory:
    if integrator not in METHODS:
        raise ValueError(f"unknown quadrotor integrator {integrator!r}; choose from {sorted(METHODS)}")
    method = METHODS[integrator]
    if method.adaptive != request.adaptive:
        raise ValueError(f"{integrator} needs a request with {'tol' if method.adaptive else 'h'}")
    sp = qs.make_stepper(model.params, method, method.adaptive)
    options = {"blowup": 0.0, **LIE.options(integrator, options)}
    return start_trajectory(sp, qs.initial_state(model.y0), request, options)


def integrate(model: QuadModel, integrator: str, T: float, n_steps: int, **options) -> Trajectory:
    """Python entry point: ``n_steps`` equal steps on [0, T], every step sampled."""
    h = T / n_steps
    traj = start(model, integrator, RunRequest(T=T, dt_out=h, h=h), options)
    traj.advance()
    return traj


def _pair(traj: Trajectory, name: str) -> np.ndarray:
    return np.stack([traj.samples(f"{name}_1"), traj.samples(f"{name}_2")], axis=1)


_REFS: dict[tuple, np.ndarray] = {}


def collect(model: QuadModel, integrator: str, traj: Trajectory, options: dict | None = None) -> CellResult:
    options = options or {}
    values = common_values(traj, lambda x: np.ascontiguousarray(x[:42])[None, :])
    t = traj.sample_times
    thrust = _pair(traj, "thrust")
    tension = _pair(traj, "tension")
    rot_mom = np.stack([
        np.stack([traj.samples(f"rot_mom_{i}_{c}") for c in "xyz"], axis=1) for i in (1, 2)
    ], axis=1)  # fmt: skip
    gerr = np.full(len(BLOCKS), np.nan)
    if bool(options.get("global_error", False)) and traj.status == 0:
        tol = float(options.get("ref_tol", 1e-13))
        key = (model.params.tobytes(), model.y0.tobytes(), traj.time, tol)
        if key not in _REFS:
            _REFS.clear() if len(_REFS) > 16 else None
            _REFS[key] = model.reference(traj.time, tol)
        d = traj.S[:42] - _REFS[key]
        gerr = np.array([np.linalg.norm(d), np.linalg.norm(d[0:6]), np.linalg.norm(d[6:30]), np.linalg.norm(d[30:42])])

    def _argt(x, fn):
        ok = np.isfinite(x).all(axis=1)
        if not ok.any():
            return np.full(2, np.nan)
        return t[ok][fn(x[ok], axis=0)]

    finite = np.flatnonzero(np.isfinite(traj.samples("e_y")))
    last = int(finite[-1]) if len(finite) else 0
    values.update(
        e_y=traj.samples("e_y").copy(),
        psi=_pair(traj, "psi"),
        e_q=_pair(traj, "e_q"),
        thrust=thrust,
        tension=tension,
        unit_err=_pair(traj, "unit_err"),
        tang_err=_pair(traj, "tang_err"),
        orth_err=_pair(traj, "orth_err"),
        det_err=_pair(traj, "det_err"),
        rot_ke=_pair(traj, "rot_ke"),
        rot_mom=rot_mom,
        e_y_final=np.float64(traj.samples("e_y")[last]),
        psi_final=_pair(traj, "psi")[last].copy(),
        max_thrust=np.array([traj.reduced("thrust_1"), traj.reduced("thrust_2")]),
        max_thrust_time=_argt(thrust, np.argmax),
        min_tension=-np.array([traj.reduced("neg_tension_1"), traj.reduced("neg_tension_2")]),
        min_tension_time=_argt(tension, np.argmin),
        max_unit_err=np.array([traj.reduced("unit_err_1"), traj.reduced("unit_err_2")]),
        max_tang_err=np.array([traj.reduced("tang_err_1"), traj.reduced("tang_err_2")]),
        max_orth_err=np.array([traj.reduced("orth_err_1"), traj.reduced("orth_err_2")]),
        max_det_err=np.array([traj.reduced("det_err_1"), traj.reduced("det_err_2")]),
        max_rot_ke_drift=np.array([traj.reduced("rot_ke_1"), traj.reduced("rot_ke_2")]),
        max_rot_mom_drift=np.array([traj.reduced("rot_mom_1_x"), traj.reduced("rot_mom_2_x")]),
        global_error=gerr,
    )
    _count_dense_evals(values, traj)
    return finish(traj, values)


def _count_dense_evals(values: dict, traj: Trajectory) -> None:
    """DOP853's dense-only stages (evaluated in steps that contain a sample) count in ``f_evals``."""
    extra = dense_evals(traj.S) if True else 0
    if extra:
        values["f_evals"] = np.int64(values["f_evals"] + extra)


run = make_run(start, collect)


def warmup() -> None:
    m = two_quadrotors()
    for name in ("quad_rkmk4", "quad_cf4", "quad_rk4_ambient"):
        integrate(m, name, 0.01, 2)
    run(m, "quad_rkmk45", RunRequest(T=0.02, dt_out=0.01, tol=1e-6), {})


def _step_cost(model: QuadModel, m: tableaux.Method) -> float:
    """Seconds per step: 3 µs per evaluation of the closed loop and the action, 1 µs overhead."""
    return m.evals_per_step * 3e-6 + 1e-6


def cost_per_step(model: QuadModel, integrator: str) -> float:
    return LIE.cost_per_step(model, integrator)


FAMILY = FamilyDef(
    name="quad",
    diagnostics=diagnostics,
    sizes=sizes,
    run=run,
    warmup=warmup,
    cost_per_step=cost_per_step,
    state_labels=STATE_LABELS,
    start=start,
    collect=collect,
)
_REF = REFERENCE_PARAMS


#: every method of kernels.lie.tableaux through the transitive action of 001 §6.1
LIE = LieAction(
    family="quad",
    prefix="quad_",
    group="the transitive action of 001 §6.1",
    ambient="ambient R⁴²; constraints drift",
    params=_REF,
    adaptive_params=ADAPTIVE_PARAMS,
    step_cost=_step_cost,
)
#: integrator name → the method record it runs
METHODS = LIE.methods()
INTEGRATORS = LIE.integrators()

SYSTEMS = (
    SystemDef(
        name="two_quadrotors",
        family="quad",
        doc="Two quadrotors carrying a point load on rigid links (001 §6; spec heavy_top_quadrotors §3–6): "
        "e3 down, the load tracks y_d(t) = (t − 2.5, 0, (t − 2.5)² − 7), the links 30° from the vertical.",
        params=(
            Param("attitude_mode", str, "free_tumble", "1", "attitude moments (spec D13)", choices=ATTITUDE_MODES),
            Param(
                "initial",
                str,
                "paper",
                "1",
                "initial state: paper (D14) or controller_singular (F_d(0) = 0)",
                choices=INITIAL,
            ),
            Param("m_y", float, 0.4, "kg", "load mass", gt=0.0),
            Param("m1", float, 0.755, "kg", "quadrotor 1 mass", gt=0.0),
            Param("m2", float, 0.755, "kg", "quadrotor 2 mass", gt=0.0),
            Param("L1", float, 0.6, "m", "link 1 length", gt=0.0),
            Param("L2", float, 0.8, "m", "link 2 length", gt=0.0),
            Param("k_y", float, 12.0, "1 / s^2", "load position gain", gt=0.0),
            Param("k_v", float, 5.0, "1 / s", "load velocity gain", ge=0.0),
            Param("k_q", float, 16.0, "1 / s^2", "link direction gain", gt=0.0),
            Param("k_w", float, 5.0, "1 / s", "link angular velocity gain", ge=0.0),
            Param("g", float, 9.81, "m / s^2", "gravitational acceleration (along +e3)", ge=0.0),
        ),  # fmt: skip
        build=two_quadrotors,
        time_units="s",
        energy_units="J",
        example={"h": [0.0025], "T": 5.0, "dt_out": 0.0025},
    ),
)
