"""A run with ``grow`` decides once, before any write, which of its two steps it takes
(:func:`geosweep.sweeps.extension.growth`): the sweep axes grow (:mod:`geosweep.sweeps.grow`, at the
store's T when T grows too), then the time axis (:func:`geosweep.sweeps.extension.extend_time`);
neither for the store's own spec or no store. The engine runs the steps in that order."""

from __future__ import annotations

import json

from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.extension import growth
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store import StoreRef
from tests.proc_util import store_files

CHAIN = {"name": "steps", "system": "pendulum_chain", "integrators": ["lie_euler"], "h": [0.01], "T": 0.02,
         "dt_out": 0.01, "params": {"ic": "random", "seed": [0, 1]}}  # fmt: skip


def _with(**changes) -> dict:
    spec = json.loads(json.dumps(CHAIN))
    spec.update(changes)
    return spec


def test_the_steps_of_a_grow_run_are_chosen_once_from_the_two_specs(tmp_path):
    store = tmp_path / "s.zarr"
    ref = StoreRef.of(store)
    nothing = growth(make_plan(CHAIN), ref)
    assert (nothing.axes, nothing.time) == (None, False)  # no store yet: the run creates it
    assert run_sweep(CHAIN, store, serial=True).complete
    before = store_files(store)
    same = growth(make_plan(CHAIN), ref)
    assert (same.axes, same.time) == (None, False)
    later = growth(make_plan(_with(T=0.04)), ref)
    assert later.axes is None and later.time and later.plan.spec.T == 0.04
    wider = growth(make_plan(_with(h=[0.01, 0.005])), ref)
    assert wider.axes is wider.plan and not wider.time
    both = growth(make_plan(_with(h=[0.01, 0.005], T=0.04)), ref)
    assert both.time and both.axes.spec.T == 0.02 and list(both.axes.spec.h) == [0.01, 0.005]
    assert store_files(store) == before  # deciding writes nothing
    result = run_sweep(_with(h=[0.01, 0.005], T=0.04), store, serial=True, grow=True)  # axes, then T
    assert result.complete and result.total == 4 and result.ran == 4  # 2 new cells, 2 continued to the new T
    attrs = dict(ref.open_group("r").attrs)
    assert attrs["spec_hash"] == make_plan(_with(h=[0.01, 0.005], T=0.04)).spec.spec_hash
