"""The size of a finished store before a sweep runs: each stored variable's compressed bytes (measured
on one short cell per integrator, or fixed ratios), chunk overheads, metadata and the kept carries."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from geosweep.sweeps.cell_cost import runnable_methods
from geosweep.sweeps.plan import Plan
from geosweep.sweeps.store import SWEEP_FLAGS, fill_value, objects_estimate, shard_shape

#: zstd's ratio on a cell's float64 states (final_state, snapshot_state: 0.39-0.65 measured on the demo
#: at T = 0.5 and T = 5); smaller per-cell arrays (time series, summaries) hardly compress
FLOAT_RATIO, FLOAT_RATIO_FROM = 0.55, 4096
#: bytes per stored chunk besides its values (shard index entry: offset and length)
CHUNK_OVERHEAD = 16
#: the short cell :func:`sampled_bytes` runs per integrator: samples, and steps per sample at most
SAMPLE_OUTPUTS, SAMPLE_STEPS = 64, 4
#: bytes of metadata per array (its zarr.json and its entry in the consolidated copy) and the group's
META_PER_ARRAY, META_GROUP = 3400, 8000


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
    methods = runnable_methods(plan)
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
#: compressed / raw bytes of a thin carry (:func:`geosweep.sweeps.carries.thin`; 0.31 for 3-link chains)
THIN_RATIO = 0.35


def carry_bytes(plan: Plan) -> float:
    """Bytes per cell of its kept final carry (:mod:`geosweep.sweeps.extension`): the trajectory's samples,
    envelopes, snapshots and state (sized from a short trajectory of the first cell), compressed
    at :data:`FLOAT_RATIO` when :mod:`geosweep.sweeps.extension` compresses them; a thin carry's
    state, counters and first sample at :data:`THIN_RATIO`."""
    from geosweep.sweeps.carries import COMPRESS_BYTES_PER_CELL

    cell = plan.grid.first_cell
    request, options = plan.request(cell)
    traj = plan.famdef.start(plan.model(cell), plan.grid.coords(cell)["integrator"], _short_request(request), options)  # type: ignore[misc]
    columns = traj.out.shape[1] + traj.env.shape[1]
    small = traj.S.size + traj.acc.size + traj.info.size + traj.ictl.size + traj.fctl.size
    thins = plan.famdef.thin_carries
    if thins is not None and thins(plan.model(cell), plan.grid.coords(cell)["integrator"]):
        # a thin carry: no samples, envelopes or snapshots but the first sample, deflated
        return 8.0 * (small + traj.out.shape[1] + 12) * THIN_RATIO
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
