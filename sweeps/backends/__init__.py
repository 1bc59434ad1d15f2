"""Where a run's shard jobs execute: :mod:`~geosweep.sweeps.backends.local` (serial, or a few short cells in
the driver: one code path) and :mod:`~geosweep.sweeps.backends.dask` (a Dask cluster); the engine's
micro-paths are switched in one place, :class:`~geosweep.sweeps.backends.paths.MicroPaths`."""
