"""The local backend: a run's shard jobs in this thread, without Dask — ``serial=True``, or a few short
cells whatever the execution (:meth:`geosweep.sweeps.execution.Execution.in_driver`): one code path.

Shard by shard, each shard written (:func:`geosweep.sweeps.writes.write_runs`) and reported as soon as its
cells are done. (Writing on a helper thread while the next shard runs was measured slower: the threads
contend for the GIL.)
"""

from __future__ import annotations

from collections.abc import Callable

from geosweep.sweeps.cells import compute_slice
from geosweep.sweeps.early import EarlyStore
from geosweep.sweeps.progress import Tracker
from geosweep.sweeps.store import ArrayCache, StoreRef
from geosweep.sweeps.worklist import Choices, Slicing, WorkList, local_cores, with_threads
from geosweep.sweeps.writes import write_runs


def run(
    work: WorkList,
    choices: Choices,
    ref: StoreRef,
    tracker: Tracker,
    creating: EarlyStore | None,
    log: Callable[[str], None],
) -> int:
    """Compute and write every pending cell of ``work``; returns the number of slices."""
    if creating is not None:  # its store is being created meanwhile: every slice reads it
        creating.wait()
    execution = choices.execution
    by_shard = work.slices(Slicing.of(execution.slice_seconds, 1))
    options = with_threads(choices.run, len(work.pending), local_cores(), log)
    together = execution.paths.together
    arrays = ArrayCache(ref.open_group("r+")).open_all()  # opened once (each open reads every array's metadata)
    plan = work.plan
    for group in by_shard.values():
        runs = [
            r
            for cells in group
            for r in compute_slice(plan, cells, ref, tracker.on_segment, arrays, together=together, run=options)
        ]
        tracker.report(write_runs(ref, runs, arrays))
    return sum(len(group) for group in by_shard.values())
