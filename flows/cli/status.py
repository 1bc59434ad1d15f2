"""``geosweep status STORE``: the status table of a store."""

from __future__ import annotations

import argparse

from geosweep.flows.cli.common import (
    StoreProblem,
    _check_store,
    _read_damaged,
)
from geosweep.sweeps.store import StoreRef
from geosweep.sweeps.summary import status_table


def cmd_status(args: argparse.Namespace) -> int:
    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options)
    if not ref.exists():
        raise StoreProblem(f"no store at {ref.url}")
    table = _read_damaged(ref, lambda: status_table(ref))
    print(table)
    return 0
