"""Duplicates merged (issue 24 item 5): one Newton stop test for every Newton-type solve, one
SciPy right-hand side of the pendulum chain, one declaration of the chain's parameters."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from geosweep.kernels.chain.integrate import scipy_rhs
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.chain.rhs import chain_F, chain_F_dense, work_size
from geosweep.kernels.linalg import newton_converged

ROOT = Path(__file__).resolve().parent.parent


def _dg_rule(dx, prev, it, sc):  # the discrete-gradient / DLA rule as it was written in both solvers
    return dx <= sc or (it >= 3 and dx > 0.5 * prev and dx <= 1e3 * sc)


def _slgi_rule(dx, prev, it, tol):  # the SLGI Newton's rule as it was written
    return dx <= tol or (dx <= 1e3 * tol and dx >= 0.5 * prev)


VALUES = [0.0, 1e-16, 5e-16, 1e-15, 2e-15, 1e-14, 2e-13, 1e-12, 1e-9, 1.0, math.inf, math.nan]


@pytest.mark.parametrize("it", [1, 2, 3, 4])
def test_one_stop_test_keeps_each_solvers_rule(it):
    tol = 1e-15
    for dx, prev in itertools.product(VALUES, VALUES + [2e-15 * 2]):
        assert newton_converged(dx, prev, it, tol, 3, False) == _dg_rule(dx, prev, it, tol), (dx, prev, it)
        assert newton_converged(dx, prev, it, tol, 1, True) == _slgi_rule(dx, prev, it, tol), (dx, prev, it)
    # the two rules differ exactly where the old code differed: a halving update, and the second iteration
    assert newton_converged(1e-15, 2e-15, 3, 1e-16, 1, True) and not newton_converged(1e-15, 2e-15, 3, 1e-16, 3, False)


def test_every_newton_solve_uses_the_one_stop_test():
    for path in ("kernels/dg/steppers.py", "kernels/dg/dla.py", "kernels/top/slgi.py"):
        src = (ROOT / path).read_text()
        assert "newton_converged(" in src and "0.5 * prev" not in src and "STALL_RATIO *" not in src, path


@pytest.mark.parametrize("dense", [False, True])
def test_the_chain_scipy_rhs_is_the_compiled_field(dense):
    model = build_chain(4)
    y = model.y0 + 0.01 * np.random.default_rng(1).normal(size=model.y0.shape)
    want = np.empty((4, 6))
    (chain_F_dense if dense else chain_F)(np.ascontiguousarray(y), model.params, np.zeros(work_size(4, dense)), want)
    rhs = scipy_rhs(model, dense=dense)
    got = rhs(0.0, y.ravel())
    assert got.tobytes() == want.ravel().tobytes() and rhs(0.0, y.ravel()) is not got


def test_no_second_scipy_wrapper_of_the_chain_field():
    for path in ("benchmarks/bench_chain.py", "benchmarks/peers/geosweep_side.py", "kernels/chain/family.py"):
        src = (ROOT / path).read_text()
        assert "chain_F(yb" not in src and "chain_F_dense(yb" not in src, path


def test_the_chain_parameters_are_declared_once():
    for path in ("kernels/chain/family.py", "kernels/dg/chain_lp.py"):
        src = (ROOT / path).read_text()
        assert "chain_params(" in src and 'Param("n"' not in src, path
