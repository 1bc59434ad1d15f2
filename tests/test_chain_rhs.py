"""Chain vector field: O(N) RHS against the dense formula, invariants, reference values."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.chain.family import reference_solution
from geosweep.kernels.chain.model import (
    ChainModel,
    build_chain,
    dense_energy,
    dense_F,
    dense_f,
    dense_R,
    initial_state,
)
from geosweep.kernels.chain.rhs import chain_diag, chain_F, chain_f, chain_F_dense, rmult, rsolve, work_size
from geosweep.kernels.lie.se3 import generator


def _random_chain(n: int, seed: int) -> ChainModel:
    rng = np.random.default_rng(seed)
    return ChainModel(m=rng.random(n) + 0.5, L=rng.random(n) + 0.5, g=9.81, y0=initial_state(n, "random", seed=seed))


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("n", [1, 2, 5, 20])
def test_fast_rhs_equals_dense(n: int) -> None:
    for seed in range(3):
        mod = _random_chain(n, 100 * n + seed)
        y = mod.y0
        w = np.zeros(work_size(n, True))
        f = np.empty((n, 6))
        F = np.empty((n, 6))
        Fd = np.empty((n, 6))
        assert chain_f(y, mod.params, w, f) == 0
        assert chain_F(y, mod.params, w, F) == 0
        assert chain_F_dense(y, mod.params, w, Fd) == 0
        assert _rel(f, dense_f(mod, y)) <= 1e-12
        assert _rel(F, dense_F(mod, y)) <= 1e-12
        assert _rel(Fd, dense_F(mod, y)) <= 1e-12
        # ω̇ is tangent and ψ_*(f(y))|_y = F(y)
        assert np.abs((y[:, :3] * F[:, 3:]).sum(1)).max() <= 1e-12 * np.abs(F).max()
        g = np.empty((n, 6))
        generator(f, y, g)
        assert _rel(g, F) <= 1e-12


@pytest.mark.parametrize("n", [1, 3, 20])
def test_rmult_and_rsolve(n: int) -> None:
    mod = _random_chain(n, 7 + n)
    q = mod.y0[:, :3]
    rng = np.random.default_rng(n)
    x = np.cross(q, rng.normal(size=(n, 3)))  # tangent
    w = np.zeros(work_size(n))
    Rx = np.empty((n, 3))
    rmult(q, x, mod.params, w, Rx)
    assert _rel(Rx, (dense_R(mod, q) @ x.ravel()).reshape(n, 3)) <= 1e-12
    back = np.empty((n, 3))
    assert rsolve(q, Rx, mod.params, w, back) == 0
    assert _rel(back, x) <= 1e-12


@pytest.mark.parametrize("n", [1, 4, 20])
def test_energy_and_momentum_fast_equal_dense(n: int) -> None:
    mod = _random_chain(n, 55 + n)
    y = mod.y0
    out = np.empty(6)
    E = chain_diag(y, mod.params, np.zeros(work_size(n)), out)
    assert abs(E - dense_energy(mod, y)) <= 1e-12 * abs(E)
    # L = Σ_i π_i with π = R ω
    Rw = (dense_R(mod, y[:, :3]) @ y[:, 3:].ravel()).reshape(n, 3)
    assert np.abs(out[1:4] - Rw.sum(0)).max() <= 1e-12 * np.abs(Rw).max()


@pytest.mark.parametrize(
    ("n", "length_mode", "ic", "E0", "J0"),
    [
        (2, "unit", "paper", 23.3101525703, 0.0),
        (20, "unit", "paper", 2891.71067992, 0.0),
        (20, "scaled", "paper", 453.865170, 0.0),
        (2, "unit", "twisted", 23.935153, 1.767767),
        (20, "unit", "twisted", 3250.460680, 1014.698231),
        (20, "scaled", "twisted", 476.287045, 63.418639),
    ],
)
def test_reference_initial_values(n: int, length_mode: str, ic: str, E0: float, J0: float) -> None:
    d = build_chain(n, length_mode=length_mode, ic=ic, kappa=0.5).diagnostics(
        build_chain(n, length_mode=length_mode, ic=ic, kappa=0.5).y0
    )
    assert abs(d[0] - E0) <= 2e-6 * E0
    assert abs(d[3] - J0) <= 2e-6 * max(1.0, J0)


def test_gravity_free_reference_energies() -> None:
    assert abs(build_chain(2, g=0.0).diagnostics(build_chain(2, g=0.0).y0)[0] - 2.5) <= 1e-12
    assert abs(build_chain(20, g=0.0).diagnostics(build_chain(20, g=0.0).y0)[0] - 1435.0) <= 1e-9


@pytest.mark.parametrize("n", [2, 5])
def test_rhs_is_euler_lagrange_energy_conserved(n: int) -> None:
    """The ODE conserves E (it is the Euler–Lagrange system of T − U): tight DOP853 to T = 3."""
    mod = build_chain(n)
    yT = reference_solution(mod, 3.0, 1e-12)
    E0 = mod.diagnostics(mod.y0)[0]
    assert abs(mod.diagnostics(yT)[0] - E0) <= 1e-9 * E0


def test_twisted_is_tangent_and_random_ic_on_manifold() -> None:
    for ic in ("paper", "twisted", "random", "horizontal_rest"):
        y = initial_state(7, ic, kappa=0.3, seed=3)
        assert np.abs(1 - (y[:, :3] ** 2).sum(1)).max() <= 1e-15
        assert np.abs((y[:, :3] * y[:, 3:]).sum(1)).max() <= 1e-15
