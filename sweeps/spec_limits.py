"""Size limits of a sweep, checked before any work: the grid, steps, samples and snapshots from the
spec alone (:func:`check_limits`), the store's size and a task's memory once the models are built
(:func:`check_size_limits`). A spec raises a limit in its ``[limits]`` table."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from geosweep.sweeps.spec_error import SpecError

if TYPE_CHECKING:
    from geosweep.sweeps.spec import SweepSpec

#: Size limits checked before any work (a spec may raise them in its ``[limits]`` table).
LIMITS: dict[str, float] = {
    "cells": 1_000_000,  # grid size
    "steps_per_cell": 1e9,  # T / smallest h
    "samples_per_cell": 10_000_000,  # T / dt_out + 1
    "snapshots_per_cell": 100_000,
    "samples_total": 2e9,  # cells × samples per cell (≈ 16 GB per stored float series)
    "store_bytes": 1e11,  # estimated size of the finished store (uncompressed), bytes
    "task_memory_bytes": 2e9,  # estimated memory of one Dask task (a cell, or a shard's write), bytes
}
#: Limits checked once the models are built (they depend on body counts): see :func:`check_size_limits`.
PLAN_LIMITS = ("store_bytes", "task_memory_bytes")


def check_limits(spec: SweepSpec) -> list[tuple[str, str]]:
    """Sizes against :data:`LIMITS` (raised by the spec's ``limits`` table), before anything is built."""
    problems: list[tuple[str, str]] = []
    for key, value in spec.limits.items():
        if key not in LIMITS:
            problems.append((f"limits.{key}", f"unknown limit; known: {sorted(LIMITS)}"))
        elif not (math.isfinite(value) and value > 0):  # a NaN limit would compare False: no bound
            problems.append((f"limits.{key}", f"must be a positive finite number, got {value}"))
    lim = {**LIMITS, **{k: v for k, v in spec.limits.items() if k in LIMITS and math.isfinite(v) and v > 0}}
    if not (spec.T > 0 and spec.dt_out > 0 and math.isfinite(spec.T) and math.isfinite(spec.dt_out)):
        return problems
    n_steps_axes = max(len(spec.h), 1) * max(len(spec.tol), 1)
    cells = len(spec.integrators) * n_steps_axes
    for v in spec.params.values():
        if isinstance(v, list):
            cells *= max(len(v), 1)

    def over(field: str, key: str, value: float, what: str) -> None:
        if value > lim[key]:
            problems.append(
                (field, f"{what} = {value:.4g} exceeds the limit {lim[key]:.4g} ({key}); "
                        f"set [limits] {key} = … in the spec if you mean it")
            )  # fmt: skip

    over("params", "cells", cells, "grid cells")
    good_h = [h for h in spec.h if math.isfinite(h) and h > 0]
    if good_h:
        over("h", "steps_per_cell", spec.T / min(good_h), "steps per cell (T / smallest h)")
    samples = spec.T / spec.dt_out + 1
    over("dt_out", "samples_per_cell", samples, "samples per cell (T / dt_out + 1)")
    over("params", "samples_total", cells * samples, "stored samples (cells × samples per cell)")
    if spec.snapshot_dt is not None and spec.snapshot_dt > 0:
        over("snapshot_dt", "snapshots_per_cell", spec.T / spec.snapshot_dt + 1, "snapshots per cell")
    return problems


def _bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def check_size_limits(spec: SweepSpec, estimate: dict[str, float], cells: int) -> None:
    """The plan's estimates (``store_bytes``, ``task_memory_bytes``) against :data:`LIMITS` and the spec's
    ``[limits]``; raises :class:`SpecError` naming the limit, before the store or a cluster exists."""
    lim = {**LIMITS, **{k: v for k, v in spec.limits.items() if k in LIMITS}}
    per_cell = _bytes(float(estimate.get("cell_bytes", 0.0)))
    what = {
        "store_bytes": f"estimated store size {{}} ({cells} cells × {per_cell} per cell)",
        "task_memory_bytes": f"estimated memory per task {{}} ({per_cell} per cell)",
    }
    problems = []
    for key in PLAN_LIMITS:
        value = float(estimate.get(key, 0.0))
        if value > lim[key]:
            problems.append(
                (key, f"{what[key].format(_bytes(value))} exceeds the limit {_bytes(lim[key])} "
                                  f"({key}); set [limits] {key} = {value:.3g} in the spec if you mean it")
            )  # fmt: skip
    if problems:
        raise SpecError(problems, spec.name)
