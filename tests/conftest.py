"""Shared fixtures. The ``s2_`` fixtures serve the (S²)ⁿ physics tests (spec sphere.md)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def s2_lj_default():
    """Sphere MD, Ex. 6, default parameters (level 3, ε = 0.01, σ = mean_edge, Ω = 3.25 co)."""
    from geosweep.kernels.systems.lj_sphere import lj_sphere

    return lj_sphere()


@pytest.fixture(scope="session")
def s2_lj_default_run(s2_lj_default):
    """Explicit VI on Ex. 6 with the spec's reference setting h = 0.005, T = 5 (N = 1000),
    every step sampled (~1 s)."""
    from geosweep.kernels.s2.integrate import integrate

    return integrate(s2_lj_default, "explicit_vi", 0.005, 1000, stride=1)
