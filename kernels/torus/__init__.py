"""SE(3)ⁿ kernels: the particle-binder torus and the SO(3) pendulum with the explicit
rescaled-Rodrigues variational integrators (spec ``torus.md``).

Modules: :mod:`~geosweep.kernels.torus.rodrigues` (rotation toolkit), :mod:`~geosweep.kernels.torus.forces`
(interaction model), :mod:`~geosweep.kernels.torus.neighbours` (Verlet list), :mod:`~geosweep.kernels.torus.model`
(system builders), :mod:`~geosweep.kernels.torus.integrate` (maps (23), (25), (27) and the driver),
:mod:`~geosweep.kernels.torus.family` (registry declarations: ``FAMILY``, ``INTEGRATORS``, ``SYSTEMS``).
"""
