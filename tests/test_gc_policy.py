"""Fewer cyclic garbage collections while cells run (:mod:`geosweep.sweeps.gc_policy`), counted, not timed.

A sweep of many cheap cells allocates a few hundred container objects per cell, nearly all freed by
reference counting; with CPython's default threshold the collector ran every few cells (and walked
every live object every hundredth pass). Real sweeps and a real ``LocalCluster``.
"""

from __future__ import annotations

import gc
import threading

import pytest
from distributed import Client, LocalCluster

from geosweep.sweeps import gc_policy
from geosweep.sweeps.engine import LOCAL_WORKER, run_sweep
from geosweep.sweeps.gc_policy import FIRST_THRESHOLD, fewer_collections
from geosweep.sweeps.plan import make_plan
from tests.sweep_util import assert_stores_bitwise_equal, chain_ensemble

#: 400 cheap cells (about 0.1 ms each): 100 seeds × 2 integrators × 2 step sizes
SPEC = chain_ensemble("gc-policy", 100)


@pytest.fixture
def default_threshold():
    """CPython's default thresholds for the test, whatever the session set; restored after."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def _collector_passes(run) -> tuple[int, object]:
    """(collector passes of any generation while ``run()`` runs, its result)."""
    starts: list[int] = []

    def count(phase, info):
        if phase == "start":
            starts.append(info["generation"])

    gc.callbacks.append(count)
    try:
        result = run()
    finally:
        gc.callbacks.remove(count)
    return len(starts), result


def test_a_sweep_of_many_cheap_cells_collects_rarely_and_restores_the_threshold(tmp_path, default_threshold):
    seen: list[int] = []

    def watch(progress):
        seen.append(gc.get_threshold()[0])

    make_plan(SPEC)  # the family's modules imported first: the count is of the run, not of first imports
    passes, res = _collector_passes(lambda: run_sweep(SPEC, tmp_path / "new.zarr", serial=True, progress=watch))
    assert res.complete and res.ran == 400
    assert seen and set(seen) == {FIRST_THRESHOLD}  # raised while the cells run ...
    assert gc.get_threshold() == (700, 10, 10)  # ... and given back after
    # the same sweep with the default threshold throughout, for the count and the values
    old_threshold = gc_policy.FIRST_THRESHOLD
    gc_policy.FIRST_THRESHOLD = 0
    try:
        passes_before, old = _collector_passes(lambda: run_sweep(SPEC, tmp_path / "old.zarr", serial=True))
    finally:
        gc_policy.FIRST_THRESHOLD = old_threshold
    assert old.complete
    assert passes * 5 <= passes_before, (passes, passes_before)  # measured: 3–4 against 62–63
    assert_stores_bitwise_equal(res.store, old.store)  # the collector never touches a value


def test_worker_tasks_run_under_the_raised_threshold_and_give_it_back(tmp_path, default_threshold):
    seen: list[int] = []

    def watch(progress):  # called in this process; the worker threads live here too
        seen.append(gc.get_threshold()[0])

    with LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER) as cluster:
        with Client(cluster) as client:
            res = run_sweep(SPEC, tmp_path / "s.zarr", client=client, slice_seconds=1e-3, progress=watch)
            # the workers' own tasks enter the policy too: a threshold read inside a task
            inside = client.submit(_threshold_inside_a_guarded_task, str(tmp_path / "s.zarr"), pure=False).result()
    assert res.complete and res.slices >= 2
    assert set(seen) == {FIRST_THRESHOLD}
    assert inside == FIRST_THRESHOLD
    assert gc.get_threshold() == (700, 10, 10)


def _threshold_inside_a_guarded_task(store: str) -> int:
    from geosweep.sweeps.engine import _guarded
    from geosweep.sweeps.store import StoreRef

    return _guarded(StoreRef.of(store), lambda: gc.get_threshold()[0])


def test_nested_and_concurrent_blocks_restore_the_threshold_only_when_the_last_one_leaves(default_threshold):
    entered, release = threading.Event(), threading.Event()

    def other():
        with fewer_collections():
            entered.set()
            release.wait(10)

    t = threading.Thread(target=other)
    with fewer_collections():
        t.start()
        assert entered.wait(10)
        with fewer_collections():
            assert gc.get_threshold()[0] == FIRST_THRESHOLD
        assert gc.get_threshold()[0] == FIRST_THRESHOLD  # the inner block left, two remain
    assert gc.get_threshold()[0] == FIRST_THRESHOLD  # this thread's block left, the other's remains
    release.set()
    t.join(10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_or_a_disabled_collector_is_left_as_it_is():
    saved = gc.get_threshold()
    try:
        gc.set_threshold(FIRST_THRESHOLD * 3, 10, 10)
        with fewer_collections():
            assert gc.get_threshold()[0] == FIRST_THRESHOLD * 3
        gc.set_threshold(0, 10, 10)  # threshold 0: automatic collection off
        with fewer_collections():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*saved)
