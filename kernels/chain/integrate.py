"""Python entry point: integrate a :class:`ChainModel` with a named method.

Fixed-step methods: ``h`` is the step, ``n_steps`` the number of steps, a sample every
``stride`` steps (``t_k = k·stride·h``). Adaptive runs (``adaptive=True``, for methods with an
embedded formula): ``h`` is the output interval Δt_out, ``n_steps`` the number of output
intervals (``T = n_steps·h``), ``stride`` is ignored; see :mod:`kernels.lie.driver`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kernels.chain.model import ChainModel
from kernels.chain.rhs import N_DIAG, chain_diag, chain_F, chain_f, chain_F_dense, work_size
from kernels.lie import tableaux
from kernels.lie.driver import INFO_FIELDS, SUMMARY_FIELDS, run_lie
from kernels.lie.tableaux import AMBIENT, Method
from kernels.status import Status


@dataclass
class ChainRun:
    """Result: ``time`` (K,), ``diag`` (K, 6) = [E, L_x, L_y, L_z, max|1−q·q|, max|q·ω|]
    (NaN after a failure), final (or last valid) state ``y`` (N, 6), driver ``summary`` and
    ``info`` dicts, ``wall_time`` (s)."""

    time: np.ndarray
    diag: np.ndarray
    step_size: np.ndarray
    y: np.ndarray
    summary: dict[str, float]
    info: dict[str, int]
    wall_time: float

    @property
    def status(self) -> Status:
        return Status(self.info["status"])

    @property
    def energy(self) -> np.ndarray:
        return self.diag[:, 0]

    @property
    def momentum(self) -> np.ndarray:
        return self.diag[:, 1:4]


def integrate(
    model: ChainModel,
    method: str | Method,
    h: float,
    n_steps: int,
    stride: int = 1,
    *,
    adaptive: bool = False,
    tol: float = 1e-6,
    theta: float = 0.85,
    exponent: float = 0.25,
    h0: float = 0.0,
    fac_min: float = 0.2,
    fac_max: float = 5.0,
    h_min: float = 1e-12,
    max_steps: int = 10_000_000,
    ambient_rhs: str = "dense",
    y0: np.ndarray | None = None,
) -> ChainRun:
    """Run one trajectory. ``h0 <= 0`` means ``T/100``; ``exponent`` is the controller α;
    ``ambient_rhs`` (``"dense"`` reference formula or ``"fast"`` O(N) path) for AMBIENT kinds."""
    m = tableaux.get(method) if isinstance(method, str) else method
    if h <= 0 or n_steps < 0 or stride < 1:
        raise ValueError("need h > 0, n_steps >= 0, stride >= 1")
    if adaptive and m.bhat is None:
        raise ValueError(f"{m.name} has no embedded formula; cannot run adaptively")
    y = np.ascontiguousarray(model.y0 if y0 is None else y0, dtype=np.float64).copy()
    dense = m.kind == AMBIENT and ambient_rhs == "dense"
    work = np.zeros(work_size(model.n, dense))
    ns = n_steps + 1 if adaptive else n_steps // stride + 1
    out = np.full((ns, N_DIAG + 1), np.nan)  # + the step in force at each sample
    iopt = np.array(
        [m.kind, m.dexp_mode, int(m.fsal), m.s_main, int(m.P is not None), int(adaptive), max_steps], dtype=np.int64
    )
    ctrl = np.array([tol, theta, exponent, h0, fac_min, fac_max, h_min], dtype=np.float64)
    summary = np.empty(len(SUMMARY_FIELDS))
    info = np.empty(len(INFO_FIELDS), dtype=np.int64)
    ffield = chain_F_dense if dense else chain_F
    t0 = time.perf_counter()
    run_lie(
        chain_f,
        ffield,
        chain_diag,
        model.params,
        work,
        *m.arrays(),
        iopt,
        ctrl,
        y,
        float(h),
        int(n_steps),
        int(stride),
        out,
        summary,
        info,
    )
    wall = time.perf_counter() - t0
    dt = h if adaptive else h * stride
    return ChainRun(
        time=np.arange(ns) * dt,
        diag=out[:, :N_DIAG].copy(),
        step_size=out[:, N_DIAG].copy(),
        y=y,
        summary=dict(zip(SUMMARY_FIELDS, summary.tolist())),
        info=dict(zip(INFO_FIELDS, info.tolist())),
        wall_time=wall,
    )
