"""SE(3)ⁿ models: the particle-binder torus (spec §4–§5) and the SO(3) 3-D pendulum (§3).

State per body: position x, velocity v, attitude α (rescaled Rodrigues, body → inertial)
and inertial angular velocity Ω, each (n, 3) float64. Spherical bodies: scalar mass m and
inertia J shared by all bodies. Kinetic energy ``½ m Σ|v|² + ½ J Σ|Ω|²``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from geosweep.kernels.torus.forces import N_P_TORUS, P_KA, P_KM, P_KPP, P_KPW, P_KS, P_LITERAL, P_WALL, P_XW
from geosweep.kernels.torus.neighbours import NBL_THRESHOLD

SYS_TORUS = 0
SYS_PENDULUM = 1
SHEAR_MODELS = ("objective", "paper_literal")


@dataclass(frozen=True, eq=False)
class SE3Model:
    """A concrete SE(3)ⁿ system with its initial state.

    ``kind``: ``SYS_TORUS`` or ``SYS_PENDULUM``. ``p``: float parameter vector of the force
    kernel (see :mod:`geosweep.kernels.torus.forces`). Torus topology: ``bonds`` (nb, 2) int64 with
    reference vectors ``d0`` (nb, 3) and lengths ``L0``; ``bpart`` (n, 2) bonded partners;
    ``D`` (n,) diameters. ``use_nbl`` selects the Verlet list for contacts (``skin`` in
    length units). ``potential_names`` label the five potential slots.
    """

    name: str
    kind: int
    m: float
    J: float
    p: np.ndarray
    x0: np.ndarray
    v0: np.ndarray
    alpha0: np.ndarray
    Omega0: np.ndarray
    D: np.ndarray
    bonds: np.ndarray
    d0: np.ndarray
    L0: np.ndarray
    bpart: np.ndarray
    use_nbl: bool = False
    skin: float = 0.0
    potential_names: tuple[str, ...] = ("U_m", "U_a", "U_s", "U_pp", "U_pw")
    extras: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.x0.shape[0]


def _f(a, shape=None) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float64)
    return a.reshape(shape) if shape is not None else a


def ring_geometry(N_p: int, D_t: float, g0: float, tilt: float) -> tuple[np.ndarray, float]:
    """Reference positions of the ring (§5) and the particle diameter ``D_p = D_t sin(π/N_p)``.

    Ring in the plane spanned by ``e1' = (cos γ, 0, −sin γ)`` and e2 (γ = ``tilt``), centre
    ``c = ((D_t/2) cos γ + D_p/2 + g0, 0, 0)``; particle ``N_p/2`` is nearest the wall x = 0.
    """
    Dp = D_t * np.sin(np.pi / N_p)
    beta = 2.0 * np.pi * np.arange(N_p) / N_p
    e1 = np.array([np.cos(tilt), 0.0, -np.sin(tilt)])
    e2 = np.array([0.0, 1.0, 0.0])
    c = np.array([0.5 * D_t * np.cos(tilt) + 0.5 * Dp + g0, 0.0, 0.0])
    x = c + 0.5 * D_t * (np.cos(beta)[:, None] * e1 + np.sin(beta)[:, None] * e2)
    return _f(x), float(Dp)


def torus(
    N_p: int = 80,
    D_t: float = 3.0,
    m: float = 1.0,
    J: float = 1.0,
    K_m: float = 10.0,
    K_a: float = 200.0,
    K_s: float = 200.0,
    K_pp: float = 2100.0,
    K_pw: float = 2100.0,
    v0: float = 1.0,
    g0: float = 0.5,
    tilt: float = 0.0,
    shear: str = "objective",
    wall: bool = True,
    neighbour_list: str = "auto",
    skin_factor: float = 0.1,
) -> SE3Model:
    """The particle-binder torus impacting the wall x = 0 (spec §5 defaults).

    ``neighbour_list``: ``"auto"`` (Verlet list above 256 bodies), ``"on"`` or ``"off"``;
    skin = ``skin_factor·D_p``. Initial state: R = I, Ω = 0, v = (−v0, 0, 0).
    """
    if shear not in SHEAR_MODELS:
        raise ValueError(f"shear must be one of {SHEAR_MODELS}, got {shear!r}")
    if N_p < 3:
        raise ValueError("need N_p >= 3")
    if neighbour_list not in ("auto", "on", "off"):
        raise ValueError("neighbour_list must be auto, on or off")
    x0, _ = ring_geometry(N_p, D_t, g0, tilt)
    idx = np.arange(N_p)
    bonds = np.ascontiguousarray(np.stack([idx, (idx + 1) % N_p], axis=1), dtype=np.int64)
    d0 = _f(x0[bonds[:, 0]] - x0[bonds[:, 1]])
    # same operation order as the kernels, so the reference state has L0 ≥ D_p bitwise
    L0 = _f(np.sqrt(d0[:, 0] * d0[:, 0] + d0[:, 1] * d0[:, 1] + d0[:, 2] * d0[:, 2]))
    # D_p = D_t sin(π/N_p) up to round-off; the minimum bond length makes the bonded
    # neighbours touch with s ≤ 0 exactly at rest (contacts engage only under compression)
    Dp = float(L0.min())
    bpart = np.ascontiguousarray(np.stack([(idx - 1) % N_p, (idx + 1) % N_p], axis=1), dtype=np.int64)
    p = np.zeros(N_P_TORUS)
    p[P_KM], p[P_KA], p[P_KS], p[P_KPP], p[P_KPW] = K_m, K_a, K_s, K_pp, K_pw
    p[P_WALL] = 1.0 if wall else 0.0
    p[P_XW] = 0.0
    p[P_LITERAL] = 1.0 if shear == "paper_literal" else 0.0
    v = np.zeros((N_p, 3))
    v[:, 0] = -v0
    use_nbl = neighbour_list == "on" or (neighbour_list == "auto" and N_p > NBL_THRESHOLD)
    return SE3Model(
        name="torus",
        kind=SYS_TORUS,
        m=float(m),
        J=float(J),
        p=p,
        x0=x0,
        v0=_f(v),
        alpha0=np.zeros((N_p, 3)),
        Omega0=np.zeros((N_p, 3)),
        D=_f(np.full(N_p, Dp)),
        bonds=bonds,
        d0=d0,
        L0=L0,
        bpart=bpart,
        use_nbl=bool(use_nbl),
        skin=skin_factor * Dp,
        extras={"D_p": Dp, "D_t": D_t, "tilt": tilt, "g0": g0, "shear": shear, "wall": wall},
    )


def so3_pendulum(
    m: float = 1.0,
    g: float = 1.0,
    J: float = 1.0,
    angle0: float = 0.75 * np.pi,
    Omega0: tuple[float, float, float] = (0.2, 0.0, 0.2),
) -> SE3Model:
    """3-D pendulum (§3): pivot at the origin, ``U = −m g e3·R e3``, J about the pivot.

    Initial attitude: rotation by ``angle0`` about e2 (paper IC: 3π/4, ``Ω(0) = (0.2, 0, 0.2)``).
    Translation is inert (x = v = 0, F = 0), so the SE(3) driver integrates SO(3) only.
    """
    if not 0.0 <= angle0 < np.pi:
        raise ValueError("angle0 must lie in [0, π)")
    a = np.zeros((1, 3))
    a[0, 1] = 2.0 * np.tan(0.5 * angle0)
    z = np.zeros((1, 3))
    return SE3Model(
        name="so3_pendulum",
        kind=SYS_PENDULUM,
        m=float(m),
        J=float(J),
        p=_f([m, g]),
        x0=z.copy(),
        v0=z.copy(),
        alpha0=a,
        Omega0=_f(np.asarray(Omega0, dtype=np.float64), (1, 3)),
        D=np.zeros(1),
        bonds=np.zeros((0, 2), dtype=np.int64),
        d0=np.zeros((0, 3)),
        L0=np.zeros(0),
        bpart=np.full((1, 2), -1, dtype=np.int64),
        potential_names=("U_grav",),
        extras={"g": g},
    )
