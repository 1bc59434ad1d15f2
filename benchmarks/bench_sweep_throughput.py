"""Sweep throughput: the same 16 sphere-MD cells serially in-process vs on 2 Dask workers
(threads, the default for a local cluster, and worker processes; each worker as geosweep starts
it: one slice at a time, shard writes on a second thread).

Also measures the fixed costs separately: LocalCluster start + worker warm-up, and the
Prefect flow's start-up (embedded server + flow/task bookkeeping) on an already complete
store (so no cells run). Run: ``python benchmarks/bench_sweep_throughput.py [--single-threaded]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

SPEC = {
    "name": "bench-throughput",
    "system": "lj_sphere",
    "integrators": ["explicit_vi", "rk2"],
    "h": [0.01, 0.005],
    "T": 20.0,
    "dt_out": 0.1,
    "params": {"omega": [0.0, 1.0, 2.0, 3.25]},
}


def main() -> None:
    ap = argparse.ArgumentParser(description="sweep throughput: serial vs 2 Dask workers")
    ap.add_argument(
        "--single-threaded", action="store_true", help="workers of one thread, no slice resource (the old layout)"
    )
    single_threaded = ap.parse_args().single_threaded
    from distributed import Client, LocalCluster

    from geosweep.sweeps.engine import LOCAL_WORKER, run_sweep
    from geosweep.sweeps.plan import make_plan

    tmp = Path(tempfile.mkdtemp(prefix="geosweep-bench-"))
    try:
        run_sweep(dict(SPEC, name="warm", T=0.1), tmp / "warm.zarr", serial=True)  # compile/load caches
        t = time.perf_counter()
        serial = run_sweep(SPEC, tmp / "serial.zarr", serial=True)
        t_serial = time.perf_counter() - t

        from geosweep.sweeps.engine import warm_worker

        timings = {}
        for processes in (False, True):
            t = time.perf_counter()
            worker = {"threads_per_worker": 1} if single_threaded else LOCAL_WORKER
            cluster = LocalCluster(n_workers=2, processes=processes, dashboard_address=None, **worker)
            client = Client(cluster)
            t_cluster = time.perf_counter() - t
            t = time.perf_counter()
            client.run(warm_worker, make_plan(SPEC))  # load the Numba caches once per worker
            t_warm = time.perf_counter() - t
            t = time.perf_counter()
            store = tmp / f"parallel-{processes}.zarr"
            parallel = run_sweep(SPEC, store, client=client, slice_seconds=2.0)
            timings[processes] = (time.perf_counter() - t, t_cluster, t_warm, parallel.slices)
            client.close()
            cluster.close()

        from geosweep.sweeps.store import StoreRef, ensure_store

        plan = make_plan(SPEC)
        t = time.perf_counter()
        ensure_store(plan, StoreRef.of(tmp / "template-only.zarr"))
        t_template = time.perf_counter() - t

        from geosweep.flows.sweep_flow import sweep_flow

        t = time.perf_counter()
        sweep_flow(SPEC, store=str(tmp / "serial.zarr"))  # complete store: pure flow overhead
        t_flow = time.perf_counter() - t

        print(f"cells: {serial.total} (sphere MD, n = 642, {SPEC['integrators']}, h {SPEC['h']}, T = {SPEC['T']})")
        print(f"serial in-process:            {t_serial:7.2f} s  ({t_serial / serial.total:.2f} s/cell)")
        for processes, (t_par, t_cluster, t_warm, n_slices) in timings.items():
            kind = "processes" if processes else "threads  "
            print(
                f"2 workers ({kind}):        {t_par:7.2f} s  in {n_slices} slices; speed-up "
                f"{t_serial / t_par:.2f}x (cell work only: {(t_serial - t_template) / (t_par - t_template):.2f}x); "
                f"cluster start {t_cluster:.2f} s, warm-up {t_warm:.2f} s (fixed, not in the speed-up)"
            )
        print(f"store template creation:      {t_template:7.2f} s  (fixed, inside every timing above)")
        print(f"Prefect flow, 0 cells:        {t_flow:7.2f} s  (embedded server start + flow bookkeeping)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
