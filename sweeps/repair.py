"""Self-repair of a store's per-cell flag arrays (``status``, ``checksum``, ``done`` …).

A flag array whose metadata is gone (its folder deleted) or unreadable would otherwise disable
the store: zarr's consolidated metadata still lists it, so the first resume reads fill values
(and recomputes every cell), and every later one fails. :func:`repair_flags` recreates each
missing flag array with the layout of a sibling (same shape, chunks, shards and codecs, so it
follows whatever layout the template chose), then rebuilds what it held, cell by cell:

* ``done``: 1 for a not-applicable filler and for a cell whose stored values match its
  checksum; 0 otherwise (the cell is recomputed on resume, exactly those cells).
* ``status`` (its code is part of the checksum): recovered by matching the checksum against
  every status code; a cell without a match is recomputed.
* ``checksum``: without it no stored value can be verified, so every cell that is not a filler
  is recomputed (bitwise the same values, a new checksum).
* ``wall_time``, ``completed_at``: fill values (NaN; run stamps, not results); ``progress``: 1
  for done cells.

Then the metadata is consolidated again. Runs call it (via :func:`geosweep.sweeps.store.done_mask`)
under their lease; ``geosweep verify --repair`` calls it too, under the lease as well. Every write
here is fenced by the caller's lease (:func:`geosweep.sweeps.lease.fence`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from geosweep.kernels.status import STATUS_MEANINGS, Status
from geosweep.sweeps.lease import fence
from geosweep.sweeps.store.checksums import cell_checksum, shard_checksums
from geosweep.sweeps.store.layout import SWEEP_FLAGS, shard_region, sweep_shards
from geosweep.sweeps.store.location import StoreRef
from geosweep.sweeps.store.location import consolidate as _consolidate
from geosweep.sweeps.store.location import open_unconsolidated as _open
from geosweep.sweeps.store.schema import FLAG_LAYOUT
from geosweep.sweeps.store.shards import ArrayCache, read_blocks


class StoreDamagedError(ValueError):
    """A store too damaged to repair (its root metadata or every per-cell array unreadable)."""


def missing_flags(ref: StoreRef) -> list[str]:
    """The flag arrays (:data:`geosweep.sweeps.store.SWEEP_FLAGS`) whose metadata is missing or unreadable."""
    group = _open(ref)
    out = []
    for name in SWEEP_FLAGS:
        try:
            group[name]
        except Exception:  # noqa: BLE001 - absent, or zarr.json damaged: either way it must be rebuilt
            out.append(name)
    return out


def _sibling(group, missing: list[str]):
    """An existing array over exactly the sweep axes whose layout a rebuilt flag copies."""
    for name in [n for n in SWEEP_FLAGS if n not in missing] + ["E0"]:
        try:
            return group[name]
        except Exception:  # noqa: BLE001
            continue
    raise StoreDamagedError("no per-cell array left to rebuild the flag arrays from")


def _value_names(ref: StoreRef) -> list[str]:
    import xarray as xr

    kwargs: dict[str, Any] = {"consolidated": False}
    if not ref.is_local:
        kwargs["storage_options"] = ref.storage_options or {}
    ds = xr.open_zarr(ref.url, **kwargs)
    return [name for name in ds.data_vars if name not in SWEEP_FLAGS]


def repair_flags(ref: StoreRef, log=None) -> dict[str, Any]:
    """Rebuild missing flag arrays (see the module doc); returns ``{"rebuilt": names,
    "verified": cells kept as done, "rerun": cells left to recompute}`` (empty when nothing was missing)."""
    missing = missing_flags(ref)
    if not missing:
        return {"rebuilt": [], "verified": _restore_lost_done(ref, log), "rerun": 0}
    with fence(ref):  # every write under the caller's lease
        return _rebuild_flags(ref, missing, log)


def _rebuild_flags(ref: StoreRef, missing: list[str], log=None) -> dict[str, Any]:
    group = _open(ref, "r+")
    like = _sibling(group, missing)
    coords = like.attrs.get("coordinates")
    for name in missing:
        dtype, fill, layout_attrs = FLAG_LAYOUT[name]
        attrs: dict[str, Any] = dict(layout_attrs)
        if coords:
            attrs["coordinates"] = coords
        group.create_array(
            name,
            shape=like.shape,
            dtype=dtype,
            chunks=like.chunks,
            shards=like.shards,
            compressors=like.compressors,
            fill_value=fill,
            dimension_names=like.metadata.dimension_names,
            attributes=attrs,
            overwrite=True,
        )
    verified, rerun = _rebuild_cells(ref, group, set(missing))
    _consolidate(ref)
    if log:
        log(
            f"store {ref.url}: rebuilt missing flag array(s) {', '.join(missing)}; "
            f"{verified} cell(s) verified by checksum, {rerun} to recompute"
        )
    return {"rebuilt": missing, "verified": verified, "rerun": rerun}


def _restore_lost_done(ref: StoreRef, log=None) -> int:
    """Cells written in full (a checksum set, ``done`` not): their ``done`` chunks were lost, or the
    writer died between the checksum and the flag. Those whose values match the checksum are marked
    done (not recomputed); returns how many."""
    try:
        group = _open(ref, "r")
        done, checksum, status = (np.asarray(group[n][...]) for n in ("done", "checksum", "status"))
    except Exception:  # noqa: BLE001 - an unreadable flag chunk: geosweep.sweeps.store.done_mask handles it
        return 0
    orphans = (done != 1) & (checksum != 0) & (status >= 0)
    if not orphans.any():
        return 0
    sums, readable = stored_checksums(group, _value_names(ref), orphans, [status])
    good = [tuple(int(i) for i in c) for c in np.argwhere(orphans & readable & (sums[0] == checksum))]
    if good:
        with fence(ref):
            group = _open(ref, "r+")
            progress = np.array(group["progress"][...])
            for cell in good:
                done[cell], progress[cell] = 1, 1.0
            group["progress"][...] = progress
            group["done"][...] = done
        if log:
            log(f"store {ref.url}: {len(good)} finished cell(s) had lost their done flag; verified by checksum")
    return len(good)


def _rebuild_cells(ref: StoreRef, group, missing: set[str]) -> tuple[int, int]:
    """Fill the rebuilt flags (each flag array written whole: one write per shard); returns
    (cells kept as done, cells to recompute)."""

    def read(name: str) -> np.ndarray:
        return np.array(group[name][...])

    flags = {name: read(name) for name in SWEEP_FLAGS}  # rebuilt ones hold their fill values
    before = {name: a.copy() for name, a in flags.items()}
    done, progress = flags["done"], flags["progress"]
    verified = rerun = 0
    if not missing & {"done", "status", "checksum"}:  # the done state is intact: only stamps were lost
        if "progress" in missing:
            progress[done == 1] = 1.0
    else:
        verified, rerun = _recheck_cells(group, _value_names(ref), flags, missing)
    order = [n for n in SWEEP_FLAGS if n != "done"] + ["done"]  # the completion marker last
    for name in order:
        if name in missing or not np.array_equal(flags[name], before[name], equal_nan=True):
            group[name][...] = flags[name]
    return verified, rerun


def _recheck_cells(group, names: list[str], flags: dict[str, np.ndarray], missing: set[str]) -> tuple[int, int]:
    """Decide every cell's flags (in ``flags``, in place) after ``done``, ``status`` or ``checksum`` was
    lost: fillers stay done, never-run cells run, a cell whose stored values match its checksum (for its
    status, or the first status code that matches when ``status`` was lost) is done, every other cell
    that may be finished is recomputed. Returns (cells kept as done, cells to recompute)."""
    status, done, checksum, progress = flags["status"], flags["done"], flags["checksum"], flags["progress"]
    na, never = int(Status.NOT_APPLICABLE), int(Status.NOT_RUN)
    filler = np.zeros(done.shape, bool) if "status" in missing else np.isin(status, (na, never))
    done[filler] = status[filler] == na  # fillers stay done; never-run cells run
    maybe = ~filler if "done" in missing else ~filler & (done == 1)  # cells known incomplete run anyway
    found = np.zeros(done.shape, bool)
    code = status.copy()
    if "checksum" not in missing:
        check = maybe & (checksum != 0)
        codes = [int(k) for k in STATUS_MEANINGS if int(k) >= 0]
        trials = [np.full(done.shape, c, status.dtype) for c in codes] if "status" in missing else [status]
        sums, readable = stored_checksums(group, names, check, trials)
        for trial, sum_ in zip(trials, sums):  # the first code that matches, as cell by cell
            hit = check & readable & ~found & (sum_ == checksum)
            code[hit], found[hit] = trial[hit], True
    keep, rerun = maybe & found, maybe & ~found
    done[rerun], progress[rerun], checksum[rerun] = 0, 0.0, 0
    status[keep], done[keep], progress[keep] = code[keep], 1, 1.0
    return int(keep.sum()), int(rerun.sum())


def stored_checksums(
    group, names: list[str], cells: np.ndarray, statuses: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`geosweep.sweeps.store.cell_checksum` of the stored values of the ``cells`` (boolean mask over the
    sweep grid) for each array of status codes in ``statuses``, read shard by shard (a shard's
    variables at once); returns (checksums ``(len(statuses), *grid)``, readable mask). A shard with an
    undecodable object is read cell by cell; a cell whose values cannot be read is not readable."""
    shape = cells.shape
    shards = sweep_shards(group)
    arrays = ArrayCache(group)
    sums = np.zeros((len(statuses), *shape), np.int64)
    readable = np.zeros(shape, bool)
    for index in np.ndindex(*[-(-n // s) for n, s in zip(shape, shards)]):
        region = shard_region(index, shards, shape)
        mask = cells[region]
        if not mask.any():
            continue
        try:
            blocks = read_blocks({n: arrays[n] for n in names}, region)
        except Exception:  # noqa: BLE001 - a variable that cannot be opened: no value can be read
            continue
        if not any(isinstance(v, BaseException) for v in blocks.values()):
            for k, st in enumerate(statuses):
                sums[k][region][mask] = shard_checksums(blocks, st[region], mask)  # type: ignore[arg-type]  # no exception in blocks
            readable[region][mask] = True
            continue
        for local in np.argwhere(mask):  # an undecodable shard: cell by cell (format 2 keeps the others)
            cell = tuple(int(r.start + i) for r, i in zip(region, local))
            try:
                stored = {name: np.asarray(group[name][cell]) for name in names}
            except Exception:  # noqa: BLE001 - damaged values: the cell is recomputed
                continue
            for k, st in enumerate(statuses):
                sums[(k, *cell)] = cell_checksum(stored, int(st[cell]))
            readable[cell] = True
    return sums, readable


def drop_undecodable(ref: StoreRef, cells: list) -> list[str]:
    """Delete the store objects (chunks or shards) that hold ``cells`` and cannot be decoded, so that
    they read as fill values and can be written again (zarr re-reads a shard it partly rewrites, and a
    garbage one fails). A cell's values may span several objects along its per-cell axes (an adaptive
    store keeps the row at T in an object of its own; a grown time axis spans several): each object
    holding the cell is tried on its own and exactly the undecodable ones go — every cell they hold was
    unreadable already. Returns the deleted keys (``NAME/c/…``)."""
    import fsspec

    group = _open(ref, "r")
    sweep_dims = tuple(group["status"].metadata.dimension_names or ())
    k = len(sweep_dims)
    if ref.is_local:
        fs, root = fsspec.filesystem("file"), ref.url
    else:
        fs, root = fsspec.core.url_to_fs(ref.url, **(ref.storage_options or {}))
    deleted: list[str] = []
    for name, arr in _arrays(group):
        dims = tuple(arr.metadata.dimension_names or ())
        if dims[:k] != sweep_dims or not k:
            continue
        for coords in _undecodable_objects(arr, k, cells):
            key = f"{name}/{arr.metadata.encode_chunk_key(coords)}"
            try:
                fs.rm_file(f"{root.rstrip('/')}/{key}")
                deleted.append(key)
            except FileNotFoundError:
                pass
    return deleted


def _arrays(group) -> list[tuple[str, Any]]:
    """The group's arrays (zarr's warning about the store's non-zarr folders, e.g. ``_carries``, muted)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(group.arrays())


def _undecodable_objects(arr, k: int, cells: list) -> list[tuple[int, ...]]:
    """Chunk-grid coordinates of the objects of ``arr`` (its shards, or chunks when unsharded) that hold
    one of ``cells`` (indices along the first ``k`` axes) and whose part for that cell cannot be read."""
    extents = tuple(int(e) for e in (arr.shards or arr.chunks))
    grid = [-(-int(n) // e) for n, e in zip(arr.shape[k:], extents[k:])]
    out: dict[tuple[int, ...], None] = {}
    for cell in cells:
        cell = tuple(int(c) for c in cell)
        try:
            arr[cell]
            continue
        except Exception:  # noqa: BLE001 - some object of the cell is undecodable: find which
            pass
        head = tuple(c // e for c, e in zip(cell, extents))
        for tail in np.ndindex(*grid):
            part = tuple(slice(i * e, (i + 1) * e) for i, e in zip(tail, extents[k:]))
            try:
                arr[cell + part]
            except Exception:  # noqa: BLE001 - this object cannot be decoded
                out[head + tail] = None
    return list(out)
