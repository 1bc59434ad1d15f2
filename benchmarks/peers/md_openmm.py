"""Peer: the 642-molecule Lennard-Jones sphere in OpenMM (CPU platform), inside its own venv.

Install: ``python3 -m venv /tmp/peer-openmm && /tmp/peer-openmm/bin/pip install openmm numpy``.
As for LAMMPS, each molecule (mass 1) is held at distance 1 from its own heavy pivot at the
origin by a distance constraint; a ``CustomIntegrator`` does velocity Verlet with RATTLE
(half kick, drift, constrain positions, velocity from the constrained displacement, half kick,
constrain velocities). The LJ energy is a ``CustomNonbondedForce`` without cutoff restricted
to one interaction group (the molecules; pivots interact with nothing). OpenMM's units (nm,
ps, amu, kJ/mol) are consistent (1 kJ/mol = 1 amu nm²/ps²), so geosweep's numbers are used as
they are. The CPU platform runs on ``OPENMM_CPU_THREADS`` = 1 thread (set by ``harness.py``)
in its own precision (single-precision forces); energy = ½Σ|v_i|² of the molecules + the LJ
energy, both read from the context.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openmm  # noqa: E402
from _peer import serve, timed  # noqa: E402

PIVOT_MASS = 1.0e12
STATE: dict = {}


def _system(n: int, eps: float, sigma: float) -> openmm.System:
    system = openmm.System()
    for _ in range(n):
        system.addParticle(1.0)
    for _ in range(n):
        system.addParticle(PIVOT_MASS)
    for i in range(n):
        system.addConstraint(i, n + i, 1.0)
    lj = openmm.CustomNonbondedForce("4*eps*((sig/r)^12 - (sig/r)^6)")
    lj.addGlobalParameter("eps", eps)
    lj.addGlobalParameter("sig", sigma)
    lj.setNonbondedMethod(openmm.CustomNonbondedForce.NoCutoff)
    for _ in range(2 * n):
        lj.addParticle([])
    lj.addInteractionGroup(range(n), range(n))
    system.addForce(lj)
    return system


def _rattle_verlet(h: float, tol: float) -> openmm.CustomIntegrator:
    it = openmm.CustomIntegrator(h)
    it.setConstraintTolerance(tol)
    it.addPerDofVariable("x0", 0.0)
    it.addUpdateContextState()
    it.addComputePerDof("v", "v + 0.5*dt*f/m")
    it.addComputePerDof("x0", "x")
    it.addComputePerDof("x", "x + dt*v")
    it.addConstrainPositions()
    it.addComputePerDof("v", "(x - x0)/dt")
    it.addComputePerDof("v", "v + 0.5*dt*f/m")
    it.addConstrainVelocities()
    return it


def op_init(msg: dict) -> dict:
    q = np.load(msg["q0"])
    w = np.load(msg["w0"])
    n = q.shape[0]
    system = _system(n, float(msg["eps"]), float(msg["sigma"]))
    it = _rattle_verlet(float(msg["h"]), float(msg.get("constraint_tol", 1e-10)))
    platform = openmm.Platform.getPlatformByName("CPU")
    ctx = openmm.Context(system, it, platform, {"Threads": "1"})
    ctx.setPositions(np.vstack([q, np.zeros((n, 3))]))
    ctx.setVelocities(np.vstack([np.cross(w, q), np.zeros((n, 3))]))
    STATE.update(ctx=ctx, it=it, n=n)
    props = {k: platform.getPropertyValue(ctx, k) for k in platform.getPropertyNames()}
    return {"versions": {"openmm": openmm.__version__, "numpy": np.__version__}, "platform": props}


def _state() -> tuple[np.ndarray, np.ndarray, float]:
    n = STATE["n"]
    s = STATE["ctx"].getState(getPositions=True, getVelocities=True, getEnergy=True)
    x = s.getPositions(asNumpy=True)._value[:n]
    v = s.getVelocities(asNumpy=True)._value[:n]
    return np.array(x), np.array(v), float(s.getPotentialEnergy()._value)


def op_energy(msg: dict) -> dict:
    every = int(msg["every"])
    E = []
    for k in range(int(msg["steps"]) // every + 1):
        if k:
            STATE["it"].step(every)
        _, v, pe = _state()
        E.append(0.5 * float(np.sum(v * v)) + pe)
    q, v, _ = _state()
    np.save(msg["out"], np.array(E))
    np.save(msg["out_q"], q)
    np.save(msg["out_w"], np.cross(q, v))
    return {}


def op_time(msg: dict) -> dict:
    it = STATE["it"]
    k = int(msg["steps"])

    def run() -> None:
        it.step(k)
        STATE["ctx"].getState(getEnergy=False)  # waits until the steps are done

    return timed(run, int(msg.get("repeats", 1)))


if __name__ == "__main__":
    serve({"init": op_init, "energy": op_energy, "time": op_time})
