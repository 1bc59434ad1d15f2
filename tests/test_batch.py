"""Cells advanced together and collected together (geosweep.kernels.core.batch, issue 21): every stored
value bitwise the cell run and collected alone, for every Lie group and ambient method of the chain,
finished and failed cells mixed in one stack."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.chain.family import FAMILY, INTEGRATORS
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.core.batch import ARRAYS, advance_together
from geosweep.kernels.quad import family as quad
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.status import Status


def _models() -> list:
    # g = 0 conserves all of L (momentum_error stored), g ≠ 0 only J; one chain of another length
    return [build_chain(3, g=g, ic="random", seed=s) for s in range(2) for g in (0.0, 9.81)] + [build_chain(2)]


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("idef", INTEGRATORS, ids=lambda i: i.name)
def test_cells_collected_together_are_bitwise_the_cells_alone(idef):
    request = RunRequest(T=0.4, dt_out=0.05, tol=1e-6) if idef.adaptive else RunRequest(T=0.4, dt_out=0.05, h=0.01,
                                                                                       snapshot_every=2)  # fmt: skip
    models = _models()
    cases = [(m, {"blowup": 0.5}, request) for m in models]
    coarse = (
        RunRequest(T=0.4, dt_out=0.05, tol=1.0)
        if idef.adaptive
        else RunRequest(T=0.4, dt_out=0.05, h=0.05, snapshot_every=2)
    )
    cases.append((models[1], {"blowup": 1e-13}, coarse))  # fails (energy blow-up) in the same stack
    alone = []
    for model, options, request in cases:
        traj = FAMILY.start(model, idef.name, request, options)
        traj.advance()
        alone.append((traj, FAMILY.collect(model, idef.name, traj, options)))
    assert alone[-1][1].status == Status.ENERGY_BLOWUP and alone[0][1].status == Status.OK
    trajs = [FAMILY.start(model, idef.name, request, options) for model, options, request in cases]
    stacks = advance_together(trajs)
    assert sorted(len(s) for s in stacks) == [1, 5]  # the 3-link chains in one call (a threshold is per row)
    for stack in stacks:
        options = cases[stack.index[0]][1]
        models_of = [cases[i][0] for i in stack.index]
        values = FAMILY.collect_many(models_of, idef.name, stack, options)
        for row, i in enumerate(stack.index):
            traj, res = alone[i]
            assert set(values) == set(res.values)
            for name, value in res.values.items():
                assert _same(value, values[name][row]), (i, name)
            for name in ARRAYS:  # the trajectory's own arrays are its row: its state as run alone
                if name not in ("work", "Sn", "Sd", "sio", "obs", "obs2"):  # scratch
                    assert _same(getattr(traj, name), getattr(trajs[i], name)), (i, name)
            assert int(stack.status[row]) == int(res.status)
            assert trajs[i].wall_time > 0.0


@pytest.mark.parametrize("idef", INTEGRATORS, ids=lambda i: i.name)
def test_cells_started_together_are_bitwise_the_cells_started_alone(idef):
    """The chain's start_many: one stepper per chain length, each row's initial state and parameters."""
    request = RunRequest(T=0.2, dt_out=0.05, tol=1e-6) if idef.adaptive else RunRequest(T=0.2, dt_out=0.05, h=0.01)
    models = _models()
    options = {"blowup": 0.5}
    stacks = FAMILY.start_many(models, idef.name, request, options)
    assert sorted(len(s) for s in stacks) == [1, 4] and sorted(i for s in stacks for i in s.index) == [0, 1, 2, 3, 4]
    for stack in stacks:
        stack.advance()
        values = FAMILY.collect_many([models[i] for i in stack.index], idef.name, stack, options)
        assert stack._trajs is None  # every value computed on the stacked arrays: no trajectory per row built
        for row, i in enumerate(stack.index):
            traj = FAMILY.start(models[i], idef.name, request, options)
            traj.advance()
            res = FAMILY.collect(models[i], idef.name, traj, options)
            assert set(values) == set(res.values)
            for name, value in res.values.items():
                assert _same(value, values[name][row]), (i, name)
            assert _same(traj.S, stack.S[row]) and _same(traj.stepper.p, stack.p[row])
        assert (stack.wall_time > 0).all()


@pytest.mark.parametrize("integrator", sorted(quad.METHODS))
def test_quadrotor_cells_collected_together_are_bitwise_the_cells_alone(integrator):
    """The quadrotors' collect_many (the shared values on the stack, the derived ones row by row)."""
    adaptive = quad.METHODS[integrator].adaptive
    request = RunRequest(T=0.02, dt_out=0.005, tol=1e-6) if adaptive else RunRequest(T=0.02, dt_out=0.005, h=0.0025)
    models = [quad.two_quadrotors(), quad.two_quadrotors(attitude_mode="free_rest", L1=0.5)]
    trajs = [quad.start(m, integrator, request, {}) for m in models]
    (stack,) = advance_together(trajs)
    values = quad.collect_many(models, integrator, stack, {})
    for row, model in enumerate(models):
        traj = quad.start(model, integrator, request, {})
        traj.advance()
        res = quad.collect(model, integrator, traj, {})
        assert set(values) == set(res.values)
        for name, value in res.values.items():
            assert _same(value, values[name][row]), (row, name)
