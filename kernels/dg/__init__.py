"""Energy-preserving discrete-gradient integrators for skew-gradient systems ẋ = S(x)∇H(x) (004).

User systems: compile S(x), H(x), ∇H(x) with :func:`dg_skew`, :func:`dg_energy`,
:func:`dg_grad` (and optionally :func:`dg_extra`) and build a :class:`SkewSystem`.
"""

from geosweep.kernels.dg.model import SkewSystem, dg_energy, dg_extra, dg_grad, dg_skew, no_extra

__all__ = ["SkewSystem", "dg_energy", "dg_extra", "dg_grad", "dg_skew", "no_extra"]
