"""Torus impact dynamics: momenta, energy, failures, neighbour list (spec §5, §9.5–9.7)."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.status import Status
from geosweep.kernels.torus.integrate import _integrate
from geosweep.kernels.torus.model import so3_pendulum, torus

METHODS = ("v2_exact", "v2_newmark", "v1")
# spec §5 [M]: max|E − E0|/E0 at h = 1e-3, t_N = 25 (planar baseline)
MAX_REL_DE = {"v2_newmark": 2.2e-3, "v2_exact": 3.2e-3, "v1": 1.5e-2}


def _energy_error_38(tr) -> float:
    t = tr.time
    E = tr.field("E_total")
    E0 = E[0]
    return float(np.sqrt(np.trapezoid((E - E0) ** 2, t)) / (abs(E0) * np.sqrt(t[-1] - t[0])))


def _random_spin_state(model, seed: int = 7):
    rng = np.random.default_rng(seed)
    v = model.v0 + rng.normal(scale=0.5, size=model.v0.shape)
    W = rng.normal(scale=0.5, size=model.v0.shape)
    return v, W


@pytest.mark.parametrize("method", METHODS)
def test_wall_free_random_spin_conserves_momenta(method):
    """No wall, random v and Ω perturbations, tilted ring: ΔP, ΔL ≤ 1e-12 over t = 5."""
    model = torus(wall=False, tilt=np.pi / 6)
    v, W = _random_spin_state(model)
    tr = _integrate(model, method, 1e-3, 5000, 10, v0=v, Omega0=W)
    assert tr.status == Status.OK
    dP = np.abs(tr.P - tr.P[0]).max()
    dL = np.abs(tr.L - tr.L[0]).max()
    assert dP <= 1e-12 and dL <= 1e-12, (dP, dL)
    assert np.abs(tr.L[0]).max() > 1.0  # non-trivial angular momentum
    assert tr.summary["max_rel_dE"] <= (1.2e-2 if method == "v1" else 1.5e-3)


def test_literal_shear_breaks_angular_momentum():
    """Same wall-free run with the literal (53): L drifts at O(1) while P holds."""
    model = torus(wall=False, tilt=np.pi / 6, shear="paper_literal")
    v, W = _random_spin_state(model)
    tr = _integrate(model, "v2_newmark", 1e-3, 5000, 10, v0=v, Omega0=W)
    assert tr.status == Status.OK
    assert np.abs(tr.P - tr.P[0]).max() <= 1e-12
    assert np.abs(tr.L - tr.L[0]).max() > 0.1


def _check_wall_momenta(tr, planar: bool, tol_after: float = 1e-12):
    """P_y, P_z, L_x exact throughout; all six constant after the last wall contact."""
    P = tr.P
    L = tr.L
    assert np.abs(P[:, 1] - P[0, 1]).max() <= 1e-12
    assert np.abs(P[:, 2] - P[0, 2]).max() <= 1e-12
    assert np.abs(L[:, 0] - L[0, 0]).max() <= 1e-12
    t_last = tr.summary["last_wall_t"]
    assert 3.0 < t_last < 8.0
    after = tr.time > t_last + 1e-9
    assert after.sum() > 100
    PL = np.hstack([P, L])[after]
    assert np.abs(PL - PL[0]).max() <= tol_after
    for key in ("dP_free_x", "dP_free_y", "dP_free_z", "dL_free_x", "dL_free_y", "dL_free_z"):
        assert tr.summary[key] <= tol_after
    # the wall does change P_x (rebound) and, unless planar, L_y
    assert P[-1, 0] > 5.0
    if not planar:
        assert np.abs(L[:, 1] - L[0, 1]).max() > 1.0


@pytest.mark.parametrize("method", METHODS)
def test_baseline_impact(method):
    """Planar baseline, h = 1e-3, t_N = 25: energy error, momenta, contacts (spec §5)."""
    model = torus()
    tr = _integrate(model, method, 1e-3, 25_000, 10)
    assert tr.status == Status.OK and tr.info["steps_done"] == 25_000
    assert not np.isnan(tr.samples[:, :24]).any()
    assert tr.summary["E0"] == 40.0
    rel = tr.summary["max_rel_dE"]
    assert MAX_REL_DE[method] / 2 <= rel <= 2 * MAX_REL_DE[method], rel
    assert 0.49 < tr.summary["first_wall_t"] < 0.52
    _check_wall_momenta(tr, planar=True)
    # planar motion: z ≡ 0 and α ∥ e3
    assert np.abs(tr.x[:, 2]).max() == 0.0 and np.abs(tr.alpha[:, :2]).max() == 0.0
    # energy parts as in spec §5 (peak values, chaotic → generous bands)
    peaks = {k: np.max(tr.field(k)) for k in ("KE_rot", "U_0", "U_1", "U_2", "U_3", "U_4")}
    assert 10 < peaks["KE_rot"] < 25 and 12 < peaks["U_0"] < 25 and 5 < peaks["U_2"] < 12
    assert 0.9 < peaks["U_4"] < 1.3
    assert tr.summary["max_hb2"] < 1e-5
    parts = tr.samples[:, :7].sum(axis=1)
    assert np.abs(parts - tr.field("E_total")).max() <= 1e-12 * 40


def test_baseline_energy_error_38():
    model = torus()
    tr = _integrate(model, "v2_newmark", 1e-3, 25_000, 10)
    e38 = _energy_error_38(tr)
    assert 6.8e-4 / 2 <= e38 <= 2 * 6.8e-4, e38


@pytest.mark.parametrize("method", ["v2_newmark", "v1"])
def test_tilted_impact(method):
    model = torus(tilt=np.pi / 6)
    tr = _integrate(model, method, 1e-3, 25_000, 10)
    assert tr.status == Status.OK
    assert tr.summary["max_rel_dE"] <= (4e-2 if method == "v1" else 6e-3)
    _check_wall_momenta(tr, planar=False)


@pytest.mark.parametrize("blowup", [0.5, 0.0])
def test_large_step_fails_with_partial_record(blowup):
    """h = 1e-2 (paper Fig 5) is unstable: failure status, finite record up to it, NaN after."""
    model = torus()
    tr = _integrate(model, "v2_newmark", 1e-2, 2_500, 1, blowup=blowup)
    assert tr.status == (Status.ENERGY_BLOWUP if blowup > 0 else Status.NONFINITE)
    assert tr.fail_reason == ("energy_blowup" if blowup > 0 else "nonfinite")
    k = tr.info["fail_step"]
    assert 5 < k < 200
    last = tr.info["steps_done"]
    assert last == (k if blowup > 0 else k - 1)
    assert np.isfinite(tr.samples[: last + 1, :24]).all()
    assert np.isnan(tr.samples[last + 1 :]).all()
    assert np.isfinite(tr.x).all() and np.isfinite(tr.Omega).all() and np.isfinite(tr.alpha).all()


def test_rotation_increment_failure_keeps_last_state():
    """(23) needs h²|b|² < 1: a fast spin fails at once with DOMAIN; (25) runs on."""
    model = so3_pendulum(Omega0=(30.0, 0.0, 0.0))
    tr = _integrate(model, "v2_exact", 0.05, 10, 1)
    assert tr.status == Status.DOMAIN and tr.fail_reason == "rotation_increment"
    assert tr.info["fail_step"] == 1 and tr.info["steps_done"] == 0 and tr.info["fail_index"] == 0
    assert tr.summary["fail_value"] >= 1.0
    assert np.array_equal(tr.alpha, model.alpha0) and np.array_equal(tr.Omega, model.Omega0)
    assert np.isfinite(tr.samples[0, :24]).all() and np.isnan(tr.samples[1:]).all()
    assert _integrate(model, "v2_newmark", 0.05, 10, 1).status == Status.OK


@pytest.mark.parametrize("method", METHODS)
def test_chart_singular_failure(method):
    """An attitude composed to |α| > 1e12 (rotation angle π) ends with CHART_SINGULAR."""
    h = 1e-3
    a0 = np.array([[0.0, 1e11, 0.0]])
    model = so3_pendulum()
    tr = _integrate(model, method, h, 10, 1, alpha0=a0, Omega0=[[0.0, 3.9e-11 / h, 0.0]], blowup=0.0)
    assert tr.status == Status.CHART_SINGULAR and tr.fail_reason == "chart_singular"
    assert tr.info["fail_step"] == 1 and tr.summary["fail_value"] > 1e12
    assert np.array_equal(tr.alpha, a0)


def test_energy_parts_and_snapshots():
    model = torus()
    tr = _integrate(model, "v2_newmark", 1e-3, 2_500, 10)
    assert np.allclose(tr.snap_time, [0.0, 1.0, 2.0])
    assert np.array_equal(tr.snap[0, :, 0:3], model.x0)
    assert np.array_equal(tr.snap[0, :, 3:6], model.v0)
    # snapshot at t = 1 equals the sample-time state of a run that stops there
    tr1 = _integrate(model, "v2_newmark", 1e-3, 1_000, 10)
    assert np.array_equal(tr.snap[1, :, 0:3], tr1.x) and np.array_equal(tr.snap[1, :, 9:12], tr1.Omega)
    assert np.array_equal(tr.samples[:101], tr1.samples)


def test_neighbour_list_matches_all_pairs_bitwise():
    """N_p = 300 (> 256): Verlet list and all-pairs give identical trajectories through impact."""
    kw = dict(N_p=300, g0=0.02, tilt=0.3)
    on = torus(neighbour_list="on", **kw)
    off = torus(neighbour_list="off", **kw)
    assert torus(neighbour_list="auto", **kw).use_nbl and not torus(neighbour_list="auto").use_nbl
    n = 1_500
    a = _integrate(on, "v2_newmark", 2e-4, n, 10)
    b = _integrate(off, "v2_newmark", 2e-4, n, 10)
    assert a.status == b.status == Status.OK
    assert np.nanmax(a.field("n_contact_wall")) > 0 and np.nanmax(a.field("n_contact_bonded_pp")) > 0
    assert a.info["nbl_rebuilds"] > 1
    assert np.array_equal(a.samples, b.samples)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.alpha, b.alpha)


@pytest.mark.parametrize("method", ["v2_newmark"])
def test_bounded_energy_short(method):
    """CI version of the long-time check: h = 1e-3 stays within 1 % over t = 50, while
    h = 2e-3 already drifts upward (spec §5: +3.5 % at t = 50)."""
    model = torus()
    good = _integrate(model, method, 1e-3, 50_000, 100)
    assert good.status == Status.OK and good.summary["max_rel_dE"] <= 1e-2
    bad = _integrate(model, method, 2e-3, 25_000, 50)
    assert bad.status == Status.OK
    dE = (bad.field("E_total") - 40.0) / 40.0
    assert dE[-1] > 5e-3 and bad.summary["drift_slope"] > 0.0


@pytest.mark.slow
def test_long_time_bounded_energy():
    """h = 1e-3, t_N = 500 (25): bounded, no systematic drift, momenta exact (spec §5).

    The error wanders chaotically (non-smooth contacts): spec [M] max 9.3e-3, this kernel
    1.8e-2 (25-unit window means within ±1.5e-2); the bound below leaves room for that
    and is still ~50× below the h = 2e-3 drift (+137 % at t = 500)."""
    model = torus()
    tr = _integrate(model, "v2_newmark", 1e-3, 500_000, 100)
    assert tr.status == Status.OK
    assert tr.summary["max_rel_dE"] <= 3e-2
    t = tr.time
    dE = (tr.field("E_total") - 40.0) / 40.0
    slope = np.polyfit(t, dE, 1)[0]
    assert abs(slope) <= 1e-4  # spec: 1.8e-5 per time unit vs 2.8e-3 at h = 2e-3
    # after t ≈ 4 the ring flies off (|x| ~ 90 at t = 500): round-off in Σ m x×v over 5e5
    # steps accumulates to ~1e-11 in L_z, i.e. ~1e-16 relative to Σ m|x||v| per step
    _check_wall_momenta(tr, planar=True, tol_after=5e-11)


@pytest.mark.slow
def test_long_time_drift_at_2e3():
    """h = 2e-3, t_N = 500 (25): energy drifts upward by O(100 %); momenta stay exact."""
    model = torus()
    tr = _integrate(model, "v2_newmark", 2e-3, 250_000, 50, blowup=10.0)
    assert tr.status == Status.OK
    dE = (tr.field("E_total") - 40.0) / 40.0
    assert 0.5 <= dE[-1] <= 3.0
    assert np.polyfit(tr.time, dE, 1)[0] > 1e-3
    assert np.abs(tr.P[:, 1]).max() <= 1e-12 and np.abs(tr.L[:, 0]).max() <= 1e-12


def _q_err_true(tr, ref) -> float:
    """q_err_true of spec §3 on the common snapshot grid (x, v, ang(R_h R_refᵀ), Ω)."""
    from geosweep.kernels.torus.rodrigues import alpha_to_quat

    a = tr.snap
    b = ref.snap
    t = tr.snap_time
    assert np.allclose(t, ref.snap_time)
    qh = alpha_to_quat(a[:, :, 6:9])
    qr = alpha_to_quat(b[:, :, 6:9]) * np.array([1.0, -1.0, -1.0, -1.0])
    w = qh[..., 0] * qr[..., 0] - np.sum(qh[..., 1:] * qr[..., 1:], axis=-1)
    vec = qh[..., :1] * qr[..., 1:] + qr[..., :1] * qh[..., 1:] + np.cross(qh[..., 1:], qr[..., 1:])
    ang = 2 * np.arctan2(np.linalg.norm(vec, axis=-1), np.abs(w))
    num = (
        np.sum((a[:, :, 0:6] - b[:, :, 0:6]) ** 2, axis=(1, 2))
        + np.sum((a[:, :, 9:12] - b[:, :, 9:12]) ** 2, axis=(1, 2))
        + np.sum(ang**2, axis=1)
    )
    th = 2 * np.arctan(np.linalg.norm(b[:, :, 6:9], axis=-1) / 2)
    den = np.sum(b[:, :, 0:6] ** 2, axis=(1, 2)) + np.sum(b[:, :, 9:12] ** 2, axis=(1, 2)) + np.sum(th**2, axis=1)
    return float(np.sqrt(np.trapezoid(num, t) / np.trapezoid(den, t)))


@pytest.fixture(scope="module")
def impact_reference():
    """(23) at h = 3.125e-5 to t = 1.5 (first impact), snapshots every 0.01."""
    return _integrate(torus(), "v2_exact", 3.125e-5, 48_000, 320, snapshot_interval=0.01)


# spec §5 [M], t_N = 1.5, h = 2e-3 … 2.5e-4: last two E slopes and last q_err_true slope
IMPACT_SLOPES = {"v2_newmark": ((2.10, 2.05), 2.05), "v2_exact": ((2.10, 2.05), 2.05), "v1": ((1.05, 1.00), 1.3)}


@pytest.mark.parametrize("method", list(IMPACT_SLOPES))
def test_impact_convergence(method, impact_reference):
    """Torus convergence over the first impact (t_N = 1.5, spec §5 table)."""
    e_err = []
    q_err = []
    for h in (2e-3, 1e-3, 5e-4, 2.5e-4):
        tr = _integrate(torus(), method, h, int(round(1.5 / h)), int(round(0.01 / h)), snapshot_interval=0.01)
        assert tr.status == Status.OK
        e_err.append(_energy_error_38(tr))
        q_err.append(_q_err_true(tr, impact_reference))
    e_slopes = np.log2(np.array(e_err[:-1]) / np.array(e_err[1:]))
    q_slopes = np.log2(np.array(q_err[:-1]) / np.array(q_err[1:]))
    (s1, s2), qs = IMPACT_SLOPES[method]
    assert abs(e_slopes[1] - s1) <= 0.1 and abs(e_slopes[2] - s2) <= 0.1, e_slopes
    assert abs(q_slopes[-1] - qs) <= 0.1, q_slopes
    first = 1.4e-3 if method != "v1" else 4.0e-3
    assert first / 1.2 <= e_err[0] <= first * 1.2


@pytest.mark.parametrize("method", METHODS)
def test_nonfinite_initial_state_is_reported(method):
    """A non-finite initial state fails at step 0 with NONFINITE: no sample, state untouched."""
    model = so3_pendulum()
    tr = _integrate(model, method, 1e-2, 5, 1, Omega0=[[np.inf, 0.0, 0.0]])
    assert tr.status == Status.NONFINITE and tr.fail_reason == "nonfinite"
    assert tr.info["fail_step"] == 0 and tr.info["steps_done"] == 0
    assert np.isnan(tr.samples).all()
    assert np.array_equal(tr.alpha, model.alpha0)
