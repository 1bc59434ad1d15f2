"""A shard's models reach the cluster without a large graph (issue 21): a shard of 8 ``lj_sphere``
models (3.3 MB each pickled) used to be one 26 MB task, and distributed warned "Sending large
graph" on the CLI's stderr. Large models are built on the worker; the results stay bitwise."""

from __future__ import annotations

import warnings

from distributed import Client, LocalCluster

from geosweep.sweeps import bundles
from geosweep.sweeps.engine import LOCAL_WORKER, run_sweep
from geosweep.sweeps.plan import make_plan
from tests.sweep_util import assert_stores_bitwise_equal

#: 16 cells of 642 molecules, a few steps each: two store shards of 8 models
BIG = """
name = "big-models"
system = "lj_sphere"
integrators = ["rk4"]
h = [0.0025]
T = 0.01
dt_out = 0.005
[params]
omega = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4, 2.6, 2.8, 3.0]
"""


def test_large_models_are_built_on_the_worker_bitwise(tmp_path):
    spec = tmp_path / "big.toml"
    spec.write_text(BIG)
    plan = make_plan(str(spec))
    assert bundles.model_bytes(plan) * 8 > 10 * 2**20  # a shard's models as one task: a "large graph"
    built = bundles.build_bundle(plan.part(models={}), list(plan.models))
    assert built.keys() == plan.models.keys()
    run_sweep(plan, str(tmp_path / "serial.zarr"), serial=True)
    with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
        with Client(cluster) as client, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run_sweep(plan, str(tmp_path / "dist.zarr"), client=client)
    assert result.complete and result.ran == 16
    large = [str(w.message) for w in caught if "large graph" in str(w.message)]
    assert not large, large
    assert_stores_bitwise_equal(str(tmp_path / "serial.zarr"), str(tmp_path / "dist.zarr"))


def test_small_models_still_travel_in_their_task():
    """A pendulum chain pickles to a few hundred bytes: 4000 of a shard stay under the limit."""
    plan = make_plan(
        {
            "name": "small",
            "system": "pendulum_chain",
            "integrators": ["rkmk4"],
            "h": [0.01],
            "T": 0.1,
            "dt_out": 0.1,
            "params": {"N": 3, "ic": "random", "seed": list(range(4))},
        }
    )
    assert bundles.model_bytes(plan) * 4000 <= bundles.MAX_SHIPPED_BYTES
