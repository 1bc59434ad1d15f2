"""The built-in (S²)ⁿ systems: sphere MD (000 Ex. 6) and the catalogue of 000 (Ex. 1, 3, 4)."""

from __future__ import annotations

from kernels.registry import Param, SystemDef
from kernels.systems import catalogue
from kernels.systems.lj_sphere import SIGMA_RULES, lj_sphere


def _lj_build(level, epsilon, sigma_rule, sigma, omega, sense, separation_deg, radius_deg):
    return lj_sphere(level, epsilon, sigma_rule, sigma, omega, sense, separation_deg, radius_deg)


SYSTEMS = (
    SystemDef(
        name="lj_sphere",
        family="s2",
        doc="Lennard-Jones molecules on the unit sphere (000 Ex. 6): icosphere positions, "
        "two Gaussian vortex patches as initial velocities, all pairs, M = I.",
        params=(
            Param("level", int, 3, "1", "icosphere subdivision level (3: n = 642 molecules)", ge=0, le=5),
            Param("epsilon", float, 0.01, "energy", "LJ well depth ε", gt=0.0),
            Param("sigma_rule", str, "mean_edge", "1", "how σ is chosen", choices=SIGMA_RULES),
            Param("sigma", float, None, "length", "σ when sigma_rule = 'explicit'", gt=0.0),
            Param("omega", float, 3.25, "rad / time", "vortex core angular speed Ω", ge=0.0),
            Param("sense", str, "co", "1", "second vortex co- or counter-rotating", choices=("co", "counter")),
            Param("separation_deg", float, 30.0, "degree", "angle between vortex centres", ge=0.0, le=180.0),
            Param("radius_deg", float, 15.0, "degree", "vortex angular radius ρ", gt=0.0, le=180.0),
        ),
        build=_lj_build,
        example={"h": [0.01, 0.005], "T": 5.0, "dt_out": 0.05},
    ),
    SystemDef(
        name="double_pendulum",
        family="s2",
        doc="Double spherical pendulum (000 Ex. 1): coupled M, gravity along +e3, e3·J conserved.",
        params=(
            Param("m1", float, 1.0, "kg", "mass 1", gt=0.0),
            Param("m2", float, 1.0, "kg", "mass 2", gt=0.0),
            Param("l1", float, 9.81, "m", "link 1 length", gt=0.0),
            Param("l2", float, 9.81, "m", "link 2 length", gt=0.0),
            Param("g", float, 9.81, "m / s^2", "gravity", ge=0.0),
        ),
        build=catalogue.double_spherical_pendulum,
        time_units="s",
        energy_units="J",
        example={"h": [0.01], "T": 100.0, "dt_out": 0.1},
    ),
    SystemDef(
        name="spring_pendula",
        family="s2",
        doc="Four spherical pendula on a square of pivots joined by springs (000 Ex. 3); diagonal M.",
        params=(
            Param("m", float, 0.1, "kg", "mass of each pendulum", gt=0.0),
            Param("l", float, 0.1, "m", "link length and pivot spacing", gt=0.0),
            Param("g", float, 9.81, "m / s^2", "gravity", ge=0.0),
            Param("kappa12", float, 10.0, "N / m", "spring 1-2 stiffness", ge=0.0),
            Param("kappa23", float, 20.0, "N / m", "spring 2-3 stiffness", ge=0.0),
            Param("kappa34", float, 30.0, "N / m", "spring 3-4 stiffness", ge=0.0),
            Param("kappa41", float, 40.0, "N / m", "spring 4-1 stiffness", ge=0.0),
        ),
        build=catalogue.spring_pendula,
        time_units="s",
        energy_units="J",
        example={"h": [0.01, 0.005], "T": 20.0, "dt_out": 0.05},
    ),
    SystemDef(
        name="elastic_rod",
        family="s2",
        doc="Pure bending of an elastic rod of n+1 rigid rods, rod 0 clamped (000 Ex. 4); coupled M.",
        params=(
            Param("n", int, 10, "1", "movable rods", ge=1, le=200),
            Param("total_mass", float, 0.055, "kg", "mass of all n+1 rods", gt=0.0),
            Param("total_length", float, 1.1, "m", "length of all n+1 rods", gt=0.0),
            Param("kappa", float, 1000.0, "N m", "bending stiffness κ_i", ge=0.0),
            Param("g", float, 9.81, "m / s^2", "gravity", ge=0.0),
            Param("rod_inertia_mode", str, "paper", "1", "inertia matrix version", choices=("paper", "derived")),
            Param("kick", float, 10.0, "rad / s", "initial ω_z of the kicked rod"),
            Param("kick_rod", int, 5, "1", "index (1..n) of the kicked rod", ge=1),
        ),
        build=catalogue.elastic_rod,
        time_units="s",
        energy_units="J",
        example={"h": [1e-4], "T": 3.0, "dt_out": 0.01},
    ),
)
