"""The ``se3`` family: what an SE(3)ⁿ cell (torus, SO(3) pendulum) stores and how it runs.

The shared names (energy, errors, failure, cost, final and snapshot states) come from
:mod:`geosweep.kernels.core.cells`; the family's own (energy parts, momenta, contacts, chart
margins) from the stepper's declared observables (:data:`geosweep.kernels.torus.stepper.OBSERVABLES`).
Rows after a failure are NaN; the final (last valid) state is stored separately.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from geosweep.kernels.core import observables
from geosweep.kernels.core.cells import (
    BLOWUP,
    COMMON_DIAGNOSTICS,
    blocks_to_bodies,
    common_values,
    finish,
    make_run,
    start_trajectory,
)
from geosweep.kernels.core.observables import Observable
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
from geosweep.kernels.torus.integrate import METHODS, _integrate
from geosweep.kernels.torus.model import SHEAR_MODELS, SYS_PENDULUM, SE3Model, so3_pendulum, torus
from geosweep.kernels.torus.stepper import OBSERVABLES, initial_state, make_stepper

STATE_LABELS = tuple(f"{v}_{c}" for v in ("x", "v", "alpha", "Omega") for c in "xyz")


def diagnostics(model: SE3Model) -> tuple[Diagnostic, ...]:
    """The shared diagnostics and those :data:`~geosweep.kernels.torus.stepper.OBSERVABLES`
    declares for this model (torus or pendulum)."""
    return COMMON_DIAGNOSTICS + observables.diagnostics(OBSERVABLES, model)


def sizes(model: SE3Model) -> dict[str, int]:
    """Per-cell dims besides ``time`` and ``snapshot`` (the sweep sizes those)."""
    return {"body": model.n, "component": 3, "state": 12}


def start(model: SE3Model, integrator: str, request: RunRequest, options: dict) -> Trajectory:
    """A resumable trajectory of one cell (``options``: blowup)."""
    if request.adaptive:
        raise ValueError(f"{integrator} is a fixed-step map: the request needs h, not tol")
    stepper = make_stepper(model, integrator, float(request.h))
    S0, _ = initial_state(stepper, model.x0, model.v0, model.alpha0, model.Omega0)
    return start_trajectory(stepper, S0, request, options)


def collect(model: SE3Model, integrator: str, traj: Trajectory, options: dict | None = None) -> CellResult:
    """The stored values of a finished (or failed) trajectory."""
    values = common_values(traj, blocks_to_bodies(model.n, 4))
    values.update(observables.values(OBSERVABLES, traj, model, integrator))
    return finish(traj, values)


run = make_run(start, collect)


def warmup() -> None:
    """Compile (or load from cache) the driver once, on tiny models, for every map."""
    small = torus(N_p=8)
    for m in METHODS:
        _integrate(small, m, 1e-3, 2, 1)
    _integrate(replace(small, use_nbl=True), "v2_newmark", 1e-3, 2, 1)
    _integrate(so3_pendulum(), "v2_newmark", 1e-2, 2, 1)


def cost_per_step(model: SE3Model, integrator: str) -> float:
    """Rough seconds per step on one core (used only to size slices); same for all maps."""
    n = model.n
    if model.kind == SYS_PENDULUM:
        return 1e-7
    pairs = 6e-7 * n if model.use_nbl else 1.0e-9 * n * (n - 1) / 2
    return 1.0e-7 * n + pairs + 1e-6


def stored(model: SE3Model, integrator: str) -> tuple[Observable, ...]:
    """The observables an SE(3)ⁿ cell stores from (their outputs' ``when`` picks torus or pendulum)."""
    return OBSERVABLES


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
    observables=stored,
)

_BLOWUP = BLOWUP
#: what the second-order variational maps keep: the symplectic form, and P and L of invariant potentials
_VI_KEEPS = ("symplectic", "P and L (invariant potentials)")

INTEGRATORS = (
    IntegratorDef(
        "v2_exact",
        "se3",
        2,
        "Explicit rescaled-Rodrigues VI (paper (23) ≡ (21)): half-kick, drift with the exact increment "
        "Δα = 2h b/(1 + √(1 − h²|b|²)), half-kick; needs h²|b|² < 1 (else status domain).",
        params=(_BLOWUP,),
        preserves=_VI_KEEPS,
    ),
    IntegratorDef(
        "v2_newmark",
        "se3",
        2,
        "Truncated (Newmark-like) variant (paper (25)): Δα = h b; symplectic, reversible, conserves P and L "
        "of invariant potentials; no validity condition. Production default.",
        params=(_BLOWUP,),
        preserves=_VI_KEEPS,
    ),
    IntegratorDef(
        "v1",
        "se3",
        1,
        "First-order explicit map (paper (27), Campello φ = 1): symplectic-Euler kick then drift with "
        "Δα = h Ω_{k+1}; stored velocities are staggered by O(h).",
        params=(_BLOWUP,),
        preserves=("symplectic",),
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
