"""A run's progress as its cells finish (:class:`Tracker`), what the ``progress`` callback receives
(:class:`Progress`) and what ``run_sweep`` returns (:class:`SweepResult`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from geosweep.kernels.status import Status
from geosweep.sweeps.grid import Cell


@dataclass
class Progress:
    """Progress of a running sweep, passed to the ``progress`` callback after each slice and
    after each checkpointed segment of a long cell.

    ``steps_done``/``steps_total`` count integration steps of the cells still to run when the
    sweep started (adaptive cells: estimated steps, scaled by the fraction of their time span
    done), so long cells show progress and an ETA before they finish.
    """

    done: int  # cells complete (including those found complete in the store)
    total: int
    failed: int  # cells completed with a non-zero status in this run
    elapsed: float  # seconds since execution started
    skipped: int  # cells already complete before this run
    steps_done: int = 0
    steps_total: int = 0

    @property
    def eta(self) -> float | None:
        if self.steps_total > 0 and self.steps_done > 0:
            return self.elapsed / self.steps_done * (self.steps_total - self.steps_done)
        ran = self.done - self.skipped
        left = self.total - self.done
        if ran <= 0:
            return None
        return self.elapsed / ran * left


@dataclass
class SweepResult:
    """Summary of one ``run_sweep`` call.

    >>> import geosweep, os, tempfile
    >>> spec = geosweep.api.cell_spec("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
    >>> result = geosweep.run(spec, os.path.join(tempfile.mkdtemp(), "top.zarr"), serial=True)
    >>> result.complete, result.total, result.failed_cells, result.wall_time > 0
    (True, 1, 0, True)
    """

    store: str
    total: int
    skipped: int
    ran: int
    failed_cells: int
    wall_time: float
    slices: int
    errors: list[str] = field(default_factory=list)
    segments: int = 0  # checkpointed segments integrated by this run
    resumed: int = 0  # partial cells continued from a checkpoint

    @property
    def complete(self) -> bool:
        return not self.errors and self.skipped + self.ran == self.total


class Tracker:
    """Counts a run's finished cells and segments and tells ``progress`` (thread-safe: segment events
    arrive on the Dask client's thread). ``steps_of``: each pending cell's steps (progress by steps).

        >>> from geosweep.sweeps.progress import SweepResult
        >>> SweepResult("s.zarr", total=4, skipped=1, ran=3, failed_cells=1, wall_time=2.0, slices=1).complete
        True
    """

    def __init__(
        self, total: int, skipped: int, steps_of: dict[Cell, int], progress: Callable[[Progress], None] | None
    ) -> None:
        self.total, self.skipped, self.done = total, skipped, skipped
        self.failed = self.segments = self.resumed = self.ran = 0
        self.steps_of, self.steps_total = steps_of, sum(steps_of.values())
        self.partial: dict[Cell, float] = {}
        self.finished_steps = 0
        self.advances = 0  # segments and shards reported so far: the run makes progress (sweeps.resubmit)
        self.errors: list[str] = []
        self.progress = progress
        self.t_start = time.perf_counter()
        self._lock = threading.Lock()
        with self._lock:
            self._emit()

    def _emit(self) -> None:
        if self.progress:
            steps = self.finished_steps + sum(int(f * self.steps_of.get(c, 0)) for c, f in self.partial.items())
            elapsed = time.perf_counter() - self.t_start
            self.progress(Progress(self.done, self.total, self.failed, elapsed, self.skipped, steps, self.steps_total))

    def on_segment(self, cell: Cell, fraction: float) -> None:
        """A segment of ``cell`` finished: ``fraction`` of its span is done."""
        with self._lock:
            self.partial[tuple(cell)] = fraction
            self.advances += 1
            self._emit()

    def report(self, results: list[tuple]) -> None:
        """Cells written: ``(cell, status, wall time, segments, resumed, ran)`` each."""
        with self._lock:
            for cell, st, _wall, nseg, res, ran in results:
                self.done += 1
                self.failed += int(ran and st != Status.OK)
                self.segments += nseg
                self.resumed += int(res)
                self.ran += int(ran)
                self.partial.pop(cell, None)
                self.finished_steps += self.steps_of.get(cell, 0)
            self.advances += 1
            self._emit()
