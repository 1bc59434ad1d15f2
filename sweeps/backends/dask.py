"""The Dask backend: a run's shard jobs as Dask futures — first worker, submit, write, resubmit, liveness.

One plain future per slice, and one writer future per shard that depends on the shard's slices (a shard
of one slice is computed and written by one task). Dask runs higher priority first: shard by shard, the
costliest shards first, and the longest slices first within a shard — finished shards reach the store
while the sweep runs, and no worker is left finishing one long slice at the end while the other idles.
Models go to the cluster once per shard (:mod:`geosweep.sweeps.bundles`); kernels are warmed on every
worker before any slice; a slice whose workers died is resubmitted while its cells' checkpoints advance
(:mod:`geosweep.sweeps.resubmit`); adaptive scaling is told how many workers the pending cells can keep
busy (:mod:`geosweep.sweeps.demand`); a worker that stops answering is named (:mod:`geosweep.sweeps.liveness`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from geosweep.sweeps import bundles as bundles_mod
from geosweep.sweeps import checkpoints, demand, early, first_worker, liveness, visibility
from geosweep.sweeps.backends.dask_tasks import (
    _compute_part,
    _run_part,
    _write_part,
    slice_resources,
    spread,
)
from geosweep.sweeps.cells import warm_part, warm_worker
from geosweep.sweeps.compact import MAX_ERROR_CHARS, MAX_ITEMS
from geosweep.sweeps.lease import Lease, LeaseLost
from geosweep.sweeps.progress import Tracker
from geosweep.sweeps.resubmit import Resubmitter, ShardJob
from geosweep.sweeps.store import ArrayCache, StoreRef
from geosweep.sweeps.store.layout import cell_block
from geosweep.sweeps.worklist import Choices, WorkList, with_threads
from geosweep.sweeps.writes import StoreFault


def run(
    work: WorkList,
    choices: Choices,
    ref: StoreRef,
    tracker: Tracker,
    lease: Lease | None,
    creating: early.EarlyStore | None,
    client: Any,
    log: Callable[[str], None],
) -> int:
    """Compute and write every pending cell of ``work`` on ``client``'s cluster (None: the cluster of
    ``choices.execution``, started or connected here and closed afterwards); returns the number of slices."""
    with ExitStack() as stack:
        if client is None:
            client = choices.execution.connect(stack, log)
        publisher = demand.Publisher(client, demand.Demand(work.by_cell, choices.execution.slice_seconds))
        publisher.publish()
        stack.callback(publisher.publish, 0)  # this run wants no more workers
        return DaskRun(work, choices, ref, tracker, lease, client, publisher, log).go(creating)


class DaskRun:
    """One run on one cluster: its workers' layout, its tasks and the loop that waits for them."""

    def __init__(self, work, choices, ref, tracker, lease, client, publisher, log) -> None:
        self.work, self.plan, self.ref, self.tracker, self.lease = work, work.plan, ref, tracker, lease
        self.client, self.publisher, self.log = client, publisher, log
        self.execution = choices.execution
        self.paths = self.execution.paths
        self.tag = f"{self.plan.spec.spec_hash[:10]}-{os.getpid()}-{time.time_ns()}"
        self.futures: list = []
        self.waiting: dict[Any, ShardJob] = {}  # the future the driver waits for → its shard's slices
        self.started: dict[str, int] = {}  # task key → times a slice started running (not only waited)
        self.topic = f"geosweep-progress-{self.tag}"

    # -- the cluster's workers ---------------------------------------------------------------------------
    def _workers(self) -> dict:
        return self.client.scheduler_info(n_workers=-1).get("workers", {})

    def _models(self, workers: dict) -> None:
        """How the shards' models travel (:mod:`geosweep.sweeps.bundles`): inside the slices that need them
        (no model task to wait for, copy or lose; an adaptive cluster without workers yet is started by the
        pending model tasks), else one model task per shard, shipped or built on the worker."""
        self.per_model = bundles_mod.model_bytes(self.plan)
        self.no_models = self.plan.part(models={})  # large models are built on the worker
        by_shard = self.work.by_shard
        self.inline = (
            self.paths.inline_models
            and bool(workers)
            and bundles_mod.inline_models(self.per_model, by_shard, self.plan)
        )
        self.bundles = {} if self.inline else {s: self._bundle(s, f"{i}") for i, s in enumerate(by_shard)}

    def _bundle(self, shard: Any, suffix: str) -> Any:
        keys = self.plan.combinations(self.work.by_shard[shard])
        key = f"geosweep-models-{self.tag}-{suffix}"
        return bundles_mod.submit_bundle(self.client, self.plan, self.no_models, keys, key, self.per_model)

    def _layout(self) -> None:
        """Wait for a first worker, check that every worker sees the store, then decide the run's layout
        once: slicing, writers, resources, threads per cell."""
        workers = self._workers()
        self._models(workers)
        if not workers:
            self.log("waiting for a first Dask worker")
            first_worker.wait(self.client, self.log)  # says what the batch jobs do; stops when they cannot start
            workers = self._workers()
        # workers that are threads of this process (inproc://) see its store and share its kernels, warmed
        # in the driver: no round trip to them for either (the 10³-cell run of 0.1 ms cells spends ~0.1 s in all)
        self.in_process = self.paths.inproc and bool(workers) and all(str(a).startswith("inproc://") for a in workers)
        if self.in_process:
            visibility.prove_local(self.ref)
        else:
            visibility.check_workers(self.client, self.ref, self.log)  # every worker sees this store, before any slice
        self.n_w = max(1, len(workers))
        self.resources = slice_resources(workers)
        self.procs = all(w.get("nanny") for w in workers.values())  # a worker with a nanny is a process of its own
        slicing = self.work.slicing(self.execution.slice_seconds, self.n_w, self.procs)
        if not self.paths.tails:
            slicing = type(slicing)(slicing.target, slicing.n_workers, slicing.per_worker, slicing.min_slice, 0)
        self.by_shard = self.work.slices(slicing)
        self.groups = list(self.by_shard.items())  # in the order the run takes them
        # a shard of one slice is written by a task of its own on the worker's spare writer thread, beside
        # the next slice, when its cells hardly hold the GIL (10³ cells of 10 ms on 2 threads: 6.24–6.52 →
        # 6.10–6.32 s); short cells compute and write in one task (their writer would contend with the next
        # slice for the GIL: 10⁴ cells of 0.1 ms, 3.53–3.78 → 3.69–4.33 s)
        self.writers_apart = self.paths.writers_apart and bool(self.resources) and self.work.long_cells
        # cores: the workers' threads, less the spare writer thread of a LOCAL_WORKER
        cores = sum(int(w.get("nthreads", 1)) for w in workers.values()) - (len(workers) if self.resources else 0)
        self.options = with_threads(self.execution.run, len(self.work.pending), max(1, cores), self.log)
        self.bare = self.plan.part(models={})
        n_slices = sum(len(g) for g in self.by_shard.values())
        kind = " (processes)" if self.procs else ""
        self.log(
            f"{len(self.work.pending)} cells in {n_slices} slices ({len(self.by_shard)} store shards) "
            f"on {self.n_w} workers{kind}"
        )

    def _warm(self) -> None:
        """Warm every worker's kernels; a worker that cannot be reached (paused, lost) is named, not fatal:
        liveness.completed watches it. Then copy the model tasks' results to every worker."""
        on = (
            {}
            if self.in_process
            else self.client.run(warm_worker, *warm_part(self.plan, self.work.pending), on_error="return")
        )
        for addr, line in on.items():
            if not isinstance(line, str):
                self.log(f"worker {addr}: not warmed up ({line!r:.200})")
            elif line:  # empty: nothing was compiled
                self.log(f"worker {line}")
        if self.paths.spread:
            spread(self.client, list(self.bundles.values()), self.n_w, self.log)

    def _on_event(self, event: tuple) -> None:
        msg = event[1]
        if "started" in msg:
            self.started[msg["started"]] = self.started.get(msg["started"], 0) + 1
        else:
            self.tracker.on_segment(tuple(msg["cell"]), msg["fraction"])

    # -- tasks ----------------------------------------------------------------------------------------------
    def submit(self, sh: ShardJob, redo: list[int], fresh: bool = False) -> None:
        """Submit the slices ``redo`` of ``sh`` (new keys on a resubmission) and its writer; ``fresh``:
        compute-only slices of a store not created yet, their writer comes later (:meth:`write`)."""
        sh.attempt += 1
        rank = (len(self.groups) - sh.index) * 10**12
        again = "" if sh.attempt == 1 else f"-r{sh.attempt}"
        if not self.inline and self.bundles[sh.shard].status == "error":  # its model task died with its workers
            self.bundles[sh.shard] = self._bundle(sh.shard, f"{sh.index}{again}")
        one_task = self.paths.one_task_shards and len(sh.slices) == 1 and not fresh and not self.writers_apart
        for i in redo:
            cells = sh.slices[i]
            models = (
                bundles_mod.Models({k: self.plan.models[k] for k in self.plan.combinations(cells)})
                if self.inline
                else self.bundles[sh.shard]
            )
            sh.parts[i] = self.client.submit(
                _run_part if one_task else _compute_part,
                self.bare,
                models,
                cell_block(cells),  # one array: Dask does not walk it, it pickles as one buffer
                self.ref,
                self.topic,
                fresh,
                self.options,
                self.paths.together,
                key=f"geosweep-{self.tag}-slice-{sh.index}-{i}{again}",
                pure=False,
                retries=self.execution.retries,  # a slice that raised is retried; finished cells, checkpoints: cheap
                priority=rank + min(int(1000 * sum(self.work.cost[c] for c in cells)), 10**12 - 1),
                resources=self.resources,
            )
        if not fresh:
            self.write(sh, not one_task)

    def write(self, sh: ShardJob, writer: bool = True) -> None:
        """Wait for the shard's writer (``writer=False``: its one slice, which writes the shard itself)."""
        fut = sh.parts[0]
        if writer:
            fut = self.client.submit(
                _write_part,
                self.ref,
                *sh.parts,
                key=f"geosweep-{self.tag}-shard-{sh.index}{'' if sh.attempt == 1 else f'-r{sh.attempt}'}",
                pure=False,
                retries=self.execution.retries,
                priority=10**15 + (len(self.groups) - sh.index) * 10**12,
            )
        self.waiting[fut] = sh
        self.futures.append(fut)

    def _wave(self, creating: early.EarlyStore | None) -> list[ShardJob]:
        """A store being created: the first slices compute meanwhile (:mod:`geosweep.sweeps.early`) — on
        worker processes not when the wave would be a large part of the run: each of its shards sends its
        values to a writer task in another process (10⁴ cells of 0.1 ms, 4 shards on 2 processes: 3.3 s
        without the wave, 3.6 s with it; threads share the values for free)."""
        if creating is None:
            return []
        wave: list[ShardJob] = []
        many = len(self.groups) >= early.MIN_SHARDS_PER_WORKER * self.n_w
        leading = self.groups if self.paths.early_wave and (not self.procs or many) else []
        for s_i, (shard, group) in enumerate(leading):
            if sum(len(sh.slices) for sh in wave) >= 2 * self.n_w:
                break
            wave.append(ShardJob(s_i, shard, group, [None] * len(group)))
            self.submit(wave[-1], list(range(len(group))), fresh=True)
        try:
            creating.wait()
        except BaseException:
            self.client.cancel([p for sh in wave for p in sh.parts])
            raise
        return wave

    # -- the run ----------------------------------------------------------------------------------------------
    def go(self, creating: early.EarlyStore | None) -> int:
        self._layout()
        self._warm()
        self.client.subscribe_topic(self.topic, self._on_event)
        if self.lease is not None:  # a lost lease cancels the run's tasks (the slices go with their writers)
            self.lease.on_lost(lambda _msg: self.client.cancel(self.futures))
        wave = self._wave(creating)
        own_arrays = ArrayCache(self.ref.open_group("r"))  # the driver's reads of its store (resubmissions)
        at_start = {c: f for c, f in checkpoints.progress(self.ref).items() if f == f}  # before any slice runs
        for first in wave:  # the store exists: their writers may run
            self.write(first)
        for s_i, (shard, group) in enumerate(self.groups[len(wave) :], start=len(wave)):
            self.submit(ShardJob(s_i, shard, group, [None] * len(group)), list(range(len(group))))
        again = Resubmitter(self.ref, own_arrays, at_start, self.started, lambda: self.tracker.advances, self.log)
        self._wait(again)
        self.client.unsubscribe_topic(self.topic)
        if self.lease is not None and self.lease.lost:
            self.client.cancel(self.futures)
            raise LeaseLost(self.lease.lost)
        return sum(len(g) for g in self.by_shard.values())

    def _wait(self, again: Resubmitter) -> None:
        """Wait for every shard's writer; a worker that stops answering is named, and a cluster none of
        whose workers answers stops the run (:func:`geosweep.sweeps.liveness.completed`)."""
        lost = lambda: self.lease is not None and self.lease.lost  # noqa: E731
        errors = self.tracker.errors
        for fut in liveness.completed(self.client, self.futures, self.log):
            if lost():
                break
            sh = self.waiting.pop(fut, None)  # its slices' values are released once the shard is written
            try:
                result = fut.result()
            except Exception as exc:  # noqa: BLE001 - one bad slice must not lose the others
                if lost():
                    break
                redo = again.redo(sh, exc) if sh is not None and self.paths.resubmit else None
                if sh is not None and redo is not None:
                    self.submit(sh, redo)
                    continue
                errors.append(again.why if sh is not None and self.paths.resubmit else f"{type(exc).__name__}: {exc}")
                if len(errors) <= MAX_ITEMS:  # bounded: the rest are counted by the engine
                    self.log(f"slice failed: {errors[-1][:MAX_ERROR_CHARS]}")
                continue
            if isinstance(result, StoreFault):  # the store refuses this run's writes: stop
                self.client.cancel(self.futures)
                raise result.error()
            self.tracker.report(result)
            self.publisher.demand.finished(r[0] for r in result)
            self.publisher.publish()
