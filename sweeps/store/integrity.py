"""Checking stored cells: :func:`verify` compares every finished cell with its checksum (``geosweep
verify``), :func:`mark_for_rerun` clears the ``done`` flag of damaged cells so that a resume
recomputes exactly them (``geosweep verify --repair``). Rebuilding lost flag arrays is
:mod:`geosweep.sweeps.repair`.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from geosweep.kernels.status import Status
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.grow import interrupted
from geosweep.sweeps.lease import fence
from geosweep.sweeps.repair import drop_undecodable
from geosweep.sweeps.store.checks import StoreMismatchError
from geosweep.sweeps.store.checksums import cell_checksum, shard_checksums
from geosweep.sweeps.store.layout import SWEEP_FLAGS, shape_of, shard_region, sweep_shards
from geosweep.sweeps.store.location import StoreRef, open_results, open_unconsolidated
from geosweep.sweeps.store.shards import ArrayCache, read_blocks


def verify(ref: StoreRef, value_names: list[str] | None = None) -> dict[str, list[Cell]]:
    """Check every finished cell against its checksum, reading the store shard by shard.

    Returns ``{"damaged": cells whose values or checksum cannot be read or do not match,
    "flags": cells whose ``done`` flag could not be read}``; raises :class:`StoreMismatchError`
    (one line) for a store an interrupted grow or extension left half-way; ``value_names`` are the stored
    variables (default: every variable with the store's sweep dims, except the run flags).
    A shard's variables are read concurrently and its cells checked at once
    (:func:`shard_checksums`); a shard with an unreadable object is checked cell by cell.
    """
    if line := interrupted(ref.url, dict(open_unconsolidated(ref, "r").attrs)):  # arrays and spec disagree
        raise StoreMismatchError(line)
    if value_names is None:
        value_names = [name for name in open_results(ref).data_vars if name not in SWEEP_FLAGS]
    return checked_cells(ref, value_names)


def _value_names(group) -> list[str]:
    """The stored variables of ``group`` read off its zarr arrays (what ``open_results(ref).data_vars``
    has but the run flags, without opening xarray): arrays with the sweep's dims first, neither a
    dimension's coordinate nor one any array names in its ``coordinates``."""
    import warnings

    dims = tuple(group["status"].metadata.dimension_names or ())
    with warnings.catch_warnings():  # the carry and checkpoint objects beside the arrays are not zarr nodes
        warnings.filterwarnings("ignore", message="Object at .* is not recognized as a component")
        arrays = dict(group.arrays())
    coords = {c for a in arrays.values() for c in str(a.attrs.get("coordinates", "")).split()}
    return sorted(
        name
        for name, a in arrays.items()
        if tuple(a.metadata.dimension_names or ())[: len(dims)] == dims
        and name not in SWEEP_FLAGS
        and name not in dims
        and name not in coords
    )


def checked_cells(ref: StoreRef, value_names: list[str] | None = None) -> dict[str, list[Cell]]:
    """:func:`verify` without its refusal of a store an extension left half-way (the extension's own
    check of the stored samples its thin carries continue, before it resizes any array);
    ``value_names`` default: read off the zarr arrays."""
    group = ref.open_group("r")
    shape = tuple(group["status"].shape)
    if value_names is None:
        value_names = _value_names(group)
    out: dict[str, list[Cell]] = {"damaged": [], "flags": []}
    shards = sweep_shards(group)
    arrays = ArrayCache(group)
    for index in np.ndindex(*[-(-n // s) for n, s in zip(shape, shards)]):
        region = shard_region(index, shards, shape)
        origin = tuple(r.start for r in region)
        flags = read_blocks({n: arrays[n] for n in ("done", "status")}, region)
        if any(isinstance(v, BaseException) for v in flags.values()):  # an unreadable flag shard
            out["flags"].extend(tuple(o + i for o, i in zip(origin, c)) for c in np.ndindex(*shape_of(region)))
            continue
        done, status = cast(np.ndarray, flags["done"]), cast(np.ndarray, flags["status"])  # no exception here
        todo = (done == 1) & (status != int(Status.NOT_APPLICABLE))
        if not todo.any():
            continue
        try:
            blocks = read_blocks({n: arrays[n] for n in [*value_names, "checksum"]}, region)
        except Exception:  # noqa: BLE001 - a variable that cannot be opened: no cell's values can be read
            blocks = None
        failed = [] if blocks is None else [n for n, v in blocks.items() if isinstance(v, BaseException)]
        if blocks is not None and not failed:
            checks = cast(np.ndarray, blocks.pop("checksum"))
            bad = checks[todo] != shard_checksums(cast(dict[str, np.ndarray], blocks), status, todo)
            damaged = [tuple(int(i) for i in c) for c in np.argwhere(todo)[bad]]
        elif blocks is None or all(_one_object(arrays[n], shards) for n in failed):
            damaged = [tuple(int(i) for i in c) for c in np.argwhere(todo)]  # lost with the object: every cell
        else:  # an undecodable shard of one-cell inner chunks (format 2): check cell by cell
            cells = map(tuple, np.argwhere(todo).tolist())
            damaged = [c for c in cells if not _cell_ok(group, value_names, region, c, status)]
        out["damaged"].extend(tuple(o + i for o, i in zip(origin, c)) for c in damaged)
    return out


def _one_object(arr, shards: tuple[int, ...]) -> bool:
    """A shard of ``arr`` is one zarr chunk (store format 3): if it cannot be read, no cell of it can."""
    return getattr(arr, "shards", None) is None and tuple(arr.chunks[: len(shards)]) == tuple(shards)


def _cell_ok(group, value_names: list[str], region: tuple[slice, ...], local: Cell, status: np.ndarray) -> bool:
    """One cell (``local`` within the shard at ``region``) read on its own matches its checksum."""
    cell = tuple(r.start + i for r, i in zip(region, local))
    try:
        stored = {name: np.asarray(group[name][cell]) for name in value_names}
        return int(group["checksum"][cell]) == cell_checksum(stored, int(status[local]))
    except Exception:  # noqa: BLE001 - a missing or undecodable chunk is damage
        return False


def mark_for_rerun(ref: StoreRef, cells: list[Cell]) -> None:
    """Clear ``done`` (and the checksum) of ``cells`` so that a resume recomputes exactly them.

    Objects holding them that cannot be decoded are deleted first (:func:`geosweep.sweeps.repair.drop_undecodable`),
    so that they can be written again."""
    with fence(ref):
        drop_undecodable(ref, cells)
        group = ref.open_group("r+")
        for cell in cells:
            group["done"][cell] = np.int8(0)
            group["checksum"][cell] = np.int64(0)
            group["progress"][cell] = 0.0
