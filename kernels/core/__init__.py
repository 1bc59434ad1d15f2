"""The family contract: one resumable trajectory driver shared by every family.

A *family* (a kind of state space: (S²)ⁿ, SE(3)ⁿ, (TS²)ᴺ with Lie group methods, …) supplies
pure Numba functions — ``step``, ``observe`` and, for adaptive methods, ``dense`` — with the
signatures of :mod:`geosweep.kernels.core.signatures`, plus its method as data (a float64 record).
:func:`geosweep.kernels.core.driver.drive` owns everything else: the time grid and sampling,
snapshots, running summaries over every accepted step, the energy blow-up guard, non-finite
checks, failure recording, the last valid state, cost counters, the adaptive controller and
dense output. :class:`geosweep.kernels.core.trajectory.Trajectory` wraps one run in Python and can stop
after any number of steps and continue, bitwise identically.
"""

from geosweep.kernels.core.trajectory import Reductions, StepperSpec, Trajectory

__all__ = ["Reductions", "StepperSpec", "Trajectory"]
