"""Growing a store along its sweep axes: a spec that appends values to axes of the store's spec.

``geosweep run SPEC --store STORE --grow`` (``run_sweep(…, grow=True)``) accepts a spec that adds
values at the *end* of one or more sweep axes (``integrators``, ``h``, ``tol``, a swept
``params.NAME``) and is otherwise the store's spec (an added integrator may bring its own
``integrator_options``). The store's arrays are resized along the grown dimensions (zarr
metadata only: no stored chunk is read or rewritten), the coordinates along them rewritten,
the not-applicable fillers among the new cells marked, and the spec attributes switched to the
new spec; the run then computes the new cells only. Cells keep their indices, so every stored
object and every checkpoint (``_checkpoints/c<i>_<j>….npz``) keeps its meaning.

New cells land in new chunks, except where the old extent of a grown axis is not a multiple of
the store's shard extent along it: the last, partly filled shard along that axis then also
holds new cells, and its one object per variable is written once more when they are — the
stored cells' values written back bitwise unchanged (as :func:`geosweep.sweeps.store.write_shard` does
for every shard holding finished cells).

Refused (:class:`geosweep.sweeps.store.StoreMismatchError`, exit 3), with the field named: removed or
changed values, values inserted before the last stored value (they would move every stored cell
after them: append new values at the end), a new sweep axis (a fixed parameter made a list, an
``h`` or ``tol`` axis the store lacks), any other changed field, and added values that change the
per-cell layout (another number of bodies …).

Crash safety: the target spec is recorded first (attribute :data:`GROWING_ATTR`), the spec
attributes are switched last (writing the marker drops the consolidated metadata copy, written
again at the end, so no reader sees stale shapes). A grow interrupted in between is finished by
the next run of the same spec (every step is idempotent); any other spec is refused until then.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from geosweep.kernels.status import Status
from geosweep.sweeps import crashpoint
from geosweep.sweeps.store.checks import (
    StoreMismatchError,
    differences,
    mismatch_message,
    spec_attr_intact,
    spec_value,
)
from geosweep.sweeps.store.location import StoreRef, consolidate
from geosweep.sweeps.store.location import open_unconsolidated as _open

if TYPE_CHECKING:
    from geosweep.sweeps.plan import Plan

#: group attribute naming the spec a grow in progress switches the store to (see module doc)
GROWING_ATTR = "geosweep_growing"
#: group attribute of an extension to a later T in progress (:mod:`geosweep.sweeps.extension`):
#: ``{"spec_hash", "from", "to", "carries_checked"}``
EXTENDING_ATTR = "geosweep_extending"
#: spec fields that are sweep axes, with the store dimension each one is
METHOD_FIELDS = {"integrators": "integrator", "h": "h", "tol": "tol"}


@dataclass
class Growth:
    """How a spec differs from a store's spec: ``added`` (store dim → (old, new) extent) or ``problems``
    (one line per field that forbids growing)."""

    added: dict[str, tuple[int, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.added) and not self.problems

    def axes_text(self) -> str:
        return ", ".join(f"{d} {a} → {b}" for d, (a, b) in self.added.items())


def _exact(values: list) -> list[str]:
    """Axis values as exact keys (JSON text: ``-0.0`` is not ``0.0``, as the spec hash sees them)."""
    return [json.dumps(v) for v in values]


def _axis(growth: Growth, field_name: str, dim: str, old: Any, new: Any) -> None:
    """Compare one sweep axis of the store's spec (``old``) and the spec (``new``)."""
    if json.dumps(old) == json.dumps(new):
        return
    if not isinstance(old, list) or not old:
        growth.problems.append(
            f"{field_name}: the store has no {dim} axis (store has {spec_value(old)}, spec has {spec_value(new)}); "
            f"a sweep axis cannot be added to a store"
        )
        return
    if not isinstance(new, list):
        growth.problems.append(
            f"{field_name}: store has {spec_value(old)}, spec has {spec_value(new)}; a sweep axis cannot be removed"
        )
        return
    o, n = _exact(old), _exact(new)
    missing = [v for v in o if v not in n]
    if missing:
        growth.problems.append(
            f"{field_name}: {len(missing)} value(s) of the store are not in the spec ({', '.join(missing[:5])}"
            f"{' …' if len(missing) > 5 else ''}); values cannot be removed from or changed in a store"
        )
    elif n[: len(o)] != o:
        growth.problems.append(
            f"{field_name}: the spec puts new values before stored ones (or reorders them); "
            f"append new values at the end of the axis (stored cells keep their places)"
        )
    else:
        growth.added[dim] = (len(o), len(n))


def compare(old: dict, new: dict) -> Growth:
    """What growing a store of spec ``old`` to spec ``new`` (canonical spec dicts) adds, or why it cannot."""
    growth = Growth()
    old_ints, new_ints = list(old.get("integrators") or []), list(new.get("integrators") or [])
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if key in METHOD_FIELDS:
            _axis(growth, key, METHOD_FIELDS[key], a or [], b or [])
        elif key == "params":
            a, b = a or {}, b or {}
            for name in sorted(set(a) | set(b)):
                if isinstance(a.get(name), list) or isinstance(b.get(name), list):
                    _axis(growth, f"params.{name}", name, a.get(name), b.get(name))
                elif a.get(name) != b.get(name) or _exact([a.get(name)]) != _exact([b.get(name)]):
                    growth.problems.extend(differences(f"params.{name}", a.get(name), b.get(name)))
        elif key == "integrator_options":
            a, b = a or {}, b or {}
            for name in sorted(set(a) | set(b)):
                added = name not in old_ints and name in new_ints
                if not added and json.dumps(a.get(name), sort_keys=True) != json.dumps(b.get(name), sort_keys=True):
                    growth.problems.extend(differences(f"integrator_options.{name}", a.get(name), b.get(name)))
        elif json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
            growth.problems.extend(differences(key, a, b))
    return growth


def _field(dim: str) -> str:
    """The spec field of a sweep dimension (``integrator`` → ``integrators``, ``seed`` → ``params.seed``)."""
    fields = {d: f for f, d in METHOD_FIELDS.items()}
    return fields.get(dim, f"params.{dim}")


def growth_of(attrs: dict, plan: Plan) -> Growth | None:
    """:func:`compare` of a store's spec attribute with ``plan``'s spec (None if the attribute is not a spec)."""
    try:
        old = json.loads(attrs.get("spec", ""))
    except (TypeError, ValueError):
        return None
    if not isinstance(old, dict):
        return None
    return compare(old, json.loads(plan.spec.canonical_json()))


def grow_hint(attrs: dict, spec_json: str) -> str:
    """`` The spec only adds …: rerun with --grow …`` when the spec grows the store's spec, else ``""``."""
    try:
        old, new = json.loads(attrs.get("spec", "")), json.loads(spec_json)
    except (TypeError, ValueError):
        return ""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ""
    growth = compare(old, new)
    if not growth.ok:
        return ""
    return (
        f" The spec only adds values at the end of sweep axes ({growth.axes_text()}): run it with --grow "
        f"(run_sweep(…, grow=True)) to compute just the new cells into this store."
    )


def interrupted(url: str, attrs: dict) -> str | None:
    """The one line saying that a grow or an extension of the store at ``url`` (attributes ``attrs``)
    was interrupted and how to finish it, or None when neither is pending."""
    ext = attrs.get(EXTENDING_ATTR)
    if ext is not None:
        to = ext.get("to", "?") if isinstance(ext, dict) else "?"
        return (
            f"store {url}: an interrupted extension to T = {to} is unfinished (its arrays may be resized, "
            f"its spec still the old one); rerun `geosweep extend {url} --T {to}` to finish it"
        )
    grow = attrs.get(GROWING_ATTR)
    if grow is not None:
        target = str(grow.get("spec_hash", "?"))[:12] if isinstance(grow, dict) else "?"
        return (
            f"store {url}: an interrupted grow to the spec with spec_hash {target}… is unfinished; "
            f"rerun geosweep run --grow with that spec to finish it"
        )
    return None


def _refuse(ref: StoreRef, name: str, problems: list[str]) -> StoreMismatchError:
    from geosweep.sweeps.compact import MAX_ITEMS, joined

    return StoreMismatchError(
        f"store {ref.url} cannot grow to spec {name!r}: {joined(problems, most=MAX_ITEMS, sep='; ')}. "
        f"Use a new --store path for another sweep."
    )


def grow_store(plan: Plan, ref: StoreRef, attrs: dict, ds: Any, log=None) -> dict[str, tuple[int, int]]:
    """Grow the store at ``ref`` (attributes ``attrs``) to ``plan`` (template ``ds``), or finish an
    interrupted grow to it; call as the store's writer, inside its lease fence. Returns the grown
    axes (dim → (old, new) extent), ``{}`` if the store already is ``plan``'s. Raises
    :class:`StoreMismatchError` (store untouched) when the spec does not only add values."""
    spec = plan.spec
    pending = attrs.get(GROWING_ATTR)
    if pending is not None and (not isinstance(pending, dict) or pending.get("spec_hash") != spec.spec_hash):
        target = str(pending.get("spec_hash", "?"))[:12] if isinstance(pending, dict) else "?"
        raise StoreMismatchError(
            f"store {ref.url}: an interrupted grow to another spec (spec_hash {target}…) is unfinished; "
            f"rerun geosweep run --grow with that spec to finish it before running another"
        )
    if attrs.get("spec_hash") == spec.spec_hash and pending is None:
        return {}
    if not spec_attr_intact(attrs):
        raise StoreMismatchError(mismatch_message(ref.url, attrs, spec, grow_hint))
    growth = growth_of(attrs, plan)
    if growth is None:
        raise StoreMismatchError(mismatch_message(ref.url, attrs, spec, grow_hint))
    if not growth.ok:
        raise _refuse(ref, spec.name, growth.problems or ["the spec adds no values"])
    group = _open(ref, "r")
    problems = _layout_problems(group, plan, ds, growth)
    if problems:
        raise _refuse(ref, spec.name, problems)
    if log:
        log(f"store {ref.url}: growing {growth.axes_text()}")
    group = _open(ref, "r+")
    if pending is None:
        group.attrs[GROWING_ATTR] = {"spec_hash": spec.spec_hash, "from_spec_hash": attrs.get("spec_hash")}
    crashpoint.reached("grow.marked")
    _resize(group, plan, ds)
    crashpoint.reached("grow.resized")
    _rewrite_coords(group, plan, ds)
    crashpoint.reached("grow.coords")
    _mark_new_fillers(group, plan, growth)
    crashpoint.reached("grow.fillers")
    _switch_spec(group, plan, ds, growth)
    crashpoint.reached("grow.switched")
    consolidate(ref)
    return growth.added


def _layout_problems(group, plan: Plan, ds: Any, growth: Growth) -> list[str]:
    """Why the store's arrays cannot take ``plan``'s grid: another dimension order, variables or
    per-cell sizes, or stored coordinates other than the first values of ``plan``'s axes."""
    grid = plan.grid
    dims = tuple(group["done"].metadata.dimension_names or ())
    if dims != grid.dims:
        return [f"dimensions: the store has sweep axes {list(dims)}, the spec {list(grid.dims)} (same order needed)"]
    problems = []
    missing = sorted(set(ds.data_vars) - set(group.array_keys()))
    if missing:
        problems.append(f"variables: the grown sweep stores {missing[:5]}, which the store lacks")
    for name, var in ds.data_vars.items():
        if name in missing:
            continue
        stored, wanted = tuple(group[name].shape[len(dims) :]), tuple(var.shape[len(dims) :])
        if stored != wanted:
            per_cell = ", ".join(f"{d} {a} → {b}" for d, a, b in zip(var.dims[len(dims) :], stored, wanted) if a != b)
            problems.append(
                f"{', '.join(map(_field, growth.added))}: the added values change the size of a cell ({per_cell}, "
                f"e.g. {name}); a store grows only by cells of the size of its own"
            )
            break
    for dim, (old, _new) in growth.added.items():
        if dim not in group.array_keys():  # a text coordinate an interrupted grow was writing anew
            continue
        values = np.asarray(group[dim][...])
        if values.shape[0] < old or not np.array_equal(values[:old], np.asarray(ds[dim].values)[:old]):
            problems.append(f"{dim}: the store's coordinate differs from its spec's values")
    return problems


def _resize(group, plan: Plan, ds: Any) -> None:
    """Every value and flag array to the grown grid: zarr metadata only, no chunk is touched."""
    n = len(plan.grid.dims)
    for name in ds.data_vars:
        arr = group[name]
        shape = plan.grid.shape + tuple(arr.shape[n:])
        if tuple(arr.shape) != shape:
            arr.resize(shape)
            crashpoint.reached("grow.resizing")


def _rewrite_coords(group, plan: Plan, ds: Any) -> None:
    """The coordinates along the sweep axes (axis values, integrator family/order/adaptive) as the
    template of the grown grid has them, where they differ: resized and written in place, or — a
    text coordinate that needs wider strings (a longer integrator name) — written anew (also when
    a grow interrupted in between left it missing)."""
    sweep = set(plan.grid.dims)
    present = set(group.array_keys())
    for name, var in ds.coords.items():
        if not var.dims or not set(var.dims) <= sweep:
            continue
        values = np.asarray(var.values)
        old = group[name] if name in present else None
        if old is not None and old.dtype == values.dtype:
            if tuple(old.shape) == values.shape and np.array_equal(old[...], values):
                continue
            if tuple(old.shape) != values.shape:
                old.resize(values.shape)
            old[...] = values
            continue
        arr = group.create_array(
            name,
            shape=values.shape,
            dtype=values.dtype,
            chunks=values.shape,
            fill_value=old.fill_value if old is not None else np.zeros((), values.dtype).item(),
            compressors=old.compressors if old is not None else "auto",
            attributes=dict(old.attrs) if old is not None else dict(var.attrs),
            dimension_names=var.dims,
            overwrite=True,
        )
        arr[...] = values


def new_regions(shape: tuple[int, ...], added: dict[int, tuple[int, int]]) -> list[tuple[slice, ...]]:
    """The regions of a grown grid holding its new cells: per grown axis (index → (old, new)), that
    axis from its old extent on and every other axis whole (they may overlap)."""
    out = []
    for axis, (old, new) in added.items():
        out.append(tuple(slice(old, new) if k == axis else slice(0, n) for k, n in enumerate(shape)))
    return out


def _mark_new_fillers(group, plan: Plan, growth: Growth) -> None:
    """``status``/``done`` of the new cells as a new store has them (not run; not-applicable fillers
    of a mixed fixed-step/adaptive grid done): written only where they differ from what is read."""
    grid = plan.grid
    mask = grid.applicable_mask()
    added = {grid.dims.index(d): ext for d, ext in growth.added.items()}
    for region in new_regions(grid.shape, added):
        filler = ~mask[region]
        status = np.where(filler, np.int8(Status.NOT_APPLICABLE), np.int8(-1)).astype(np.int8)
        done = filler.astype(np.int8)
        if not np.array_equal(np.asarray(group["status"][region]), status):
            group["status"][region] = status
        if not np.array_equal(np.asarray(group["done"][region]), done):
            group["done"][region] = done


def _switch_spec(group, plan: Plan, ds: Any, growth: Growth) -> None:
    """The store's spec attributes to ``plan``'s, the grow recorded in ``runs`` and ``history``, the
    grow marker removed: one write of the group's attributes."""
    attrs = dict(group.attrs)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    old_cells = int(np.prod([growth.added.get(d, (n, n))[0] for d, n in zip(plan.grid.dims, plan.grid.shape)]))
    record = {
        "grown": now,
        "axes": {d: list(ext) for d, ext in growth.added.items()},
        "from_spec_hash": (attrs.get(GROWING_ATTR) or {}).get("from_spec_hash", attrs.get("spec_hash")),
        "spec_hash": plan.spec.spec_hash,
        "cells_added": plan.grid.size - old_cells,
    }
    for key in ("spec", "spec_hash", "integrator_options"):
        attrs[key] = ds.attrs[key]
    attrs["runs"] = [*attrs.get("runs", []), record]
    line = f"{now} grown by geosweep: {growth.axes_text()} ({record['cells_added']} cells added)"
    attrs["history"] = "\n".join(x for x in (attrs.get("history", ""), line) if x)
    attrs.pop(GROWING_ATTR, None)
    group.attrs.put(attrs)
