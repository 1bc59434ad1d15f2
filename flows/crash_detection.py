"""Crash detection for nightly flow runs killed from outside (walltime, ``scancel``, OOM, SIGKILL).

A flow run whose process is killed cannot report its own end, so Prefect would show it
``Running`` forever. Prefect 3 flow runs emit a ``prefect.flow-run.heartbeat`` event every
``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` seconds (≥ 30; geosweep's runner sets
:data:`DEFAULT_HEARTBEAT`); :func:`ensure_crash_detection` creates, once per server, an
automation that marks a flow run ``Crashed`` when a heartbeat is followed by neither another
heartbeat nor a final state within ``grace`` seconds. Rerunning the flow then resumes its store
(the dead run's lease is taken over, finished cells are kept, partial cells continue from their
checkpoints).

``geosweep serve`` calls it; with ``prefect deploy`` run ``python -m geosweep.flows.crash_detection`` once
per server (deploy/README.md), and set ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` for the workers.
"""

from __future__ import annotations

import datetime as dt

#: Seconds between heartbeats of geosweep's flow runs (Prefect's minimum is 30).
DEFAULT_HEARTBEAT = 60
#: Name of the automation (one per Prefect server, shared by every geosweep deployment).
AUTOMATION_NAME = "geosweep: crash flow runs that stopped sending heartbeats"


def crash_detection_automation(heartbeat: int = DEFAULT_HEARTBEAT, grace: float | None = None):
    """The automation (not yet created): a heartbeat not followed within ``grace`` seconds
    (default 2 heartbeats + 30 s) by another heartbeat or a final state → ``Crashed``."""
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification

    if heartbeat < 30:
        raise ValueError(f"heartbeat must be at least 30 s (Prefect's minimum), got {heartbeat}")
    grace = float(grace if grace is not None else 2 * heartbeat + 30)
    if grace <= heartbeat:
        raise ValueError(f"grace ({grace} s) must exceed the heartbeat interval ({heartbeat} s)")
    return Automation(
        name=AUTOMATION_NAME,
        description=(
            f"A flow run that sent a heartbeat and then nothing (no heartbeat, no final state) for {grace:.0f} s "
            "was killed from outside (walltime, scancel, node loss): mark it Crashed. Rerunning resumes its store."
        ),
        trigger=EventTrigger(
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            after={"prefect.flow-run.heartbeat"},
            expect={
                "prefect.flow-run.heartbeat",
                "prefect.flow-run.Completed",
                "prefect.flow-run.Failed",
                "prefect.flow-run.Cancelled",
                "prefect.flow-run.Crashed",
            },
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=dt.timedelta(seconds=grace),
        ),
        actions=[
            ChangeFlowRunState(
                state=StateType.CRASHED,
                message=f"no heartbeat for {grace:.0f} s: the flow run's process was killed; rerun to resume",
            )
        ],
    )


def ensure_crash_detection(heartbeat: int = DEFAULT_HEARTBEAT, grace: float | None = None) -> str:
    """Create the crash-detection automation on the current Prefect server unless one with
    the same trigger exists (an outdated one is replaced). Returns its id."""
    from prefect.automations import Automation

    wanted = crash_detection_automation(heartbeat, grace)
    try:
        existing = Automation.read(name=AUTOMATION_NAME)
    except ValueError:  # none yet
        existing = None
    if existing is not None:
        if existing.trigger == wanted.trigger and existing.actions == wanted.actions and existing.enabled:
            return str(existing.id)
        existing.delete()
    return str(wanted.create().id)


def main(argv: list[str] | None = None) -> int:
    """``python -m geosweep.flows.crash_detection [--heartbeat S] [--crash-after S]``: create the automation on
    the server of ``PREFECT_API_URL`` (for deployments made with ``prefect deploy``)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m geosweep.flows.crash_detection", description=main.__doc__)
    p.add_argument("--heartbeat", type=int, default=DEFAULT_HEARTBEAT, help="heartbeat interval of the runs (s)")
    p.add_argument("--crash-after", type=float, help="silence (s) after which a run is marked Crashed")
    args = p.parse_args(argv)
    print(f"crash-detection automation {ensure_crash_detection(args.heartbeat, args.crash_after)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
