"""Concrete systems: the sphere MD (Lennard-Jones on S²) and the catalogue examples."""
