"""Formulation C's relative energy error is relative to the same physical energy as formulation A's
(issue 22 item 7a): slgikk_half's E0 = H_C(0) carries the auxiliary ½|p(0)|² = ½(Mgℓ)²."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.registry import RunRequest
from geosweep.kernels.top.family import diagnostics, run
from geosweep.kernels.top.model import heavy_top

TOP = heavy_top()


def test_slgikk_half_and_slgi_half_give_the_same_relative_energy_error():
    req = RunRequest(T=3.0, dt_out=0.05, h=0.01)
    a = run(TOP, "slgi_half", req, {}).values
    b = run(TOP, "slgikk_half", req, {}).values
    assert b["E0"] - a["E0"] == pytest.approx(0.5 * TOP.mgl**2, rel=1e-14)
    # the same trajectory and absolute error; now the same relative error (before: 9.2× smaller)
    assert abs(b["max_rel_energy_error"] / a["max_rel_energy_error"] - 1.0) < 1e-6
    np.testing.assert_allclose(b["rel_energy_error"], a["rel_energy_error"], rtol=1e-6, atol=1e-14)
    np.testing.assert_allclose(b["drift_last10"], a["drift_last10"], rtol=1e-6)


def test_the_store_attrs_say_which_energy_the_relative_error_divides_by():
    desc = {d.name: d.description for d in diagnostics(TOP)}
    assert "slgikk_half" in desc["rel_energy_error"] and "½|p(0)|²" in desc["max_rel_energy_error"]
