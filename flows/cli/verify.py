"""``geosweep verify STORE [--repair]``: check every finished cell against its checksum."""

from __future__ import annotations

import argparse

import numpy as np

from geosweep.flows.cli.common import (
    StoreProblem,
    _check_store,
)
from geosweep.sweeps.carry_identity import drop_carries, unusable_carries
from geosweep.sweeps.compact import MAX_ITEMS, capped
from geosweep.sweeps.grow import interrupted
from geosweep.sweeps.lease import Lease
from geosweep.sweeps.repair import missing_flags, repair_flags
from geosweep.sweeps.store import StoreRef, mark_for_rerun, open_unconsolidated, verify


def cmd_verify(args: argparse.Namespace) -> int:
    """``geosweep verify STORE [--repair]``: check every finished cell against its checksum."""
    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options)
    if not ref.exists():
        raise StoreProblem(f"no store at {ref.url}")
    if args.repair:  # a repair writes: under the store's lease (exit 3 while a run writes the store)
        with Lease(ref) as lease:
            return _verify(lease.ref, args)
    return _verify(ref, args)


def _verify(ref, args: argparse.Namespace) -> int:
    if line := interrupted(ref.url, dict(open_unconsolidated(ref, "r").attrs)):  # its arrays and spec disagree
        print(line)
        return 1
    if missing := missing_flags(ref):
        print(f"{ref.url}: flag array(s) {', '.join(missing)} missing")
        if not args.repair:
            print("run `geosweep verify STORE --repair` to rebuild them (cells whose checksum verifies stay done)")
            return 1
        out = repair_flags(ref)
        print(f"rebuilt {', '.join(out['rebuilt'])}: {out['verified']} cell(s) verified, {out['rerun']} to recompute")
    found = verify(ref)
    bad = found["damaged"] + found["flags"]
    carries_ok = _carries(ref, args)
    if not bad:
        print(f"{ref.url}: every finished cell matches its checksum")
        return 0 if carries_ok or args.repair else 1
    print(f"{ref.url}: {len(found['damaged'])} damaged cell(s), {len(found['flags'])} unreadable flag(s)")
    for line in capped(_cell_labels(ref, bad[:MAX_ITEMS]), total=len(bad), indent="  "):
        print(line)
    if args.repair:
        mark_for_rerun(ref, bad)
        print("marked for recomputation: rerun the sweep's command to recompute exactly these cells")
        return 0
    print("run `geosweep verify STORE --repair`, then the sweep's command, to recompute them")
    return 1


def _carries(ref, args: argparse.Namespace) -> bool:
    """Check the finished cells' kept carries (:func:`geosweep.sweeps.carry_identity.unusable_carries`): print
    the unusable ones (``--repair``: dropped, so that ``extend`` computes those cells from t = 0)."""
    bad = unusable_carries(ref)
    if not bad:
        return True
    print(f"{ref.url}: {len(bad)} kept carr{'y' if len(bad) == 1 else 'ies'} foreign, stale or damaged "
          "(extend computes those cells again from t = 0)")  # fmt: skip
    for line in capped(_cell_labels(ref, bad[:MAX_ITEMS]), total=len(bad), indent="  "):
        print(line)
    if args.repair:
        drop_carries(ref, bad)
        print("dropped those carries")
    return False


def _cell_labels(ref, cells: list) -> list[str]:
    """Cells by their coordinates (``integrator=rk4, h=0.01, omega=3.25``), or by index where the
    store's coordinates cannot be read."""
    try:
        group = ref.open_group("r")
        status = group["status"]
        dims = getattr(status.metadata, "dimension_names", None) or status.attrs["_ARRAY_DIMENSIONS"]
        coords = {d: np.asarray(group[d][:]) for d in dims}
    except Exception:  # noqa: BLE001 - a damaged store: the indices still name the cells
        return [f"cell {tuple(int(i) for i in cell)}" for cell in cells]

    def value(v) -> str:
        return format(float(v), ".12g") if isinstance(v, np.floating | float) else str(v)

    return [", ".join(f"{d}={value(coords[d][int(i)])}" for d, i in zip(dims, cell)) for cell in cells]
