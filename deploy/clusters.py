"""Dask clusters for geosweep: local processes, Slurm/PBS batch jobs, Kubernetes pods.

Every Dask worker is a single-threaded process with one core: the kernels are
single-threaded Numba code, so one process per core avoids the GIL and keeps results
bitwise identical to a serial run. Batch jobs export ``NUMBA_NUM_THREADS=1`` (and the BLAS
thread counts) and put the Numba cache on shared storage (``NUMBA_CACHE_DIR``) so a kernel
compiled once is loaded by every worker.

``make_cluster(kind, **options)`` builds a cluster in Python; :class:`ClusterConfig` reads the
same options from a TOML/YAML file (``kind = "slurm"`` plus options), e.g. for
``geosweep run SPEC --cluster deploy/slurm/cluster.toml``.
"""

from __future__ import annotations

import importlib.util
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, RootModel

KINDS = ("local", "slurm", "pbs", "kubernetes")

#: Environment of every worker: single-threaded kernels and BLAS.
WORKER_ENV = {
    "NUMBA_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
#: Default Numba cache of batch workers; home directories are shared on most HPC systems.
DEFAULT_NUMBA_CACHE_DIR = "$HOME/.cache/geosweep/numba"

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
    """Options shared by Slurm and PBS: one batch job = ``cores`` single-threaded workers."""

    queue: str | None = Field(None, description="partition (Slurm) or queue (PBS)")
    account: str | None = Field(None, description="account/project to charge")
    cores: int = Field(8, ge=1, description="cores per job = single-threaded worker processes per job")
    memory: str = Field("16GiB", description="memory per job, split evenly between its workers")
    walltime: str = Field("02:00:00", description="job wall-clock limit (HH:MM:SS)")
    job_name: str = "geosweep"
    job_extra_directives: list[str] = Field(default_factory=list, description="extra #SBATCH/#PBS lines")
    prologue: list[str] = Field(
        default_factory=list, description="shell lines run before the worker, e.g. 'module load python'"
    )
    env: dict[str, str] = Field(default_factory=dict, description="extra exported variables ($VARS expand)")
    numba_cache_dir: str = Field(DEFAULT_NUMBA_CACHE_DIR, description="Numba cache on shared storage")
    worker_lifetime: str | None = Field(
        None, description="retire workers gracefully before the walltime, e.g. '55m' for a 1 h job"
    )
    worker_extra_args: list[str] = Field(default_factory=list)
    interface: str | None = Field(None, description="network interface of scheduler and workers, e.g. 'ib0'")
    local_directory: str | None = Field(None, description="worker scratch space, e.g. '$TMPDIR'")
    log_directory: str | None = None
    python: str | None = Field(None, description="python on the compute nodes (default: this one)")
    dashboard_address: str | None = ":8787"
    jobs: int = Field(0, ge=0, description="jobs submitted when the cluster starts")
    adapt_min_jobs: int = Field(0, ge=0)
    adapt_max_jobs: int | None = Field(None, ge=1, description="set to scale adaptively between min and max jobs")

    @property
    def requests_workers(self) -> bool:
        return self.jobs > 0 or bool(self.adapt_max_jobs)


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
    image: str = "geosweep:latest"
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
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=o.n_workers or os.cpu_count() or 1,
        threads_per_worker=1,
        processes=True,
        memory_limit=o.memory_limit,
        dashboard_address=o.dashboard_address,
        env=dict(WORKER_ENV),
    )


def _dq(value: str) -> str:
    """Double-quote for a shell: ``$VARS`` still expand, quotes and backticks do not."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`") + '"'


def batch_prologue(o: _BatchOptions) -> list[str]:
    """Shell lines of a batch job before the worker starts: user prologue, then environment."""
    env = {**WORKER_ENV, "NUMBA_CACHE_DIR": o.numba_cache_dir, **o.env}
    lines = list(o.prologue)
    lines += [f"export {k}={_dq(v)}" for k, v in env.items()]
    lines.append('mkdir -p "$NUMBA_CACHE_DIR"')
    return lines


def _batch_kwargs(o: _BatchOptions) -> dict[str, Any]:
    extra = list(o.worker_extra_args)
    if o.worker_lifetime:
        extra += ["--lifetime", o.worker_lifetime, "--lifetime-stagger", "2m"]
    kwargs: dict[str, Any] = {
        "queue": o.queue,
        "account": o.account,
        "cores": o.cores,
        "processes": o.cores,  # one single-threaded worker process per core
        "memory": o.memory,
        "walltime": o.walltime,
        "job_name": o.job_name,
        "job_extra_directives": list(o.job_extra_directives),
        "job_script_prologue": batch_prologue(o),
        "worker_extra_args": extra,
        "interface": o.interface,
        "local_directory": o.local_directory,
        "log_directory": o.log_directory,
        "scheduler_options": {"dashboard_address": o.dashboard_address},
    }
    if o.python:
        kwargs["python"] = o.python
    return kwargs


def _start_batch(cluster, o: _BatchOptions):
    if o.adapt_max_jobs:
        cluster.adapt(minimum_jobs=o.adapt_min_jobs, maximum_jobs=o.adapt_max_jobs)
    elif o.jobs:
        cluster.scale(jobs=o.jobs)
    return cluster


def _slurm(o: SlurmOptions):
    from dask_jobqueue import SLURMCluster

    return _start_batch(SLURMCluster(**_batch_kwargs(o)), o)


def _pbs(o: PBSOptions):
    from dask_jobqueue import PBSCluster

    return _start_batch(PBSCluster(resource_spec=o.resource_spec, **_batch_kwargs(o)), o)


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
            env={**WORKER_ENV, "NUMBA_CACHE_DIR": "/tmp/numba-cache", **o.env},
            worker_command="dask worker --nthreads 1",
        )
    if o.adapt_max_workers:
        cluster.adapt(minimum=o.adapt_min_workers, maximum=o.adapt_max_workers)
    return cluster


_BUILDERS = {"local": _local, "slurm": _slurm, "pbs": _pbs, "kubernetes": _kubernetes}
