"""``geosweep report STORE``: figures and index of a store."""

from __future__ import annotations

import argparse

from geosweep.analysis.report import main_report
from geosweep.flows.cli.common import (
    StoreProblem,
    _check_store,
)
from geosweep.flows.cli.exits import OptionsError
from geosweep.flows.output import LOG
from geosweep.sweeps.store import StoreRef, open_results


def cmd_report(args: argparse.Namespace) -> int:
    """``geosweep report STORE [--out DIR]``: figures and index.md/index.html (see geosweep.analysis.report)."""
    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options)
    if not ref.exists():
        raise StoreProblem(f"no store at {ref.url}")
    open_results(ref)  # a store of another format is refused here (exit 3), before any figure
    select = {}
    for item in args.sel or []:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise OptionsError(f"--sel {item!r}: expected NAME=VALUE, e.g. --sel omega=3.25")
        select[name.strip()] = value.strip()
    try:
        rep = main_report(args.store, args.out, args.storage_options, select=select)
    except ValueError as e:
        if not str(e).startswith("sel."):
            raise
        raise OptionsError(str(e)) from None
    print(f"report: {rep.index_location} ({len(rep.figures)} figures{'; ' + rep.selection if rep.selection else ''})")
    for note in rep.notes:
        LOG.info(f"note: {note}")
    return 0
