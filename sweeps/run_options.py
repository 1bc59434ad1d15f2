"""The run options that reach the workers: how each cell executes, never what it computes.

A :class:`RunOptions` is one small frozen object: a field of :class:`geosweep.sweeps.execution.Execution`
(``Execution(threads_per_cell=2)`` and ``Execution(run=RunOptions(threads_per_cell=2))`` are the same),
read from the command line by name (:meth:`Execution.from_args`), resolved once per run by
:func:`geosweep.sweeps.worklist.resolve` and handed whole to every slice
(:func:`geosweep.sweeps.cells.compute_slice`, :func:`geosweep.sweeps.cells.compute_cell`). The
:class:`~geosweep.sweeps.plan.Plan` never carries them. A new option is three edits: a field here, its
flag in ``flows/cli/parser.py`` (``dest`` = the field's name) and the code on the worker that reads it
(``tests/test_run_options.py`` adds one in a test and sees it on a worker through the CLI, the Prefect
flow and ``run_sweep``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RunOptions(BaseModel):
    """Options every slice of a run receives (results are bitwise the same on any value).

    ``threads_per_cell``: threads inside one cell (families that can split a step); None: automatic
    (:func:`geosweep.sweeps.worklist.cell_threads`), resolved before any slice runs.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    threads_per_cell: int | None = Field(default=None, ge=1)

    @property
    def threads(self) -> int:
        """Threads of one cell (1 while unresolved)."""
        return self.threads_per_cell or 1


#: the options of a run that sets none (unresolved)
DEFAULT = RunOptions()
