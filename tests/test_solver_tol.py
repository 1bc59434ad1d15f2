"""``geosweep.integrate``'s ``tol`` on a fixed-step method that declares a solver option ``tol`` (the
(S²)ⁿ implicit VI's fixed point, the heavy top's SLGI Newton stop): it sets that option, bitwise as
the option given in a spec, instead of being refused as an adaptive tolerance (issue 51 item 1)."""

from __future__ import annotations

import numpy as np
import pytest

import geosweep
from geosweep.api import cell_plan, cell_spec
from geosweep.kernels.vocabulary import RUN_DEPENDENT
from geosweep.solution import Solution

GRID = {"T": 0.2, "dt_out": 0.1, "h": 0.01}


@pytest.mark.parametrize(("system", "integrator"), [("double_pendulum", "implicit_vi"), ("heavy_top", "slgi_half")])
def test_tol_of_a_fixed_step_method_is_its_solver_option(system, integrator):
    loose = geosweep.integrate(system, integrator, **GRID, tol=1e-3)
    spec = cell_spec(system, integrator, **GRID, options={"tol": 1e-3})
    as_spec = Solution.compute(cell_plan(spec))
    assert loose.values.keys() == as_spec.values.keys()
    for name, value in loose.values.items():
        if name not in RUN_DEPENDENT:
            assert np.asarray(value).tobytes() == np.asarray(as_spec.values[name]).tobytes(), name
    # the option took effect: a loose stop leaves another trajectory than the default 1e-14
    default = geosweep.integrate(system, integrator, **GRID)
    assert np.asarray(loose["final_state"]).tobytes() != np.asarray(default["final_state"]).tobytes()


def test_tol_stays_the_tolerance_of_an_adaptive_method():
    a = geosweep.integrate("pendulum_chain", "rkmk45", T=0.2, dt_out=0.1, tol=1e-4)
    b = geosweep.integrate("pendulum_chain", "rkmk45", T=0.2, dt_out=0.1, tol=1e-9)
    assert int(a["f_evals"]) < int(b["f_evals"])
