"""``geosweep serve``: serve the nightly Prefect deployment of a spec."""

from __future__ import annotations

import argparse

from geosweep.flows import firstrun
from geosweep.flows.cli.exits import OptionsError
from geosweep.flows.deployments import extend_by_problem, prefect_api_url, serve_nightly
from geosweep.sweeps.credentials import deployment_parameter
from geosweep.sweeps.execution import cluster_config


def cmd_serve(args: argparse.Namespace) -> int:
    if problem := extend_by_problem(args.extend_by):  # 0 would serve a dated nightly, NaN fail each night
        raise OptionsError(problem)
    cluster = cluster_config(args.cluster).model_dump(mode="json") if args.cluster else None
    if not args.temporary and prefect_api_url() is None:
        raise OptionsError(
            "no Prefect server: PREFECT_API_URL is not set, and a temporary server would take the schedule with it "
            "when this process stops. Start one (prefect server start) and export "
            "PREFECT_API_URL=http://127.0.0.1:4200/api, or pass --temporary"
        )
    firstrun.FirstRun().prepare()
    serve_nightly(
        args.spec,
        args.store_root,
        name=args.name,
        cron=args.cron,
        timezone=args.timezone,
        address=args.address,
        n_workers=args.workers,
        slice_seconds=args.slice_seconds,
        storage_options=deployment_parameter(args.storage_ref),  # a reference, never a secret
        cluster=cluster,
        max_failed_share=args.max_failed_share,
        compare_rtol=args.compare_rtol,
        imports=args.imports,
        extend_by=args.extend_by,
        temporary=args.temporary,
        heartbeat=args.heartbeat,
        crash_after=args.crash_after,
        crash_detection=not args.no_crash_detection,
    )
    return 0
