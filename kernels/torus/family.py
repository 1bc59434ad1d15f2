"""The ``se3`` family: what an SE(3)ⁿ cell (torus, SO(3) pendulum) stores and how it runs.

The shared names (energy, errors, failure, cost, final and snapshot states) come from
:mod:`geosweep.kernels.core.cells`; the family adds the energy parts, momenta, contacts and chart
margins. Rows after a failure are NaN; the final (last valid) state is stored separately.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from geosweep.kernels.core.cells import (
    BLOWUP,
    COMMON_DIAGNOSTICS,
    blocks_to_bodies,
    common_values,
    finish,
    make_run,
    start_trajectory,
)
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.registry import (
    CellResult,
    Diagnostic,
    FamilyDef,
    Figure,
    IntegratorDef,
    Param,
    RunRequest,
    SystemDef,
)
from geosweep.kernels.torus.forces import N_AUX
from geosweep.kernels.torus.integrate import METHODS, integrate
from geosweep.kernels.torus.model import SHEAR_MODELS, SYS_PENDULUM, SE3Model, so3_pendulum, torus
from geosweep.kernels.torus.stepper import initial_state, make_stepper

_E = "energy"
_C = ("time", "component")
_EVERY = "every step"
STATE_LABELS = tuple(f"{v}_{c}" for v in ("x", "v", "alpha", "Omega") for c in "xyz")


def _ts(name: str, units: str, long_name: str) -> Diagnostic:
    return Diagnostic(name, ("time",), units, long_name)


_COMMON_TS = (
    _ts("KE_rot", _E, "rotational kinetic energy ½ J Σ|Ω_i|²"),
    _ts("max_abs_alpha", "1", "max_i |α_i| (chart margin; singular at ∞)"),
    _ts("max_hb2", "1", "max_i h²|b_i|² of the next step ((23) needs < 1)"),
    _ts("qnorm_integrand", "1", "Σ_i (|x_i|² + |v_i|² + |θ_i|² + |Ω_i|²) (paper (36) integrand)"),
)
_TORUS_TS = (
    _ts("KE_trans", _E, "translational kinetic energy ½ m Σ|v_i|²"),
    _ts("U_m", _E, "bending/torsion energy U^m"),
    _ts("U_a", _E, "axial energy U^a"),
    _ts("U_s", _E, "shear energy U^s"),
    _ts("U_pp", _E, "particle-particle contact energy U^pp"),
    _ts("U_pw", _E, "particle-wall contact energy U^pw"),
    Diagnostic("P", _C, "momentum", "linear momentum Σ m v_i"),
    Diagnostic("L", _C, "angular momentum", "angular momentum Σ (m x_i × v_i + J Ω_i) about the origin"),
    Diagnostic("L_spin", _C, "angular momentum", "spin angular momentum Σ J Ω_i (paper (34))"),
    _ts("n_contact_pp", "1", "active non-bonded particle-particle contacts"),
    _ts("n_contact_bonded_pp", "1", "active contacts between bonded neighbours"),
    _ts("n_contact_wall", "1", "active particle-wall contacts"),
    _ts("max_bond_angle", "rad", "max over bonds of the relative rotation angle φ_ij"),
)
_PEND_TS = (
    _ts("U_grav", _E, "gravitational energy −m g e3·R ρ0"),
    Diagnostic("L", _C, "angular momentum", "spin angular momentum J Ω (only e3·L is conserved)"),
    _ts("rho_dot_Omega", "1 / time", "R ρ0 · Ω (conserved, = 0)"),
    _ts("e3_dot_Omega", "1 / time", "e3 · Ω (conserved)"),
    _ts("rho_norm_error", "1", "|R ρ0| − 1 (orthogonality check)"),
)
_COMMON_SUM = (
    Diagnostic(
        "energy_error_38", (), "1", "paper (38): [∫(E−E0)² dt]^½ / (|E0| √(t_N − t_0)), trapezoid rule",
        computed_over="samples",
    ),
    Diagnostic("max_abs_alpha_run", (), "1", "max over steps and bodies of |α_i|", computed_over=_EVERY),
    Diagnostic("max_hb2_run", (), "1", "max over steps and bodies of h²|b_i|²", computed_over=_EVERY),
    Diagnostic("steps_per_second", (), "1 / s", "completed steps per wall-clock second"),
)  # fmt: skip
_TORUS_SUM = (
    Diagnostic("max_bond_angle_run", (), "rad", "max over steps of max φ_ij", computed_over=_EVERY),
    Diagnostic("P_drift_max", ("component",), "momentum", "max_k |P_k − P_0| per component", computed_over=_EVERY),
    Diagnostic("L_drift_max", ("component",), "angular momentum", "max_k |L_k − L_0| per component",
               computed_over=_EVERY),
    Diagnostic("P_drift_free", ("component",), "momentum", "max drift of P within wall-contact-free windows",
               computed_over=_EVERY),
    Diagnostic("L_drift_free", ("component",), "angular momentum", "max drift of L within contact-free windows",
               computed_over=_EVERY),
    Diagnostic("first_wall_contact_t", (), "time", "first time with a wall contact (NaN if none)",
               computed_over=_EVERY),
    Diagnostic("last_wall_contact_t", (), "time", "last time with a wall contact (NaN if none)", computed_over=_EVERY),
    Diagnostic("nbl_rebuilds", (), "1", "neighbour-list builds (0: all-pairs)", "int64"),
)  # fmt: skip


def diagnostics(model: SE3Model) -> tuple[Diagnostic, ...]:
    if model.kind == SYS_PENDULUM:
        return COMMON_DIAGNOSTICS + _COMMON_TS + _PEND_TS + _COMMON_SUM
    return COMMON_DIAGNOSTICS + _COMMON_TS + _TORUS_TS + _COMMON_SUM + _TORUS_SUM


def sizes(model: SE3Model) -> dict[str, int]:
    """Per-cell dims besides ``time`` and ``snapshot`` (the sweep sizes those)."""
    return {"body": model.n, "component": 3, "state": 12}


_TS_COLUMNS = {
    "KE_trans": "KE_trans",
    "KE_rot": "KE_rot",
    "U_m": "U_0",
    "U_a": "U_1",
    "U_s": "U_2",
    "U_pp": "U_3",
    "U_pw": "U_4",
    "U_grav": "U_0",
    "n_contact_pp": "n_contact_pp",
    "n_contact_bonded_pp": "n_contact_bonded_pp",
    "n_contact_wall": "n_contact_wall",
    "max_abs_alpha": "max_abs_alpha",
    "max_bond_angle": "max_bond_angle",
    "max_hb2": "max_hb2",
    "qnorm_integrand": "qnorm_integrand",
    "rho_dot_Omega": "rho_dot_Omega",
    "e3_dot_Omega": "e3_dot_Omega",
    "rho_norm_error": "rho_norm_error",
}


def energy_error_38(t: np.ndarray, E: np.ndarray) -> float:
    """Paper (38) by the trapezoid rule over the finite samples (NaN if fewer than two)."""
    ok = np.isfinite(E)
    t = t[ok]
    E = E[ok]
    if len(t) < 2 or E[0] == 0.0:
        return float("nan")
    return float(np.sqrt(np.trapezoid((E - E[0]) ** 2, t)) / (abs(E[0]) * np.sqrt(t[-1] - t[0])))


def start(model: SE3Model, integrator: str, request: RunRequest, options: dict) -> Trajectory:
    """A resumable trajectory of one cell (``options``: blowup)."""
    if request.adaptive:
        raise ValueError(f"{integrator} is a fixed-step map: the request needs h, not tol")
    stepper = make_stepper(model, integrator, float(request.h))
    S0, _ = initial_state(stepper, model.x0, model.v0, model.alpha0, model.Omega0)
    return start_trajectory(stepper, S0, request, options)


def collect(model: SE3Model, integrator: str, traj: Trajectory, options: dict | None = None) -> CellResult:
    """The stored values of a finished (or failed) trajectory."""
    n = model.n
    values = common_values(traj, blocks_to_bodies(n, 4))
    names = {d.name for d in diagnostics(model)}
    for name, col in _TS_COLUMNS.items():
        if name in names:
            values[name] = traj.samples(col).copy()
    out = traj.out
    obs = traj.stepper.obs_names
    values["L"] = out[:, obs.index("L_x") : obs.index("L_x") + 3].copy()  # pendulum: x = v = 0, so L = J Ω
    wall = traj.wall_time
    values.update(
        energy_error_38=np.float64(energy_error_38(traj.sample_times, values["energy"])),
        max_abs_alpha_run=np.float64(traj.reduced("max_abs_alpha")),
        max_hb2_run=np.float64(traj.reduced("hb2_step")),
        steps_per_second=np.float64(traj.steps / wall if wall > 0 else np.nan),
    )
    if model.kind != SYS_PENDULUM:
        o = 18 * n + N_AUX + 15  # contact-free drifts in the state (geosweep.kernels.torus.stepper)
        dfree = traj.S[o : o + 6]
        values.update(
            P=out[:, obs.index("P_x") : obs.index("P_x") + 3].copy(),
            L_spin=out[:, obs.index("Ls_x") : obs.index("Ls_x") + 3].copy(),
            max_bond_angle_run=np.float64(traj.reduced("max_bond_angle")),
            P_drift_max=np.array([traj.reduced(c) for c in ("P_x", "P_y", "P_z")]),
            L_drift_max=np.array([traj.reduced(c) for c in ("L_x", "L_y", "L_z")]),
            P_drift_free=dfree[0:3].copy(),
            L_drift_free=dfree[3:6].copy(),
            first_wall_contact_t=np.float64(traj.reduced("n_contact_wall", "first")),
            last_wall_contact_t=np.float64(traj.reduced("n_contact_wall", "last")),
            nbl_rebuilds=np.int64(traj.costs()["extra_counter"] + int(bool(model.use_nbl))),
        )
    return finish(traj, values)


run = make_run(start, collect)


def warmup() -> None:
    """Compile (or load from cache) the driver once, on tiny models, for every map."""
    small = torus(N_p=8)
    for m in METHODS:
        integrate(small, m, 1e-3, 2, 1)
    integrate(replace(small, use_nbl=True), "v2_newmark", 1e-3, 2, 1)
    integrate(so3_pendulum(), "v2_newmark", 1e-2, 2, 1)


def cost_per_step(model: SE3Model, integrator: str) -> float:
    """Rough seconds per step on one core (used only to size slices); same for all maps."""
    n = model.n
    if model.kind == SYS_PENDULUM:
        return 1e-7
    pairs = 6e-7 * n if model.use_nbl else 1.0e-9 * n * (n - 1) / 2
    return 1.0e-7 * n + pairs + 1e-6


FAMILY = FamilyDef(
    name="se3",
    diagnostics=diagnostics,
    sizes=sizes,
    run=run,
    warmup=warmup,
    cost_per_step=cost_per_step,
    state_labels=STATE_LABELS,
    start=start,
    collect=collect,
    order_error_vars=("energy_error_38", "max_rel_energy_error"),
)

_BLOWUP = BLOWUP

INTEGRATORS = (
    IntegratorDef(
        "v2_exact",
        "se3",
        2,
        "Explicit rescaled-Rodrigues VI (paper (23) ≡ (21)): half-kick, drift with the exact increment "
        "Δα = 2h b/(1 + √(1 − h²|b|²)), half-kick; needs h²|b|² < 1 (else status domain).",
        params=(_BLOWUP,),
    ),
    IntegratorDef(
        "v2_newmark",
        "se3",
        2,
        "Truncated (Newmark-like) variant (paper (25)): Δα = h b; symplectic, reversible, conserves P and L "
        "of invariant potentials; no validity condition. Production default.",
        params=(_BLOWUP,),
    ),
    IntegratorDef(
        "v1",
        "se3",
        1,
        "First-order explicit map (paper (27), Campello φ = 1): symplectic-Euler kick then drift with "
        "Δα = h Ω_{k+1}; stored velocities are staggered by O(h).",
        params=(_BLOWUP,),
    ),
)


def _build_torus(**kw) -> SE3Model:
    return torus(**kw)


def _build_pendulum(**kw) -> SE3Model:
    W = (kw.pop("Omega0_x", 0.2), kw.pop("Omega0_y", 0.0), kw.pop("Omega0_z", 0.2))
    return so3_pendulum(Omega0=W, **kw)


SYSTEMS = (
    SystemDef(
        name="torus",
        family="se3",
        doc="Particle-binder torus (ring of N_p spheres, bending/torsion, axial and shear binder, Hertz "
        "contacts) hitting the wall x = 0 edge-on (paper section 4.1, spec torus §4-§5).",
        params=(
            Param("N_p", int, 80, "1", "number of particles (stable h scales like 1/N_p)", ge=3, le=100_000),
            Param("D_t", float, 3.0, "length", "torus (ring) diameter; D_p = D_t sin(π/N_p)", gt=0.0),
            Param("m", float, 1.0, "mass", "mass per particle", gt=0.0),
            Param("J", float, 1.0, "mass·length²", "scalar moment of inertia per particle", gt=0.0),
            Param("K_m", float, 10.0, "energy", "bending/torsion stiffness, U^m = ½ K_m φ²", ge=0.0),
            Param("K_a", float, 200.0, "energy", "axial stiffness, U^a = ½ K_a (L/L0 − 1)²", ge=0.0),
            Param("K_s", float, 200.0, "energy", "shear stiffness", ge=0.0),
            Param("K_pp", float, 2100.0, "energy", "particle-particle Hertz stiffness, U = (2/5) K s^{5/2}", ge=0.0),
            Param("K_pw", float, 2100.0, "energy", "particle-wall Hertz stiffness", ge=0.0),
            Param("v0", float, 1.0, "length / time", "initial speed towards the wall (v = −v0 e1)"),
            Param("g0", float, 0.5, "length", "initial gap between the nearest particle and the wall", ge=0.0),
            Param("tilt", float, 0.0, "rad", "ring plane rotated by γ about e2 (0: planar edge-on impact)"),
            Param(
                "shear",
                str,
                "objective",
                "",
                "shear model: objective (default) or paper_literal (53)",
                choices=SHEAR_MODELS,
            ),
            Param("wall", bool, True, "", "wall at x = 0 present"),
            Param(
                "neighbour_list",
                str,
                "auto",
                "",
                "contact pairs: auto (Verlet list above 256), on, off",
                choices=("auto", "on", "off"),
            ),
        ),
        build=_build_torus,
        time_units="1",
        energy_units="1",
        example={"N_p": 80, "tilt": 0.0, "shear": "objective"},
        figures=(
            Figure("torus_energy_partition", "geosweep.analysis.system_figures:torus_energy_partition"),
            Figure("torus_snapshots", "geosweep.analysis.system_figures:torus_snapshots"),
        ),
    ),
    SystemDef(
        name="so3_pendulum",
        family="se3",
        doc="3-D rigid pendulum on SO(3) (paper section 3): pivot at the origin, U = −m g e3·R e3, "
        "initial rotation angle0 about e2 and spatial angular velocity Ω0.",
        params=(
            Param("m", float, 1.0, "mass", "mass", gt=0.0),
            Param("g", float, 1.0, "length / time²", "gravitational acceleration (along −e3)", gt=0.0),
            Param("J", float, 1.0, "mass·length²", "scalar moment of inertia about the pivot", gt=0.0),
            Param(
                "angle0",
                float,
                0.75 * np.pi,
                "rad",
                "initial rotation angle about e2 (paper: 3π/4)",
                ge=0.0,
                le=3.14159,
            ),
            Param("Omega0_x", float, 0.2, "1 / time", "initial inertial angular velocity, x"),
            Param("Omega0_y", float, 0.0, "1 / time", "initial inertial angular velocity, y"),
            Param("Omega0_z", float, 0.2, "1 / time", "initial inertial angular velocity, z"),
        ),
        build=_build_pendulum,
        time_units="1",
        energy_units="1",
        example={"angle0": 0.75 * np.pi},
    ),
)
