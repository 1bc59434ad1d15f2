"""Mechanical systems on (S²)ⁿ and their integrators.

A system is a constant inertia matrix ``M`` (n×n, diagonal or full) plus a potential written
as one Numba function with the signature :data:`POTENTIAL_SIG`::

    @s2_potential
    def my_potential(q, p, g):      # q: (n, 3) unit vectors, p: float64 parameters
        ...                         # write dV/dq_i into g[i, :] (ordinary R³ gradient)
        return V                    # potential energy

See :class:`geosweep.kernels.s2.model.S2System`; a system is integrated by :func:`geosweep.integrate`
(``integrate`` here is the deprecated kernels-alone alias, one release).
"""

from geosweep.kernels.s2.integrate import METHODS, SUMMARY_FIELDS, Trajectory, integrate
from geosweep.kernels.s2.model import POTENTIAL_SIG, S2System, s2_potential

__all__ = [
    "METHODS",
    "POTENTIAL_SIG",
    "S2System",
    "SUMMARY_FIELDS",
    "Trajectory",
    "integrate",
    "s2_potential",
]
