"""Slices whose workers died, resubmitted as long as their cells' checkpoints advance.

Dask gives up on a task once ``distributed.scheduler.allowed-failures`` + 1 workers died while
running it (``KilledWorker``): a hard walltime, ``scancel``, an out-of-memory kill or a lost node.
A long cell checkpoints every segment (:mod:`geosweep.sweeps.checkpoints`), so each worker that dies on it
still moves it forward. The driver therefore resubmits such a slice (new task keys, the same
priority; the shard's other slices and their finished values are kept) whenever the progress of
its cells — 2 for a cell written to the store, else the fraction its checkpoint holds — is higher
for some cell than at the previous attempt: a long cell survives any number of walltimes. A slice
whose workers died that many times without any of its cells advancing is given up with one line
(the run ends with exit 1, finished cells and checkpoints kept; a rerun resumes) — unless it never
started (each slice announces its start as an event): Dask also counts the death of a worker a task
only waited on, so such a slice is resubmitted, up to :data:`MAX_WAITED` times in a row while no
cell of the run progresses (a cluster whose workers die before any slice can start stops).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from geosweep.sweeps import checkpoints
from geosweep.sweeps.grid import Cell

#: the progress value of a cell whose values are in the store (above any checkpoint fraction)
WRITTEN = 2.0
#: resubmissions in a row of a slice that never started while nothing else progressed: Dask counts a
#: death of the worker a task was queued on as one of the task's failures
MAX_WAITED = 5


def lost_workers(exc: BaseException) -> int:
    """How many workers died running the task ``exc`` (a Dask ``KilledWorker``) reports, else 0."""
    from distributed import KilledWorker

    if not isinstance(exc, KilledWorker):
        return 0
    try:
        return int(exc.allowed_failures) + 1
    except (AttributeError, IndexError, TypeError, ValueError):
        return 1


def cell_progress(ref: Any, group: Any, cells: Sequence[Cell]) -> dict[Cell, float]:
    """``cell → progress`` of ``cells`` as the driver reads its store (``group``: the store's open
    arrays): :data:`WRITTEN` for a cell marked done, else its checkpoint's fraction (0 without one)."""
    out: dict[Cell, float] = {}
    for cell in cells:
        cell = tuple(int(i) for i in cell)
        if int(group["done"][cell]) == 1:
            out[cell] = WRITTEN
        else:
            f = checkpoints.fraction(ref, cell)
            out[cell] = f if f == f else 0.0  # NaN: a checkpoint without a recorded fraction
    return out


def advanced(before: dict[Cell, float], after: dict[Cell, float]) -> list[Cell]:
    """The cells whose progress is higher in ``after`` than in ``before``."""
    return [c for c, v in after.items() if v > before.get(c, 0.0)]


def describe(cells: Sequence[Cell], before: dict[Cell, float], after: dict[Cell, float], limit: int = 3) -> str:
    """``cell (i, j, …) 35 % → 60 %`` for up to ``limit`` of ``cells``."""

    def pct(v: float) -> str:
        return "written" if v >= WRITTEN else f"{100 * v:.0f} %"

    shown = [f"cell {tuple(c)} {pct(before.get(c, 0.0))} → {pct(after.get(c, 0.0))}" for c in list(cells)[:limit]]
    more = f" and {len(cells) - limit} more" if len(cells) > limit else ""
    return ", ".join(shown) + more


@dataclass
class ShardJob:
    """One store shard's slices as submitted, kept until the shard is written: what the driver needs
    to resubmit a slice whose workers died."""

    index: int  # rank of the shard (task keys and priorities)
    shard: Any  # the store shard's key (its models' bundle)
    slices: list[list[Cell]]
    parts: list[Any]  # the slices' futures (their values live on the workers until the shard is written)
    attempt: int = 0
    progress: dict[Cell, float] = field(default_factory=dict)  # cells' progress at the last resubmission
    waited: int = 0  # resubmissions in a row of slices that never started (their queued workers died)
    advances: int = 0  # the run's progress count when ``waited`` was last reset


class Resubmitter:
    """Decides, for a shard whose task raised, which of its slices to resubmit (module doc).

    ``group``: the driver's open arrays of the store; ``at_start``: the cells' checkpoint fractions when
    the run started; ``started``: task key → times the slice started running; ``advances()``: the run's
    progress count (segments and shards reported)."""

    def __init__(
        self,
        ref: Any,
        group: Any,
        at_start: dict[Cell, float],
        started: dict[str, int],
        advances: Callable[[], int],
        log: Callable[[str], None],
    ) -> None:
        self.ref, self.group, self.at_start, self.started, self.advances, self.log = (
            ref, group, at_start, started, advances, log,
        )  # fmt: skip
        self.why = ""

    def redo(self, sh: ShardJob, exc: BaseException) -> list[int] | None:
        """The slices of ``sh`` to resubmit after ``exc`` (its workers died and a cell of theirs advanced
        since the last attempt, or they only waited on workers that died), else None and :attr:`why` says
        the error line."""
        died = lost_workers(exc)
        if not died:
            self.why = f"{type(exc).__name__}: {exc}"
            return None
        keys = {getattr(exc, "task", None)}
        redo = [i for i, p in enumerate(sh.parts) if p.key in keys or p.status == "error"]
        cells = [c for i in (redo or range(len(sh.slices))) for c in sh.slices[i]]
        now = cell_progress(self.ref, self.group, cells)
        before = {c: sh.progress.get(c, self.at_start.get(c, 0.0)) for c in now}
        moved = advanced(before, now)
        if moved:
            sh.progress.update(now)
            sh.waited = 0
            self.log(
                f"a slice of {len(cells)} cell(s) lost its worker {died} time(s); its checkpoints advanced "
                f"({describe(moved, before, now)}): resubmitted (attempt {sh.attempt + 1})"
            )
            return redo
        ran = any(self.started.get(str(sh.parts[i].key)) for i in redo)
        if sh.advances != self.advances():  # other cells progressed meanwhile: the cluster does work
            sh.waited, sh.advances = 0, self.advances()
        if not ran and sh.waited < MAX_WAITED:  # queued on workers that died: not its fault
            sh.waited += 1
            self.log(
                f"a slice of {len(cells)} cell(s) waited on {died} worker(s) that died: "
                f"resubmitted (attempt {sh.attempt + 1})"
            )
            return redo
        self.why = (
            f"KilledWorker: a slice of {len(cells)} cell(s) lost its worker {died} time(s) and none of its "
            f"checkpoints advanced since the last attempt ({describe(cells, before, now)}); "
            "not resubmitted — finished cells and checkpoints are kept, a rerun resumes"
        )
        return None
