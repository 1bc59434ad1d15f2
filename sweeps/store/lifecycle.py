"""A store's life: created from the template or checked against the spec (:func:`ensure_store`),
its progress read (:func:`done_mask`), its fillers re-marked, its runs recorded. Every write here is
the store's writer's, fenced by its lease (:func:`geosweep.sweeps.lease.fence`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from geosweep.kernels.status import Status
from geosweep.sweeps.grow import EXTENDING_ATTR, GROWING_ATTR, grow_hint, grow_store, interrupted
from geosweep.sweeps.lease import LeaseLost, StoreBusyError, fence
from geosweep.sweeps.repair import repair_flags
from geosweep.sweeps.store.checks import (
    StoreMismatchError,
    check_format,
    mismatch_message,
    readable_format,
    spec_attr_intact,
)
from geosweep.sweeps.store.integrity import mark_for_rerun
from geosweep.sweeps.store.location import PARTIAL_SUFFIX, StoreRef, consolidate, remove_store
from geosweep.sweeps.store.schema import store_template
from geosweep.sweeps.store.template_dataset import template
from geosweep.sweeps.store.template_write import write_template

if TYPE_CHECKING:
    from geosweep.sweeps.plan import Plan

#: Group attribute written last when a store's template is complete (see :func:`ensure_store`).
CREATED_ATTR = "geosweep_created"


def _no_results(group) -> bool:
    """True if no cell of the group was ever computed (status still only ``not_run``/``not_applicable``)."""
    try:
        return bool((np.asarray(group["status"][...]) < 0).all())
    except Exception:  # noqa: BLE001 - arrays missing or unreadable: creation did not get that far
        return True


def ensure_store(plan: Plan, ref: StoreRef, log=None, grow: bool = False) -> bool:
    """Create the store from the template, or check an existing one belongs to ``plan``
    (``grow``: or grow it to ``plan`` when ``plan``'s spec adds values to its axes, :mod:`geosweep.sweeps.grow`).

    Returns True if the store was created. Raises
    :class:`~geosweep.sweeps.store.checks.StoreFormatError` if the store has another format and
    :class:`StoreMismatchError` if it holds a different sweep (it is never modified in either case).

    Creation is crash-safe: the template (whose attrs name the format and the spec) is written
    first, then the not-applicable fillers, and the marker attr ``geosweep_created`` last. A
    store of ours without the marker holds no result (creation was interrupted, or failed): it
    is deleted and created again. A failed creation removes what it wrote — only that, and only
    while the run still holds the lease; every write is fenced by it (:func:`geosweep.sweeps.lease.fence`).
    """
    with fence(ref):  # no takeover of the lease while this run creates or removes the store
        return _create_or_check(plan, ref, log, grow)


def _create_or_check(plan: Plan, ref: StoreRef, log=None, grow: bool = False) -> bool:
    if ref.exists():  # the template is built only where it is needed: not to resume a store
        group = ref.open_group("r")
        attrs = dict(group.attrs)
        ours = readable_format(attrs.get("geosweep_format")) and not attrs.get(CREATED_ATTR)
        # killed before the template's attributes were written: a bare group holding nothing but
        # (some of) the arrays this template creates
        bare = not attrs and set(group.keys()) <= store_template(plan).names()
        if (ours or bare) and _no_results(group):
            if log:
                log(f"store {ref.url}: its creation was interrupted; creating it again")
            remove_store(ref)
        else:
            check_format(ref.url, attrs)
            if EXTENDING_ATTR in attrs:  # finished by `geosweep extend` (sweeps.extension), refused to any other run
                raise StoreMismatchError(interrupted(ref.url, attrs) or "")
            if GROWING_ATTR in attrs or (grow and attrs.get("spec_hash") != plan.spec.spec_hash):
                grow_store(plan, ref, attrs, template(plan)[0], log)  # refused unless it only adds values
                return False
            if attrs.get("spec_hash") != plan.spec.spec_hash or not spec_attr_intact(attrs):
                raise StoreMismatchError(mismatch_message(ref.url, attrs, plan.spec, grow_hint))
            return False
    from zarr.errors import ContainsArrayError, ContainsGroupError

    if ref.is_local and Path(ref.url).is_dir():  # a run killed while zarr wrote the root metadata left it behind
        for leftover in Path(ref.url).glob(f"*{PARTIAL_SUFFIX}"):
            leftover.unlink(missing_ok=True)
    tpl = store_template(plan)
    try:
        write_template(tpl, ref.url, None if ref.is_local else ref.storage_options or {})
        group = ref.open_group("r+")
        filler = ~plan.grid.applicable_mask()
        if filler.any():  # whole-array writes: each shard object written once
            group["status"][...] = np.where(filler, np.int8(Status.NOT_APPLICABLE), np.int8(-1)).astype(np.int8)
            group["done"][...] = filler.astype(np.int8)
        group.attrs[CREATED_ATTR] = 1
        consolidate(ref)
    except (ContainsGroupError, ContainsArrayError, FileExistsError) as e:  # made meanwhile by another: not ours
        raise StoreBusyError(f"store {ref.url} was created by another process while this run created it") from e
    except BaseException:
        _remove_ours(ref)
        raise
    return True


def _remove_ours(ref: StoreRef) -> None:
    """Remove a store this run was creating, only while it still holds the store's lease."""
    try:
        with fence(ref):
            remove_store(ref)
    except (LeaseLost, OSError):  # another run holds the store (or it cannot be removed): leave it
        pass


def mark_fillers(plan: Plan, ref: StoreRef) -> int:
    """Re-mark not-applicable filler cells whose flags were lost (e.g. a rebuilt ``status``
    array, :mod:`geosweep.sweeps.repair`); returns how many were re-marked. Call as the store's writer."""
    filler = ~plan.grid.applicable_mask()
    if not filler.any():
        return 0
    group = ref.open_group("r")
    status, done = np.array(group["status"][...]), np.array(group["done"][...])
    lost = filler & ((status != int(Status.NOT_APPLICABLE)) | (done != 1))
    if not lost.any():
        return 0
    status[filler], done[filler] = np.int8(Status.NOT_APPLICABLE), np.int8(1)
    with fence(ref):
        group = ref.open_group("r+")
        group["status"][...] = status
        group["done"][...] = done
    return int(lost.sum())


def done_mask(ref: StoreRef, log=None) -> np.ndarray:
    """Boolean array over the sweep axes: True where the cell is complete.

    A ``done`` chunk that cannot be read (damaged) counts as not done and is reset, so the
    cell is recomputed instead of the store becoming unusable; a flag array that is missing
    altogether is rebuilt first (:func:`geosweep.sweeps.repair.repair_flags`: cells whose checksum
    verifies stay done). Call it as the store's writer (under its lease)."""
    repair_flags(ref, log)
    group = ref.open_group("r")
    try:
        return np.asarray(group["done"][...]) == 1
    except Exception:  # noqa: BLE001 - some chunk is damaged: go cell by cell
        pass
    shape = group["status"].shape
    mask = np.zeros(shape, dtype=bool)
    bad = []
    for cell in np.ndindex(*shape):
        try:
            mask[cell] = int(group["done"][cell]) == 1
        except Exception:  # noqa: BLE001
            bad.append(cell)
    if bad:
        mark_for_rerun(ref, bad)
    return mask


def record_run(ref: StoreRef, entry: dict[str, Any]) -> None:
    """Append a run record (who, when, how many cells) to the store's ``runs`` attribute."""
    with fence(ref):
        group = ref.open_group("r+")
        runs = [*group.attrs.get("runs", []), entry]
        line = f"{entry.get('finished', '')} geosweep run: {entry.get('cells_run', 0)} cells computed"
        history = "\n".join(x for x in (group.attrs.get("history", ""), line) if x)  # CF history
        # one write of the group's metadata, with the consolidated metadata it was opened with (a run changes
        # no array's metadata; a grown store was consolidated when it grew): 5 ms, where consolidating
        # again reads every array's metadata (~40 ms at 66 arrays)
        group.update_attributes({"runs": runs, "history": history})
        if getattr(group.metadata, "consolidated_metadata", None) is None:  # opened without: consolidate
            consolidate(ref)
