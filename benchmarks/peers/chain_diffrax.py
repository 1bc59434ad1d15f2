"""Peer: the N-link 3D pendulum chain in diffrax (JAX), run inside its own venv.

Install: ``python3 -m venv /tmp/peer-diffrax && /tmp/peer-diffrax/bin/pip install diffrax numpy``.
Started by ``run.py`` as a line-protocol server (see ``_peer.py``); nothing of geosweep is
imported. The field is the ambient ODE on (TS²)ᴺ, y = (q_i, ω_i): q̇_i = ω_i × q_i and
ω̇ = R(q)⁻¹ b(q, ω), written in JAX with the O(N) algorithm (prefix/suffix sums, the
tridiagonal M⁻¹ and one tridiagonal solve for the multipliers), i.e. the most favourable
field for the peer; the parameters are geosweep's packed vector ``[g, m, L, μ, G_diag, G_off]``
read from a ``.npy`` file. diffrax integrates it with ``Dopri8`` and a ``PIDController``
(rtol = atol = tol), saving only t = T (timed) or every step (constraint drift, not timed).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffrax  # noqa: E402
import jax  # noqa: E402
from _peer import serve, timed  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

STATE: dict = {}
E3 = jnp.array([0.0, 0.0, 1.0])


def _unpack(p: np.ndarray, n: int) -> dict:
    k = 1 + np.arange(6) * n
    return {
        "g": float(p[0]),
        "L": jnp.asarray(p[k[1] : k[2]]),
        "mu": jnp.asarray(p[k[2] : k[3]]),
        "gd": jnp.asarray(p[k[3] : k[4]]),
        "go": jnp.asarray(p[k[4] : k[5]]),
    }


def _tri(gd, go, s):
    """G s for the symmetric tridiagonal G (diagonal gd, off-diagonal go[:-1]), per component."""
    up = jnp.concatenate([go[:-1, None] * s[1:], jnp.zeros((1, 3))])
    lo = jnp.concatenate([jnp.zeros((1, 3)), go[:-1, None] * s[:-1]])
    return gd[:, None] * s + up + lo


def make_field(pp: dict):
    g, L, mu, gd, go = pp["g"], pp["L"], pp["mu"], pp["gd"], pp["go"]

    def field(t, y, args):
        q, w = y[:, :3], y[:, 3:]
        c = L * jnp.sum(w * w, axis=1)
        term = (mu * c)[:, None] * q
        suffix = jnp.cumsum(term[::-1], axis=0)[::-1] - term  # Σ_{j>i} μ_j c_j q_j
        prefix = jnp.cumsum(c[:, None] * q, axis=0) - c[:, None] * q  # Σ_{j<i} c_j q_j
        v = mu[:, None] * prefix + suffix
        b = L[:, None] * (jnp.cross(q, v) - (mu * g)[:, None] * jnp.cross(q, E3))
        # R(q) x = b on the tangent space: x = q × G(s + λ q), s = b × q, K λ = −q·(G s)
        s = jnp.cross(b, q)
        ts = _tri(gd, go, s)
        rho = -jnp.sum(q * ts, axis=1)
        ko = go[:-1] * jnp.sum(q[:-1] * q[1:], axis=1)
        zero = jnp.zeros(1)
        lam = jax.lax.linalg.tridiagonal_solve(
            jnp.concatenate([zero, ko]), gd, jnp.concatenate([ko, zero]), rho[:, None]
        )[:, 0]
        acc = jnp.cross(q, _tri(gd, go, s + lam[:, None] * q))
        return jnp.concatenate([jnp.cross(w, q), acc], axis=1)

    return field


def _solver(field, T: float, save_steps: bool, max_steps: int):
    term = diffrax.ODETerm(field)
    solver = diffrax.Dopri8()
    saveat = diffrax.SaveAt(steps=True) if save_steps else diffrax.SaveAt(t1=True)

    @jax.jit
    def solve(y0, tol):
        ctrl = diffrax.PIDController(rtol=tol, atol=tol)
        sol = diffrax.diffeqsolve(
            term, solver, 0.0, T, None, y0, saveat=saveat, stepsize_controller=ctrl, max_steps=max_steps
        )
        return sol.ys, sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"]

    return solve


def op_init(msg: dict) -> dict:
    y0 = np.load(msg["y0"])
    n = y0.shape[0]
    field = make_field(_unpack(np.load(msg["params"]), n))
    STATE.update(
        y0=jnp.asarray(y0),
        T=float(msg["T"]),
        final=_solver(field, float(msg["T"]), False, int(msg.get("max_steps", 100_000))),
        steps=_solver(field, float(msg["T"]), True, int(msg.get("max_steps_saved", 40_000))),
        field=jax.jit(lambda y: field(0.0, y, None)),
    )
    return {"versions": {"diffrax": diffrax.__version__, "jax": jax.__version__, "numpy": np.__version__}}


def op_field(msg: dict) -> dict:
    """The field at one state (a check of the JAX formula against geosweep's compiled one)."""
    np.save(msg["out"], np.asarray(STATE["field"](jnp.asarray(np.load(msg["y"])))))
    return {}


def op_solve(msg: dict) -> dict:
    tol = float(msg["tol"])
    if msg.get("steps"):
        ys, acc, rej = STATE["steps"](STATE["y0"], tol)
        ys = np.asarray(ys)[: int(acc)]
    else:
        ys, acc, rej = STATE["final"](STATE["y0"], tol)
        ys = np.asarray(ys)[-1]
    np.save(msg["out"], ys)
    return {"accepted": int(acc), "rejected": int(rej)}


def op_time(msg: dict) -> dict:
    tol = float(msg["tol"])
    fn = STATE["final"]
    return timed(lambda: fn(STATE["y0"], tol)[0].block_until_ready(), int(msg.get("repeats", 1)))


if __name__ == "__main__":
    serve({"init": op_init, "field": op_field, "solve": op_solve, "time": op_time})
