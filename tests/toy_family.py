"""A fourth family in one file: n uncoupled harmonic oscillators x'' = −ω_i² x (CONTRIBUTING.md (c)).

Everything a family provides — model, step/observe functions with the contract signatures,
method records, declarations — and nothing else: the shared driver does the rest. Each stored
diagnostic beyond the shared ones is an :class:`~geosweep.kernels.core.observables.Observable` in
:data:`OBSERVABLES` plus the line of ``osc_observe`` that computes its column (CONTRIBUTING.md
(d); ``tests/test_recipes.py`` adds one that way).
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.core import observables
from geosweep.kernels.core.cells import BLOWUP, COMMON_DIAGNOSTICS, common_values, finish, make_run, start_trajectory
from geosweep.kernels.core.driver import compile_driver
from geosweep.kernels.core.layout import I_EVALS
from geosweep.kernels.core.observables import Max, Observable
from geosweep.kernels.core.signatures import F1, contract_types
from geosweep.kernels.core.trajectory import Reductions, StepperSpec, Trajectory
from geosweep.kernels.registry import (
    CellResult,
    Diagnostic,
    FamilyDef,
    Figure,
    IntegratorDef,
    Param,
    RunRequest,
    SystemDef,
)

CB = F1  # the model data handed to step/observe: the frequencies ω_i
_STEP, _OBS, _DENSE, _ = contract_types(CB)
METHODS = {"symplectic_euler": 0.0, "verlet": 1.0}
#: the observation columns, their reductions and what a cell stores from them
OBSERVABLES: tuple[Observable, ...] = (
    Observable("energy"),
    Observable("amplitude", Reductions.MAX, (Max(Diagnostic("max_amplitude", (), "1", "max_i |x_i|")),)),
)
O_AMPLITUDE = observables.columns(OBSERVABLES)["amplitude"]


@kjit(_STEP)
def osc_step(w, meth, h, S, Sn, p, work, iwork, info, sio):
    n = w.shape[0]
    for i in range(n):
        x, v, w2 = S[i], S[n + i], w[i] * w[i]
        if meth[0] == 0.0:  # symplectic Euler: kick, drift
            vn = v - h * w2 * x
            Sn[i] = x + h * vn
            Sn[n + i] = vn
        else:  # velocity Verlet
            vh = v - 0.5 * h * w2 * x
            xn = x + h * vh
            Sn[i] = xn
            Sn[n + i] = vh - 0.5 * h * w2 * xn
    info[I_EVALS] += 1
    return 0


@kjit(_OBS)
def osc_observe(w, meth, S, p, work, full, obs):
    n = w.shape[0]
    E = 0.0
    amp = 0.0
    for i in range(n):
        E += 0.5 * (S[n + i] ** 2 + (w[i] * S[i]) ** 2)
        amp = max(amp, abs(S[i]))
    obs[0] = E
    obs[O_AMPLITUDE] = amp


@kjit(_DENSE)
def osc_no_dense(w, meth, theta, h, S, Sn, work, Sd):
    pass


def build(n: int = 3, omega: float = 1.0) -> np.ndarray:
    return omega * (1.0 + np.arange(n, dtype=np.float64))


def make_family(declared: tuple[Observable, ...] = OBSERVABLES, observe=osc_observe) -> FamilyDef:
    """The family's declaration with these observables and this observe kernel (the module's own
    by default; a test adds a diagnostic by passing one more observable and its kernel)."""

    def start(model: np.ndarray, integrator: str, request: RunRequest, options: dict) -> Trajectory:
        n = model.shape[0]
        stepper = StepperSpec(
            drive=compile_driver(CB), step=osc_step, observe=observe, dense=osc_no_dense, cb=model,
            meth=np.array([METHODS[integrator]]), p=np.zeros(1), work_size=1, iwork_size=1, state_size=2 * n,
            n_check=2 * n, obs_names=observables.obs_names(declared), red=observables.reductions(declared, model),
        )  # fmt: skip
        S0 = np.concatenate([np.ones(n), np.zeros(n)])
        return start_trajectory(stepper, S0, request, options)

    def collect(model: np.ndarray, integrator: str, traj: Trajectory, options: dict | None = None) -> CellResult:
        n = model.shape[0]
        values = common_values(traj, lambda x: np.ascontiguousarray(x.reshape(2, n).T))
        values.update(observables.values(declared, traj, model, integrator))
        return finish(traj, values)

    run = make_run(start, collect)
    return FamilyDef(
        name="osc",
        diagnostics=lambda model: COMMON_DIAGNOSTICS + observables.diagnostics(declared),
        sizes=lambda model: {"body": model.shape[0], "state": 2},
        run=run,
        warmup=lambda: run(build(1), "verlet", RunRequest(T=1.0, dt_out=0.5, h=0.5), {}) and None,
        cost_per_step=lambda model, integrator: 1e-8 * model.shape[0],
        state_labels=("x", "v"),
        start=start,
        collect=collect,
        order_error_vars=("max_abs_energy_error",),
        figures=(Figure("oscillator_energy", "tests.toy_family:energy_figure"),),
        observables=lambda model, integrator: declared,
    )


def energy_figure(ds):
    """The family's report figure: energy error against time of every ok cell."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ok = ds["energy_error"].where(ds["status"] == 0)
    for cell in ok.stack(cell=[d for d in ok.dims if d != "time"]).transpose("cell", "time").values:
        ax.plot(ds["time"].values, cell)
    return fig, "Energy error of every ok cell against time.", []


FAMILY = make_family()
start, collect, run = FAMILY.start, FAMILY.collect, FAMILY.run
INTEGRATORS = (
    IntegratorDef("symplectic_euler", "osc", 1, "Kick–drift symplectic Euler.", params=(BLOWUP,)),
    IntegratorDef("verlet", "osc", 2, "Velocity Verlet.", params=(BLOWUP,)),
)
SYSTEMS = (
    SystemDef(
        name="oscillators",
        family="osc",
        doc="n uncoupled harmonic oscillators, ω_i = i·omega, x(0) = 1, v(0) = 0.",
        params=(
            Param("n", int, 3, "1", "number of oscillators", ge=1),
            Param("omega", float, 1.0, "1 / time", "base angular frequency", gt=0.0),
        ),
        build=build,
    ),
)
