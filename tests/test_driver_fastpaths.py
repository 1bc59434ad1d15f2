"""Fast paths of the shared driver and the Lie stepper (issue 15): the fused SE(3) exponential
action + exact dexp⁻¹ of an RKMK stage agree with the separate operations to round-off, over
the Taylor and the trigonometric ranges of |A| (the fast driver call is checked in
test_driver_nonfinite.py)."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.lie.se3 import DEXPINV_EXACT, dexpinv, dexpinv_kept, exp_act, exp_act_keep


@pytest.mark.parametrize("alpha", [1e-6, 0.03, 0.0999, 0.1001, 0.3, 0.4999, 0.5001, 1.5, 3.0, 6.0])
def test_fused_exp_dexpinv_match_the_separate_operations(alpha):
    rng = np.random.default_rng(int(alpha * 1e4))
    n = 16
    U = rng.normal(size=(n, 6))
    U[:, :3] *= alpha / np.linalg.norm(U[:, :3], axis=1)[:, None]  # |A_i| = alpha
    y = rng.normal(size=(n, 6))
    V = rng.normal(size=(n, 6))
    Y0, Y1, D0, D1, C = (np.zeros((n, 6)) for _ in range(5))
    exp_act(U, y, Y0)
    exp_act_keep(U, y, Y1, C)
    dexpinv(U, V, D0, DEXPINV_EXACT)
    dexpinv_kept(U, V, D1, C)
    # relative to the size of the terms (the exact dexp⁻¹ grows like 1/(2π − α) near 2π)
    assert np.max(np.abs(Y1 - Y0)) <= 8e-16 * np.max(np.abs(Y0)) * (1 + alpha)
    assert np.max(np.abs(D1 - D0)) <= 1e-14 * np.max(np.abs(D0)) * (1 + alpha) ** 2
    # the action stays exact: |Rq| = |q| and (Rq)·(Rω + r×Rq) = q·ω
    q, w, Rq, Rw = y[:, :3], y[:, 3:], Y1[:, :3], Y1[:, 3:]
    assert np.allclose(np.linalg.norm(Rq, axis=1), np.linalg.norm(q, axis=1), rtol=4e-16 * 8, atol=0)
    assert np.allclose((Rq * Rw).sum(1), (q * w).sum(1), rtol=0, atol=1e-14 * (1 + alpha))
