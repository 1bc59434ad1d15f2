"""Rotation toolkit identities (spec torus §1, §9.1)."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.torus.rodrigues import (
    alpha_to_quat,
    alpha_to_theta,
    expm_so3,
    g_of,
    oplus,
    quat_to_alpha,
    rot,
    theta_to_alpha,
)

SEED = 20240611


@pytest.fixture
def rng() -> np.random.Generator:
    """Each test's own draws (a module-wide generator would give draws that depend on which
    tests ran before, in this process)."""
    return np.random.default_rng(SEED)


def _random_theta(rng: np.random.Generator, n: int, max_angle: float = 3.0) -> np.ndarray:
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    return axis * rng.uniform(0.0, max_angle, size=(n, 1))


def test_rotation_orthogonal_and_equals_exponential(rng):
    thetas = np.vstack([_random_theta(rng, 200), _random_theta(rng, 20, 1e-6)])
    worst_orth = 0.0
    worst_exp = 0.0
    for th in thetas:
        R = rot(theta_to_alpha(th))
        worst_orth = max(worst_orth, np.abs(R.T @ R - np.eye(3)).max())
        worst_exp = max(worst_exp, np.abs(R - expm_so3(th)).max())
    assert worst_orth <= 1e-15
    assert worst_exp <= 1e-15


def test_rotation_of_large_alpha_stays_orthogonal(rng):
    for scale in (1e2, 1e4, 1e6):
        a = rng.normal(size=3) * scale
        R = rot(a)
        assert np.abs(R.T @ R - np.eye(3)).max() <= 1e-15
        assert abs(np.linalg.det(R) - 1.0) <= 1e-15


def test_inverse_is_transpose(rng):
    for th in _random_theta(rng, 50):
        a = theta_to_alpha(th)
        assert np.abs(rot(-a) - rot(a).T).max() <= 1e-15


def test_composition_order(rng):
    """R(α1 ⊕ α2) = R(α2) R(α1); the other order is wrong at O(1)."""
    worst = 0.0
    wrong = 0.0
    for t1, t2 in zip(_random_theta(rng, 100, 2.0), _random_theta(rng, 100, 2.0)):
        a1 = theta_to_alpha(t1)
        a2 = theta_to_alpha(t2)
        R12 = rot(oplus(a1, a2))
        worst = max(worst, np.abs(R12 - rot(a2) @ rot(a1)).max())
        wrong = max(wrong, np.abs(R12 - rot(a1) @ rot(a2)).max())
    assert worst <= 1e-15
    assert wrong > 0.1


def test_relative_rotation_vector(rng):
    """R((−α_i) ⊕ α_j) = R_j R_iᵀ."""
    worst = 0.0
    for ti, tj in zip(_random_theta(rng, 100, 2.5), _random_theta(rng, 100, 2.5)):
        ai = theta_to_alpha(ti)
        aj = theta_to_alpha(tj)
        worst = max(worst, np.abs(rot(oplus(-ai, aj)) - rot(aj) @ rot(ai).T).max())
    assert worst <= 1e-15


def test_alpha_theta_round_trip(rng):
    thetas = np.vstack([_random_theta(rng, 300, 3.1), _random_theta(rng, 30, 1e-5), np.zeros((1, 3))])
    back = alpha_to_theta(theta_to_alpha(thetas))
    assert np.abs(back - thetas).max() <= 1e-15
    alphas = rng.normal(size=(300, 3)) * 2.0
    assert np.abs(theta_to_alpha(alpha_to_theta(alphas)) - alphas).max() <= 1e-15 * 20


def test_angle_and_g_function(rng):
    assert g_of(0.0) == 1.0
    for n in (1e-8, 5e-5, 9.99e-5, 1e-4, 1e-3, 0.5, 3.0, 1e6):
        assert abs(g_of(n) - 2 * np.arctan(n / 2) / n) <= 2e-16 * max(1.0, g_of(n))
    th = _random_theta(rng, 100, 3.0)
    assert np.allclose(
        2 * np.arctan(np.linalg.norm(theta_to_alpha(th), axis=1) / 2),
        np.linalg.norm(th, axis=1),
        rtol=0,
        atol=1e-15,
    )


def _quat_matrix(q: np.ndarray) -> np.ndarray:
    """Standard rotation matrix of a unit quaternion (scalar first)."""
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def test_quaternion_link(rng):
    a = rng.normal(size=(50, 3)) * 3
    q = alpha_to_quat(a)
    assert np.abs(np.linalg.norm(q, axis=1) - 1).max() <= 1e-15
    assert np.abs(quat_to_alpha(q) - a).max() <= 1e-14
    for qi, ai in zip(q, a):
        assert np.abs(_quat_matrix(qi) - rot(ai)).max() <= 1e-15


@pytest.mark.parametrize("turns", [3])
def test_increments_through_singularity_match_quaternions(turns):
    """Many small inertial increments carry a body through kπ; α composition tracks quaternions."""
    axis = np.array([0.3, -0.5, 0.8])
    axis /= np.linalg.norm(axis)
    n = 9425
    dth = turns * np.pi / n
    wobble = np.array([0.0, 1e-3, 0.0])
    a = np.zeros(3)
    q = np.array([1.0, 0.0, 0.0, 0.0])
    for k in range(n):
        th = dth * axis + wobble * np.sin(0.01 * k) * dth
        da = theta_to_alpha(th)
        a = oplus(a, da)
        dq = alpha_to_quat(da)
        # left multiplication dq ⊗ q (inertial increment)
        w1, v1 = dq[0], dq[1:]
        w2, v2 = q[0], q[1:]
        q = np.concatenate([[w1 * w2 - v1 @ v2], w1 * v2 + w2 * v1 + np.cross(v1, v2)])
    R_a = rot(a)
    assert np.linalg.norm(a) > 1e3  # close to the singularity at 3π
    assert np.abs(R_a - _quat_matrix(q / np.linalg.norm(q))).max() <= 1e-12
