"""Integration status codes stored with every trajectory."""

from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    """Outcome of one trajectory (one sweep cell).

    ``OK``              finished all steps.
    ``DOMAIN``          an explicit step left its domain (e.g. ``1 - |a|^2 <= 0`` for the
                        explicit variational integrator on S²).
    ``NONCONVERGED``    an implicit step's nonlinear solve did not converge.
    ``NONFINITE``       a non-finite value appeared in the state or energy.
    ``CHART_SINGULAR``  an attitude chart hit its singularity (rescaled Rodrigues vectors).
    ``ENERGY_BLOWUP``   |E − E0| exceeded a configured fraction of |E0| at a sample (the run
                        is unstable; stopped before it turns non-finite).
    ``CONTROLLER_SINGULAR`` a controlled system's control law is undefined at the current
                        state (e.g. the quadrotors' desired thrust direction vanishes).
    ``NOT_RUN``         the cell has not been computed (store template value).
    ``NOT_APPLICABLE``  the cell is not a run: a fixed-step integrator at a ``tol`` other than
                        the first, or an adaptive one at an ``h`` other than the first.
    """

    OK = 0
    DOMAIN = 1
    NONCONVERGED = 2
    NONFINITE = 3
    CHART_SINGULAR = 4
    ENERGY_BLOWUP = 5
    CONTROLLER_SINGULAR = 6
    NOT_RUN = -1
    NOT_APPLICABLE = -2

    @property
    def label(self) -> str:
        return self.name.lower()

    def __repr__(self) -> str:
        return f"Status.{self.name}"

    def __str__(self) -> str:
        """The stored label (``print(tr.status)`` → ``ok``); ``int(s)`` and f-string formats keep the code."""
        return self.label


STATUS_MEANINGS = {int(s): s.label for s in Status}
