"""How many workers a sweep's pending cells can keep busy, from the plan's cell costs, published on
the Dask scheduler for adaptive scaling (:class:`geosweep.deploy.clusters.CostAwareAdaptive`).

Dask's adaptive scaling counts tasks it knows: from 0 workers it sees only the sweep's model tasks
and asks for one worker, however long the cells are (serial throughput for a few long cells). The
driver knows every pending cell's estimated single-core seconds (:meth:`geosweep.sweeps.plan.Plan.cost`), so
it publishes :func:`workers_wanted` as scheduler metadata under :data:`KEY`, updated as cells finish
and 0 when the run ends; the adaptive target is the larger of Dask's and this number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from geosweep.sweeps.grid import Cell

#: scheduler metadata key (``Client.set_metadata``) of the number of workers the running sweep wants
KEY = ("geosweep", "workers_wanted")


def workers_wanted(total: float, longest: float, n_cells: int, slice_seconds: float) -> int:
    """Workers that shorten a sweep of ``n_cells`` cells of ``total`` estimated seconds, the longest
    ``longest``: a worker per ``max(longest, slice_seconds)`` of work (no worker finishes before the
    longest cell; slices are ~``slice_seconds``), at most one per cell, at least one while cells are left."""
    if n_cells <= 0:
        return 0
    span = max(longest, slice_seconds, 1e-9)
    return max(1, min(n_cells, math.ceil(total / span - 1e-9)))


class Demand:
    """:func:`workers_wanted` of the cells not yet finished, kept up to date as they finish."""

    def __init__(self, costs: dict[Cell, float], slice_seconds: float) -> None:
        self.left = {c: max(float(v), 0.0) for c, v in costs.items()}
        self.total = sum(self.left.values())
        self.order = sorted(self.left, key=self.left.__getitem__, reverse=True)  # longest first
        self.first = 0  # index in order of the longest cell left
        self.slice_seconds = slice_seconds

    def finished(self, cells: Iterable[Cell]) -> None:
        for cell in cells:
            self.total -= self.left.pop(tuple(cell), 0.0)

    def workers(self) -> int:
        while self.first < len(self.order) and self.order[self.first] not in self.left:
            self.first += 1
        if not self.left:
            return 0
        longest = self.left[self.order[self.first]]
        return workers_wanted(max(self.total, 0.0), longest, len(self.left), self.slice_seconds)


class Publisher:
    """Publishes a :class:`Demand` on a client's scheduler when its value changes (never raises: the
    number only helps adaptive scaling)."""

    def __init__(self, client: Any, demand: Demand) -> None:
        self.client, self.demand, self.sent = client, demand, -1

    def publish(self, n: int | None = None) -> None:
        n = self.demand.workers() if n is None else n
        if n == self.sent or getattr(self.client, "status", "running") != "running":
            return  # unchanged, or the client is closing (an interrupted run does not wait on it)
        try:
            self.client.set_metadata(list(KEY), n)
            self.sent = n
        except Exception:  # noqa: BLE001 - a scheduler that cannot be told keeps Dask's own target
            pass
