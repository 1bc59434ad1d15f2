"""Sweep throughput: the same 16 sphere-MD cells serially in-process vs on 2 Dask workers.

Also measures the fixed costs separately: LocalCluster start + worker warm-up, and the
Prefect flow's start-up (embedded server + flow/task bookkeeping) on an already complete
store (so no cells run). Run: ``python benchmarks/bench_sweep_throughput.py``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

SPEC = {
    "name": "bench-throughput",
    "system": "lj_sphere",
    "integrators": ["explicit_vi", "rk2"],
    "h": [0.01, 0.005],
    "T": 10.0,
    "dt_out": 0.1,
    "params": {"omega": [0.0, 1.0, 2.0, 3.25]},
}


def main() -> None:
    from distributed import Client, LocalCluster

    from sweeps.engine import run_sweep

    tmp = Path(tempfile.mkdtemp(prefix="geosweep-bench-"))
    try:
        run_sweep(dict(SPEC, name="warm", T=0.1), tmp / "warm.zarr", serial=True)  # compile/load caches
        t = time.perf_counter()
        serial = run_sweep(SPEC, tmp / "serial.zarr", serial=True)
        t_serial = time.perf_counter() - t

        t = time.perf_counter()
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        t_cluster = time.perf_counter() - t
        from kernels.registry import FAMILIES
        from sweeps.engine import warm_worker

        t = time.perf_counter()
        client.run(warm_worker, FAMILIES["s2"])  # load the Numba caches once per worker
        t_warm = time.perf_counter() - t
        t = time.perf_counter()
        parallel = run_sweep(SPEC, tmp / "parallel.zarr", client=client, slice_seconds=2.0)
        t_parallel = time.perf_counter() - t
        client.close()
        cluster.close()

        from flows.sweep_flow import sweep_flow

        t = time.perf_counter()
        sweep_flow(SPEC, store=str(tmp / "serial.zarr"))  # complete store: pure flow overhead
        t_flow = time.perf_counter() - t

        cpu = sum(c for c in [serial.wall_time])
        print(f"cells: {serial.total} (sphere MD, n = 642, {SPEC['integrators']}, h {SPEC['h']}, T = {SPEC['T']})")
        print(f"serial in-process:         {t_serial:7.2f} s  ({cpu / serial.total:.2f} s/cell)")
        print(f"2 workers (run_sweep):     {t_parallel:7.2f} s  in {parallel.slices} slices")
        print(f"speed-up:                  {t_serial / t_parallel:7.2f} x   (target >= 1.8)")
        print(f"LocalCluster start:        {t_cluster:7.2f} s  (fixed, not in the speed-up)")
        print(f"worker warm-up (caches):   {t_warm:7.2f} s  (fixed, once per worker process)")
        print(f"Prefect flow, 0 cells:     {t_flow:7.2f} s  (embedded server start + flow bookkeeping)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
