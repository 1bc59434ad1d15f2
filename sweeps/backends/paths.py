"""The engine's micro-paths, each a named strategy switched here: ``Execution(paths=MicroPaths(...))``.

Each keeps today's behaviour when on (the default); turned off, the run takes the general path, with the
same stored values, bitwise. They exist for speed only, so that each can be measured with and without
(``benchmarks/bench_scale.py``) and dropped where it gains less than 5 %:

* ``inproc``: workers that are threads of this process (``inproc://``) are not asked to prove they see the
  store nor to warm their kernels (they share the driver's);
* ``inline_models``: small models travel inside their slices (:func:`geosweep.sweeps.bundles.inline_models`),
  else in one model task per shard (shipped, or built on the worker when large);
* ``spread``: the model tasks' results are copied to every worker
  (:func:`geosweep.sweeps.backends.dask_tasks.spread`);
* ``one_task_shards``: a shard of one slice is computed and written by one task (no writer task);
* ``writers_apart``: long cells' shards are written by a writer task on the worker's spare thread;
* ``early_wave``: a new store is created while the first slices compute (:mod:`geosweep.sweeps.early`);
* ``together``: fresh short cells of a slice are computed in one compiled call (:mod:`geosweep.sweeps.together`);
* ``resubmit``: a slice whose workers died is resubmitted while its checkpoints advance
  (:mod:`geosweep.sweeps.resubmit`);
* ``tails``: the run's last shards are cut finer (:class:`geosweep.sweeps.worklist.Slicing`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class MicroPaths(BaseModel):
    """Which of the engine's speed-only paths a run takes (module doc); all on by default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inproc: bool = True
    inline_models: bool = True
    spread: bool = True
    one_task_shards: bool = True
    writers_apart: bool = True
    early_wave: bool = True
    together: bool = True
    resubmit: bool = True
    tails: bool = True


#: every micro-path on
ALL = MicroPaths()
