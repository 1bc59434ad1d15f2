"""Observed convergence orders on the N = 2 chain (spec lie_group_integrators §3, E1 setting).

Random 3D point of (TS²)², L_i = 1, m_i = 1 + 10 U(0,1), T = 0.5, 10…80 steps; the observed
order is the log₂ error ratio of the two finest runs; the reference is DOP853 at 1e-13.
"""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.chain.family import reference_solution
from geosweep.kernels.chain.integrate import _integrate
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.lie import tableaux

T = 0.5
STEPS = (10, 20, 40, 80)


@pytest.fixture(scope="module")
def setting():
    model = build_chain(2, masses="e1", ic="random", seed=1)
    return model, reference_solution(model, T, 1e-13)


def _orders(model, ref, method) -> tuple[np.ndarray, np.ndarray]:
    errs = np.array([np.linalg.norm(_integrate(model, method, T / n, n, n).y - ref) for n in STEPS])
    return np.log2(errs[:-1] / errs[1:]), errs


#: every fixed-step method of the tableaux up to order 5 (order 8: tests/test_lie_order8.py), with
#: the order its record declares
FIXED_STEP = [(m.name, m.order) for m in tableaux.METHODS.values() if not m.adaptive and m.order <= 5]


@pytest.mark.parametrize(("method", "order"), FIXED_STEP)
def test_observed_order(setting, method: str, order: int) -> None:
    model, ref = setting
    p, errs = _orders(model, ref, method)
    slack = 0.35 if order == 5 else 0.25  # order 5 is still pre-asymptotic here (5.28)
    assert abs(p[-1] - order) <= slack, (method, p, errs)
    assert errs[-1] > 1e-13  # still above the reference's accuracy


def test_rkmk4_needs_two_dexpinv_terms(setting) -> None:
    """With one ad-term RKMK4 drops to order 3; two terms restore order 4 (B₃ = 0)."""
    model, ref = setting
    base = tableaux.get("rkmk4")
    p1, _ = _orders(model, ref, base.with_dexp_mode(1))
    p2, _ = _orders(model, ref, base.with_dexp_mode(2))
    assert p1[-1] < 3.5, p1
    assert abs(p1[-1] - 3) <= 0.25, p1
    assert abs(p2[-1] - 4) <= 0.25, p2


def test_rkmk5_two_terms_suffice(setting) -> None:
    model, ref = setting
    p, _ = _orders(model, ref, tableaux.get("rkmk5").with_dexp_mode(2))
    assert abs(p[-1] - 5) <= 0.35, p


@pytest.mark.parametrize(("method", "order"), [("rkmk45", 4), ("cf43", 3), ("cf3", 2), ("cf3b", 2)])
def test_embedded_orders(setting, method: str, order: int) -> None:
    """The embedded formulas (used for the error estimate) have their nominal orders."""
    model, ref = setting
    m = tableaux.get(method)
    if m.kind == tableaux.CF:
        emb = tableaux.Method(
            **{
                **m.__dict__,
                "name": method + "_emb",
                "obase": m.obase[::-1].copy(),
                "onexp": m.onexp[::-1].copy(),
                "obeta": m.obeta[::-1].copy(),
                "s_main": m.stages,
            }
        )
    else:
        emb = tableaux.Method(
            **{**m.__dict__, "name": method + "_emb", "b": m.bhat, "bhat": m.b, "fsal": False, "P": None}
        )
    p, _ = _orders(model, ref, emb)
    assert abs(p[-1] - order) <= 0.25, p
