"""Copy a store of an older readable format (format 2) into a new store of the current layout.

``python -m geosweep.sweeps.convert OLD NEW``: NEW is created from OLD's spec
(:func:`~geosweep.sweeps.store.ensure_store`,
so one chunk per shard, :data:`geosweep.sweeps.store.FORMAT_VERSION`), then every per-cell array is copied
shard by shard of the new layout (values, flags and checksums unchanged, bit for bit), and the
old store's run records and checkpoints of partial cells come along. OLD is only read. Format-2
stores need no conversion to be read or resumed; a large one reads much faster converted (one
dask chunk per shard instead of one per cell).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from geosweep.sweeps.lease import Lease, fence
from geosweep.sweeps.store import FORMAT_VERSION, StoreRef, check_format, ensure_store, shard_region, sweep_shards


class ConvertError(ValueError):
    """A source or target the converter refuses (one line, exit 2)."""


def _spec_of(text: str, family: str = "") -> dict:
    """The spec of a store's canonical ``spec`` attribute, integer parameters as integers again (the
    canonical text writes an integer as the float equal to it). Its family is loaded here: a fresh
    process has registered none."""
    from geosweep.kernels.registry import declared

    spec = json.loads(text)
    sysdef, _ = declared(spec["system"], family)
    if sysdef is None:
        raise ConvertError(f"the store's system {spec['system']!r} is declared by no family (a plugin not loaded?)")

    def typed(name: str, v):
        kind = sysdef.param(name).kind
        if isinstance(v, list):
            return [typed(name, x) for x in v]
        return int(v) if kind is int and isinstance(v, float) and v.is_integer() else v

    spec["params"] = {k: typed(k, v) for k, v in (spec.get("params") or {}).items()}
    return spec


def convert_store(source: str, target: str) -> int:
    """Copy the store ``source`` into a new store ``target`` (see the module doc); returns the cells copied."""
    from geosweep.sweeps import checkpoints
    from geosweep.sweeps.plan import make_plan

    src = StoreRef.of(source)
    old = _open_source(src)
    attrs = dict(old.attrs)
    check_format(src.url, attrs)
    plan = make_plan(_spec_of(attrs["spec"], str(attrs.get("family", ""))))
    if (target_problem := StoreRef.of(target).problem(write=True)) is not None:
        raise ConvertError(target_problem)
    with Lease(StoreRef.of(target)) as lease:
        ref = lease.ref
        if not ensure_store(plan, ref):
            raise ConvertError(f"{ref.url} already exists: convert into a new store path")
        new = ref.open_group("r+")
        shape = tuple(new["done"].shape)
        shards = sweep_shards(new)
        names = [n for n, a in old.arrays() if tuple(a.shape[: len(shape)]) == shape and n in new and n != "done"]
        with fence(ref):
            for index in np.ndindex(*[-(-n // s) for n, s in zip(shape, shards)]):
                region = shard_region(index, shards, shape)
                for name in [*names, "done"]:  # the completion flags last
                    new[name][region] = old[name][region]
            for key in ("runs", "history", "created"):
                if key in attrs:
                    new.attrs[key] = attrs[key]
            for cell, _fraction in checkpoints.progress(src).items():
                saved = checkpoints.load(src, cell)
                if saved is not None:
                    checkpoints.save(ref, cell, saved, _fraction)
        return int(np.prod(shape))


def _open_source(src: StoreRef):
    """The source store's root group, read-only; a path that holds no geosweep store is refused in one line."""
    if (problem := src.problem(write=False)) is not None:
        raise ConvertError(problem)
    if not src.exists():
        raise ConvertError(f"{src.url} is not a store (no zarr store there): nothing to convert")
    group = src.open_group("r")
    if "spec" not in group.attrs:
        raise ConvertError(f"{src.url} is a zarr store but not a geosweep store (it has no spec attribute)")
    return group


def main(argv: list[str] | None = None) -> int:
    """The command: 0 converted, 2 a source or target refused, 3 a source of an unreadable store format
    or a target another run holds (the exit codes of ``geosweep``)."""
    from geosweep.sweeps.store import StoreMismatchError

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m geosweep.sweeps.convert OLD_STORE NEW_STORE", file=sys.stderr)
        return 2
    try:
        cells = convert_store(*args)
    except (ConvertError, StoreMismatchError) as e:
        print(f"geosweep: {e}", file=sys.stderr)
        return 3 if isinstance(e, StoreMismatchError) else 2
    print(f"{args[1]}: {cells} cells copied from {args[0]} (store format {FORMAT_VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
