"""geosweep's side of the peer comparisons (main environment): the systems, their state
export to ``.npy`` files for the peers, and the timed geosweep runs.

Chain: the 20-link 3D pendulum (paper IC, m = L = 1, T = 3) with ``rkmk853`` (adaptive),
``rkmk8`` (fixed step), ``dop853_ambient`` and SciPy ``solve_ivp(DOP853)`` on the compiled O(N)
field. MD: ``lj_sphere`` (icosphere level 3, n = 642, ε = 0.01, σ by ``mean_edge``, the
two-vortex velocities) with the explicit VI.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: half decades of tolerance (adaptive methods) and step counts (rkmk8) spanning 1e-3 … 1e-12 final error
TOLS = tuple(float(t) for t in 10.0 ** -np.arange(3.0, 14.5, 0.5))
RKMK8_STEPS = (60, 85, 120, 170, 240, 340, 480, 680, 960, 1360, 1920, 2720, 3840)


def constraint_errors(y: np.ndarray) -> tuple[float, float]:
    """max over states ``y`` (..., N, 6) of abs(‖q_i‖ − 1) and abs(q_i·ω_i)."""
    Y = np.asarray(y).reshape(-1, y.shape[-2], 6)
    q, w = Y[..., :3], Y[..., 3:]
    return float(np.abs(np.linalg.norm(q, axis=2) - 1.0).max()), float(np.abs((q * w).sum(2)).max())


@dataclass
class ChainCase:
    """The chain, its reference final state and the exported files (``y0.npy``, ``params.npy``)."""

    n: int = 20
    T: float = 3.0
    ic: str = "paper"
    ref_steps: int = 24000
    model: object = field(init=False)
    ref: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        from geosweep.kernels.chain.model import build_chain

        self.model = build_chain(self.n, ic=self.ic)

    def reference(self) -> np.ndarray:
        """``rkmk8`` at fixed step T/ref_steps (error ≈ 1e-15 at the default 24 000 steps)."""
        from geosweep.kernels.chain.integrate import _integrate

        k = self.ref_steps
        self.ref = _integrate(self.model, "rkmk8", self.T / k, k, k).y
        return self.ref

    def export(self, d: Path) -> dict[str, str]:
        """Write the initial state and geosweep's packed parameter vector; their paths."""
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "y0.npy", self.model.y0)
        np.save(d / "params.npy", self.model.params)
        return {"y0": str(d / "y0.npy"), "params": str(d / "params.npy"), "T": self.T}

    def error(self, y: np.ndarray) -> float:
        return float(np.linalg.norm(np.asarray(y).reshape(self.n, 6) - self.ref))


@dataclass
class ChainMethod:
    """One method of the work–precision comparison: its knobs (tolerances or step counts),
    ``solve(knob) -> (final y, f-evaluations or steps, max abs(‖q‖−1), max abs(q·ω))`` (untimed
    diagnostics) and ``seconds(knob)`` (one timed whole call: wall and CPU seconds)."""

    name: str
    knobs: tuple
    solve: Callable[[float], tuple[np.ndarray, int, float, float]]
    seconds: Callable[[float], tuple[float, float]]
    side: str = "geosweep"


def chain_methods(case: ChainCase) -> list[ChainMethod]:
    """geosweep's order-8 methods and SciPy's DOP853 (main environment)."""
    from scipy.integrate import solve_ivp

    from geosweep.kernels.chain.integrate import _integrate, scipy_rhs

    model, n, T = case.model, case.n, case.T

    def adaptive(name: str) -> ChainMethod:
        def run(tol: float):
            return _integrate(model, name, T, 1, adaptive=True, tol=tol, exponent=0.125, ambient_rhs="fast")

        def solve(tol: float):
            r = run(tol)
            return r.y, int(r.info["f_evals"]), r.core.reduced("unit_error"), r.core.reduced("tangency_error")

        return ChainMethod(name, TOLS, solve, lambda tol: _clock(lambda: run(tol)))

    def fixed(k: float):
        k = int(k)
        return _integrate(model, "rkmk8", T / k, k, k)

    def fixed_solve(k: float):
        r = fixed(k)
        return r.y, int(r.info["f_evals"]), r.core.reduced("unit_error"), r.core.reduced("tangency_error")

    rhs = scipy_rhs(model)

    def scipy_run(tol: float):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rtol below 2.2e-14 is raised (with a warning)
            return solve_ivp(rhs, (0.0, T), model.y0.ravel(), method="DOP853", rtol=tol, atol=tol)

    def scipy_solve(tol: float):
        r = scipy_run(tol)
        return (r.y[:, -1], int(r.nfev), *constraint_errors(r.y.T.reshape(-1, n, 6)))

    return [
        adaptive("rkmk853"),
        ChainMethod("rkmk8", RKMK8_STEPS, fixed_solve, lambda k: _clock(lambda: fixed(k))),
        adaptive("dop853_ambient"),
        ChainMethod("scipy_dop853", TOLS, scipy_solve, lambda tol: _clock(lambda: scipy_run(tol)), side="scipy"),
    ]


def _clock(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of one call of ``fn``."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


# --------------------------------------------------------------------------------------
# MD: lj_sphere
# --------------------------------------------------------------------------------------
@dataclass
class SphereCase:
    """The 642-molecule LJ sphere (``lj_sphere`` defaults), its normalised, projected initial
    state and step ``h``."""

    level: int = 3
    h: float = 0.005
    system: object = field(init=False)
    q0: np.ndarray = field(init=False)
    w0: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        from geosweep.kernels.s2.model import normalise_and_project
        from geosweep.kernels.systems.lj_sphere import lj_sphere

        self.system = lj_sphere(level=self.level)
        self.q0, self.w0 = normalise_and_project(self.system.q0, self.system.w0)

    @property
    def eps_sigma(self) -> tuple[float, float]:
        return float(self.system.params[0]), float(self.system.params[1])

    def export(self, d: Path) -> dict[str, object]:
        """``q0.npy``, ``w0.npy`` (n, 3) and the scalars a peer needs to set up the same system."""
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "q0.npy", self.q0)
        np.save(d / "w0.npy", self.w0)
        eps, sigma = self.eps_sigma
        return {"q0": str(d / "q0.npy"), "w0": str(d / "w0.npy"), "eps": eps, "sigma": sigma, "h": self.h}

    def energy_run(self, steps: int, every: int):
        """Explicit VI over ``steps`` steps, energy every ``every`` steps: (E (steps/every + 1,), run)."""
        from geosweep.kernels.s2.integrate import _integrate

        r = _integrate(self.system, "explicit_vi", self.h, steps, every)
        return np.asarray(r.energy), r

    def seconds(self, steps: int) -> tuple[float, float]:
        """Wall and CPU seconds of one ``integrate`` call of ``steps`` explicit-VI steps (set-up included)."""
        from geosweep.kernels.s2.integrate import _integrate

        return _clock(lambda: _integrate(self.system, "explicit_vi", self.h, steps, steps))
