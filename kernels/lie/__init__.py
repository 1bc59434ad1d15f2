"""Lie group integrators for SE(3)^N acting on (TS²)^N (RKMK, commutator-free, adaptive pairs).

Modules: :mod:`se3` (group primitives), :mod:`tableaux` (method coefficients),
:mod:`methods` (every family's registry entries generated from the tableaux),
:mod:`driver` (one compiled trajectory driver for every method), :mod:`signatures`
(types of the system callbacks).
"""
