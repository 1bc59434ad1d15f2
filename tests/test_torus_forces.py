"""Forces, torques, objectivity and momentum balance of the torus model (spec §4, §9.2)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from geosweep.kernels.torus.forces import P_KA, P_KM, P_KPP, P_KPW, P_KS
from geosweep.kernels.torus.integrate import evaluate
from geosweep.kernels.torus.model import SE3Model, so3_pendulum, torus
from geosweep.kernels.torus.rodrigues import oplus, theta_to_alpha

EPS = 1e-6
TERMS = {"bending": P_KM, "axial": P_KA, "shear": P_KS, "contact": P_KPP, "wall": P_KPW}


def _only(model: SE3Model, term: str) -> SE3Model:
    """Copy of ``model`` with every stiffness except ``term``'s set to zero."""
    p = model.p.copy()
    for name, idx in TERMS.items():
        if name != term:
            p[idx] = 0.0
    return replace(model, p=p)


def _config(model: SE3Model, seed: int, squeeze: float = 0.5, wall_gap: float | None = 0.2):
    """Random deformed state: ring squeezed towards its centre (bonded and non-bonded
    overlaps), shifted so the body nearest the wall sits at ``wall_gap·D_p`` (wall contact;
    ``None``: no shift), random displacements and attitudes of O(1)."""
    rng = np.random.default_rng(seed)
    x0 = model.x0
    c = x0.mean(axis=0)
    Dp = model.extras["D_p"]
    x = c + squeeze * (x0 - c) + 0.15 * Dp * rng.normal(size=x0.shape)
    if wall_gap is not None:
        x[:, 0] -= x[:, 0].min() - wall_gap * Dp
    alpha = theta_to_alpha(rng.normal(size=x0.shape) * 0.8)
    return np.ascontiguousarray(x), np.ascontiguousarray(alpha)


def _fd(model: SE3Model, x: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Central differences: F = −∂U/∂x, τ = −∂U/∂ξ with R → exp(S(ξ)) R, i.e. α → α ⊕ α(ξ)."""
    Ffd = np.empty_like(x)
    Tfd = np.empty_like(x)
    for i in range(model.n):
        for k in range(3):
            xp = x.copy()
            xm = x.copy()
            xp[i, k] += EPS
            xm[i, k] -= EPS
            Ffd[i, k] = -(evaluate(model, xp, alpha)[0] - evaluate(model, xm, alpha)[0]) / (2 * EPS)
            e = np.zeros(3)
            e[k] = EPS
            ap = alpha.copy()
            am = alpha.copy()
            ap[i] = oplus(alpha[i], theta_to_alpha(e))
            am[i] = oplus(alpha[i], theta_to_alpha(-e))
            Tfd[i, k] = -(evaluate(model, x, ap)[0] - evaluate(model, x, am)[0]) / (2 * EPS)
    return Ffd, Tfd


@pytest.mark.parametrize(("term", "shear"), [(t, "objective") for t in TERMS] + [("shear", "paper_literal")])
def test_forces_and_torques_match_central_differences(term, shear):
    base = _only(torus(N_p=8, shear=shear), term)
    worst = 0.0
    for seed in range(5):
        x, alpha = _config(base, seed)
        U, F, T, aux = evaluate(base, x, alpha)
        assert U > 0.0
        if term == "contact":
            assert aux[5] > 0 and aux[6] > 0, "configuration must engage bonded and non-bonded pairs"
        if term == "wall":
            assert aux[7] > 0
        Ffd, Tfd = _fd(base, x, alpha)
        scale = max(np.abs(F).max(), np.abs(T).max())
        assert scale > 0.0
        worst = max(worst, np.abs(F - Ffd).max() / scale, np.abs(T - Tfd).max() / scale)
    assert worst <= 1e-8


def test_full_model_matches_central_differences():
    model = torus(N_p=8)
    x, alpha = _config(model, 11)
    _, F, T, _ = evaluate(model, x, alpha)
    Ffd, Tfd = _fd(model, x, alpha)
    scale = max(np.abs(F).max(), np.abs(T).max())
    assert np.abs(F - Ffd).max() / scale <= 1e-8
    assert np.abs(T - Tfd).max() / scale <= 1e-8


def test_pendulum_torque_matches_central_differences():
    model = so3_pendulum()
    rng = np.random.default_rng(3)
    for _ in range(10):
        alpha = theta_to_alpha(rng.normal(size=(1, 3)))
        x = np.zeros((1, 3))
        U, F, T, _ = evaluate(model, x, alpha)
        _, Tfd = _fd(replace(model, extras={"D_p": 0.0}), x, alpha)
        assert np.abs(F).max() == 0.0
        assert np.abs(T - Tfd).max() / np.abs(T).max() <= 1e-8


def test_reference_state_is_force_free_and_counts_no_contacts():
    model = torus()
    U, F, T, aux = evaluate(model, model.x0, model.alpha0)
    assert U <= 1e-20
    assert np.abs(F).max() <= 1e-12 and np.abs(T).max() == 0.0
    assert aux[5] == aux[6] == aux[7] == 0.0  # neighbours touch at s = 0 exactly: inactive


def _random_rotation(rng) -> tuple[np.ndarray, np.ndarray]:
    from geosweep.kernels.torus.rodrigues import rot

    aq = theta_to_alpha(rng.normal(size=3) * 1.5)
    return aq, rot(aq)


@pytest.mark.parametrize("shear", ["objective", "paper_literal"])
def test_objectivity(shear):
    """U(Qx + t, QR) = U(x, R) for the objective shear; the literal (53) is not invariant."""
    model = torus(N_p=12, shear=shear, wall=False)
    rng = np.random.default_rng(5)
    worst = 0.0
    for seed in range(5):
        x, alpha = _config(model, 100 + seed, squeeze=0.9, wall_gap=None)
        aq, Q = _random_rotation(rng)
        xq = x @ Q.T + rng.normal(size=3)
        alq = np.array([oplus(a, aq) for a in alpha])  # R(α ⊕ α_Q) = Q R(α)
        for term in ("bending", "axial", "shear", "contact"):
            m = _only(model, term)
            U1 = evaluate(m, x, alpha)[0]
            U2 = evaluate(m, xq, alq)[0]
            rel = abs(U2 - U1) / abs(U1)
            if term == "shear":
                worst = max(worst, rel)
            else:
                assert rel <= 1e-13
    if shear == "objective":
        assert worst <= 1e-13
    else:
        assert worst > 1e-2


@pytest.mark.parametrize("shear", ["objective", "paper_literal"])
def test_per_bond_momentum_balance(shear):
    """Per bond: ΣF = 0 and Σ x×F + Σ τ = 0 (objective); = τ_i ≠ 0 for the literal shear."""
    model = torus(N_p=12, shear=shear, wall=False)
    worst_rel = 0.0
    worst_literal = 0.0
    for seed in range(3):
        x, alpha = _config(model, 200 + seed, squeeze=0.95, wall_gap=None)
        for b in range(model.bonds.shape[0]):
            one = replace(
                model, bonds=model.bonds[b : b + 1].copy(), d0=model.d0[b : b + 1].copy(), L0=model.L0[b : b + 1].copy()
            )
            one = replace(one, p=one.p.copy())
            one.p[P_KPP] = 0.0
            _, F, T, _ = evaluate(one, x, alpha)
            i, j = model.bonds[b]
            assert np.abs(F.sum(axis=0)).max() <= 1e-13 * np.abs(F).max()
            total = np.cross(x, F).sum(axis=0) + T.sum(axis=0)
            scale = np.abs(np.cross(x, F)).max() + np.abs(T).max()
            worst_rel = max(worst_rel, np.abs(total).max() / scale)
            # literal (53): the imbalance is exactly |τ_i| of the shear term (never zero)
            Ts = evaluate(_only(one, "shear"), x, alpha)[2]
            assert np.linalg.norm(Ts[i]) > 1e-6 * scale
            worst_literal = max(worst_literal, abs(np.linalg.norm(total) - np.linalg.norm(Ts[i])) / scale)
    if shear == "objective":
        assert worst_rel <= 1e-10
    else:
        assert worst_rel > 1e-4
        assert worst_literal <= 1e-10


def test_literal_shear_stores_energy_under_rigid_rotation():
    """A rigidly rotated undeformed ring has U = 0 (objective) but U^s > 0 (literal)."""
    rng = np.random.default_rng(9)
    aq, Q = _random_rotation(rng)
    for shear, expect_zero in (("objective", True), ("paper_literal", False)):
        model = torus(N_p=16, shear=shear, wall=False)
        x = model.x0 @ Q.T
        alpha = np.tile(aq, (model.n, 1))
        U, _, _, aux = evaluate(model, x, alpha)
        if expect_zero:
            assert U <= 1e-12
        else:
            assert aux[2] > 1e-3


def test_contact_energy_prefactor_and_wall_signed_gap():
    """U^pp = (2/5) K s^{5/2}; the wall uses the signed gap (a body behind the wall is pushed out)."""
    model = torus(N_p=8, wall=True)
    Dp = model.extras["D_p"]
    x = model.x0.copy()
    x[:, 0] += 10.0  # away from the wall
    x[1] = x[0] + np.array([0.0, 0.0, 0.7 * Dp])
    U, F, _, aux = evaluate(_only(model, "contact"), x, model.alpha0)
    s = 0.3
    assert aux[3] == pytest.approx(0.4 * 2100.0 * s**2.5, rel=1e-14)
    assert F[1, 2] == pytest.approx(2100.0 / Dp * s**1.5, rel=1e-13)
    x2 = model.x0.copy()
    x2[:, 0] += 10.0
    x2[3, 0] = -0.25 * Dp  # behind the wall: s = 1.5
    U, F, _, aux = evaluate(_only(model, "wall"), x2, model.alpha0)
    assert aux[7] == 1.0
    assert F[3, 0] == pytest.approx(2100.0 / (Dp / 2) * 1.5**1.5, rel=1e-13)
    assert U == pytest.approx(0.4 * 2100.0 * 1.5**2.5, rel=1e-13)
