"""The store's template: every variable (a family's diagnostics and the run flags) with its
dims, dtype, fill value and CF attributes, the coordinates (sweep axes, integrator records, times,
fixed parameters) and the group attributes (format, spec and its hash, provenance). It is written
once, lazily filled (nothing computed), when the store is created
(:func:`geosweep.sweeps.store.lifecycle.ensure_store`); ``run --grow`` later extends it along sweep
axes whose new values are appended (:mod:`geosweep.sweeps.grow`). Also the name checks a spec
passes before any store exists (a system parameter named like a stored variable).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from geosweep.kernels.status import STATUS_MEANINGS
from geosweep.sweeps.store.checks import FIRST_STEP_ATTR, FIRST_STEP_RULE, FORMAT_VERSION, integrator_options_attr
from geosweep.sweeps.store.layout import SWEEP_FLAGS, cell_chunks, shard_shape
from geosweep.sweeps.store.location import provenance

if TYPE_CHECKING:
    from geosweep.sweeps.plan import Plan


def _units(units: str, sysdef) -> str:
    return units.replace("energy", sysdef.energy_units).replace("time", sysdef.time_units)


def _dimensional(sysdef) -> bool:
    return sysdef.energy_units != "1" or sysdef.time_units != "1"


def cf_units(units: str | None, sysdef) -> str | None:
    """``units`` as a UDUNITS-parsable string (CF): the declared quantity words (energy, time,
    length, mass, momentum, angular momentum) in the system's units — all "1" for a system in
    nondimensional units — ``·`` and superscripts spelled out, factors of 1 dropped, and "1" for
    a dimensionless quantity. None for no units (strings, labels); reference times unchanged."""
    if units is None or not str(units).strip():
        return None
    text = str(units).strip()
    if "since" in text:
        return text
    dim = _dimensional(sysdef)
    E, T = sysdef.energy_units, sysdef.time_units
    words = {
        "angular momentum": f"{E} {T}",
        "momentum": "kg m / s" if dim else "1",
        "energy": E,
        "length": "m" if dim else "1",
        "mass": "kg" if dim else "1",
        "time": T,
    }
    for a, b in (("·", " "), ("²", "^2"), ("³", "^3"), ("*", " ")):
        text = text.replace(a, b)
    for word, value in words.items():
        text = text.replace(word, value)
    parts = text.split("/")
    if len(parts) > 2:
        return text

    def factors(part: str) -> list[str]:
        return [t for t in part.split() if not re.fullmatch(r"1(\^-?\d+)?", t)]

    num = factors(parts[0])
    den = factors(parts[1]) if len(parts) == 2 else []
    if not num and not den:
        return "1"
    return " ".join(num or ["1"]) + (f" / {' '.join(den)}" if den else "")


def _cf_attrs(arrays, sysdef) -> None:
    """Every ``units`` attribute of ``arrays`` (variables and coordinates) through :func:`cf_units`."""
    for arr in arrays:
        if "units" not in arr.attrs:
            continue
        units = cf_units(arr.attrs["units"], sysdef)
        if units is None:
            del arr.attrs["units"]
        else:
            arr.attrs["units"] = units


def fill_value(dtype: str):
    """The fill value of a stored variable of ``dtype`` (a cell not written yet): NaN, or -1 for integers."""
    return np.nan if dtype.startswith("float") else -1


#: coordinates the store adds besides the sweep axes and the per-cell dims (see :func:`template`)
LAYOUT_COORDS = ("integrator_family", "integrator_order", "integrator_adaptive", "time", "snapshot", "snapshot_time")
#: the method axes of every grid (:class:`geosweep.sweeps.grid.Grid`)
METHOD_AXES = ("integrator", "h", "tol")


def stored_names(famdef, model) -> set[str]:
    """Every variable and coordinate name the store of a sweep of ``model`` writes, except the system parameters."""
    names = {d.name for d in famdef.diagnostics(model)} | set(SWEEP_FLAGS) | set(LAYOUT_COORDS)
    return names | set(famdef.sizes(model)) | set(METHOD_AXES)


def name_clash(sysdef, famdef, model) -> tuple[str, str] | None:
    """``(field, reason)`` for the first system parameter (every parameter becomes a coordinate, swept
    or fixed) or method axis whose name a stored variable or coordinate also has; ``None`` if disjoint."""
    taken = stored_names(famdef, model)
    for p in sysdef.params:
        if p.name in taken:
            return f"params.{p.name}", (
                f"system {sysdef.name!r} declares a parameter {p.name!r}, which is also the name of a stored "
                "variable or coordinate; the system must rename it"
            )
    diagnostics = {d.name for d in famdef.diagnostics(model)}
    for axis in METHOD_AXES:
        if axis in diagnostics:
            return "system", f"family {famdef.name!r} stores a variable {axis!r}, the name of a sweep axis"
    return None


def _state_labels(model) -> tuple[str, ...]:
    """The stored ``state`` labels of a model whose family has no fixed ``state_labels`` (dg)."""
    return tuple(getattr(model, "stored_labels", None) or getattr(model, "labels", ()) or ())


def state_layout_clash(plan: Plan) -> tuple[str, str] | None:
    """``(field, reason)`` when the models of a sweep store different ``state`` layouts (the ``state``
    coordinate would be a bare index meaning different entries in different cells); else ``None``."""
    if plan.famdef.state_labels or "state" not in plan.sizes:
        return None
    layouts = {_state_labels(m) for m in plan.models.values()}
    if len(layouts) <= 1:
        return None
    swept = list(plan.spec.swept_params())
    field = f"params.{swept[0]}" if len(swept) == 1 else "params"
    shown = "; ".join(f"({', '.join(x)})" for x in sorted(layouts, key=len)[:2])
    return field, (
        f"the models of this sweep store different state layouts ({shown}); run them in separate sweeps "
        "or give the system one layout for every variant (SkewSystem.layout)"
    )


#: the per-cell flag arrays (:data:`SWEEP_FLAGS`, in that order): dtype, fill value and attributes, as
#: the template writes them and :mod:`geosweep.sweeps.repair` rebuilds them
FLAG_LAYOUT: dict[str, tuple[str, Any, dict[str, Any]]] = {
    "status": (
        "int8",
        -1,
        {
            "long_name": "integration status",
            "flag_values": [int(k) for k in STATUS_MEANINGS],
            "flag_meanings": " ".join(STATUS_MEANINGS.values()),
            "description": "0 ok; >0 the trajectory failed (see flag_meanings); -1 not run yet; "
            "-2 not applicable (filler cell of a mixed fixed-step/adaptive grid)",
        },
    ),
    "wall_time": ("float64", np.nan, {"units": "s", "long_name": "wall-clock time of the cell"}),
    "completed_at": (
        "float64",
        np.nan,
        {"units": "seconds since 1970-01-01", "long_name": "time the cell was written (provenance stamp)"},
    ),
    "progress": (
        "float64",
        0.0,
        {"units": "1", "long_name": "fraction of the cell's time span integrated (1 once complete)"},
    ),
    "checksum": (
        "int64",
        0,
        {"long_name": "checksum of the cell's stored values (geosweep.sweeps.store.cell_checksum; geosweep verify)"},
    ),
    "done": ("int8", 0, {"long_name": "1 once every value of the cell is written"}),
}


@dataclass
class StoredArray:
    """One array of the store's template: a coordinate (its ``values``) or a lazily filled variable
    (``values`` None; ``fill`` its fill value and ``chunks`` its zarr chunks: one per shard, two with
    :func:`~geosweep.sweeps.store.layout.cell_chunks`). ``attrs`` are its CF attributes."""

    dims: tuple[str, ...]
    dtype: np.dtype
    shape: tuple[int, ...]
    attrs: dict[str, Any]
    values: np.ndarray | None = None
    fill: Any = None
    chunks: tuple[int, ...] | None = None


def _coordinate(dims: tuple[str, ...], values: np.ndarray, attrs: dict[str, Any]) -> StoredArray:
    """A coordinate of the template holding ``values``."""
    values = np.asarray(values)
    return StoredArray(tuple(dims), values.dtype, values.shape, dict(attrs), values)


@dataclass
class StoreTemplate:
    """What a new store holds before any cell is written (nothing computed): its data variables (the
    family's diagnostics, then the run flags) and coordinates, each in the order xarray lists them,
    and the group's attributes. Written by :func:`geosweep.sweeps.store.template_write.write_template`
    with zarr alone; :func:`geosweep.sweeps.store.template_dataset.template` is the same as an xarray
    Dataset."""

    data_vars: dict[str, StoredArray]
    coords: dict[str, StoredArray]
    attrs: dict[str, Any]

    def names(self) -> set[str]:
        """Every array's name (variables and coordinates)."""
        return set(self.data_vars) | set(self.coords)


def store_template(plan: Plan) -> StoreTemplate:
    """The store's template of ``plan`` (numpy only: no xarray, no Dask)."""
    coords = {**_axis_coords(plan), **_time_coords(plan), **_label_coords(plan)}
    for dim, n in plan.sizes.items():
        if dim not in coords:
            coords[dim] = _coordinate((dim,), np.arange(n), {"long_name": f"{dim} index"})
    coords.update(_fixed_param_coords(plan))
    data_vars = _data_vars(plan)
    _cf_attrs([*data_vars.values(), *coords.values()], plan.sysdef)
    return StoreTemplate(data_vars, coords, _group_attrs(plan))


def _data_vars(plan: Plan) -> dict[str, StoredArray]:
    """Every stored variable (the family's diagnostics, then the run flags) with its fill value and
    chunks (one object per shard, two with ``cell_chunks``)."""
    grid, sysdef, sizes, shards = plan.grid, plan.sysdef, dict(plan.sizes), shard_shape(plan)
    last_apart = any(idef.adaptive for idef in plan.idefs.values())
    data_vars: dict[str, StoredArray] = {}

    def add(name: str, dims: tuple[str, ...], dtype: str, attrs: dict, fill) -> None:
        cell_shape = tuple(sizes[d] for d in dims)
        chunks = shards + cell_chunks(dims, cell_shape, last_apart)
        shape = grid.shape + cell_shape
        data_vars[name] = StoredArray(grid.dims + dims, np.dtype(dtype), shape, attrs, None, fill, chunks)

    for d in plan.famdef.diagnostics(plan.first_model):
        attrs: dict[str, Any] = {"units": _units(d.units, sysdef), "long_name": d.long_name}
        if d.description:
            attrs["description"] = d.description
        if d.computed_over:
            attrs["computed_over"] = d.computed_over
        add(d.name, d.dims, d.dtype, attrs, fill_value(d.dtype))
    for name, (dtype, fill, attrs) in FLAG_LAYOUT.items():
        add(name, (), dtype, dict(attrs), fill)
    return data_vars


def _axis_coords(plan: Plan) -> dict[str, StoredArray]:
    """The sweep axes' coordinates, and the integrators' records along ``integrator``."""
    grid, sysdef = plan.grid, plan.sysdef
    coords: dict[str, StoredArray] = {}
    for i, axis in enumerate(grid.axes):
        kind = sysdef.param(axis.name).kind if i >= grid.n_method_axes else None
        values = _coord_values(axis.values, kind)
        coords[axis.name] = _coordinate((axis.name,), values, {"units": axis.units, "long_name": axis.doc})
    idefs = [plan.idefs[name] for name in plan.spec.integrators]
    orders = [min(i.order_for(m) for m in plan.models.values()) for i in idefs]  # on this sweep's models
    for name, values, doc in (
        ("integrator_family", np.array([i.family for i in idefs]).astype(str), "family the integrator belongs to"),
        ("integrator_order", np.array(orders, dtype=np.int64), "order of accuracy"),
        ("integrator_adaptive", np.array([i.adaptive for i in idefs], dtype=bool), "adaptive (swept over tol)"),
    ):
        coords[name] = _coordinate(("integrator",), values, {"long_name": doc})
    return coords


def _time_coords(plan: Plan) -> dict[str, StoredArray]:
    """``time`` (the samples, every ``dt_out``) and ``snapshot_time`` (the stored states)."""
    spec, sizes, units = plan.spec, plan.sizes, plan.sysdef.time_units
    return {
        "time": _coordinate(("time",), np.arange(sizes["time"]) * spec.dt_out, {"units": units, "long_name": "time"}),
        "snapshot_time": _coordinate(
            ("snapshot",),
            np.arange(sizes["snapshot"]) * spec.snapshot_interval,
            {"units": units, "long_name": "time of the stored state"},
        ),
    }


def _label_coords(plan: Plan) -> dict[str, StoredArray]:
    """Labels of the ``component`` and ``state`` dimensions: the family's state labels, or the models'
    own when the state depends on the system (dg) and every model has the same."""
    sizes, fam = plan.sizes, plan.famdef
    coords: dict[str, StoredArray] = {}
    if "component" in sizes:
        coords["component"] = _coordinate(("component",), np.array(["x", "y", "z"]), {"long_name": "Cartesian axis"})
    if fam.state_labels and "state" in sizes:
        if len(fam.state_labels) != sizes["state"]:
            raise ValueError(f"family {fam.name}: {len(fam.state_labels)} state_labels, state dim {sizes['state']}")
        coords["state"] = _coordinate(
            ("state",), np.array(fam.state_labels).astype(str), {"long_name": "entry of the state vector of a body"}
        )
    elif "state" in sizes:  # families whose state depends on the system (dg): the models' own labels
        labels = {_state_labels(m) for m in plan.models.values()}
        if len(labels) == 1 and len(next(iter(labels))) == sizes["state"]:
            coords["state"] = _coordinate(
                ("state",), np.array(next(iter(labels))).astype(str), {"long_name": "entry of the state vector"}
            )
    return coords


def _fixed_param_coords(plan: Plan) -> dict[str, StoredArray]:
    """The system parameters not swept (given or defaults, None left out), as scalar coordinates."""
    spec = plan.spec
    swept = set(spec.swept_params())
    coords: dict[str, StoredArray] = {}
    for p in plan.sysdef.params:
        if p.name in swept:
            continue
        value = spec.params.get(p.name, p.default)
        if value is None:
            continue
        meta = {"units": p.units, "long_name": p.doc, "fixed_parameter": 1}
        coords[p.name] = _coordinate((), _coord_values([value], p.kind)[0], meta)
    return coords


def _group_attrs(plan: Plan) -> dict[str, Any]:
    """The group's attributes: format, the spec and its hash, the first-step rule, provenance, history."""
    spec, sysdef = plan.spec, plan.sysdef
    prov = provenance()
    return {
        "title": f"geosweep results: {spec.name}",
        "geosweep_format": FORMAT_VERSION,
        "sweep_name": spec.name,
        "system": spec.system,
        "system_family": sysdef.family,
        "system_doc": sysdef.doc,
        "spec": spec.canonical_json(),
        "spec_hash": spec.spec_hash,
        "integrator_options": integrator_options_attr(plan),
        FIRST_STEP_ATTR: FIRST_STEP_RULE,
        "T": spec.T,
        "dt_out": spec.dt_out,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **prov,
        "Conventions": "CF-1.11",
        "history": f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} created by geosweep "
        f"{prov.get('geosweep_version', '?')} from spec {spec.name!r} ({spec.spec_hash[:12]})",
        "geosweep_conventions": "status != 0 marks failed or missing cells; select with ds.where(ds.status == 0)",
    }


#: Stored type of a parameter coordinate, by the parameter's declared kind (``str``: fixed-width text).
_COORD_DTYPES: dict[type | None, type] = {bool: np.bool_, int: np.int64, float: np.float64, str: np.str_}


def _coord_values(values, kind: type | None) -> np.ndarray:
    """A coordinate's values in the declared parameter type (``int`` → int64: a spec's integers
    are checked to fit), or as numpy infers them (method axes: names, ``h``, ``tol``)."""
    dtype = _COORD_DTYPES.get(kind)
    if dtype is None:
        values = np.array(values, dtype=object if isinstance(values[0], str) else None)
        return values.astype(str) if values.dtype == object else values
    return np.array(values, dtype=dtype)
