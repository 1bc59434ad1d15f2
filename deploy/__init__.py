"""Running geosweep beyond one machine: Dask clusters (local, Slurm, PBS, Kubernetes).

See ``deploy/README.md`` for Slurm/PBS/Kubernetes runs, object-storage output and the
nightly Prefect schedule (``geosweep.flows.deployments``).
"""

from geosweep.deploy.clusters import ClusterConfig, make_cluster

__all__ = ["ClusterConfig", "make_cluster"]
