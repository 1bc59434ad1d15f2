"""The ``ts2`` family: the N-link 3D pendulum on (TS²)^N with Lie group and ambient methods.

Fixed-step integrators: ``h`` is the step, ``n_steps`` the number of steps and ``stride`` the
steps between stored samples. Adaptive integrators (``rkmk45``, ``dopri5_ambient``): the
sweep axis is ``tol``; ``h`` passed to :func:`run` is the output interval Δt_out and
``n_steps`` the number of output intervals. Samples land on ``t_k = k·Δt_out`` through the
methods' **dense output** (continuous Dormand–Prince extension; for RKMK applied to the
dexp⁻¹ equation and mapped by the group action, so samples stay on (TS²)^N); the step
sequence is therefore independent of the output grid, and only the last step is clipped to
hit T (see :mod:`kernels.lie.driver`).
"""

from __future__ import annotations

import time

import numpy as np

from kernels.chain.integrate import integrate
from kernels.chain.model import IC_FAMILIES, LENGTH_MODES, ChainModel, build_chain
from kernels.chain.rhs import chain_F_dense, work_size
from kernels.lie import tableaux
from kernels.registry import CellResult, Diagnostic, FamilyDef, IntegratorDef, Param, SystemDef

_E = "energy"

TIME_SERIES = (
    Diagnostic("energy", ("time",), _E, "total energy E = T + U"),
    Diagnostic("energy_error", ("time",), "1", "relative energy error (E(t) − E0) / |E0|"),
    Diagnostic("J", ("time",), "angular momentum", "vertical angular momentum e3·L about the pivot"),
    Diagnostic(
        "momentum",
        ("time", "component"),
        "angular momentum",
        "angular momentum L = Σ m_k x_k × v_k about the pivot (all of it conserved only when g = 0)",
    ),
    Diagnostic("unit_error", ("time",), "1", "max_i |1 − q_i·q_i|"),
    Diagnostic("tangency_error", ("time",), "1 / time", "max_i |q_i·ω_i|"),
    Diagnostic(
        "step_size",
        ("time",),
        "time",
        "step in force at each sample (adaptive: the accepted step whose interval contains the sample)",
    ),
)
SUMMARIES = (
    Diagnostic("E0", (), _E, "initial energy"),
    Diagnostic("max_rel_energy_error", (), "1", "max over samples of |E − E0| / |E0|"),
    Diagnostic("max_J_error", (), "angular momentum", "max over samples of |J − J0| (J = e3·L)"),
    Diagnostic(
        "max_momentum_error",
        (),
        "angular momentum",
        "max over samples of |L − L0| when g = 0 (L conserved); NaN otherwise",
    ),
    Diagnostic("max_unit_error", (), "1", "max over samples of max_i |1 − q_i·q_i|"),
    Diagnostic("max_tangency_error", (), "1 / time", "max over samples of max_i |q_i·ω_i|"),
    Diagnostic(
        "global_error",
        (),
        "1",
        "‖y(T) − y_ref(T)‖₂ in R^{6N} against DOP853 (rtol = atol = ref_tol) on the dense RHS; "
        "NaN unless option global_error is true",
    ),
    Diagnostic("steps", (), "1", "accepted steps", "int64"),
    Diagnostic("rejected_steps", (), "1", "rejected trial steps (adaptive; 0 for fixed step)", "int64"),
    Diagnostic("f_evals", (), "1", "vector-field evaluations", "int64"),
    Diagnostic("h_min_used", (), "time", "smallest accepted step"),
    Diagnostic("h_max_used", (), "time", "largest accepted step"),
    Diagnostic("fail_step", (), "1", "number of the step that failed (1-based), −1 if none", "int64"),
    Diagnostic("solver_iterations", (), "1", "total fixed-point (Picard) iterations; 0 for explicit methods", "int64"),
    Diagnostic("solver_iterations_max", (), "1", "max fixed-point iterations in one step", "int64"),
)
STATE = (Diagnostic("y_final", ("body", "state"), "1", "final (or last valid) state rows (q_i, ω_i)"),)


def diagnostics(model: ChainModel) -> tuple[Diagnostic, ...]:
    return TIME_SERIES + SUMMARIES + STATE


def sizes(model: ChainModel) -> dict[str, int]:
    return {"body": model.n, "component": 3, "state": 6}


def reference_solution(model: ChainModel, T: float, tol: float = 1e-13) -> np.ndarray:
    """y(T) (N, 6) from scipy DOP853 (rtol = atol = ``tol``) on the dense ambient RHS."""
    from scipy.integrate import solve_ivp

    n = model.n
    work = np.zeros(work_size(n, True))
    buf = np.empty((n, 6))
    yb = np.empty((n, 6))

    def rhs(t, yf):
        yb[:, :] = yf.reshape(n, 6)
        chain_F_dense(yb, model.params, work, buf)
        return buf.ravel().copy()

    sol = solve_ivp(rhs, (0.0, T), model.y0.ravel(), method="DOP853", rtol=tol, atol=tol)
    if not sol.success:
        raise RuntimeError(f"reference integration failed: {sol.message}")
    return sol.y[:, -1].reshape(n, 6)


def run(model: ChainModel, integrator: str, h: float, n_steps: int, stride: int, options: dict) -> CellResult:
    """Run one cell.

    Fixed-step integrators: ``h`` step, ``n_steps`` steps, a sample every ``stride`` steps.
    Adaptive integrators: ``h`` is the output interval Δt_out, ``n_steps`` the number of output
    intervals (T = n_steps·h), ``stride`` is ignored; ``options`` carry tol, theta, exponent,
    h0 (h0 ≤ 0 means T/100). ``options["global_error"]`` adds a DOP853 reference at T
    (costly; its time is not included in the cell's wall time).
    """
    if integrator == "implicit_vi":
        return _run_vi(model, h, n_steps, stride, dict(options))
    idef = _BY_NAME[integrator]
    opts = dict(options)
    want_ref = bool(opts.pop("global_error", False))
    ref_tol = float(opts.pop("ref_tol", 1e-13))
    kw: dict = {}
    if idef.adaptive:
        kw = dict(
            adaptive=True,
            tol=opts.pop("tol"),
            theta=opts.pop("theta"),
            exponent=opts.pop("exponent"),
            h0=opts.pop("h0"),
        )
    kw.update(opts)
    t0 = time.perf_counter()
    r = integrate(model, integrator, h, n_steps, stride, **kw)
    wall = time.perf_counter() - t0
    d = r.diag
    E0 = d[0, 0]
    L0 = d[0, 1:4]
    with np.errstate(invalid="ignore"):
        rel = (d[:, 0] - E0) / abs(E0) if E0 != 0.0 else np.full(len(d), np.nan)
        dJ = np.abs(d[:, 3] - L0[2])
        dL = np.linalg.norm(d[:, 1:4] - L0, axis=1)
    ok = np.isfinite(d[:, 0])

    def _max(a: np.ndarray) -> np.float64:
        a = a[ok]
        return np.float64(np.max(a)) if a.size else np.float64(np.nan)

    gerr = np.nan
    if want_ref and r.info["status"] == 0:
        T = n_steps * h
        gerr = float(np.linalg.norm(r.y - reference_solution(model, T, ref_tol)))
    values: dict[str, np.ndarray] = {
        "energy": d[:, 0].copy(),
        "energy_error": rel,
        "J": d[:, 3].copy(),
        "momentum": d[:, 1:4].copy(),
        "unit_error": d[:, 4].copy(),
        "tangency_error": d[:, 5].copy(),
        "step_size": r.step_size,
        "E0": np.float64(E0),
        "max_rel_energy_error": _max(np.abs(rel)),
        "max_J_error": _max(dJ),
        "max_momentum_error": _max(dL) if model.g == 0.0 else np.float64(np.nan),
        "max_unit_error": _max(d[:, 4]),
        "max_tangency_error": _max(d[:, 5]),
        "global_error": np.float64(gerr),
        "steps": np.int64(r.info["steps"]),
        "rejected_steps": np.int64(r.info["rejected"]),
        "f_evals": np.int64(r.info["f_evals"]),
        "h_min_used": np.float64(r.summary["h_min_used"]),
        "h_max_used": np.float64(r.summary["h_max_used"]),
        "fail_step": np.int64(r.info["fail_step"]),
        "solver_iterations": np.int64(0),
        "solver_iterations_max": np.int64(0),
        "y_final": r.y,
    }
    return CellResult(values=values, status=int(r.info["status"]), wall_time=wall)


def _run_vi(model: ChainModel, h: float, n_steps: int, stride: int, opts: dict) -> CellResult:
    """The (S²)ⁿ implicit variational integrator on the chain's (S²)ⁿ form, stored as ts2 data.

    ``unit_error`` is converted to this family's |1 − q·q| from the s2 kernel's max_i
    |sqrt(q_i·q_i) − 1| = u as u·(2 + u) (exact for the worst link up to O(u²) round-off).
    """
    from kernels.chain.s2_bridge import chain_as_s2
    from kernels.s2.integrate import integrate as s2_integrate

    want_ref = bool(opts.pop("global_error", False))
    ref_tol = float(opts.pop("ref_tol", 1e-13))
    tr = s2_integrate(
        chain_as_s2(model), "implicit_vi", h, n_steps, stride, tol=float(opts["tol"]), maxit=int(opts["maxit"])
    )
    E0 = tr.summary["E0"]
    ok = np.isfinite(tr.energy)
    with np.errstate(invalid="ignore"):
        rel = (tr.energy - E0) / abs(E0)
        dL = np.linalg.norm(tr.momentum - tr.momentum[0], axis=1)
    unit = tr.unit_error * (2.0 + tr.unit_error)

    def _max(a: np.ndarray) -> np.float64:
        a = a[ok]
        return np.float64(np.max(a)) if a.size else np.float64(np.nan)

    y = np.concatenate([tr.q, tr.w], axis=1)
    gerr = np.nan
    if want_ref and tr.status == 0:
        gerr = float(np.linalg.norm(y - reference_solution(model, n_steps * h, ref_tol)))
    values = {
        "energy": tr.energy,
        "energy_error": rel,
        "J": tr.momentum[:, 2].copy(),
        "momentum": tr.momentum,
        "unit_error": unit,
        "tangency_error": tr.tangency_error,
        "step_size": np.where(ok, h, np.nan),
        "E0": np.float64(E0),
        "max_rel_energy_error": _max(np.abs(rel)),
        "max_J_error": _max(np.abs(tr.momentum[:, 2] - tr.momentum[0, 2])),
        "max_momentum_error": _max(dL) if model.g == 0.0 else np.float64(np.nan),
        "max_unit_error": _max(unit),
        "max_tangency_error": _max(tr.tangency_error),
        "global_error": np.float64(gerr),
        "steps": np.int64(tr.info["steps_done"]),
        "rejected_steps": np.int64(0),
        "f_evals": np.int64(tr.info["potential_evals"]),
        "h_min_used": np.float64(h),
        "h_max_used": np.float64(h),
        "fail_step": np.int64(tr.info["fail_step"]),
        "solver_iterations": np.int64(tr.info["solver_iterations"]),
        "solver_iterations_max": np.int64(tr.info["solver_iterations_max"]),
        "y_final": y,
    }
    return CellResult(values=values, status=int(tr.info["status"]), wall_time=tr.wall_time)


def warmup() -> None:
    """Compile (or load from the on-disk cache) the driver and the chain kernels."""
    model = build_chain(2)
    integrate(model, "rkmk4", 1e-3, 2, 1)
    integrate(model, "rk4_ambient", 1e-3, 2, 1)
    integrate(model, "rkmk45", 1e-3, 2, adaptive=True, h0=1e-3)


_EVALS = {
    "lie_euler": 1,
    "lie_euler_heun": 2,
    "rkmk3": 3,
    "rkmk4": 4,
    "rkmk4_2comm": 4,
    "cf4": 4,
    "cf3": 3,
    "cf43": 4,
    "rkmk5": 6,
    "rkmk45": 6,
    "rk4_ambient": 4,
    "dopri5_ambient": 6,
}


def cost_per_step(model: ChainModel, integrator: str) -> float:
    """Rough seconds per step on one core (for slicing). Adaptive: per output interval, assuming
    about 4 steps per interval."""
    n = model.n
    if integrator == "implicit_vi":
        return 6 * (3 * n) ** 3 / 3 * 1.5e-9 + 1e-6
    ev = _EVALS.get(integrator, 6)
    if integrator.endswith("_ambient"):
        per_eval = 3e-9 * (3 * n) ** 3 + 5e-8 * n
    else:
        per_eval = 6e-8 * n + 1e-7  # O(N) RHS + exp/dexpinv per stage
    cost = ev * per_eval + 1e-7
    return cost * (4 if _BY_NAME.get(integrator) is not None and _BY_NAME[integrator].adaptive else 1)


FAMILY = FamilyDef(
    name="ts2", diagnostics=diagnostics, sizes=sizes, run=run, warmup=warmup, cost_per_step=cost_per_step
)

_REF = (
    Param("global_error", bool, False, "1", "compute ‖y(T) − y_ref(T)‖ against a DOP853 reference (costly)"),
    Param("ref_tol", float, 1e-13, "1", "rtol = atol of the DOP853 reference", gt=0.0),
)
_AMB = (
    Param(
        "ambient_rhs",
        str,
        "dense",
        "1",
        "ambient RHS: dense formula of spec §2 or the O(N) path",
        choices=("dense", "fast"),
    ),
)
_ADAPT = (
    Param("tol", float, 1e-6, "1", "absolute bound on the local error estimate ‖σ − σ̂‖₂ (per step)", gt=0.0),
    Param("theta", float, 0.85, "1", "controller safety factor θ", gt=0.0, le=1.0),
    Param("exponent", float, 0.25, "1", "controller exponent α (001: 1/5; its code: 1/4)", gt=0.0, le=1.0),
    Param("h0", float, 0.0, "time", "first trial step; ≤ 0 means T/100"),
)


def _lie(name: str, order: int, doc: str) -> IntegratorDef:
    return IntegratorDef(name, "ts2", order, doc, params=_REF)


INTEGRATORS = (
    _lie("lie_euler", 1, "Lie–Euler: y₁ = exp(h f(y₀))·y₀ on SE(3)^N acting on (TS²)^N."),
    _lie("lie_euler_heun", 2, "Lie–Euler–Heun (RKMK, Heun tableau, exact dexp⁻¹)."),
    _lie("rkmk3", 3, "RKMK with Kutta's third-order tableau and exact se(3) dexp⁻¹."),
    _lie("rkmk4", 4, "RKMK with the classical RK4 tableau and exact se(3) dexp⁻¹."),
    _lie("rkmk4_2comm", 4, "Fourth-order RKMK with two commutators (Casas–Owren), no dexp⁻¹."),
    _lie("cf4", 4, "Commutator-free CF4 (Celledoni–Marthinsen–Owren), 4 f-evaluations, 5 exponentials."),
    _lie("cf3", 3, "Commutator-free CF(3,2) variant a, main third-order method at fixed step."),
    _lie("cf43", 4, "CF(4,3): CF4 main method at fixed step (embedded pair available for adaptivity)."),
    _lie("rkmk5", 5, "RKMK with the DOPRI5 main tableau at constant step (001 §5.3 comparison)."),
    IntegratorDef(
        "rkmk45",
        "ts2",
        5,
        "Variable-step RKMK(5,4) on DOPRI5(4) with the controller of 001 eq. (33); sweep axis tol; "
        "dense output onto the shared time grid.",
        params=_ADAPT + _REF,
        adaptive=True,
    ),
    IntegratorDef(
        "rk4_ambient", "ts2", 4, "Classical RK4 on the ambient ODE in R^{6N} (baseline).", params=_REF + _AMB
    ),
    IntegratorDef(
        "dopri5_ambient",
        "ts2",
        5,
        "Variable-step DOPRI5(4) on the ambient ODE in R^{6N} (ODE45-like baseline), same controller.",
        params=_ADAPT + _REF + _AMB,
        adaptive=True,
    ),
)
_BY_NAME = {i.name: i for i in INTEGRATORS}
assert all(i.name in tableaux.METHODS for i in INTEGRATORS)


def _build(
    N: int, masses: str, mass_seed: int, length_mode: str, L_tot: float, g: float, ic: str, kappa: float, seed: int
) -> ChainModel:
    return build_chain(
        N,
        masses=masses,
        length_mode=length_mode,
        L_tot=L_tot,
        g=g,
        ic=ic,
        kappa=kappa,
        seed=seed if ic == "random" else mass_seed,
    )


SYSTEMS = (
    SystemDef(
        name="pendulum_chain",
        family="ts2",
        doc="N-link 3D pendulum on (TS²)^N (001 §5): point masses on massless rigid links from a "
        "fixed pivot, gravity along −e3 (e3 up). Conserves E and J = e3·L (all of L when g = 0).",
        params=(
            Param("N", int, 2, "1", "number of links", ge=1),
            Param(
                "masses",
                str,
                "unit",
                "1",
                "unit: m_i = 1 kg; random: U(0.5, 1.5) kg (mass_seed)",
                choices=("unit", "random"),
            ),
            Param("mass_seed", int, 0, "1", "seed of the random masses", ge=0),
            Param("length_mode", str, "unit", "1", "unit: L_i = 1 m; scaled: L_i = L_tot / N", choices=LENGTH_MODES),
            Param("L_tot", float, 5.0, "m", "total length for length_mode = scaled", gt=0.0),
            Param("g", float, 9.81, "m / s^2", "gravitational acceleration", ge=0.0),
            Param("ic", str, "paper", "1", "initial condition family (spec pendulum_chain §8)", choices=IC_FAMILIES),
            Param("kappa", float, 0.5, "rad / s", "twist κ of ic = twisted"),
            Param("seed", int, 0, "1", "seed of ic = random", ge=0),
        ),
        build=_build,
        time_units="s",
        energy_units="J",
        example={"h": [0.01, 0.005], "T": 3.0, "dt_out": 0.01},
    ),
)
