"""The single-core cost of every cell before a sweep runs: a few steps of each integrator (and each
tolerance of an adaptive one) timed on this machine on each parameter combination (CPU time, so a
busy machine does not inflate them); beyond :data:`PROBED_COMBINATIONS` combinations only the first
is probed and the family's cost model (``FamilyDef.cost_per_step``) carries it to the others.
Adaptive cells take their steps per unit time from the probe."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from geosweep.sweeps.grid import Cell
from geosweep.sweeps.plan import Plan

#: seconds of probing per (integrator, tolerance, combination): batches enough for a stable fastest one
#: (two consecutive ``geosweep validate`` agree within a few per cent; tests/test_estimate.py)
PROBE_SECONDS = 0.1
#: timed batches of one size per probe at least (the fastest counts, see ``_time_steps``)
PROBE_BATCHES = 3
#: seconds of probing in all, at most (the budget per probe shrinks with their number)
PROBE_TOTAL_SECONDS = 3.0


def _time_steps(traj: Any, budget: float) -> tuple[float, float]:
    """Time ``traj`` for about ``budget`` seconds: (CPU seconds per step, steps per unit time).

    Batches of 4, 16, 64 … steps until one takes a tenth of the budget, then batches of that size
    until the budget is spent (at least :data:`PROBE_BATCHES`). The time per step is the fastest
    batch's: the first calls (buffers, first sample) and the Python call per batch do not count,
    and neither does what other processes on a shared machine add (shared caches, memory
    bandwidth, a virtual machine's stolen time count as this thread's CPU time too). They slow some
    batches, never speed one up, so the fastest batch is what a second probe finds again."""
    k0, t_start = traj.steps, traj.time
    n, best, cpu_all, sized = 4, None, 0.0, 0
    t0 = time.perf_counter()
    while not traj.finished:
        k, c0 = traj.steps, time.thread_time()
        traj.advance(steps=n)
        cpu = time.thread_time() - c0
        cpu_all += cpu
        if traj.steps - k == n and (n > 4 or sized):
            best = min(best, cpu / n) if best is not None else cpu / n
        sized += bool(sized) or cpu >= budget / 10
        elapsed = time.perf_counter() - t0
        if (elapsed >= budget and sized > PROBE_BATCHES) or elapsed >= 4 * budget:
            break
        if not sized:
            n *= 4
    steps = traj.steps - k0
    advanced = traj.time - t_start
    per_step = best if best is not None else cpu_all / max(steps, 1)
    return per_step, steps / advanced if advanced > 0 else 0.0


#: every parameter combination is probed when there are at most this many; beyond, the first one
#: is, and the family's cost model scales it to the others
PROBED_COMBINATIONS = 16

Probes = dict[tuple[str, float | None, tuple[int, ...]], tuple[float, float, float]]


def _probe_key(plan: Plan, cell: Cell) -> tuple[str, float | None, tuple[int, ...]]:
    """(integrator, tol or None for a fixed-step one, parameter combination) of ``cell``."""
    coords = plan.grid.coords(cell)
    name = coords["integrator"]
    return name, float(coords["tol"]) if plan.idefs[name].adaptive else None, plan.grid.combination(cell)


def runnable_methods(plan: Plan) -> list[tuple[int, ...]]:
    """Indices along the method axes (integrator, h, tol) of the cells that run, in C order."""
    ok = plan.grid.applicable_methods()
    return [m for m in np.ndindex(*ok.shape) if ok[m]]


def probe(plan: Plan, budget: float = PROBE_SECONDS) -> Probes:
    """Measured ``(CPU seconds per step, steps per unit time, seconds to start a cell)`` keyed by
    ``(integrator, tol, combination)`` (``tol`` None for fixed-step integrators)."""
    grid, famdef = plan.grid, plan.famdef
    methods = runnable_methods(plan)
    combos = list(np.ndindex(*grid.combination_shape))[: PROBED_COMBINATIONS + 1] if methods else []
    if len(combos) > PROBED_COMBINATIONS:
        combos = combos[:1]
    firsts: dict[tuple, tuple[int, ...]] = {}  # the first cell (C order) of each probe key
    for m in methods:
        for combo in combos:
            cell = m + combo
            firsts.setdefault(_probe_key(plan, cell), cell)
    budget = max(min(budget, PROBE_TOTAL_SECONDS / max(len(firsts), 1)), 0.01)
    out: Probes = {}
    for key, cell in firsts.items():
        name = key[0]
        request, options = plan.request(cell)
        if not out:  # the first start and steps in a process load code: not part of any cell's cost
            _time_steps(famdef.start(plan.model(cell), name, request, options), budget / 4)  # type: ignore[misc]
        c0 = time.thread_time()
        traj = famdef.start(plan.model(cell), name, request, options)  # type: ignore[misc]  # every family has one
        setup = time.thread_time() - c0
        per_step, rate = _time_steps(traj, budget)
        out[key] = (per_step, rate or 1.0 / (request.h or plan.spec.dt_out), setup)
    return out


def cost_array(plan: Plan, probes: Probes | None = None) -> np.ndarray:
    """Single-core seconds of every cell as an array over the grid (0 for not-applicable cells):
    probed ``(integrator, tol, combination)`` keys take their measured time per step, the others the
    family's cost model scaled by its error on the first probe of the integrator. No per-cell work."""
    probes = probe(plan) if probes is None else probes
    grid, famdef = plan.grid, plan.famdef
    # the cost model's error on the first probed combination, per integrator (the fallback's scale)
    scale: dict[str, float] = {}
    for (name, _tol, combo), (probed, _rate, _setup) in probes.items():
        model_cost = famdef.cost_per_step(plan.models[combo], name)
        if model_cost > 0:
            scale.setdefault(name, probed / model_cost)
    setup = min((s for *_, s in probes.values()), default=0.0)
    modelled = plan.per_step()  # (integrator, *combination_shape)
    dims = grid.dims
    out = np.zeros(grid.shape)
    for m in runnable_methods(plan):
        i = m[0]
        name = grid.axes[0].values[i]
        tol = float(grid.axes[dims.index("tol")].values[m[dims.index("tol")]]) if plan.idefs[name].adaptive else None
        per_step = np.array(scale.get(name, 1.0) * modelled[i], dtype=float)  # 0-d with no swept axis
        rate: np.ndarray | None = None
        if tol is not None:
            rates = [r for (n, t, _c), (_p, r, _s) in probes.items() if n == name and t == tol]
            rate = np.full(grid.combination_shape, rates[0] if rates else 20 / plan.spec.dt_out)
        for (n, t, combo), (p, r, _s) in probes.items():
            if n == name and t == tol:
                per_step[combo] = p
                if rate is not None:
                    rate[combo] = r
        steps: np.ndarray | int
        if rate is not None:  # adaptive (tol set)
            steps = rate * plan.spec.T
        else:
            steps = plan.spec.n_steps(float(grid.axes[dims.index("h")].values[m[dims.index("h")]]))
        out[m] = steps * per_step + setup
    return out


def cell_costs(plan: Plan, probes: Probes | None = None) -> dict[Cell, float]:
    """Single-core seconds of every runnable cell (not-applicable cells are left out), as a dict
    (:func:`cost_array` without the per-cell objects)."""
    costs = cost_array(plan, probes)
    ok = plan.grid.applicable_mask()
    return {tuple(int(i) for i in c): float(costs[tuple(c)]) for c in np.argwhere(ok)}
