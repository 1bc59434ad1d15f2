"""Running geosweep beyond one machine: Dask clusters (local, Slurm, PBS, Kubernetes).

See ``deploy/README.md`` for Slurm/PBS/Kubernetes runs, object-storage output and the
nightly Prefect schedule (``geosweep.flows.deployments``).
"""

if __name__ != "geosweep.deploy":  # the folder imported as a top-level ``deploy`` (the checkout on sys.path)
    raise ImportError(f"import geosweep.deploy, not {__name__}: the folder deploy/ is the package geosweep.deploy")

from geosweep.deploy.clusters import ClusterConfig, make_cluster

__all__ = ["ClusterConfig", "make_cluster"]
