"""Growing a finished study to a longer ``T`` without recomputing it (``geosweep extend``).

Every cell that finished keeps its *final carry* — the arrays of
:meth:`geosweep.kernels.core.trajectory.Trajectory.checkpoint` (state, accumulators of every summary over
every step, envelopes, samples, snapshots, adaptive controller) — in the store, one ``.npz``
object per store shard under ``<store>/_carries/`` (compressed when the cells' arrays are large).
A *thin* carry (:func:`geosweep.sweeps.carries.thin`) leaves out the samples the store holds (and reads).
Extending the store to a later T continues each finished cell from its carry; the result is
bitwise identical to a store computed to the new T from the start, because nothing before T₁
depends on T:

* samples are spaced by ``dt_out`` (not T/n), so the sample grid to T₁ is a prefix of the one to T₂;
* fixed-step runs and adaptive runs without dense output (their steps are clipped to every sample
  time) reach T₁ exactly as a longer run does; an adaptive run *with* dense output clips its last
  step to land on T, which a longer run does not take: its carry is the state before that step
  (the driver's hold, ``geosweep.kernels.core.layout.C_HOLD``), and the samples inside that last step —
  typically one to a few before T₁ — are computed again and compared with the stored ones (equal:
  not written). The samples and snapshots *inside* that last step do change: the longer run steps
  across T₁ and interpolates there. With steps shorter than ``dt_out`` that is only the row at T₁,
  and a store with an adaptive integrator keeps that last row of its ``time`` and ``snapshot``
  arrays in an object of its own (:func:`geosweep.sweeps.store.cell_chunks`), so the objects of the
  earlier rows are not rewritten (a last step longer than ``dt_out`` changes earlier rows, and
  their object is rewritten);
* the adaptive controller's default first step (``h0`` ≤ 0) comes from the initial state, the
  tolerance and the order, not from T (:func:`geosweep.kernels.core.driver.starting_step`), so the
  grown spec is the store's spec with the new T and nothing else. A store written before that rule
  (no :data:`geosweep.sweeps.store.FIRST_STEP_ATTR`) started from T₁/100: its grown spec pins
  ``h0`` to that value, so the store's spec still describes its results;
* snapshots: with ``snapshot_dt`` unset (states at t = 0 and T only) the state at T moves to the
  new T; with a ``snapshot_dt`` the snapshots up to T₁ stay.

The time axis grows in place: the arrays are resized (their chunk length along ``time`` stays
the first run's), and a grown shard is written from the first row where its cells' values differ
from the stored ones (:func:`geosweep.sweeps.store.write_shard`): the chunks of old samples are not
rewritten, except a chunk that also holds new rows (the last, partly filled chunk of a previous
extension, or the row at T₁ of an adaptive store), written whole with its old rows unchanged.
Cells that failed keep their status (they continue from their
carry too, integrating nothing, so that their values take the longer layout exactly as a run to
the new T stores them); ``not_applicable`` stays. Each extension (from, to, when) is appended
to the store's ``runs`` records.

A kept carry is used only if it is its cell's (:func:`problem`): it records the cell, the identity
of the cell's trajectory (:func:`identities`: the spec without T and the sweep axes, the cell's
coordinates), the T it was kept at, the cell's stored checksum (the samples it continues) and a
digest of itself. The extension checks every finished cell's carry against the store before it
changes anything; a foreign, stale or damaged one is dropped and its cell runs again from t = 0
(one warning line naming how many), ``recompute`` drops every carry unread. The store's
metadata changes in crash-safe phases (:func:`_grow_store`); ``geosweep verify`` checks the carries.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geosweep.sweeps import crashpoint
from geosweep.sweeps.carries import drop_shard, is_thin, joined, load_shard, read_shard, save_shard, split
from geosweep.sweeps.carry_identity import (
    ID_T,
    ID_TRAJECTORY,
    identities,
    problem,
    sealed,
    sealed_stack,
    stamped,
    usable,
)
from geosweep.sweeps.extend_spec import (
    NOT_IDENTITY,
    ExtendError,
    grown_spec,
    legacy_first_steps,
    only_T_differs,
    pin_first_steps,
    stored_first_steps,
    stored_spec,
    typed,
)
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.grow import EXTENDING_ATTR, interrupted
from geosweep.sweeps.lease import fence
from geosweep.sweeps.store import (
    StoreRef,
    checked_cells,
    consolidate,
    group_by_shard,
    integrator_options_attr,
    open_unconsolidated,
    sweep_shards,
)

#: names of the carries' modules given here too: what the engine reads of an extension
__all__ = ["ID_T", "ID_TRAJECTORY", "ExtendError", "extend", "grown_spec", "identities", "joined", "load_shard"]
__all__ += ["Growth", "extend_time", "growth"]
__all__ += ["problem", "save_shard", "sealed", "sealed_stack", "split", "stamped", "typed", "usable"]


@dataclass(frozen=True)
class Growth:
    """What a run with ``grow`` asks of an existing store, decided once before any write
    (:func:`growth`): ``plan`` (the run's plan, with the first steps the store pinned), ``axes`` — the
    plan the sweep axes grow to first (:mod:`geosweep.sweeps.grow`: values appended, at the store's T;
    anything else is refused there, the field named) or None — and ``time``: whether the store then
    grows to a later T (:func:`extend_time`: also resuming an interrupted extension, or refusing a
    smaller T). Neither: the usual identity check of the store follows."""

    plan: Any
    axes: Any = None
    time: bool = False
    asked: dict[str, Any] = field(default_factory=dict)
    keep: dict[str, Any] = field(default_factory=dict)


def growth(plan, ref) -> Growth:
    """Which of the two steps a run of ``plan`` with ``grow`` takes on the store at ``ref`` (none when
    there is no store yet): from the store's spec and the asked one, whose first steps are the store's
    when it was extended before. Reads the store only."""
    from geosweep.sweeps.plan import make_plan

    if not ref.exists():
        return Growth(plan)
    old, legacy = stored_spec(ref), legacy_first_steps(ref)
    keep = {k: v for k, v in plan.spec.model_dump(mode="json").items() if k in NOT_IDENTITY and v is not None}
    given = json.loads(plan.spec.canonical_json())
    asked = stored_first_steps(old, given)
    if asked != given:  # the store was extended before: its first steps are pinned, the user's spec does not say
        plan = make_plan({**typed(asked), **keep})
    if old == asked:
        return Growth(plan)
    later = float(asked.get("T", 0.0)) > float(old["T"])
    if only_T_differs(pin_first_steps(old, old, legacy), pin_first_steps(old, asked, legacy)):
        return Growth(plan, time=True, asked=asked, keep=keep)
    if not later:  # the axes only (or a change the grow check refuses)
        return Growth(plan, axes=plan)
    # a larger T and more: the axes grow first at the store's T (the new cells are not run yet), then
    # the time axis; the new cells run from t = 0 to the new T
    at_store_T = make_plan({**typed({**asked, "T": old["T"]}), **keep})
    return Growth(plan, axes=at_store_T, time=True, asked=asked, keep=keep)


def extend_time(step: Growth, ref, log=None, recompute: bool = False):
    """Grow the store to ``step``'s later T (arrays resized, finished cells to be continued from their
    carries, the spec and the extension recorded) and return the plan to run (a store older than the
    starting-step rule: first steps pinned), or resume an interrupted extension with the store's
    (pinned) spec. Call under the store's lease, after the axes grew (:func:`growth`).

    Raises :class:`ExtendError` for a smaller T, a spec whose cells cannot be continued, or
    finished cells without a carry (unless ``recompute``: they are computed again from t = 0).
    """
    from geosweep.sweeps.plan import make_plan

    log = log or (lambda msg: None)
    old, legacy = stored_spec(ref), legacy_first_steps(ref)  # after the axes grew, if they did
    new = pin_first_steps(old, step.asked, legacy)
    if not only_T_differs(pin_first_steps(old, old, legacy), new):
        return step.plan  # the axes did not grow to the spec: the store's identity check judges it
    if new == old:  # an extension that was interrupted: resume it with the store's (pinned) spec
        consolidate(ref)  # (killed before its metadata was consolidated: readers read each array's own)
        return make_plan({**typed(new), **step.keep})
    T1, T2 = float(old["T"]), float(new["T"])
    if T2 < T1:
        raise ExtendError(f"T: the store reaches T = {T1:g}; it cannot shrink to {T2:g} (a study only grows)")
    for name, opts in new.get("integrator_options", {}).items():
        if opts.get("global_error"):
            raise ExtendError(
                f"integrator_options.{name}.global_error: the reference error at T cannot be continued "
                "to a later T; extend a store without it (or compute a new store)"
            )
    grown = make_plan({**typed(new), **step.keep})
    _grow_store(grown, ref, old, log, recompute)
    return grown


def _grow_store(plan, ref, old: dict[str, Any], log, recompute: bool) -> None:
    """Grow the store to ``plan``'s T in crash-safe phases, each idempotent: (1) the target is
    recorded (:data:`EXTENDING_ATTR`; writing it drops the consolidated metadata, so no reader sees
    stale shapes), (2) the finished cells' carries are checked against the stored checksums and the
    foreign, stale or damaged ones dropped (``recompute``: every one dropped unread), (3) the arrays
    resized, (4) the finished cells' flags cleared, (5) the spec attributes switched and the marker
    removed in one write, (6) the metadata consolidated. A run killed anywhere is finished by the
    same extension; any other run is refused until then (:func:`geosweep.sweeps.grow.interrupted`)."""
    from geosweep.kernels.status import Status

    group = open_unconsolidated(ref, "r")
    attrs = dict(group.attrs)
    T1, T2 = float(old["T"]), plan.spec.T
    pending = attrs.get(EXTENDING_ATTR)
    if pending is not None and (not isinstance(pending, dict) or pending.get("spec_hash") != plan.spec.spec_hash):
        raise ExtendError(interrupted(ref.url, attrs) or f"store {ref.url}: an unfinished extension")
    status = np.asarray(group["status"][...])
    shards = sweep_shards(group)
    # finished cells, ok or failed: a failed one continues too (nothing to integrate; its arrays
    # take the longer layout exactly as a run to the new T stores them, and it keeps its status)
    ok = [tuple(int(i) for i in c) for c in np.argwhere(status >= int(Status.OK))]
    survey = None
    marker = {"spec_hash": plan.spec.spec_hash, "from": T1, "to": T2, "carries_checked": False}
    if pending is None:
        if not recompute:
            survey = _survey(ref, plan, group, ok, shards, T1)
            _refuse_missing(ref, survey, len(ok))
        open_unconsolidated(ref, "r+").attrs[EXTENDING_ATTR] = marker
        crashpoint.reached("extend.marked")
    if not (pending or {}).get("carries_checked"):
        if recompute:
            _drop_all(ref, ok, shards)
        else:
            _drop_unusable(ref, survey or _survey(ref, plan, group, ok, shards, T1), len(ok))
        crashpoint.reached("extend.dropped")
        open_unconsolidated(ref, "r+").attrs[EXTENDING_ATTR] = {**marker, "carries_checked": True}
        crashpoint.reached("extend.checked")
    with fence(ref):
        _resize(ref, plan)
        crashpoint.reached("extend.resized")
        _clear_flags(ref, ok)
        crashpoint.reached("extend.cleared")
        _switch(ref, plan, T1, T2, len(ok))
        crashpoint.reached("extend.switched")
        consolidate(ref)
    crashpoint.reached("extend.consolidated")
    log(f"store {ref.url}: T {T1:g} -> {T2:g}; {len(ok)} finished cells to continue")


@dataclass
class _Survey:
    """The finished cells' carries, checked: ``missing`` (no carry kept) and ``unusable``
    (foreign, stale or damaged) cells, and the shards whose object cannot be read at all."""

    missing: list[Cell] = field(default_factory=list)
    unusable: dict[tuple[int, ...], list[Cell]] = field(default_factory=dict)
    unreadable: set[tuple[int, ...]] = field(default_factory=set)

    @property
    def n_unusable(self) -> int:
        return sum(len(v) for v in self.unusable.values())


def _survey(ref, plan, group, ok: list[Cell], shards: tuple[int, ...], T1: float) -> _Survey:
    """Check the carry of every finished cell of ``ok``: its own, continuing the stored samples
    (the cell's stored ``checksum``) of the store's T ``T1`` (:func:`problem`), a thin one's over matching values."""
    out = _Survey()
    if not ok:
        return out
    checksum = np.asarray(group["checksum"][...])
    ident = identities(plan)
    thin: dict[Cell, tuple[int, ...]] = {}  # cells with a usable thin carry: their shard
    for index, members in group_by_shard(ok, shards).items():
        stored = read_shard(ref, index)
        if stored is None:
            out.unreadable.add(index)
            out.unusable[index] = list(members)
            continue
        for c in members:
            carry = stored.get(c)
            if carry is None:
                out.missing.append(c)
            elif problem(c, carry, ident(c), T1, int(checksum[c])) is not None:
                out.unusable.setdefault(index, []).append(c)
            elif is_thin(carry):
                thin[c] = index
    damaged = checked_cells(ref)["damaged"] if thin else []  # a thin carry continues them as they are
    for c in (c for c in damaged if c in thin):
        out.unusable.setdefault(thin[c], []).append(c)
    return out


def _refuse_missing(ref, survey: _Survey, n_ok: int) -> None:
    if survey.missing:
        raise ExtendError(
            f"store {ref.url}: {len(survey.missing)} of {n_ok} finished cells have no final carry (written "
            "without carries, or by an older geosweep): they cannot be continued to the new T; "
            "rerun with --recompute to compute them again from t = 0"
        )


def _drop_unusable(ref, survey: _Survey, n_ok: int) -> None:
    """Drop the foreign, stale or damaged carries (those cells are computed again from t = 0), with
    one warning line naming how many; cells without a carry after an interrupted try are counted too."""
    for index, cells in survey.unusable.items():
        if index in survey.unreadable:
            drop_shard(ref, index)
        else:
            save_shard(ref, index, dict.fromkeys(cells))
    n = survey.n_unusable + len(survey.missing)
    if n:  # a warning also when the run logs nothing else (--quiet)
        logging.getLogger("geosweep").warning(
            f"store {ref.url}: {n} of {n_ok} finished cells have a foreign, stale, damaged or no final carry "
            "(one not written for this cell's stored samples): computed again from t = 0"
        )


def _drop_all(ref, ok: list[Cell], shards: tuple[int, ...]) -> None:
    """``--recompute``: every finished cell computed again from t = 0, its carry not read (dropped)."""
    for index in group_by_shard(ok, shards):
        drop_shard(ref, index)
    if ok:
        logging.getLogger("geosweep").warning(
            f"store {ref.url}: --recompute: {len(ok)} finished cells computed again from t = 0 (their carries unread)"
        )


def _clear_flags(ref, ok: list[Cell]) -> None:
    """``done`` and ``checksum`` of the finished cells cleared: the run that follows continues them
    (no checksum: none is taken for a finished cell that lost its flag)."""
    g = ref.open_group("r+")
    done = np.asarray(g["done"][...]).copy()
    checksum = np.asarray(g["checksum"][...]).copy()
    for c in ok:
        done[c], checksum[c] = 0, 0
    g["checksum"][...] = checksum
    g["done"][...] = done


def _switch(ref, plan, T1: float, T2: float, n_ok: int) -> None:
    """The spec attributes to ``plan``'s, the extension recorded, the marker removed: one write."""
    g = open_unconsolidated(ref, "r+")
    attrs = dict(g.attrs)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    attrs.update(
        {
            "spec": plan.spec.canonical_json(),
            "spec_hash": plan.spec.spec_hash,
            "integrator_options": integrator_options_attr(plan),
            "T": plan.spec.T,
            "runs": [*attrs.get("runs", []), {"extension": {"from": T1, "to": T2, "when": when}, "cells": n_ok}],
            "history": "\n".join(
                x for x in (attrs.get("history", ""), f"{when} geosweep extend: T {T1:g} -> {T2:g}") if x
            ),
        }
    )
    attrs.pop(EXTENDING_ATTR, None)
    g.attrs.put(attrs)


def _resize(ref, plan) -> None:
    """Every array with a ``time`` or ``snapshot`` axis to the plan's lengths (chunks unchanged),
    and the ``time``/``snapshot``/``snapshot_time`` coordinates written where they grew."""
    import warnings

    g = ref.open_group("r+")
    sizes = {"time": plan.sizes["time"], "snapshot": plan.sizes["snapshot"]}
    spec = plan.spec
    with warnings.catch_warnings():  # the carry and checkpoint objects beside the arrays are not zarr nodes
        warnings.filterwarnings("ignore", message="Object at .* is not recognized as a component")
        arrays = list(g.arrays())
    for name, arr in arrays:
        dims = tuple(arr.metadata.dimension_names or ())
        if not any(d in sizes for d in dims):
            continue
        old_shape = tuple(arr.shape)
        shape = tuple(sizes.get(d, n) for d, n in zip(dims, old_shape))
        if shape != old_shape:
            arr.resize(shape)
            crashpoint.reached("extend.resizing")
        if dims == ("time",) and name == "time":
            n0 = old_shape[0]
            if shape[0] > n0:
                arr[n0:] = np.arange(shape[0])[n0:] * spec.dt_out
        elif dims == ("snapshot",) and name == "snapshot_time":
            arr[...] = np.arange(shape[0]) * spec.snapshot_interval
        elif dims == ("snapshot",) and name == "snapshot" and shape[0] > old_shape[0]:
            arr[old_shape[0] :] = np.arange(old_shape[0], shape[0])


def extend(
    store: str | os.PathLike, T: float, *, recompute: bool = False, storage_options: dict | None = None, **kwargs
):
    """Continue every finished cell of ``store`` to the final time ``T`` (see the module
    docstring): bitwise the store computed to ``T`` from the start. Fixed-step cells change no
    stored sample (no object of the first run's samples is rewritten); adaptive cells with dense
    output rewrite the rows inside their last step to the old T — always the row at the old T, and
    the earlier rows in that step when it is longer than ``dt_out`` — since a run to ``T`` steps
    across the old T and interpolates there (bitwise identity wins over leaving them). ``kwargs``
    go to :func:`geosweep.sweeps.engine.run_sweep` (``serial``, ``client``, ``n_workers`` …).
    Returns its :class:`~geosweep.sweeps.engine.SweepResult`. Usable from a notebook::

        from geosweep import sweeps
        sweeps.extend("results/sphere.zarr", T=2000.0, serial=True)

    >>> import geosweep, os, tempfile
    >>> from geosweep import sweeps
    >>> spec = geosweep.api.cell_spec("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
    >>> store = os.path.join(tempfile.mkdtemp(), "top.zarr")
    >>> _ = geosweep.run(spec, store, serial=True)
    >>> sweeps.extend(store, T=0.2, serial=True).complete  # continue to 0.2 s
    True
    >>> geosweep.open(store).sizes["time"]
    5
    """
    from geosweep.sweeps.engine import run_sweep

    ref = StoreRef.of(store, storage_options)
    if not ref.exists():
        raise ExtendError(f"no store at {ref.url}")
    return run_sweep(grown_spec(ref, T), ref, grow=True, recompute=recompute, **kwargs)
