"""SE(3)ⁿ kernels: the particle-binder torus and the SO(3) pendulum with the explicit
rescaled-Rodrigues variational integrators (spec ``torus.md``).

Modules: :mod:`~kernels.torus.rodrigues` (rotation toolkit), :mod:`~kernels.torus.forces`
(interaction model), :mod:`~kernels.torus.neighbours` (Verlet list), :mod:`~kernels.torus.model`
(system builders), :mod:`~kernels.torus.integrate` (maps (23), (25), (27) and the driver),
:mod:`~kernels.torus.family` (registry declarations: ``FAMILY``, ``INTEGRATORS``, ``SYSTEMS``).
"""
