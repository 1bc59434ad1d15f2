"""A new store is created while the first slices already compute.

Creating a store's template is 0.2–0.4 s of driver work (xarray writes the metadata of every array),
during which the workers of a parallel run would wait. When a run may start without its store —
parallel, not growing, into a store that does not exist yet, of cells estimated short — the driver
creates the store on a thread of its own and submits the first wave of slices at once as
compute-only tasks: they read nothing from the store (a store that does not exist holds no finished
cell, checkpoint or carry) and save no checkpoint. Their shards' writers are submitted only once
the store exists (:meth:`EarlyStore.wait`), so no worker writes before then, and the writes stay
fenced by the run's lease as every other write. A run killed meanwhile leaves an unfinished store,
which the next run recreates (:func:`geosweep.sweeps.store.ensure_store`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from geosweep.sweeps.lease import StoreBusyError
from geosweep.sweeps.store import StoreRef, ensure_store

if TYPE_CHECKING:
    from geosweep.sweeps.execution import Execution
    from geosweep.sweeps.plan import Plan

#: the longest estimated cell (seconds of one core) of a run that computes before its store exists:
#: longer cells save checkpoints, which need the store
MAX_CELL_SECONDS = 1.0
#: on worker processes the first wave computes before the store exists only when the run has at least
#: this many store shards per worker: its shards' values travel to writer tasks in other processes (one
#: task computes and writes each other shard), which costs more than the wait when the wave is most of
#: the run (worker threads share the values: their wave always runs)
MIN_SHARDS_PER_WORKER = 4


class EarlyStore:
    """The store of ``ref`` being created for ``plan`` on a driver thread."""

    def __init__(self, plan: Plan, ref: StoreRef, log: Callable[[str], None]) -> None:
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._create, args=(plan, ref, log), name="geosweep-create-store", daemon=True
        )
        self._thread.start()

    def _create(self, plan: Plan, ref: StoreRef, log: Callable[[str], None]) -> None:
        try:
            if not ensure_store(plan, ref, log):  # made meanwhile by another writer: its cells may be done
                raise StoreBusyError(f"store {ref.url} was created by another process while this run created it")
        except BaseException as exc:  # noqa: BLE001 - raised in the driver's thread by wait()
            self._error = exc

    def wait(self) -> None:
        """Return once the store exists; raise what its creation raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error

    def finish(self) -> None:
        """Wait for the creation to end, whatever it did (before the run gives its lease up)."""
        self._thread.join()


def start(
    plan: Plan,
    ref: StoreRef,
    execution: Execution,
    grow: bool,
    log: Callable[[str], None],
    cost: np.ndarray | None = None,
) -> EarlyStore | None:
    """An :class:`EarlyStore` for a run that may compute before its store exists, else None: a parallel
    run (the ``early_wave`` micro-path on), not growing, into a store that does not exist, of cells each
    estimated at most :data:`MAX_CELL_SECONDS` (``cost``: every cell's estimate,
    :meth:`~geosweep.sweeps.plan.Plan.cost_array`, computed here if not given) and without
    ``checkpoint_every`` (cells that checkpoint need the store)."""
    if execution.serial or not execution.paths.early_wave or grow or plan.spec.checkpoint_every is not None:
        return None
    cost = plan.cost_array() if cost is None else cost
    if cost.size == 0 or float(cost.max()) > MAX_CELL_SECONDS or ref.exists():
        return None
    return EarlyStore(plan, ref, log)
