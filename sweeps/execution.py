"""Where and how a sweep's cells run: one :class:`Execution`, built once from the command line
(:meth:`Execution.from_args`) or from :func:`geosweep.sweeps.engine.run_sweep`'s keywords, and
the only code that starts a Dask cluster (:func:`local_cluster`, :meth:`Execution.connect`;
:mod:`geosweep.deploy.clusters` builds its local kind here too).

A run option that reaches the workers is a field of :class:`~geosweep.sweeps.run_options.RunOptions`
(``Execution.run``), one flag in the CLI's parser (``from_args`` reads it by name) and the code on the
worker that uses it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from geosweep import config
from geosweep.sweeps import run_options
from geosweep.sweeps.backends.paths import ALL, MicroPaths

#: A worker resource admitting one slice at a time. A worker that declares it and has one thread
#: more (:data:`LOCAL_WORKER`) runs a shard's writer on its spare thread as soon as the shard's
#: slices are done, beside the next slice, instead of after it. Slices ask for it only when every
#: worker declares it; other clusters run one task per thread as before.
SLICE_RESOURCE = "geosweep-slice"
#: ``LocalCluster`` keywords of a geosweep worker: one slice at a time plus a thread for writers
LOCAL_WORKER: dict[str, Any] = {"threads_per_worker": 2, "resources": {SLICE_RESOURCE: 1}}
#: the same worker as ``dask worker`` options (batch job scripts, Kubernetes pods)
WORKER_ARGS = ("--nthreads", str(LOCAL_WORKER["threads_per_worker"]), "--resources", f"{SLICE_RESOURCE}=1")


class ClusterFileError(ValueError):
    """A ``--cluster`` file could not be read or describes no usable cluster."""


class SchedulerUnreachable(RuntimeError):
    """``--address`` names a Dask scheduler that does not answer."""


#: Local workers are processes, not threads, when a run's cells average under this many estimated
#: single-core seconds (:meth:`geosweep.sweeps.plan.Plan.cost_array`, which counts stepping only: a
#: cell estimated at 0.02 ms takes ~0.12 ms, one at 0.46 ms ~1 ms, one at 4.6 ms ~10 ms; at 1 ms,
#: 2 threads and 2 processes ran 10⁴ cells alike, 12.6 s and 12.7 s, so longer cells keep threads) ...
AUTO_PROCESS_CELL_SECONDS = 2e-4
#: ... and there are at least this many of them. Every cell also runs ~0.2–0.3 ms of Python that
#: holds the GIL (set-up, collecting and writing values), so threads in one process cannot run short
#: cells side by side (measured on 2 cores: even the bare kernel loop of 0.1 ms cells ran at 0.8× on
#: 2 threads); worker processes can, but their start-up (~2–3 s) pays only over many cells
#: (benchmarks/README.md, "Threads or processes"). Cells computed together (:mod:`geosweep.sweeps.together`)
#: hand the GIL over once per slice, so threads run them side by side: the engine counts only the others.
AUTO_PROCESS_MIN_CELLS = 20_000


def auto_processes(costs: Any) -> bool:
    """Whether a local cluster for cells of estimated ``costs`` (single-core seconds, one per pending
    cell) should be worker processes: :data:`AUTO_PROCESS_MIN_CELLS` or more cells averaging under
    :data:`AUTO_PROCESS_CELL_SECONDS`."""
    import numpy as np

    costs = np.asarray(costs, dtype=float).ravel()
    return costs.size >= AUTO_PROCESS_MIN_CELLS and float(costs.mean()) < AUTO_PROCESS_CELL_SECONDS


#: A run whose pending cells are all short (each estimated under :data:`AUTO_PROCESS_CELL_SECONDS`) and
#: together estimated under this many single-core seconds runs in the driver's process, without Dask,
#: whatever cluster it was given: the Python around such cells (store creation, shard writes) holds the
#: GIL, so two workers overlap little of it, and a Dask round trip costs more than they can. Measured on
#: 2 cores, chain cells of 0.1 ms estimated at 0.018 ms each, 2 worker threads against the serial run in
#: one process (medians of 10; benchmarks/README.md, "Small runs in the driver"): 300 cells (0.005 s
#: estimated) 0.88×, 1 000 (0.018 s) 0.98×, 2 000 (0.037 s) 1.10×, 3 000 (0.055 s) 1.13×; 10 cells of
#: 10 ms (too long for this rule) 1.36×. The rule is monotone: a part of such a run is such a run too.
IN_DRIVER_SECONDS: float = config.IN_DRIVER_BELOW.default
#: environment variable overriding :data:`IN_DRIVER_SECONDS` (seconds ≥ 0; 0: every run goes to Dask)
IN_DRIVER_ENV = config.IN_DRIVER_BELOW.name


def in_driver_seconds() -> float:
    """The threshold of :func:`runs_in_driver`: ``GEOSWEEP_IN_DRIVER_BELOW`` (seconds ≥ 0), else
    :data:`IN_DRIVER_SECONDS` (:class:`geosweep.config.ConfigError` for a bad value)."""
    return float(config.IN_DRIVER_BELOW.get())


def runs_in_driver(costs: Any, below: float | None = None) -> bool:
    """Whether cells of estimated ``costs`` (single-core seconds, one per cell to run; 0: not applicable)
    run in the driver's process rather than on Dask: every cell under :data:`AUTO_PROCESS_CELL_SECONDS`
    and all of them under ``below`` seconds (default :func:`in_driver_seconds`)."""
    import numpy as np

    below = in_driver_seconds() if below is None else below
    costs = np.asarray(costs, dtype=float).ravel()
    costs = costs[costs > 0]
    return bool(costs.size) and float(costs.max()) < AUTO_PROCESS_CELL_SECONDS and float(costs.sum()) < below


#: Dask's nannies start worker processes with ``MALLOC_TRIM_THRESHOLD_=65536`` (glibc hands freed memory
#: back to the system at once, and no longer adapts its thresholds); geosweep's local worker processes
#: start without it, so a shard's temporary arrays reuse memory instead of faulting pages in again.
#: Measured on 2 cores, 2 worker processes, chain cells of 0.1 ms (medians of 8 runs): 10⁴ cells
#: 1.17 → 1.09 s (page faults per worker and run ~30 000 → 2 000–6 000), 3·10⁴ cells 2.93 → 2.74 s;
#: resident memory after the runs 335 → 405 MB per worker. (Workers an adaptive local cluster starts
#: later, and workers of other clusters, keep Dask's setting.) A nanny also copies the variables into its
#: own process's environment before it spawns (so every process spawned later inherits them): they are
#: taken out of this process's environment while :func:`local_cluster` starts its workers, and put back.
DROPPED_WORKER_ENV = ("MALLOC_TRIM_THRESHOLD_",)


def worker_process_environ() -> dict[str, Any]:
    """Dask's ``distributed.nanny.pre-spawn-environ`` without :data:`DROPPED_WORKER_ENV`: what the
    nannies of :func:`local_cluster` set in their worker processes before Python starts."""
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    for name in DROPPED_WORKER_ENV:
        env.pop(name, None)
    return env


def local_cluster(n_workers: int | None, *, processes: bool, **kwargs: Any) -> Any:
    """A ``distributed.LocalCluster`` of ``n_workers`` geosweep workers (:data:`LOCAL_WORKER`;
    default: one per core); ``kwargs`` go to ``LocalCluster`` (dashboard, logs, memory, env).

    Worker processes start with SIGINT blocked (:func:`_sigint_blocked_in_new_threads`) and glibc's
    own memory thresholds (:func:`worker_process_environ`). No worker logs the heartbeat its closing
    broke (:mod:`geosweep.sweeps.worker_logs`; worker processes preload it)."""
    import dask
    from distributed import LocalCluster

    from geosweep.sweeps import worker_logs

    n = n_workers or os.cpu_count() or 1
    if not processes:
        worker_logs.quiet_closing_heartbeats()  # the workers live in this process
        return LocalCluster(n_workers=n, **LOCAL_WORKER, processes=False, **kwargs)
    preload = [*kwargs.pop("preload", ()), worker_logs.PRELOAD]
    # each nanny reads the environment of its worker process when it is made (in cluster.scale's start)
    pre_spawn = {"distributed.nanny.pre-spawn-environ": worker_process_environ()}
    with dask.config.set(pre_spawn), config.without(DROPPED_WORKER_ENV):
        with _sigint_blocked_in_new_threads():
            cluster = LocalCluster(n_workers=0, **LOCAL_WORKER, processes=True, preload=preload, **kwargs)
        # the workers started once the cluster object exists: Ctrl-C while they start closes it (its nannies
        # stop them) instead of leaving a starting worker whose parent's semaphores go away (a traceback)
        cluster.scale(n)

        async def started() -> None:
            await cluster._correct_state()  # what LocalCluster(n_workers=n) waits for

        # waited for here, not with cluster.sync: on Ctrl-C that cancels the start, and closing then fails
        loop: Any = cluster.loop  # tornado's IOLoop over an asyncio loop
        waiting = asyncio.run_coroutine_threadsafe(started(), loop.asyncio_loop)
        try:
            waiting.result()
        except BaseException:
            cluster.close()
            raise
    return cluster


@contextmanager
def _sigint_blocked_in_new_threads() -> Iterator[None]:
    """Block SIGINT in this thread meanwhile, so that the threads it starts (the cluster's event loop,
    which starts the threads that spawn worker processes) block it for good, and so do the worker
    processes they spawn, from their first instruction on. A terminal's Ctrl-C reaches the whole
    process group; a worker process whose interpreter was still starting (before geosweep's
    :func:`~geosweep.flows.output.ignore_sigint_in_worker_process` ran) printed a traceback
    (4 runs in 6 signalled as the workers appeared, tests/test_signals.py). The driver still takes
    it: this thread's mask is restored afterwards, and meanwhile the process's older threads take it
    (Python runs the handler in the main thread either way)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    from multiprocessing import resource_tracker

    # started first: starting it later (a worker's first queue) unblocks SIGINT in the starting thread
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def cluster_config(path: str) -> Any:
    """Read and check a :class:`geosweep.deploy.clusters.ClusterConfig` file (refused before any work)."""
    from pydantic import ValidationError

    from geosweep.deploy.clusters import ClusterConfig, check_dependencies

    try:
        cfg = ClusterConfig.from_file(path)
        check_dependencies(cfg.kind)
    except ValidationError as e:  # one line: each field and its problem
        problems = "; ".join(
            ".".join(str(p) for p in err["loc"][1:])
            + (": " if err["loc"][1:] else "")
            + err["msg"].removeprefix("Value error, ")
            for err in e.errors()
        )
        raise ClusterFileError(f"cluster file {path}: {problems}") from e
    except (OSError, ValueError, ImportError) as e:
        raise ClusterFileError(f"cluster file {path}: {e}") from e
    if not cfg.root.requests_workers:
        raise ClusterFileError(f"cluster file {path} starts no workers: set jobs, n_workers or an adapt maximum")
    return cfg


def has_bokeh() -> bool:
    """The Dask dashboard needs bokeh (``pip install "geosweep[dashboard]"``); without it there is no link."""
    from importlib.util import find_spec

    return find_spec("bokeh") is not None


class Execution(BaseModel):
    """How a run executes its cells (not what it computes: that is the :class:`~geosweep.sweeps.plan.Plan`).

    ``serial``: in this process without Dask (same results, bitwise); else ``address`` of a running
    scheduler, else the cluster described in ``cluster_file`` (:mod:`geosweep.deploy.clusters`),
    else a new local cluster of ``n_workers`` workers (default: one per core): worker processes with
    ``processes=True``, threads in this process with ``False``, and by default (None) processes for
    many short cells and threads otherwise (:func:`auto_processes`, decided by :meth:`for_cells`).
    ``slice_seconds``: target single-core seconds
    of work per Dask task; ``retries``: Dask retries of a slice or shard writer that raised;
    ``run``: the options every slice receives (:class:`~geosweep.sweeps.run_options.RunOptions`; its fields
    are also accepted as keywords here, e.g. ``threads_per_cell``).
    ``in_driver_below``: a run of short cells estimated under this many seconds in all runs in the
    driver's process without Dask (:func:`runs_in_driver`; default :func:`in_driver_seconds`; 0: never).
    A cluster this execution starts (:meth:`connect`): ``dashboard`` served on a free port and its link
    logged; ``quiet_workers``: worker processes log errors only (False: everything; None: Dask's
    default); ``exit_on_interrupt``: after Ctrl-C a local cluster of threads is not closed (closing waits
    for the cells running in them).
    ``paths``: the engine's speed-only micro-paths (:class:`~geosweep.sweeps.backends.paths.MicroPaths`).
    Every choice left open here (worker kind, in-driver, threads per cell, slicing) is made once per run,
    on its pending cells, by :func:`geosweep.sweeps.worklist.resolve`.

    >>> from geosweep.sweeps import Execution
    >>> Execution(serial=True).serial  # in this process, no Dask
    True
    >>> Execution(n_workers=2, threads_per_cell=2).run.threads_per_cell  # a RunOptions field, by keyword
    2
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    serial: bool = False
    address: str | None = None
    cluster_file: str | None = None
    n_workers: int | None = None
    processes: bool | None = None
    slice_seconds: float = 10.0
    retries: int = 2
    in_driver_below: float | None = Field(default=None, ge=0)
    run: run_options.RunOptions = run_options.DEFAULT
    dashboard: bool = False
    quiet_workers: bool | None = None
    exit_on_interrupt: bool = False
    paths: MicroPaths = ALL

    @model_validator(mode="before")
    @classmethod
    def _run_keywords(cls, data: Any) -> Any:
        """``RunOptions`` fields given as keywords of the execution go into ``run``."""
        if not isinstance(data, dict):
            return data
        kinds = run_options.RunOptions  # looked up now: a test may register a toy option
        given = {k: data[k] for k in kinds.model_fields if k in data}
        if not given:
            return data
        rest = {k: v for k, v in data.items() if k not in given}
        base = rest.get("run") or kinds()
        rest["run"] = kinds(**{**base.model_dump(), **given}) if isinstance(base, BaseModel) else {**base, **given}
        return rest

    @classmethod
    def from_args(cls, args: Any, **fixed: Any) -> Execution:
        """The execution options of a parsed command line, every field and run option read by name (flags a
        command lacks take their default); ``fixed``: further fields."""
        names = {"n_workers": "workers", "cluster_file": "cluster"}
        fields = [*cls.model_fields, *run_options.RunOptions.model_fields]
        values = {f: getattr(args, names.get(f, f), None) for f in fields if f not in ("run", *fixed)}
        return cls(**{k: v for k, v in values.items() if v is not None}, **fixed)

    @property
    def threads_per_cell(self) -> int | None:
        """The run option ``threads_per_cell`` (:class:`~geosweep.sweeps.run_options.RunOptions`)."""
        return self.run.threads_per_cell

    @property
    def starts_local_cluster(self) -> bool:
        """This execution starts a local cluster of its own (not serial, no scheduler, no cluster file)."""
        return not (self.serial or self.address or self.cluster_file)

    def for_cells(self, costs: Any, log: Callable[[str], None] | None = None) -> Execution:
        """This execution with ``processes`` decided for cells of estimated ``costs`` (single-core
        seconds, one per cell to run) when it is left to geosweep (None) and a local cluster will be
        started (:func:`auto_processes`); the choice of processes is logged."""
        if self.processes is not None or not self.starts_local_cluster:
            return self
        import numpy as np

        costs = np.asarray(costs, dtype=float).ravel()
        chosen = auto_processes(costs)
        if chosen and log is not None:
            log(
                f"local workers: processes ({costs.size} cells of ~{1e3 * float(costs.mean()):.2g} ms estimated "
                "work each: threads would wait on Python's GIL between such short cells; --threads keeps threads)"
            )
        return self.model_copy(update={"processes": chosen})

    def in_driver(self, costs: Any) -> bool:
        """Whether cells of estimated ``costs`` (one per cell to run) run in the driver's process without
        Dask although this execution is not serial (:func:`runs_in_driver`)."""
        return not self.serial and runs_in_driver(costs, self.in_driver_below)

    def connect(self, stack: ExitStack, log: Callable[[str], None]) -> Any:
        """Start (or connect to) this execution's Dask cluster and return a ``distributed.Client`` of it;
        both live as long as ``stack``. A started cluster's dashboard link is logged when it has one."""
        from distributed import Client

        if self.cluster_file:
            from geosweep.deploy.clusters import batch_jobs_state
            from geosweep.sweeps.first_worker import describing

            cfg = cluster_config(self.cluster_file)
            log(f"starting {cfg.kind} cluster from {self.cluster_file}")
            cluster = stack.enter_context(cfg.make())
            stack.enter_context(describing(lambda: batch_jobs_state(cluster)))  # while waiting for a worker
            if cluster.dashboard_link:
                log(f"Dask dashboard: {cluster.dashboard_link}")
            return stack.enter_context(Client(cluster.scheduler_address))
        if self.address:
            try:
                client = stack.enter_context(Client(self.address, timeout="30s"))
            except (OSError, TimeoutError) as e:
                msg = f"cannot connect to the Dask scheduler at --address {self.address}: {e}"
                raise SchedulerUnreachable(msg) from None
            if self.dashboard and client.dashboard_link:
                log(f"Dask dashboard: {client.dashboard_link}")
            return client
        cluster = self._local(stack)
        if self.dashboard and has_bokeh():
            log(f"Dask dashboard: http://127.0.0.1:{cluster.scheduler.http_server.port}/status")
        return stack.enter_context(Client(cluster))

    def _local(self, stack: ExitStack) -> Any:
        """A new local cluster of this execution, closed with ``stack`` (not after Ctrl-C with
        ``exit_on_interrupt`` on threads: closing waits for the cells running in them, maybe hours; the
        process exits at once instead, main → _exit_now, and those cells rerun on resume)."""
        served = {"dashboard_address": "127.0.0.1:0"}  # a free port; served only if bokeh is installed
        hidden = {"dashboard_address": None, "scheduler_kwargs": {"dashboard_address": ":0"}}  # not 8787
        level = logging.ERROR if self.quiet_workers else logging.DEBUG
        logs = {} if self.quiet_workers is None else {"silence_logs": level}
        cluster = local_cluster(
            self.n_workers,
            processes=bool(self.processes),  # undecided (None): threads (worklist.resolve decides first)
            **(served if self.dashboard else hidden),
            **logs,
        )
        threads_die_with_us = not self.processes and self.exit_on_interrupt

        def close(exc_type, exc, tb) -> bool:
            # a signal: Ctrl-C's KeyboardInterrupt, or Prefect's TerminationSignal inside a flow run
            signalled = exc_type is KeyboardInterrupt or getattr(exc, "signal", None) in (signal.SIGINT, signal.SIGTERM)
            if not (signalled and threads_die_with_us):
                cluster.close()
            return False

        stack.push(close)
        return cluster
