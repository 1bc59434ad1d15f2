"""Stored names with a meaning beyond one family: the values that differ from run to run.

:data:`RUN_DEPENDENT` is the one list of stored variables whose values legitimately differ
between two runs of the same cells (wall-clock timings and write stamps). Every comparison of
results reads it: the cell checksums (:data:`geosweep.sweeps.store.CHECKSUM_SKIP`), the report's
night-against-night comparison (:data:`geosweep.analysis.report.RUN_STAMPS`) and the tests'
bitwise store comparisons. A new run-dependent variable (a family diagnostic measured in wall
time, a new store stamp) is one more name here; ``tests/test_vocabulary.py`` checks that every
use picks it up. Keep the order: appending changes nothing already stored (a checksum only
leaves names out).
"""

from __future__ import annotations

#: stored variables whose values differ between two runs of the same cells: ``steps_per_second``
#: (a family diagnostic, SE(3)ⁿ), ``wall_time`` and ``completed_at`` (per-cell store stamps).
#: A list shared by reference, so a name appended at import time (a plugin family) is seen by
#: every use.
RUN_DEPENDENT: list[str] = ["steps_per_second", "wall_time", "completed_at"]


def is_run_dependent(name: str) -> bool:
    """``name`` is a stored variable whose value differs from run to run (:data:`RUN_DEPENDENT`)."""
    return name in RUN_DEPENDENT
