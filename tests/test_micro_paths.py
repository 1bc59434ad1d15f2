"""The engine's speed-only micro-paths (issue 50 item 3: each to be measured with and without) are
switched in one place, ``Execution(paths=MicroPaths(...))``, and change no stored value: a run with every
one of them off (models in a task per shard, no copies, a writer task per shard, no early wave, every cell
alone, no tails, …) stores bitwise what the default run stores. Real LocalCluster (worker threads), real
zarr stores."""

from __future__ import annotations

from geosweep.sweeps.backends.paths import MicroPaths
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.execution import Execution
from tests.sweep_util import assert_stores_bitwise_equal

SPEC = {
    "name": "micro-paths",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "cf4"],
    "h": [0.025],
    "T": 0.1,
    "dt_out": 0.05,
    "params": {"N": 3, "ic": "random", "seed": list(range(12))},
}
NONE = MicroPaths(**dict.fromkeys(MicroPaths.model_fields, False))


def test_every_micro_path_off_stores_the_same_values_bitwise(tmp_path):
    base = Execution(n_workers=2, processes=False, in_driver_below=0.0, slice_seconds=1e-4)
    said: list[str] = []
    on = run_sweep(SPEC, tmp_path / "on.zarr", execution=base)
    off = run_sweep(SPEC, tmp_path / "off.zarr", execution=base.model_copy(update={"paths": NONE}), log=said.append)
    assert on.complete and off.complete and on.ran == off.ran == 24
    assert not any("creating" in line for line in said), said  # no early wave: the store was created first
    assert_stores_bitwise_equal(str(tmp_path / "on.zarr"), str(tmp_path / "off.zarr"))
    serial = run_sweep(SPEC, tmp_path / "serial.zarr", execution=Execution(serial=True, paths=NONE))
    assert serial.complete
    assert_stores_bitwise_equal(str(tmp_path / "on.zarr"), str(tmp_path / "serial.zarr"))
