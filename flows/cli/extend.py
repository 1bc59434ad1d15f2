"""``geosweep extend STORE --T NEW``: continue every finished cell to a later T."""

from __future__ import annotations

import argparse
import logging
from contextlib import ExitStack

from geosweep.flows.cli.common import (
    StoreProblem,
    _check_store,
    _execution,
)
from geosweep.flows.output import LOG, progress_reporter
from geosweep.sweeps.extension import extend
from geosweep.sweeps.store import StoreRef
from geosweep.sweeps.summary import status_table


def cmd_extend(args: argparse.Namespace) -> int:
    """``geosweep extend STORE --T NEW``: continue every finished cell to the later T
    (:mod:`geosweep.sweeps.extension`)."""
    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options, write=True)
    if not ref.exists():
        raise StoreProblem(f"no store at {ref.url}")
    hook, close = progress_reporter(enabled=LOG.isEnabledFor(logging.INFO))
    with ExitStack() as stack:
        stack.callback(close)
        result = extend(
            ref.url,
            args.T,
            recompute=args.recompute,
            storage_options=args.storage_options,
            execution=_execution(args),
            progress=hook,
            log=LOG.info,
        )
    for err in result.errors[:3]:
        LOG.error(f"slice failed: {err[:300]}")
    if not args.quiet:
        print(status_table(ref.url, args.storage_options))
    return 0 if not result.errors else 1
