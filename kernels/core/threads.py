"""Threads inside one cell: how many a run may use, and running a call on them.

A family that can split its step (the (S²)ⁿ potentials compiled with ``threaded=True``) runs
its ``numba.prange`` loops on ``threads`` threads of Numba's threading layer; the count is set
for the calling thread only (``numba.set_num_threads`` is thread-local), so concurrent cells in
one process each keep their own. Results do not depend on the count: the threaded kernels
never sum floating-point numbers across ``prange`` iterations.

OpenMP's threads wait passively (``OMP_WAIT_POLICY=passive`` unless the environment sets it before
the layer starts): a thread that spins while the thread it waits for is descheduled costs a time
slice per step on a machine shared with other jobs (measured: 2 threads 5–10× slower than one on
an oversubscribed 2-core machine with the default spinning, on a par or faster with passive waits).

Threads need a thread-safe threading layer (OpenMP or TBB: several cells may launch parallel
regions at once from Dask's worker threads). With Numba's ``workqueue`` layer, which is not,
and above ``NUMBA_NUM_THREADS`` the count is capped (:func:`usable_threads`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from geosweep import config

#: threading layers on which concurrent parallel regions (one per cell) are safe
SAFE_LAYERS = ("omp", "tbb")


def usable_threads(requested: int) -> int:
    """``requested`` capped at ``NUMBA_NUM_THREADS``; 1 when it is 1 or the threading layer is not
    thread-safe (starts the layer's threads the first time a count above 1 is asked for)."""
    if requested <= 1:
        return 1
    import numba
    from numba.core import config as numba_config
    from numba.np.ufunc.parallel import _launch_threads

    config.put("OMP_WAIT_POLICY")  # read when the layer starts (once); unless the environment sets it
    _launch_threads()
    if numba.threading_layer() not in SAFE_LAYERS:
        return 1
    return min(int(requested), int(getattr(numba_config, "NUMBA_NUM_THREADS")))  # noqa: B009 - set at import


@contextmanager
def numba_threads(k: int) -> Iterator[None]:
    """Run the block with ``k`` Numba threads in this thread (restored afterwards); ``k`` ≤ 1 is a no-op."""
    if k <= 1:
        yield
        return
    import numba

    prev = numba.get_num_threads()
    numba.set_num_threads(k)
    try:
        yield
    finally:
        numba.set_num_threads(prev)
