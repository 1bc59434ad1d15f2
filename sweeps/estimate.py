"""What a sweep will cost before it runs (``geosweep validate``): cells, core-seconds, wall time, store.

Every parameter combination is costed on its own model: a few steps of each integrator (and
each tolerance of an adaptive one) are timed on this machine on each combination (CPU time,
so a busy machine does not inflate them), so a sweep over the chain's ``N`` is costed per
``N``. Beyond :data:`PROBED_COMBINATIONS` combinations only the first is probed and the
family's cost model (``FamilyDef.cost_per_step``) carries it to the others. Adaptive cells take
their steps per unit time from the probe instead of a guess. Not-applicable cells (the fillers
of a mixed ``h``/``tol`` grid) cost nothing and are counted apart.

Wall time = compile (cold Numba cache only) + start-up and flow overhead + the longest worker's
share of the slices (longest first onto the least loaded worker) + writing the store. The
constants below were measured on the 2-core reference machine with ``geosweep demo``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geosweep import config
from geosweep.sweeps.compact import per_value_text
from geosweep.sweeps.execution import runs_in_driver
from geosweep.sweeps.grid import Cell, slice_bounds, slice_target
from geosweep.sweeps.plan import Plan, make_plan
from geosweep.sweeps.store import SWEEP_FLAGS, fill_value, objects_estimate, shard_shape

#: seconds of probing per (integrator, tolerance, combination): batches enough for a stable fastest one
#: (two consecutive ``geosweep validate`` agree within a few per cent; tests/test_estimate.py)
PROBE_SECONDS = 0.1
#: timed batches of one size per probe at least (the fastest counts, see ``_time_steps``)
PROBE_BATCHES = 3
#: seconds of probing in all, at most (the budget per probe shrinks with their number)
PROBE_TOTAL_SECONDS = 3.0
#: start-up outside the cells (s): imports and a warm kernel load, the local Dask cluster, the store
#: template; with Prefect also its temporary server (when no PREFECT_API_URL is set; it boots while the
#: kernels load, so only its tail counts) and the flow's tasks
OVERHEAD_SECONDS = {"dask": 3.0, "prefect": 5.0, "prefect_server": 2.0, "driver": 0.5}
#: per cell outside its integration (s): model hand-over, values and flags into the store
CELL_OVERHEAD_SECONDS = 0.0005  # measured 0.23 ms serial, 0.32 ms on 2 workers (bench_scale.py, 10⁴ cells)
#: the same for a cell computed together with others (:mod:`geosweep.sweeps.together`; measured 0.03 ms
#: serial and 0.02 ms on 2 worker threads, bench_scale.py, 10⁵ cells)
CELL_OVERHEAD_TOGETHER_SECONDS = 0.00005
#: per store shard (s): its write (one object per variable), its carries and its task hand-over
SHARD_OVERHEAD_SECONDS = 0.05
#: cores busy with kernels run this much slower than one alone (shared caches and memory bandwidth;
#: 1.83x on 2 cores for 16 sphere-MD cells, benchmarks/bench_sweep_throughput.py)
PARALLEL_EFFICIENCY = 0.9
#: zstd's ratio on a cell's float64 states (final_state, snapshot_state: 0.39-0.65 measured on the demo
#: at T = 0.5 and T = 5); smaller per-cell arrays (time series, summaries) hardly compress
FLOAT_RATIO, FLOAT_RATIO_FROM = 0.55, 4096
#: bytes per stored chunk besides its values (shard index entry: offset and length)
CHUNK_OVERHEAD = 16
#: the short cell :func:`sampled_bytes` runs per integrator: samples, and steps per sample at most
SAMPLE_OUTPUTS, SAMPLE_STEPS = 64, 4
#: bytes of metadata per array (its zarr.json and its entry in the consolidated copy) and the group's
META_PER_ARRAY, META_GROUP = 3400, 8000


@dataclass
class Estimate:
    """The cost of a sweep. Seconds are wall-clock on ``workers`` local cores unless named core-seconds."""

    cells: int
    runnable: int
    not_applicable: int
    core_seconds: float  # integration on one core, summed over the runnable cells
    compile_seconds: float  # what a cold Numba cache adds (in wall_seconds only when ``cold``)
    overhead_seconds: float  # start-up, flow, per-cell store writes
    cells_seconds: float  # the slices on the workers (longest worker)
    wall_seconds: float
    workers: int
    store_bytes: float
    store_objects: int
    probes: int
    by_axis: dict[str, dict[Any, float]] = field(default_factory=dict)  # core-seconds per swept value
    cold: bool = False  # the run compiles the kernels first
    in_driver: bool = False  # a few short cells: run in the driver's process without Dask (execution.runs_in_driver)

    def lines(self) -> list[str]:
        """Human-readable summary (what ``geosweep validate`` prints)."""
        out = [
            f"cells: {self.runnable} to run, {self.not_applicable} not applicable",
            f"work: ≈ {_num(self.core_seconds)} core-seconds of integration ({self.probes} integrator probes)",
            f"wall: ≈ {_num(self.wall_seconds)} s "
            + ("in this process (a few short cells: no Dask)" if self.in_driver else f"on {self.workers} worker(s)")
            + " = "
            + (f"compile {_num(self.compile_seconds)} s + " if self.cold else "")
            + f"start-up, flow and writes {_num(self.overhead_seconds)} s + cells {_num(self.cells_seconds)} s"
            + ("" if self.cold else f"; + {_num(self.compile_seconds)} s to compile where the Numba cache is cold"),
            f"store: ≈ {_bytes(self.store_bytes)} in {self.store_objects} objects",
        ]
        for axis, per in self.by_axis.items():  # bounded: a large axis by count, range and extremes
            out.append(per_value_text(f"core-seconds by {axis}", per, _num))
        return out


def _num(x: float) -> str:
    return f"{x:.2g}" if abs(x) < 10 else f"{x:.0f}"


def _bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} TB"  # pragma: no cover


# ---------------------------------------------------------------------------------------
# integration cost per cell
# ---------------------------------------------------------------------------------------
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


def _runnable_methods(plan: Plan) -> list[tuple[int, ...]]:
    """Indices along the method axes (integrator, h, tol) of the cells that run, in C order."""
    ok = plan.grid.applicable_methods()
    return [m for m in np.ndindex(*ok.shape) if ok[m]]


def probe(plan: Plan, budget: float = PROBE_SECONDS) -> Probes:
    """Measured ``(CPU seconds per step, steps per unit time, seconds to start a cell)`` keyed by
    ``(integrator, tol, combination)`` (``tol`` None for fixed-step integrators)."""
    grid, famdef = plan.grid, plan.famdef
    methods = _runnable_methods(plan)
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
    for m in _runnable_methods(plan):
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


# ---------------------------------------------------------------------------------------
# store
# ---------------------------------------------------------------------------------------
def store_objects(plan: Plan) -> int:
    """Objects of the finished store (:func:`geosweep.sweeps.store.layout.objects_estimate`)."""
    return int(objects_estimate(plan)["objects"])


def _cell_bytes(plan: Plan) -> dict[str, tuple[int, str]]:
    """(uncompressed bytes, dtype) per cell of each stored variable."""
    sizes = plan.sizes
    out = {}
    for d in plan.famdef.diagnostics(plan.first_model):
        n = int(np.prod([sizes[x] for x in d.dims], dtype=np.int64))
        out[d.name] = (n * np.dtype(d.dtype).itemsize, d.dtype)
    for name in SWEEP_FLAGS:
        out.setdefault(name, (8, "float64"))
    return out


def _modelled_bytes(plan: Plan) -> dict[str, float]:
    """Compressed bytes per cell of each variable from fixed ratios (when no sample could be run)."""
    out = {}
    for name, (nbytes, dtype) in _cell_bytes(plan).items():
        ratio = FLOAT_RATIO if dtype.startswith("float") and nbytes >= FLOAT_RATIO_FROM else 1.0
        out[name] = nbytes * ratio
    return out


def _short_request(request: Any) -> Any:
    """``request`` cut to :data:`SAMPLE_OUTPUTS` samples of at most :data:`SAMPLE_STEPS` steps each."""
    from dataclasses import replace

    dt_out = request.dt_out
    if request.h is not None:
        per_out = max(1, round(request.dt_out / request.h))
        dt_out = min(per_out, SAMPLE_STEPS) * request.h
    n_out = max(1, min(SAMPLE_OUTPUTS, round(request.T / dt_out)))
    return replace(request, T=n_out * dt_out, dt_out=dt_out, snapshot_every=0)


def sampled_bytes(plan: Plan) -> dict[str, float]:
    """Compressed bytes of each stored variable over all runnable cells.

    What the store really writes: one short cell per integrator (first combination, first ``tol``;
    :func:`_short_request`) is run and each of its values compressed as the store's inner chunks are
    (zstd level 0, one chunk per cell). An array equal to its fill value (NaN: a diagnostic this
    system does not have) is not written at all. Time series scale with the samples, per-body arrays
    with the combination's sizes (``FamilyDef.sizes``); states (final, snapshots) take the fixed
    ratio :data:`FLOAT_RATIO`, since a short run's state has hardly left its (regular) start.
    Summed per integrator and per combination, never per cell."""
    from numcodecs import Zstd

    grid, famdef, sizes = plan.grid, plan.famdef, plan.sizes
    zstd = Zstd(level=0)
    dims = {d.name: (d.dims, d.dtype) for d in famdef.diagnostics(plan.first_model)}
    methods = _runnable_methods(plan)
    modelled = _modelled_bytes(plan)
    per_integrator: dict[str, dict[str, float]] = {}
    cells_of: dict[str, int] = {}  # runnable cells per integrator and combination
    for m in methods:
        cell = m + grid.first_cell[grid.n_method_axes :]
        name = grid.coords(cell)["integrator"]
        cells_of[name] = cells_of.get(name, 0) + 1
        if name in per_integrator:
            continue
        request, options = plan.request(cell)
        short = _short_request(request)
        model = plan.model(cell)
        values = famdef.run(model, name, short, options).values
        body = famdef.sizes(model)  # this model's (``sizes`` holds the largest: smaller cells are padded)
        own = {**body, "time": short.n_out + 1, "snapshot": 2}
        measured = {}
        for var, (var_dims, dtype) in dims.items():
            arr = np.ascontiguousarray(np.asarray(values[var], dtype=dtype))
            if np.array_equal(arr, np.full(arr.shape, fill_value(dtype), dtype=dtype), equal_nan=True):
                measured[var] = 0.0
                continue
            if "time" not in var_dims:  # states: a short run's barely moved state compresses too well
                measured[var] = modelled[var] * np.prod([own[d] / sizes[d] for d in var_dims if d in body])
                continue
            scale = np.prod([sizes[d] / own[d] for d in var_dims if d in ("time", "snapshot")])
            measured[var] = len(zstd.encode(arr)) * float(scale)
        per_integrator[name] = measured
    first = famdef.sizes(plan.first_model)
    # the combinations' per-body sizes (relative to the first's), each distinct one once with its count
    layouts = Counter(tuple(sorted(famdef.sizes(m).items())) for m in plan.models.values())
    n_combos = float(sum(layouts.values()))
    out: dict[str, float] = {}
    for var, (var_dims, _dtype) in dims.items():
        scaled = [d for d in var_dims if d in first and first.get(d)]
        per_combo = n_combos
        if scaled:
            per_combo = sum(
                n * float(np.prod([b[d] / first[d] for d in scaled if d in b]))
                for b, n in ((dict(layout), n) for layout, n in layouts.items())
            )
        out[var] = sum(per_integrator[name][var] * n for name, n in cells_of.items()) * per_combo
    return out


def _shared_first_snapshot(plan: Plan) -> float:
    """Fraction of ``snapshot_state`` bytes stored: the state at t = 0 is the same in every cell of a
    shard along the method axes (one model, one initial state), and zstd stores it once per chunk
    (store format 3: one chunk per shard)."""
    n = plan.sizes.get("snapshot", 1)
    k = int(np.prod(shard_shape(plan)[: plan.grid.n_method_axes]))
    return (n - 1 + 1 / max(k, 1)) / n if n > 1 else 1.0


#: bytes of a kept carry besides its arrays (the ``.npz`` entries of its ~9 arrays)
CARRY_OVERHEAD = 2500


def carry_bytes(plan: Plan) -> float:
    """Bytes per cell of its kept final carry (:mod:`geosweep.sweeps.extension`): the trajectory's samples,
    envelopes, snapshots and state (sized from a short trajectory of the first cell), compressed
    at :data:`FLOAT_RATIO` when :mod:`geosweep.sweeps.extension` compresses them."""
    from geosweep.sweeps.extension import COMPRESS_BYTES_PER_CELL

    cell = plan.grid.first_cell
    request, options = plan.request(cell)
    traj = plan.famdef.start(plan.model(cell), plan.grid.coords(cell)["integrator"], _short_request(request), options)  # type: ignore[misc]
    columns = traj.out.shape[1] + traj.env.shape[1]
    small = traj.S.size + traj.acc.size + traj.info.size + traj.ictl.size + traj.fctl.size
    raw = 8.0 * (plan.sizes["time"] * columns + plan.sizes["snapshot"] * traj.snaps.shape[1] + small)
    raw += CARRY_OVERHEAD
    return raw * FLOAT_RATIO if raw > COMPRESS_BYTES_PER_CELL else raw


def store_bytes(plan: Plan, sample: bool = True) -> float:
    """Bytes of the finished store: compressed values of the runnable cells (measured on a short
    sample cell per integrator, :func:`sampled_bytes`; fixed ratios if ``sample`` is false or the
    sample fails), chunk overheads, metadata, and the kept carries (:func:`carry_bytes`)."""
    grid = plan.grid
    runnable = grid.runnable()
    modelled = _modelled_bytes(plan)
    per_var: dict[str, float] = {name: b * runnable for name, b in modelled.items()}
    if sample:
        try:
            measured = sampled_bytes(plan)
        except Exception:  # noqa: BLE001 - an estimate: fall back to the fixed ratios
            measured = {}
        per_var.update(measured)
    if "snapshot_state" in per_var:
        per_var["snapshot_state"] *= _shared_first_snapshot(plan)
    values = sum(per_var.values()) + CHUNK_OVERHEAD * len(per_var) * runnable
    n_arrays = len(modelled) + len(grid.dims) + len(plan.sizes) + 6
    try:
        carries = carry_bytes(plan) * runnable
    except Exception:  # noqa: BLE001 - an estimate: without the carries rather than none
        carries = 0.0
    return values + n_arrays * META_PER_ARRAY + META_GROUP + carries


# ---------------------------------------------------------------------------------------
# wall time
# ---------------------------------------------------------------------------------------
def makespan(costs: list[float], workers: int) -> float:
    """Time until the last of ``workers`` finishes ``costs`` taken longest first by the least loaded worker."""
    loads = [0.0] * max(workers, 1)
    for c in sorted(costs, reverse=True):
        i = loads.index(min(loads))
        loads[i] += c
    return max(loads)


def _together_cells(plan: Plan, planned: np.ndarray, mask: np.ndarray) -> int:
    """How many runnable cells a run computes together (:mod:`geosweep.sweeps.together`; ``planned``: the
    plan's cost of every cell, which decides it)."""
    from geosweep.sweeps.together import joint_mask

    return int((mask & joint_mask(plan, planned)).sum())


def estimate(
    source: Plan | str | os.PathLike | dict,
    workers: int | None = None,
    *,
    prefect: bool = True,
    temporary_server: bool | None = None,
    cold: bool = False,
    compile_seconds: float = 0.0,
    slice_seconds: float = 10.0,
    cores: int | None = None,
    probes: Probes | None = None,
    costs: Mapping[Cell, float] | None = None,
    log: Callable[[str], None] | None = None,
) -> Estimate:
    """Estimate a sweep run with ``workers`` local workers (default: all cores).

    ``prefect``: through the Prefect flow (``temporary_server``: on a temporary server, default
    when no ``PREFECT_API_URL`` is set); ``cold``: the run first compiles for ``compile_seconds``
    (reported either way); ``cores`` bounds the
    parallelism (default: this machine's). Runs the probes (a fraction of a second) unless given
    ``probes`` (of :func:`probe`) or ``costs`` (single-core seconds per runnable cell).
    """
    plan = make_plan(source)
    cores = cores or os.cpu_count() or 1
    workers = workers or cores
    parallel = min(workers, cores)
    grid = plan.grid
    if costs is None:
        probes = probe(plan) if probes is None else probes
        cost, mask = cost_array(plan, probes), grid.applicable_mask()
    else:  # single-core seconds per cell, e.g. measured
        cost, mask = np.zeros(grid.shape), np.zeros(grid.shape, dtype=bool)
        for c, s in costs.items():
            cost[c], mask[c] = s, True
    runnable = int(mask.sum())
    # slices as the run cuts them (by the grid's cost model, plan.cost), each costing its cells' estimate
    planned = plan.cost_array()
    try:
        in_driver = runs_in_driver(planned[mask])
    except ValueError:  # a bad GEOSWEEP_IN_DRIVER_BELOW: the run refuses it
        in_driver = False
    if in_driver:
        workers = parallel = 1
    efficiency = PARALLEL_EFFICIENCY if parallel > 1 else 1.0
    joint = _together_cells(plan, planned, mask)
    sizing = grid.ordered_costs(planned, mask)
    bounds = slice_bounds(sizing, slice_target(sizing, slice_seconds, workers))
    del sizing
    ordered = grid.ordered_costs(cost, mask)
    slice_costs = [float(ordered[a:b].sum()) / efficiency for a, b in zip(bounds[:-1], bounds[1:])]
    del ordered
    cells_seconds = makespan(slice_costs, parallel)
    if temporary_server is None:
        temporary_server = not config.environ("PREFECT_API_URL")
    overhead = OVERHEAD_SECONDS["driver" if in_driver else "dask"]
    if prefect:
        overhead = OVERHEAD_SECONDS["prefect"] + (OVERHEAD_SECONDS["prefect_server"] if temporary_server else 0.0)
    overhead += (CELL_OVERHEAD_SECONDS * (runnable - joint) + CELL_OVERHEAD_TOGETHER_SECONDS * joint) / parallel
    extents = shard_shape(plan)
    n_shards = int(np.prod([-(-e // s) for e, s in zip(grid.shape, extents)], dtype=np.int64))
    overhead += SHARD_OVERHEAD_SECONDS * n_shards / parallel
    compile_s = compile_seconds
    by_axis: dict[str, dict[Any, float]] = {}
    for a, axis in enumerate(grid.axes[grid.n_method_axes :], start=grid.n_method_axes):
        per = cost.sum(axis=tuple(i for i in range(cost.ndim) if i != a))  # not-applicable cells cost 0
        by_axis[axis.name] = dict(zip(axis.values, per.tolist()))
    est = Estimate(
        cells=grid.size,
        runnable=runnable,
        not_applicable=grid.size - runnable,
        core_seconds=float(cost.sum()),
        compile_seconds=compile_s,
        overhead_seconds=overhead,
        cells_seconds=cells_seconds,
        wall_seconds=(compile_s if cold else 0.0) + overhead + cells_seconds,
        cold=cold,
        workers=workers,
        store_bytes=store_bytes(plan),
        store_objects=store_objects(plan),
        probes=len(probes or ()),
        by_axis=by_axis,
        in_driver=in_driver,
    )
    if log:
        log(f"estimate of {plan.spec.name}: {est}")
    return est
