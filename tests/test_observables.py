"""One vocabulary from kernel to store (issue 24 item 3): observables declared once give the
stepper's columns and reductions and the stored diagnostics; the kernels-alone results are read
by the stored names, with the older result names kept as aliases of the same values."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.chain.family import FAMILY as CHAIN
from geosweep.kernels.chain.integrate import _integrate as chain_integrate
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.core import observables
from geosweep.kernels.core.cells import COMMON_DIAGNOSTICS, UNIT_SPHERE_DIAGNOSTICS
from geosweep.kernels.core.trajectory import Reductions
from geosweep.kernels.lie import tableaux
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.s2 import stepper as s2
from geosweep.kernels.s2.family import FAMILY as S2
from geosweep.kernels.s2.integrate import _integrate as s2_integrate
from geosweep.kernels.status import Status
from geosweep.kernels.systems.catalogue import double_spherical_pendulum, spring_pendula
from geosweep.kernels.systems.lj_sphere import lj_sphere
from geosweep.kernels.torus import integrate as torus_integrate
from geosweep.kernels.torus import stepper as se3_stepper
from geosweep.kernels.torus.family import FAMILY as SE3
from geosweep.kernels.torus.model import SYS_PENDULUM, so3_pendulum, torus


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.tobytes() == np.asarray(b, dtype=a.dtype).tobytes()


def test_s2_columns_reductions_and_diagnostics_come_from_one_declaration():
    names = [c for o in s2.OBSERVABLES for c in o.columns]
    assert s2.OBS_NAMES == tuple(names)
    assert names[s2.O_J : s2.O_J + 3] == ["J_x", "J_y", "J_z"] and names[s2.O_STEP_NORM] == "step_norm"
    stored = {d.name for d in S2.diagnostics(None)}
    assert {d.name for d in observables.diagnostics(s2.OBSERVABLES)} <= stored
    assert {d.name for d in UNIT_SPHERE_DIAGNOSTICS} <= stored
    full, axis, none = lj_sphere(), double_spherical_pendulum(), spring_pendula()
    assert (full.symmetry, axis.symmetry, none.symmetry) == ("full", "axis", "none")
    red = s2.make_stepper(full, "rk4").red
    assert red[s2.O_J] == Reductions.DEVNORM3 and red[s2.O_J_AXIS] == Reductions.NONE
    assert red[names.index("unit_error")] == Reductions.MEANMAX and red[s2.O_STEP_NORM] == Reductions.MAX
    red = s2.make_stepper(axis, "rk4").red  # the column of a·J is reduced exactly where a·J is conserved
    assert red[s2.O_J_AXIS] == Reductions.DEV and red[s2.O_J] == Reductions.NONE
    red = s2.make_stepper(none, "rk4").red
    assert red[s2.O_J_AXIS] == Reductions.NONE and red[s2.O_J] == Reductions.NONE


@pytest.mark.parametrize("system", [lj_sphere, double_spherical_pendulum], ids=["lj_sphere", "double_pendulum"])
def test_s2_result_is_keyed_by_the_stored_names(system):
    model = system()
    method = "explicit_vi" if model.is_diagonal else "implicit_vi"
    tr = s2_integrate(model, method, 1e-3, 200, 10)
    assert set(tr.values) == {d.name for d in S2.diagnostics(model)}
    assert tr.status is Status.OK and isinstance(tr.status, Status)
    aliases = {"mean_abs_dE": "mean_abs_energy_error", "max_abs_dE": "max_abs_energy_error",
               "max_rel_dE": "max_rel_energy_error", "drift_slope": "energy_drift_slope",
               "max_unit_error": "max_unit_error", "max_momentum_error": "max_momentum_error"}  # fmt: skip
    for old, new in aliases.items():
        assert _same(tr[new], tr.summary[old]), (old, new)
    assert tr["steps"] == tr.info["steps_done"] and tr["f_evals"] == tr.info["potential_evals"]
    assert _same(tr["energy"], tr.energy) and _same(tr["momentum"], tr.momentum)
    with pytest.raises(KeyError, match="mean_abs_dE.*not a stored name"):
        tr["mean_abs_dE"]


def test_torus_result_is_keyed_by_the_stored_names_and_fails_with_a_status():
    model = torus()
    tr = torus_integrate._integrate(model, "v2_newmark", 1e-3, 300, 10)
    assert set(tr.values) == {d.name for d in SE3.diagnostics(model)}
    assert _same(tr["first_wall_contact_t"], tr.summary["first_wall_t"])
    assert _same(tr["max_abs_energy_error"], tr.summary["max_abs_dE"]) and tr["steps"] == tr.info["steps_done"]
    assert "fail_reason" not in tr.info and set(torus_integrate.FAIL_REASONS) <= set(Status)
    assert tr.fail_reason == torus_integrate.FAIL_REASONS[tr.status]


def test_chain_result_is_keyed_by_the_stored_names():
    model = build_chain(3)
    run = chain_integrate(model, "rkmk45", 1e-2, 50, adaptive=True, tol=1e-8)
    assert set(run.values) == {d.name for d in CHAIN.diagnostics(model)}
    assert run["rejected_steps"] == run.info["rejected"] and run["steps"] == run.info["steps"]
    assert _same(run["energy"], run.energy)


@pytest.mark.parametrize("build", [torus, so3_pendulum], ids=["torus", "so3_pendulum"])
def test_se3_stored_names_come_from_its_declared_observables(build):
    """The SE(3)ⁿ cell stores the shared names plus exactly what its observables declare for the
    model; the column ``U_0`` is one declaration stored as ``U_m`` (torus) or ``U_grav`` (pendulum)."""
    model = build(N_p=8) if build is torus else build()
    own = observables.names(se3_stepper.OBSERVABLES, model)
    assert [d.name for d in SE3.diagnostics(model)] == [d.name for d in COMMON_DIAGNOSTICS] + list(own)
    tr = torus_integrate._integrate(model, "v2_newmark", 1e-3, 40, 10)
    assert set(tr.values) == {d.name for d in SE3.diagnostics(model)}
    (u,) = [o for o in se3_stepper.OBSERVABLES if "U_0" in o.columns]
    stored_u0 = {out.diagnostic.name for out in u.outputs if out.applies(model) and out.column == 0}
    assert stored_u0 == ({"U_grav"} if model.kind == SYS_PENDULUM else {"U_m"})
    assert _same(tr[stored_u0.pop()], tr.field("U_0"))
    assert se3_stepper.OBS_NAMES == observables.obs_names(se3_stepper.OBSERVABLES)


def test_chain_stores_the_same_declared_names_whichever_stepper_runs_it():
    """ts2 cells run on three steppers (Lie, (S²)ⁿ VI, discrete gradients): each stepper's columns
    get the family's outputs attached, and every one stores the family's declared names."""
    from geosweep.kernels.chain import family as chain_family
    from geosweep.kernels.lie import stepper as lie

    model = build_chain(3)
    declared = [d.name for d in CHAIN.diagnostics(model)]
    assert declared == [d.name for d in COMMON_DIAGNOSTICS] + list(observables.names(chain_family.STORED_LIE, model))
    for integrator in ("rkmk4", "implicit_vi", "dg_avf"):
        assert sorted(observables.names(chain_family.stored(integrator), model)) == sorted(
            observables.names(chain_family.STORED_LIE, model)
        )
        traj = CHAIN.start(model, integrator, RunRequest(T=0.05, dt_out=0.01, h=0.01), {})
        traj.advance()
        assert set(CHAIN.collect(model, integrator, traj).values) == set(declared), integrator
    assert lie.OBS_NAMES == observables.obs_names(lie.OBSERVABLES)
    red = lie.make_stepper((None, None, None), np.zeros(1), 1, 1, tableaux.get("rkmk4"), False).red
    assert list(red) == [Reductions.NONE, Reductions.DEVNORM3, Reductions.NONE, Reductions.DEV, Reductions.MEANMAX,
                         Reductions.MAX]  # fmt: skip


@pytest.mark.parametrize("integrator", ["slgi_half", "lp_rkmk4"])
def test_top_integrate_is_keyed_by_the_declared_stored_names(integrator):
    """The heavy top's integrate returns the stored values by name, with a Status; formulations A
    (SLGI columns) and B (the Lie stepper's) declare the same names; the core trajectory it
    returned before stays reachable (deprecated aliases)."""
    from geosweep.kernels.top import family as top

    model = top.heavy_top()
    tr = top._integrate(model, integrator, 1e-3, 20, 5)
    declared = [d.name for d in top.diagnostics(model)]
    assert declared[: len(COMMON_DIAGNOSTICS)] == [d.name for d in COMMON_DIAGNOSTICS]
    assert declared[len(COMMON_DIAGNOSTICS) :] == list(observables.names(top.STORED_SLGI, model))
    assert sorted(observables.names(top.stored(integrator), model)) == sorted(declared[len(COMMON_DIAGNOSTICS) :])
    assert set(tr.values) == set(declared) and isinstance(tr.status, Status) and tr.status is Status.OK
    assert _same(tr["max_dJ3"], top.collect(model, integrator, tr.core).values["max_dJ3"])
    assert tr.S is tr.core.S and _same(tr["energy"], tr.out[:, 0]) and tr.time == tr.core.time  # aliases
    assert tr["steps"] == 20 and tr["final_state"].shape == (1, len(top.STATE_LABELS))


def test_quad_integrate_is_keyed_by_the_declared_stored_names():
    """The quadrotors' stored names are the shared ones plus their declared observables' outputs,
    integrate returns them by name with a Status, and the stepper's columns come from the same
    declaration; the core trajectory's attributes stay as deprecated aliases."""
    from geosweep.kernels.quad import family as quad
    from geosweep.kernels.quad import stepper as qs

    model = quad.two_quadrotors()
    declared = [d.name for d in quad.diagnostics(model)]
    assert declared == [d.name for d in COMMON_DIAGNOSTICS] + list(observables.names(quad.OBSERVABLES, model))
    assert qs.OBS_NAMES == observables.obs_names(quad.OBSERVABLES) and list(qs.RED) == list(
        observables.reductions(quad.OBSERVABLES)
    )
    tr = quad._integrate(model, "quad_rkmk4", 0.1, 20)
    assert set(tr.values) == set(declared) and tr.status is Status.OK
    assert tr["max_thrust"].shape == (2,) and tr["rot_mom"].shape == (21, 2, 3)
    assert _same(tr["max_unit_err"], [tr.core.reduced("unit_err_1"), tr.core.reduced("unit_err_2")])
    assert tr.S is tr.core.S and _same(tr["e_y"], tr.samples("e_y"))  # deprecated aliases of the core


def _request(adaptive: bool, h: float = 1e-3) -> RunRequest:
    return RunRequest(T=4 * h, dt_out=2 * h, tol=1e-6) if adaptive else RunRequest(T=4 * h, dt_out=2 * h, h=h)


def _cases():
    """(family, system, integrator) for every built-in system and every stepper its integrators
    run on (step and observe functions; a fixed-step and an adaptive integrator of each)."""
    from geosweep.kernels.registry import FAMILIES, SYSTEMS, integrators_for, load_builtins

    load_builtins()
    cases = []
    for sname, sd in sorted(SYSTEMS.items()):
        fam = FAMILIES[sd.family]
        model = sd.build(**{p.name: p.default for p in sd.params})
        seen = set()
        for idef in integrators_for(sd):
            if idef.applicable is not None and idef.applicable(model):
                continue
            stepper = fam.start(model, idef.name, _request(idef.adaptive), {}).stepper
            key = (stepper.step, stepper.observe, idef.adaptive)
            if key not in seen:
                seen.add(key)
                cases.append(pytest.param(fam, sd, idef, id=f"{sd.family}-{sname}-{idef.name}"))
    return cases


@pytest.mark.parametrize(("fam", "sd", "idef"), _cases())
def test_every_family_stores_exactly_the_shared_and_its_declared_names(fam, sd, idef):
    """A family's stored names are the shared ones plus its declared observables' outputs, whatever
    stepper the integrator runs on: its diagnostics list and its collect agree, with no duplicate."""
    model = sd.build(**{p.name: p.default for p in sd.params})
    req = _request(idef.adaptive)
    declared = set(observables.names(fam.observables(model, idef.name), model))
    listed = [d.name for d in fam.diagnostics(model)]
    assert len(listed) == len(set(listed))
    assert set(listed) == {d.name for d in COMMON_DIAGNOSTICS} | declared
    traj = fam.start(model, idef.name, req, {p.name: p.default for p in idef.params})
    traj.advance()
    assert set(fam.collect(model, idef.name, traj, {}).values) == set(listed)
