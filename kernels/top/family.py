"""The ``top`` family: the heavy top of 001 §3 in three formulations (spec heavy_top_quadrotors §2).

Why a family of its own: the formulations live on different spaces — A ``(Q, π)`` on T*SO(3)
(implicit symplectic Lie group integrators, a step of its own), C ``(Q, q, π, p)`` on
T*(SO(3) × R³), B ``(Γ, Π)`` on se(3)* — and the top stores invariants no other family has
(Casimirs, vertical momentum, spin). B reuses the group-generic Lie stepper unchanged with the
heavy top's algebra map (:mod:`kernels.top.lp`); A and C have their own Newton step
(:mod:`kernels.top.slgi`). The integrator name carries the formulation: ``slgi*`` (A),
``slgikk_half`` (C), ``lp_*`` (B, Lie–Poisson; ``lp_rk4_ambient``/``lp_dopri5_ambient`` are the
ambient R⁶ baselines).

Every cell stores the union state ``[Q (9), π, q, p, Γ, Π]`` (``state`` labels below); entries a
formulation does not carry are NaN (B cannot reconstruct Q or π; q, p exist only in C).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kernels.core.cells import (
    ADAPTIVE_PARAMS,
    BLOWUP,
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
from kernels.lie.stepper import initial_state as lie_initial_state
from kernels.lie.stepper import make_stepper as lie_make_stepper
from kernels.registry import CellResult, Diagnostic, FamilyDef, IntegratorDef, Param, RunRequest, SystemDef
from kernels.top import lp, slgi
from kernels.top.model import E3, P_J30, P_S0, TopModel, heavy_top

_EVERY = "every step"
_AM = "kg m^2 / s"
STATE_LABELS = (
    *(f"Q_{i}{j}" for i in (1, 2, 3) for j in (1, 2, 3)),
    "pi_x", "pi_y", "pi_z", "q_x", "q_y", "q_z", "p_x", "p_y", "p_z",
    "Gamma_x", "Gamma_y", "Gamma_z", "Pi_x", "Pi_y", "Pi_z",
)  # fmt: skip

#: θ and formulation of the symplectic Lie group integrators
SLGI = {"slgi0": (0.0, False), "slgi_half": (0.5, False), "slgi1": (1.0, False), "slgikk_half": (0.5, True)}

OWN = (
    Diagnostic("dJ3", ("time",), _AM, "vertical angular momentum error e3·π − J3(0) (B: Π·Γ − C2(0))"),
    Diagnostic("dS", ("time",), _AM, "spin error Π·X − S(0) (a first integral of the symmetric top)"),
    Diagnostic("cas_gamma", ("time",), "1", "Casimir error ||Γ|² − 1|"),
    Diagnostic("orth", ("time",), "1", "max|QᵀQ − I| (A, C; NaN for B)"),
    Diagnostic("max_dJ3", (), _AM, "max |J3 − J3(0)| (B: the Casimir Π·Γ)", computed_over=_EVERY),
    Diagnostic("max_dS", (), _AM, "max |S − S(0)|", computed_over=_EVERY),
    Diagnostic("max_cas_gamma", (), "1", "max ||Γ|² − 1|", computed_over=_EVERY),
    Diagnostic("max_orth", (), "1", "max |QᵀQ − I| (NaN for B)", computed_over=_EVERY),
    Diagnostic("max_det_error", (), "1", "max |det Q − 1| (NaN for B)", computed_over=_EVERY),
    Diagnostic("drift_first10", (), "1", "mean (H − H0)/H0 over the first 10 % of samples after t = 0",
               computed_over="samples"),
    Diagnostic("drift_last10", (), "1", "mean (H − H0)/H0 over the last 10 % of samples", computed_over="samples"),
    Diagnostic("newton_mean", (), "1", "mean Newton iterations per step (SLGI; NaN for explicit methods)"),
    Diagnostic(
        "global_error", (), "1",
        "‖y(T) − y_ref(T)‖₂ against DOP853 (rtol = atol = ref_tol) on the ambient ODE; y = (vec Q, π) for "
        "A and C, (Γ, Π) for B; NaN unless option global_error is true",
    ),
)  # fmt: skip


#: formulation C's energy H_C = H_A + ½|p|² carries the auxiliary ½|p(0)|² = ½(Mgℓ)² (43 306 J by
#: default, 8× the top's own energy); its relative errors divide by the physical energy instead
_REL_SCALE = (
    "; the scale |E0| is the physical energy: for slgikk_half (formulation C) |E0 − ½|p(0)|²| = |H_A(0)|, "
    "without the auxiliary ½|p|² its E0 includes"
)


def _rel_scaled(d: Diagnostic) -> Diagnostic:
    if d.name in ("rel_energy_error", "max_rel_energy_error"):
        return dataclasses.replace(d, description=d.long_name + _REL_SCALE)
    return d


def diagnostics(model: TopModel) -> tuple[Diagnostic, ...]:
    return tuple(_rel_scaled(d) for d in COMMON_DIAGNOSTICS) + OWN


def energy_scale(integrator: str, E0: float, S0: np.ndarray) -> float:
    """|E_ref| the relative energy errors divide by: |E0|, and for formulation C (``slgikk_half``)
    |E0 − ½|p(0)|²| = |H_A(0)|, so that its relative error compares with ``slgi_half``'s."""
    if integrator in SLGI and SLGI[integrator][1]:
        return abs(E0 - 0.5 * float(S0[15:18] @ S0[15:18]))
    return abs(E0)


def _rescale_relative(values: dict, integrator: str, model: TopModel) -> None:
    """Formulation C: the relative energy errors against the physical energy (see :func:`energy_scale`)."""
    E0 = float(values["E0"])
    scale = energy_scale(integrator, E0, initial_state(model, integrator))
    if scale == abs(E0) or scale == 0.0:
        return
    values["rel_energy_error"] = values["energy_error"] / scale
    values["max_rel_energy_error"] = np.float64(values["max_abs_energy_error"] / scale)


def sizes(model: TopModel) -> dict[str, int]:
    return {"body": 1, "state": len(STATE_LABELS)}


def stepper(model: TopModel, integrator: str, adaptive: bool = False, options: dict | None = None):
    """The driver's view of ``model`` with ``integrator`` (``options``: tol, maxit for SLGI)."""
    options = options or {}
    if integrator in SLGI:
        theta, kk = SLGI[integrator]
        return slgi.make_stepper(
            model.params, theta, kk, float(options.get("tol", 1e-14)), int(options.get("maxit", 50))
        )
    if integrator not in LP:
        raise ValueError(f"unknown heavy-top integrator {integrator!r}; choose from {sorted(SLGI) + sorted(LP)}")
    return lie_make_stepper((lp.top_f, lp.top_F, lp.top_diag), model.params, 1, lp.NWC, LP[integrator], adaptive)


def initial_state(model: TopModel, integrator: str) -> np.ndarray:
    if integrator in SLGI:
        return slgi.initial_state(model.params, model.Pi0)
    return lie_initial_state(np.concatenate([E3, model.Pi0])[None, :])


def start(model: TopModel, integrator: str, request: RunRequest, options: dict) -> Trajectory:
    """A resumable trajectory of one cell."""
    adaptive = integrator in LP and LP[integrator].adaptive
    if adaptive != request.adaptive:
        raise ValueError(f"{integrator} needs a request with {'tol' if adaptive else 'h'}")
    if integrator in LP:
        options = LIE.options(integrator, options)
    sp = stepper(model, integrator, adaptive, options)
    if adaptive and float(options.get("h0", 0.0)) <= 0.0:
        # T/100 would turn the body by tens of radians in the first trial step, past the domain
        # of the exact dexp⁻¹ (|A| < 2π): the driver would reject such trials (non-finite) and cut
        # h, but a first step of half a radian costs no rejections and keeps runs comparable
        options = {**options, "h0": min(request.T / 100.0, 0.5 / float(np.abs(model.Omega0).max() or 1.0))}
    return start_trajectory(sp, initial_state(model, integrator), request, options)


def integrate(model: TopModel, integrator: str, h: float, n_steps: int, stride: int = 1, **options) -> Trajectory:
    """Python entry point: ``n_steps`` fixed steps of size ``h`` (samples every ``stride``
    steps); ``options`` as in a spec (``tol``, ``maxit``, ``blowup`` (default off here))."""
    options.setdefault("blowup", 0.0)
    n_out = max(n_steps // stride, 1)
    req = RunRequest(T=n_out * stride * h, dt_out=stride * h, h=h)
    traj = start(model, integrator, req, options)
    traj.advance()
    return traj


def union_state(integrator: str, x: np.ndarray) -> np.ndarray:
    """A state prefix of the cell's stepper → the (1, 24) stored state (NaN where not carried)."""
    out = np.full(len(STATE_LABELS), np.nan)
    if integrator in SLGI:
        Q = x[0:9].reshape(3, 3)
        out[0:12] = x[0:12]
        if SLGI[integrator][1]:
            out[12:18] = x[12:18]
        out[18:21] = Q[2]  # Γ = Qᵀ e3
        out[21:24] = Q.T @ x[9:12]
    else:
        out[18:24] = x[0:6]
    return out[None, :]


_REFS: dict[tuple, np.ndarray] = {}


def reference(model: TopModel, T: float, formulation: str, tol: float) -> np.ndarray:
    """DOP853 reference at T (cached per process)."""
    key = (tuple(model.params), model.Omega0.tobytes(), float(T), formulation, float(tol))
    if key not in _REFS:
        if len(_REFS) > 64:
            _REFS.clear()
        _REFS[key] = model.reference(T, formulation, tol)
    return _REFS[key]


def collect(model: TopModel, integrator: str, traj: Trajectory, options: dict | None = None) -> CellResult:
    """The stored values of a finished (or failed) trajectory."""
    options = options or {}
    values = common_values(traj, lambda x: union_state(integrator, x))
    _rescale_relative(values, integrator, model)
    rel = values["rel_energy_error"]
    ok = rel[1:][np.isfinite(rel[1:])]  # t = 0 excluded (ΔH = 0 there by definition)
    k = max(len(ok) // 10, 1)
    if integrator in SLGI:
        dJ3 = traj.samples("J3") - model.params[P_J30]
        dS = traj.samples("S") - model.params[P_S0]
        cas = traj.samples("cas_gamma").copy()
        orth = traj.samples("orth").copy()
        mx = (traj.reduced("J3"), traj.reduced("S"), traj.reduced("cas_gamma"), traj.reduced("orth"),
              traj.reduced("det"))  # fmt: skip
        steps = max(traj.steps, 1)
        newton = traj.costs()["solver_iterations"] / steps if traj.steps else np.nan
    else:  # the Lie stepper's columns [H, S, |Γ|²−1, Π·Γ, ||Γ|²−1|, |S−S0|]
        dJ3 = traj.samples("L_z") - model.params[P_J30]
        dS = traj.samples("L_x") - model.params[P_S0]
        cas = np.abs(traj.samples("L_y"))
        orth = np.full_like(cas, np.nan)
        mx = (traj.reduced("L_z"), traj.reduced("tangency_error"), traj.reduced("unit_error"), np.nan, np.nan)
        newton = np.nan
    gerr = np.nan
    if bool(options.get("global_error", False)) and traj.status == 0:
        tol = float(options.get("ref_tol", 1e-13))
        x = traj.S[: traj.stepper.n_check]
        if integrator in SLGI:
            gerr = float(np.linalg.norm(x[:12] - reference(model, traj.time, "A", tol)))
        else:
            gerr = float(np.linalg.norm(x[:6] - reference(model, traj.time, "B", tol)))
    values.update(
        dJ3=dJ3,
        dS=dS,
        cas_gamma=cas,
        orth=orth,
        max_dJ3=np.float64(mx[0]),
        max_dS=np.float64(mx[1]),
        max_cas_gamma=np.float64(mx[2]),
        max_orth=np.float64(mx[3]),
        max_det_error=np.float64(mx[4]),
        drift_first10=np.float64(ok[:k].mean() if len(ok) else np.nan),
        drift_last10=np.float64(ok[-k:].mean() if len(ok) else np.nan),
        newton_mean=np.float64(newton),
        global_error=np.float64(gerr),
    )
    _count_dense_evals(values, traj)
    return finish(traj, values)


def _count_dense_evals(values: dict, traj: Trajectory) -> None:
    """DOP853's dense-only stages (evaluated in steps that contain a sample) count in ``f_evals``."""
    extra = dense_evals(traj.S) if traj.stepper.has_dense else 0
    if extra:
        values["f_evals"] = np.int64(values["f_evals"] + extra)


run = make_run(start, collect)


def warmup() -> None:
    """Compile (or load from the cache) the SLGI driver and the Lie driver with the top's callbacks."""
    m = heavy_top()
    for name in ("slgi_half", "slgikk_half", "lp_rkmk4", "lp_cf4", "lp_rk4_ambient"):
        integrate(m, name, 1e-3, 2)
    run(m, "lp_rkmk45", RunRequest(T=2e-3, dt_out=1e-3, tol=1e-6), {})


def cost_per_step(model: TopModel, integrator: str) -> float:
    """Rough seconds per step on one core (slicing only)."""
    if integrator in SLGI:
        return (3e-5 if SLGI[integrator][1] else 1e-5) + 1e-7
    return LIE.cost_per_step(model, integrator)


def _lp_step_cost(model: TopModel, m: tableaux.Method) -> float:
    """Seconds per step of a Lie–Poisson method: call overhead dominates up to 6 evaluations
    (1 µs per step; adaptive 4 steps per output interval at 1.5 µs), then linear in them."""
    return (4 * 1.5e-6 if m.adaptive else 1e-6) * max(1.0, m.evals_per_step / 6)


FAMILY = FamilyDef(
    name="top",
    diagnostics=diagnostics,
    sizes=sizes,
    run=run,
    warmup=warmup,
    cost_per_step=cost_per_step,
    state_labels=STATE_LABELS,
    start=start,
    collect=collect,
)

_REF = (BLOWUP, *REFERENCE_PARAMS)
_NEWTON = (
    Param("tol", float, 1e-14, "1", "Newton stop: max_j |Δw_j| / max(1, |w_j|) ≤ tol", gt=0.0),
    Param("maxit", int, 50, "1", "Newton iterations before status nonconverged", ge=1, le=10_000),
)


def _slgi(name: str, order: int, doc: str) -> IntegratorDef:
    return IntegratorDef(name, "top", order, doc, params=_NEWTON + _REF)


_ADAPT = tuple(p for p in ADAPTIVE_PARAMS if p.name != "h0") + (
    Param("h0", float, 0.0, "s", "first trial step; ≤ 0 means min(T/100, 0.5 rad / max|Ω(0)|)"),
)


#: formulation B: every method of kernels.lie.tableaux, SE(3) acting on se(3)* by the coadjoint action
LIE = LieAction(
    family="top",
    prefix="lp_",
    group="on se(3)* (formulation B, coadjoint action)",
    ambient="ambient (Γ, Π) ∈ R⁶; Casimirs drift",
    params=_REF,
    adaptive_params=_ADAPT,
    step_cost=_lp_step_cost,
)
#: the Lie–Poisson integrators and the method record each runs
LP = LIE.methods()

INTEGRATORS = (
    _slgi("slgi0", 1, "Symplectic Lie group integrator θ = 0 (001 (15)-(17)) on T*SO(3) (formulation A); Newton."),
    _slgi("slgi_half", 2, "Symplectic Lie group integrator θ = ½ on T*SO(3) (formulation A); Newton."),
    _slgi("slgi1", 1, "Symplectic Lie group integrator θ = 1 on T*SO(3) (formulation A); Newton."),
    _slgi(
        "slgikk_half",
        2,
        "SLGI θ = ½ on the quadratic form over T*(SO(3) × R³) (formulation C; consistency). "
        "E0 = H_C(0) includes the auxiliary ½|p|²; relative energy errors divide by |E0 − ½|p(0)|²| = |H_A(0)|.",
    ),
)
INTEGRATORS += LIE.integrators()
assert {i.name for i in INTEGRATORS} == set(SLGI) | set(LP)

SYSTEMS = (
    SystemDef(
        name="heavy_top",
        family="top",
        doc="Heavy (Lagrange) top of 001 §3.4.4: fixed point, X = e2, e3 up, gravity −g e3, Q(0) = I, "
        "Π(0) = 𝕀Ω(0); formulations A (slgi*), B (lp_*), C (slgikk_half).",
        params=(
            Param("M", float, 15.0, "kg", "mass", gt=0.0),
            Param("ell", float, 2.0, "m", "distance from the fixed point to the centre of mass", gt=0.0),
            Param("g", float, 9.81, "m / s^2", "gravitational acceleration", ge=0.0),
            Param("I1", float, 0.234375, "kg m^2", "body inertia 𝕀₁ about the fixed point", gt=0.0),
            Param("I2", float, 0.46875, "kg m^2", "body inertia 𝕀₂ (symmetry axis X = e2)", gt=0.0),
            Param("I3", float, 0.234375, "kg m^2", "body inertia 𝕀₃", gt=0.0),
            Param("Omega1", float, 0.0, "rad / s", "initial body rate Ω₁"),
            Param("Omega2", float, 150.0, "rad / s", "initial body rate Ω₂ (spin)"),
            Param("Omega3", float, -4.61538, "rad / s", "initial body rate Ω₃"),
        ),
        build=heavy_top,
        time_units="s",
        energy_units="J",
        example={"h": [0.01, 0.005], "T": 60.0, "dt_out": 0.05},
    ),
)
