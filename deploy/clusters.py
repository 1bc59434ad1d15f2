"""Dask clusters for geosweep: local processes, Slurm/PBS batch jobs, Kubernetes pods.

Every Dask worker is a process on one core that runs one slice at a time (the Dask resource
``geosweep-slice``; the kernels are single-threaded Numba code, so one process per core avoids
the GIL and keeps results bitwise identical to a serial run) and has a second thread that
writes finished store shards meanwhile (:data:`geosweep.sweeps.execution.WORKER_ARGS`). Batch jobs export
``NUMBA_NUM_THREADS=1`` (and the BLAS thread counts) and put the Numba cache on shared storage
(``NUMBA_CACHE_DIR``) so a kernel compiled once is loaded by every worker.

``make_cluster(kind, **options)`` builds a cluster in Python; :class:`ClusterConfig` reads the
same options from a TOML/YAML file (``kind = "slurm"`` plus options), e.g. for
``geosweep run SPEC --cluster deploy/slurm/cluster.toml``.

Slurm/PBS settings are layered, lowest first: dask-jobqueue's shipped defaults, geosweep's
defaults (:data:`BATCH_DEFAULTS`), the site's dask configuration (``jobqueue.yaml`` in
``~/.config/dask``, ``/etc/dask`` or ``$DASK_CONFIG``, ``DASK_JOBQUEUE__…`` variables), then the
keys the cluster file sets. So a cluster file overrides only what it sets. The workers' Python
is chosen explicitly (``python``: default ``python3`` as found on the compute node after the
prologue, e.g. an activated venv), never the driver's own interpreter path.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import signal
import threading
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from geosweep import config
from geosweep.sweeps.execution import WORKER_ARGS, local_cluster

KINDS = ("local", "slurm", "pbs", "kubernetes")

#: Environment of every worker: single-threaded kernels and BLAS; the working directory off
#: ``sys.path`` (a ``yaml.py`` or ``multiprocessing.py`` there is never imported). A cluster file's
#: ``env`` overrides any of them.
WORKER_ENV = config.values(
    "NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONSAFEPATH"
)
#: Default Numba cache of batch workers; home directories are shared on most HPC systems.
DEFAULT_NUMBA_CACHE_DIR = "$HOME/.cache/geosweep/numba"
#: geosweep's defaults of dask-jobqueue keys, used where neither the cluster file nor the site's
#: dask configuration sets the key.
BATCH_DEFAULTS: dict[str, Any] = {
    "cores": 8,
    "memory": "16GiB",
    "walltime": "02:00:00",
    "name": "geosweep",
    "python": "python3",
    "scheduler-options": {"dashboard_address": ":8787"},
}

_INSTALL_HINTS = {
    "slurm": "kind 'slurm' needs dask-jobqueue: pip install dask-jobqueue (or geosweep[cluster])",
    "pbs": "kind 'pbs' needs dask-jobqueue: pip install dask-jobqueue (or geosweep[cluster])",
}
_K8S_INSTALL_HINT = (
    "kind 'kubernetes' needs the Dask Kubernetes operator client: pip install dask-kubernetes "
    "(and the operator installed in the cluster, see deploy/README.md)"
)


class MissingDependencyError(ImportError):
    """The package that starts this kind of cluster is not installed (the message says which)."""


def check_dependencies(kind: str) -> None:
    """Raise :class:`MissingDependencyError` if the client library for ``kind`` is missing."""
    module = {"slurm": "dask_jobqueue", "pbs": "dask_jobqueue", "kubernetes": "dask_kubernetes"}.get(kind)
    if module and importlib.util.find_spec(module) is None:
        raise MissingDependencyError(_INSTALL_HINTS.get(kind, _K8S_INSTALL_HINT))


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @property
    def requests_workers(self) -> bool:
        """True if building the cluster starts (or may start) at least one worker."""
        raise NotImplementedError


class LocalOptions(_Options):
    """Worker processes on this machine (``distributed.LocalCluster``)."""

    kind: Literal["local"] = "local"
    n_workers: int | None = Field(None, ge=1, description="worker processes (default: all cores)")
    memory_limit: str = Field("auto", description="per worker, e.g. '2GiB'")
    dashboard_address: str = Field(":0", description="scheduler dashboard, e.g. ':8787' (default: a free port)")

    @property
    def requests_workers(self) -> bool:
        return True


class _BatchOptions(_Options):
    """Options shared by Slurm and PBS: one batch job = ``cores`` workers, one slice at a time each.

    ``None`` (the default of the dask-jobqueue keys) means not set: the site's dask configuration,
    else :data:`BATCH_DEFAULTS`, else dask-jobqueue's default applies."""

    queue: str | None = Field(None, description="partition (Slurm) or queue (PBS)")
    account: str | None = Field(None, description="account/project to charge")
    cores: int | None = Field(None, ge=1, description="cores per job = worker processes per job")
    memory: str | None = Field(None, description="memory per job, split evenly between its workers")
    walltime: str | None = Field(None, description="job wall-clock limit (HH:MM:SS)")
    job_name: str | None = None
    job_extra_directives: list[str] | None = Field(None, description="extra #SBATCH/#PBS lines")
    prologue: list[str] | None = Field(
        None, description="shell lines run before the worker, e.g. 'module load python' (replace the site's)"
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra exported variables ($VARS expand)")
    numba_cache_dir: str = Field(DEFAULT_NUMBA_CACHE_DIR, description="Numba cache on shared storage")
    worker_lifetime: str | None = Field(
        None, description="retire workers gracefully before the walltime, e.g. '55m' for a 1 h job"
    )
    worker_extra_args: list[str] | None = None
    interface: str | None = Field(None, description="network interface of scheduler and workers, e.g. 'ib0'")
    local_directory: str | None = Field(None, description="worker scratch space, e.g. '$TMPDIR'")
    log_directory: str | None = None
    python: str | None = Field(
        None, description="python of the workers on the compute nodes (default python3 on their PATH)"
    )
    dashboard_address: str | None = None
    jobs: int = Field(0, ge=0, description="jobs submitted when the cluster starts")
    adapt_min_jobs: int = Field(0, ge=0)
    adapt_max_jobs: int | None = Field(None, ge=1, description="set to scale adaptively between min and max jobs")

    @property
    def requests_workers(self) -> bool:
        return self.jobs > 0 or bool(self.adapt_max_jobs)

    @model_validator(mode="after")
    def _lifetime_needs_adaptive(self) -> _BatchOptions:
        """Retired workers of fixed jobs are never replaced (dask-jobqueue cancels the job and submits
        none): the run would stall once every worker retired."""
        if self.worker_lifetime and self.jobs and not self.adapt_max_jobs:
            raise ValueError(
                f"worker_lifetime with a fixed number of jobs (jobs = {self.jobs}) stalls the run once the workers "
                "retire (their jobs are not replaced): scale adaptively instead (adapt_max_jobs = N), or drop "
                "worker_lifetime"
            )
        return self


class SlurmOptions(_BatchOptions):
    """Workers in Slurm jobs (``dask_jobqueue.SLURMCluster``)."""

    kind: Literal["slurm"] = "slurm"


class PBSOptions(_BatchOptions):
    """Workers in PBS jobs (``dask_jobqueue.PBSCluster``)."""

    kind: Literal["pbs"] = "pbs"
    resource_spec: str | None = Field(None, description="e.g. 'select=1:ncpus=8:mem=16GB' (default from cores)")


class KubernetesOptions(_Options):
    """Worker pods of a ``DaskCluster`` resource (dask-kubernetes operator ``KubeCluster``)."""

    kind: Literal["kubernetes"] = "kubernetes"
    name: str = "geosweep"
    namespace: str | None = None
    image: str = Field("geosweep:latest", description="built by deploy/Dockerfile")
    n_workers: int = Field(2, ge=0)
    cpu: str = Field("1", description="CPU request and limit of each pod (one worker thread)")
    memory: str = Field("2Gi", description="memory request and limit of each pod")
    env: dict[str, str] = Field(default_factory=dict)
    manifest: str | None = Field(None, description="DaskCluster YAML used instead of the options above")
    adapt_min_workers: int = Field(0, ge=0)
    adapt_max_workers: int | None = Field(None, ge=1)

    @property
    def requests_workers(self) -> bool:
        return self.n_workers > 0 or bool(self.adapt_max_workers)


AnyClusterOptions = Annotated[LocalOptions | SlurmOptions | PBSOptions | KubernetesOptions, Field(discriminator="kind")]


class ClusterConfig(RootModel[AnyClusterOptions]):
    """A cluster described in a file: ``kind`` (local, slurm, pbs, kubernetes) plus its options."""

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> ClusterConfig:
        """Read a ``.toml``, ``.yaml``/``.yml`` or ``.json`` cluster file."""
        p = Path(path)
        text = p.read_text()
        data = tomllib.loads(text) if p.suffix == ".toml" else yaml.safe_load(text)
        if not isinstance(data, dict):
            raise ValueError(f"{p}: a cluster file must be a mapping with a 'kind' key")
        return cls.model_validate(data)

    @property
    def kind(self) -> str:
        return self.root.kind

    @property
    def options(self) -> dict[str, Any]:
        """The options as keyword arguments of :func:`make_cluster` (without ``kind``)."""
        return self.root.model_dump(exclude={"kind"})

    def make(self):
        """Start the cluster (see :func:`make_cluster`)."""
        check_dependencies(self.kind)
        return _BUILDERS[self.kind](self.root)


def make_cluster(kind: str, **options: Any):
    """Start a Dask cluster of ``kind`` ("local", "slurm", "pbs", "kubernetes").

    ``options`` are the fields of :class:`LocalOptions`, :class:`SlurmOptions`,
    :class:`PBSOptions` or :class:`KubernetesOptions`; unknown names are refused. Slurm/PBS
    clusters submit ``jobs`` jobs at once (default none: call ``cluster.scale(jobs=n)`` or set
    ``adapt_max_jobs``); their ``job_script()`` can be inspected without a batch system.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown cluster kind {kind!r}; choose one of {', '.join(KINDS)}")
    return ClusterConfig.model_validate({"kind": kind, **options}).make()


# ---------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------
def _local(o: LocalOptions):
    return local_cluster(
        o.n_workers,  # one slice at a time, a spare thread for shard writers
        processes=True,
        memory_limit=o.memory_limit,
        dashboard_address=o.dashboard_address,
        env=dict(WORKER_ENV),
    )


def import_jobqueue():
    """``dask_jobqueue``, imported without its side effect on the driver: importing it sets a SIGINT
    handler that calls ``sys.exit()`` (Ctrl-C would end a run with exit 0 and no message). The handler
    in place before (geosweep's :class:`geosweep.flows.output.Interrupts`) is put back."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    import dask_jobqueue

    if main and previous is not None and signal.getsignal(signal.SIGINT) is not previous:
        signal.signal(signal.SIGINT, previous)
    return dask_jobqueue


def _dq(value: str) -> str:
    """Double-quote for a shell: ``$VARS`` still expand, quotes and backticks do not."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'


def _shipped_defaults(kind: str) -> dict[str, Any]:
    """dask-jobqueue's own defaults of ``jobqueue.<kind>`` (its packaged jobqueue.yaml)."""
    path = Path(import_jobqueue().__file__).with_name("jobqueue.yaml")
    return yaml.safe_load(path.read_text())["jobqueue"].get(kind, {})


def site_settings(kind: str) -> dict[str, Any]:
    """The ``jobqueue.<kind>`` keys the site's dask configuration sets (to other than dask-jobqueue's
    defaults; a copy of those, as dask-jobqueue writes to ``~/.config/dask``, sets nothing)."""
    import dask.config

    shipped = {k.replace("_", "-"): v for k, v in _shipped_defaults(kind).items()}
    current = dask.config.get(f"jobqueue.{kind}", default={}) or {}
    out = {}
    for key, value in current.items():
        key = key.replace("_", "-")
        if key not in shipped or value != shipped[key]:
            out[key] = value
    return out


def batch_setting(o: _BatchOptions, key: str, value: Any = None) -> Any:
    """One dask-jobqueue key of a batch cluster: ``value`` (set by the cluster file), else the
    site's setting, else :data:`BATCH_DEFAULTS`, else None (dask-jobqueue's default)."""
    if value is not None:
        return value
    site = site_settings(o.kind)
    if key in site:
        return site[key]
    return BATCH_DEFAULTS.get(key)


def batch_prologue(o: _BatchOptions) -> list[str]:
    """Shell lines of a batch job before the worker starts: the prologue (the cluster file's, else the
    site's ``job-script-prologue``), then the workers' environment."""
    env = {**WORKER_ENV, "NUMBA_CACHE_DIR": o.numba_cache_dir, **o.env}
    lines = list(o.prologue if o.prologue is not None else site_settings(o.kind).get("job-script-prologue") or [])
    lines += [f"export {k}={_dq(v)}" for k, v in env.items()]
    lines.append('mkdir -p "$NUMBA_CACHE_DIR"')
    return lines


def _batch_kwargs(o: _BatchOptions) -> dict[str, Any]:
    """Keyword arguments of the dask-jobqueue cluster. Keys left None are read by dask-jobqueue from
    the dask configuration (the site's jobqueue.yaml) itself."""
    extra = list(batch_setting(o, "worker-extra-args", o.worker_extra_args) or [])
    if not {"--nthreads", "--resources"} & set(extra):
        # dask-jobqueue starts `cores` workers of one thread each; a second thread (the later
        # --nthreads wins) writes finished shards while the worker's one slice at a time runs
        extra = [*WORKER_ARGS, *extra]
    if o.worker_lifetime:
        extra += ["--lifetime", o.worker_lifetime, "--lifetime-stagger", "2m"]
    cores = int(batch_setting(o, "cores", o.cores))
    scheduler_options = dict(batch_setting(o, "scheduler-options") or {})
    if o.dashboard_address is not None:
        scheduler_options["dashboard_address"] = o.dashboard_address
    return {
        "queue": o.queue,
        "account": o.account,
        "cores": cores,
        "processes": cores,  # one worker process per core
        "memory": batch_setting(o, "memory", o.memory),
        "walltime": batch_setting(o, "walltime", o.walltime),
        "job_name": batch_setting(o, "name", o.job_name),
        "python": batch_setting(o, "python", o.python),
        "job_extra_directives": o.job_extra_directives,
        "job_script_prologue": batch_prologue(o),
        "worker_extra_args": extra,
        "interface": o.interface,
        "local_directory": o.local_directory,
        "log_directory": o.log_directory,
        "scheduler_options": scheduler_options,
    }


@functools.cache
def cost_aware_adaptive():
    """``distributed.deploy.Adaptive`` whose target is also the number of workers the running sweep's
    pending cells can keep busy (:mod:`geosweep.sweeps.demand`, published by the driver from the plan's cell
    costs): from 0 workers, three long cells ask for three workers, not one."""
    from distributed.deploy import Adaptive

    from geosweep.sweeps.demand import KEY

    class CostAwareAdaptive(Adaptive):
        async def target(self) -> int:
            n = await super().target()
            try:
                wanted = await self.scheduler.get_metadata(keys=list(KEY), default=0)
            except Exception:  # noqa: BLE001 - no number published: Dask's own target
                wanted = 0
            return max(int(n), int(wanted or 0))

    return CostAwareAdaptive


def _start_batch(cluster, o: _BatchOptions):
    if o.adapt_max_jobs:
        cluster.adapt(minimum_jobs=o.adapt_min_jobs, maximum_jobs=o.adapt_max_jobs, Adaptive=cost_aware_adaptive())
    elif o.jobs:
        cluster.scale(jobs=o.jobs)
    return cluster


def _slurm(o: SlurmOptions):
    return _start_batch(import_jobqueue().SLURMCluster(**_batch_kwargs(o)), o)


def _pbs(o: PBSOptions):
    return _start_batch(import_jobqueue().PBSCluster(resource_spec=o.resource_spec, **_batch_kwargs(o)), o)


def _kubernetes(o: KubernetesOptions):
    from dask_kubernetes.operator import KubeCluster

    if o.manifest:
        cluster = KubeCluster(custom_cluster_spec=o.manifest, namespace=o.namespace)
    else:
        limits = {"cpu": o.cpu, "memory": o.memory}
        cluster = KubeCluster(
            name=o.name,
            namespace=o.namespace,
            image=o.image,
            n_workers=o.n_workers,
            resources={"requests": dict(limits), "limits": dict(limits)},
            env={**WORKER_ENV, **o.env},  # NUMBA_CACHE_DIR: the image's, compiled at build (deploy/Dockerfile)
            # one slice at a time (geosweep.sweeps.engine.SLICE_RESOURCE), a spare thread for shard writers
            worker_command=" ".join(["dask", "worker", *WORKER_ARGS]),
        )
    if o.adapt_max_workers:
        cluster.adapt(minimum=o.adapt_min_workers, maximum=o.adapt_max_workers)
    return cluster


_BUILDERS = {"local": _local, "slurm": _slurm, "pbs": _pbs, "kubernetes": _kubernetes}


# ---------------------------------------------------------------------------------------
# what the batch system says about a cluster's jobs (geosweep.sweeps.first_worker)
# ---------------------------------------------------------------------------------------
#: Slurm job states of a job that may still start a worker
_SLURM_ALIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"}


def _job_ids(cluster) -> list[str]:
    return [str(job.job_id) for job in getattr(cluster, "workers", {}).values() if getattr(job, "job_id", None)]


def _log_paths(cluster, job_id: str) -> str:
    """Where the job's stdout/stderr go: ``#SBATCH -o/-e`` of its script, else Slurm's default."""
    paths = []
    for line in cluster.job_script().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("#SBATCH", "#PBS") and parts[1] in ("-o", "-e"):
            paths.append(parts[2].replace("%J", job_id).replace("%j", job_id))
    return ", ".join(paths) or os.path.join(os.getcwd(), f"slurm-{job_id}.out")


def slurm_jobs_state(cluster):
    """The cluster's jobs as ``squeue`` sees them (state and reason) with their log paths."""
    import subprocess

    from geosweep.sweeps.first_worker import JobsState

    ids = _job_ids(cluster)
    if not ids:
        return JobsState("no job was submitted (sbatch refused it? see the lines above)", False)
    p = subprocess.run(
        ["squeue", "-h", "-j", ",".join(ids), "-o", "%i %T %r"], capture_output=True, text=True, timeout=30
    )
    seen = {parts[0]: parts[1:] for parts in (line.split(None, 2) for line in p.stdout.splitlines()) if parts}
    words, alive = [], False
    for i in ids:
        got = seen.get(i) or ["ENDED"]  # no longer in the queue
        state, reason = got[0], (got[1] if len(got) > 1 else "")
        alive |= state in _SLURM_ALIVE
        why = f" ({reason})" if reason and reason != "None" else ""
        words.append(f"job {i} {state}{why}, log {_log_paths(cluster, i)}")
    return JobsState("; ".join(words), alive)


def batch_jobs_state(cluster):
    """What the batch system says about ``cluster``'s jobs, or None (not a batch cluster)."""
    name = type(cluster).__name__
    if name == "SLURMCluster":
        return slurm_jobs_state(cluster)
    if name == "PBSCluster":
        from geosweep.sweeps.first_worker import JobsState

        ids = _job_ids(cluster)
        return JobsState(f"jobs {', '.join(ids) or 'none yet'} (see qstat -f for why they wait)", True)
    return None
