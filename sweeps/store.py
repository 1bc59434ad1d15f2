"""The zarr (format 3) store of a sweep: layout, template, shard writes, resume state.

Layout: one xarray Dataset. Dimensions are the sweep axes (``integrator``, ``h``, swept
parameters) followed by per-cell dimensions (``time``, ``component``, ``body`` …). Every
variable is split into *shards* — blocks of neighbouring cells along the sweep axes
(:func:`shard_shape`: 64 cells in small stores, growing with the store to about
:data:`TARGET_SHARDS` shards, bounded by bytes and by the work an interruption can lose, larger for
cheap cells: at least :data:`MIN_SHARD_SECONDS` of work) — and a
shard is one zarr chunk, so one object per variable per shard. ``xr.open_zarr`` gives dask
chunks of exactly one shard, so reading a variable of the whole store is one read per shard.
(Store format 2 split each shard object into one-cell inner chunks of the zarr sharding codec:
readers got one dask chunk per cell; such stores are still read, resumed, verified and repaired.)

Each shard has exactly one writer: the engine computes the cells of a shard (in parallel
slices) and then one task writes the whole shard — every value variable, then
``status``/``wall_time``/``completed_at``/``checksum``, and last ``done = 1``
(:func:`write_shard`). A shard object is replaced whole (atomic rename locally, one PUT on an
object store), and zarr 3 has no write synchronisers, so two writers never share one. A cell
is complete only when ``done`` is 1: an interrupted shard write is redone on resume, and a
complete cell is never recomputed (a shard rewrite that repairs another cell writes its
stored values back unchanged). Stores written with one cell per chunk (no shards) are read
and resumed the same way, each cell being its own shard.

The template (metadata, coordinates, attrs) is written once; ``run --grow`` later extends it
along sweep axes whose new values are appended (:mod:`geosweep.sweeps.grow`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from geosweep.kernels.status import STATUS_MEANINGS, Status
from geosweep.kernels.vocabulary import RUN_DEPENDENT
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.spec import SweepSpec

if TYPE_CHECKING:
    from geosweep.sweeps.plan import Plan

SWEEP_FLAGS = ("status", "wall_time", "completed_at", "progress", "checksum", "done")
#: Store format written by this geosweep. 2: the family contract's stored names
#: (``final_state``/``snapshot_state``, absolute ``energy_error`` …), integrator coords, shards of
#: one-cell inner chunks; 3: the same names and values, one chunk per shard (:func:`shard_shape`).
FORMAT_VERSION = 3
#: Store formats this geosweep reads, resumes, verifies and repairs (each in its own layout).
READ_FORMATS = (2, 3)

warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification.*")
warnings.filterwarnings("ignore", message=".*Consolidated metadata is currently not part.*")
# the per-cell checkpoint objects (geosweep.sweeps.checkpoints) live under _checkpoints/, outside the zarr hierarchy
warnings.filterwarnings("ignore", message=".*_checkpoints is not recognized as a component.*")


class StoreMismatchError(ValueError):
    """The store exists but was created for a different spec."""


class StoreFormatError(StoreMismatchError):
    """The store was written in another store format (older geosweep): refused, never misread."""


@dataclass(frozen=True)
class StoreRef:
    """Where a store lives: a local path or an fsspec URL (``s3://…``) with options.

    ``storage_options`` may be given as a reference (``env:NAME``, ``@file.json``,
    ``profile:NAME``; :mod:`geosweep.sweeps.credentials`), resolved here; they are left out of the repr.
    ``lease`` is the token of the run writing the store (:class:`geosweep.sweeps.lease.Lease`): writes
    through a ref with a token are fenced by that lease (:func:`geosweep.sweeps.lease.fence`).
    """

    url: str
    storage_options: dict | None = field(default=None, repr=False)
    lease: str | None = field(default=None, repr=False, compare=False)
    carries: bool = field(default=True, repr=False, compare=False)  # keep final carries (geosweep.sweeps.extension)

    @classmethod
    def of(cls, store: str | os.PathLike | StoreRef, storage_options: Any = None) -> StoreRef:
        if isinstance(store, StoreRef):
            return store
        if storage_options is not None and not isinstance(storage_options, dict):
            from geosweep.sweeps.credentials import resolve

            storage_options = resolve(storage_options)
        s = os.fspath(store)
        if "://" not in s:
            s = str(Path(s).expanduser().absolute())
        return cls(s, storage_options)

    @property
    def is_local(self) -> bool:
        return "://" not in self.url

    def open_group(self, mode: Literal["r", "r+", "a", "w", "w-"] = "r+"):
        import zarr

        if self.is_local:
            return zarr.open_group(self.url, mode=mode)
        return zarr.open_group(self.url, mode=mode, storage_options=self.storage_options or {})

    def problem(self, write: bool = True) -> str | None:
        """Why this local store cannot be used (one line), or None: a path that is a file, lies
        under a file, is a non-empty directory that is not a zarr store, has unreadable root
        metadata, or (``write``) is read-only. URL stores: see ``geosweep.flows.output.store_problem``."""
        if not self.is_local:
            return None
        path = Path(self.url)
        if path.exists() or path.is_symlink():
            if not path.is_dir():
                return f"store path {path} is a file, not a zarr store (a directory); choose another --store"
            root = path / "zarr.json"
            if not root.exists():
                if any(path.iterdir()):
                    return f"{path} is a non-empty directory that is not a zarr store; choose another --store"
            else:
                try:
                    with open(root, "rb") as f:
                        meta = json.loads(f.read(64 * 2**20))
                    if not isinstance(meta, dict) or meta.get("node_type") != "group":
                        raise ValueError("not the metadata of a zarr group")
                except (OSError, ValueError) as e:
                    return f"store {path} is damaged: its zarr.json cannot be read ({type(e).__name__}: {e})"[:300]
            if write and not os.access(path, os.W_OK | os.X_OK):
                return f"store {path} is read-only (no write permission, or a read-only file system)"
            if write and not os.access(path.parent, os.W_OK | os.X_OK):
                return f"store {path}: its folder {path.parent} is read-only (the run's lease lives beside the store)"
            return None
        parent = path.parent
        while not (parent.exists() or parent.is_symlink()) and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return f"cannot create the store {path}: {parent} is a file, not a directory"
        if write and not os.access(parent, os.W_OK | os.X_OK):
            return f"cannot create the store {path}: {parent} is read-only"
        return None

    def exists(self) -> bool:
        if self.is_local:
            return (Path(self.url) / "zarr.json").exists()
        try:
            self.open_group("r")
            return True
        except Exception:  # noqa: BLE001 - any failure to open means "no store here"
            return False


# ---------------------------------------------------------------------------------------
# provenance
# ---------------------------------------------------------------------------------------
def _git_revision() -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        rev = out.stdout.strip()
        if out.returncode == 0 and rev:
            dirty = subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance() -> dict[str, str]:
    """Versions, revision and machine that produced a store (stored as attrs)."""
    import importlib.metadata as md

    def ver(pkg: str) -> str:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return "not installed"

    return {
        "geosweep_version": ver("geosweep"),
        "git_revision": _git_revision(),
        "numba_version": ver("numba"),
        "numpy_version": ver("numpy"),
        "xarray_version": ver("xarray"),
        "zarr_version": ver("zarr"),
        "dask_version": ver("dask"),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": str(os.cpu_count()),
        "host": socket.gethostname(),
    }


# ---------------------------------------------------------------------------------------
# template
# ---------------------------------------------------------------------------------------
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


def _cf_attrs(ds, sysdef) -> None:
    """Every ``units`` attribute of ``ds`` (variables and coordinates) through :func:`cf_units`."""
    for var in list(ds.data_vars.values()) + list(ds.coords.values()):
        if "units" not in var.attrs:
            continue
        units = cf_units(var.attrs["units"], sysdef)
        if units is None:
            del var.attrs["units"]
        else:
            var.attrs["units"] = units


def _fill(dtype: str):
    return np.nan if dtype.startswith("float") else -1


#: Cells per shard of a small store (below ``SHARD_CELLS × TARGET_SHARDS`` cells; a monkeypatched 1
#: gives one cell per object in small test stores).
SHARD_CELLS = 64
#: Shards per variable a large store aims at: reading a variable of the whole store is this many
#: object reads (each ~cells/TARGET_SHARDS cells).
TARGET_SHARDS = 64
#: Most cells per shard (any store size).
MAX_SHARD_CELLS = 4096
#: Most bytes of one variable's shard (uncompressed): bounds the memory of a shard write.
SHARD_BYTES = 32 * 2**20
#: Most estimated single-core seconds of short cells per shard: what an interruption before the
#: shard write can lose (cells of :data:`KEEP_SECONDS` or more are kept as complete checkpoints
#: until their shard is written, so they count as this much).
SHARD_SECONDS = 128.0
#: Fewest estimated single-core seconds of work per shard where cells are cheap: a shard write costs
#: some tens of ms (one object per variable), which sub-millisecond cells in shards of
#: :data:`SHARD_CELLS` paid again every few ms of work — such cells share larger shards (measured in
#: benchmarks/README.md, "Cluster-scale stores"; up to :data:`MAX_SHARD_CELLS` and 1/:data:`MIN_SHARDS`
#: of the grid). Tests that want one cell per object set it to 0 along with ``SHARD_CELLS``.
MIN_SHARD_SECONDS = 0.05
#: (as ``geosweep.sweeps.engine.KEEP_SECONDS``) a finished cell this long survives an interruption as a checkpoint
KEEP_SECONDS = 2.0


def cell_bytes(plan: Plan) -> dict[str, int]:
    """Uncompressed bytes per cell of each stored variable (values and run flags)."""
    sizes = plan.sizes
    out = {}
    for d in plan.famdef.diagnostics(plan.first_model):
        out[d.name] = int(np.prod([sizes[x] for x in d.dims], dtype=np.int64)) * np.dtype(d.dtype).itemsize
    for name in SWEEP_FLAGS:
        out[name] = 8
    return out


#: Fewest shards a store is split into (when it has enough cells): a shard becomes visible in
#: the store only once all its cells are done, so even small sweeps show completed cells before
#: the end (long cells show theirs as complete checkpoints meanwhile).
MIN_SHARDS = 2


def _short_cell_seconds(plan: Plan, samples: int = 256) -> float:
    """Mean estimated seconds of a cell (each counted as at most :data:`KEEP_SECONDS`), over up to
    ``samples`` cells spread over the grid."""
    size = plan.grid.size
    step = max(1, size // samples)
    shape = plan.grid.shape
    cost = plan.cost
    if len(plan.models) == int(np.prod(plan.grid.combination_shape)):  # a whole plan: its per-step costs
        per_step, nm = plan.per_step(), plan.grid.n_method_axes  # (plan.per_step is kept: no cost call per cell)

        def cost(cell: Cell) -> float:
            return plan.grid.cost(cell, lambda _name: float(per_step[(cell[0], *cell[nm:])]))

    costs = [min(cost(tuple(int(i) for i in np.unravel_index(k, shape))), KEEP_SECONDS) for k in range(0, size, step)]
    return float(np.mean(costs)) if costs else 0.0


def shard_cells(plan: Plan) -> int:
    """Most cells of one shard: :data:`SHARD_CELLS`, or ``cells / TARGET_SHARDS`` in a large store
    (at most :data:`MAX_SHARD_CELLS`), bounded by :data:`SHARD_SECONDS` of short-cell work, at least
    :data:`MIN_SHARD_SECONDS` of work (cheap cells), bounded by :data:`SHARD_BYTES` per variable and by
    1/:data:`MIN_SHARDS` of the grid."""
    size = plan.grid.size
    per_cell = max(cell_bytes(plan).values())
    target = min(MAX_SHARD_CELLS, max(SHARD_CELLS, -(-size // TARGET_SHARDS)))
    seconds = _short_cell_seconds(plan)
    if seconds > 0:
        if target > SHARD_CELLS:  # a large store: keep the work lost to an interruption bounded
            target = max(SHARD_CELLS, min(target, int(SHARD_SECONDS / seconds)))
        target = max(target, min(MAX_SHARD_CELLS, math.ceil(MIN_SHARD_SECONDS / seconds)))  # cheap cells
    return max(1, min(target, SHARD_BYTES // max(per_cell, 1), size // MIN_SHARDS))


def shard_shape(plan: Plan) -> tuple[int, ...]:
    """Shard extents along the sweep axes: up to :func:`shard_cells` cells, taken from the first
    axes (integrator, step size …) outward. Each shard is one zarr chunk (format 3)."""
    budget = shard_cells(plan)
    out = []
    n = 1
    for extent in plan.grid.shape:
        take = max(1, min(extent, budget // n))
        out.append(take)
        n *= take
    return tuple(out)


def objects_estimate(plan: Plan) -> dict[str, float]:
    """Objects and bytes (uncompressed upper bound) of the finished store of ``plan``.

    ``objects`` counts shard objects plus metadata (a ``zarr.json`` per array and the group,
    the consolidated copy); ``per_cell`` divides by the runnable cells."""
    shards = shard_shape(plan)
    n_shards = int(np.prod([-(-e // s) for e, s in zip(plan.grid.shape, shards)], dtype=np.int64))
    per_cell = cell_bytes(plan)
    n_vars = len(per_cell)
    n_coords = len(plan.grid.dims) + len(plan.sizes) + 6
    objects = n_vars * n_shards + n_vars + n_coords * 2 + 1
    cells = plan.grid.size
    runnable = plan.grid.runnable()
    return {
        "objects": float(objects),
        "bytes": float(sum(per_cell.values()) * cells),
        "shards": float(n_shards),
        "cells_per_shard": float(np.prod(shards)),
        "per_cell": objects / max(runnable, 1),
    }


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


#: per-cell axes whose last row is the state at T
LAST_AT_T = ("time", "snapshot")


def cell_chunks(dims: tuple[str, ...], cell_shape: tuple[int, ...], last_apart: bool) -> tuple[int, ...]:
    """Chunk extents along a variable's per-cell ``dims``: the whole cell, except that with
    ``last_apart`` (a sweep with an adaptive integrator) the last row of ``time``/``snapshot`` — the
    value at T — is an object of its own. An adaptive run with dense output clips its last step to
    land on T; a run to a later T steps across T and interpolates there, so growing the store to a
    later T (:mod:`geosweep.sweeps.extension`) changes the rows inside that step — the last one only
    when the steps are shorter than the output interval — and the objects of the earlier rows stay."""
    return tuple(max(n - 1, 1) if last_apart and d in LAST_AT_T else n for d, n in zip(dims, cell_shape))


def template(plan: Plan) -> tuple[Any, dict[str, dict]]:
    """The lazily filled xarray Dataset describing the store (nothing computed), and its encoding."""
    import dask.array as da
    import xarray as xr

    spec, grid, sysdef, fam = plan.spec, plan.grid, plan.sysdef, plan.famdef
    sizes = dict(plan.sizes)
    sweep_shape = grid.shape
    shards = shard_shape(plan)
    data_vars = {}
    encoding = {}

    last_apart = any(idef.adaptive for idef in plan.idefs.values())

    def add(name: str, dims: tuple[str, ...], dtype: str, attrs: dict, fill) -> None:
        cell_shape = tuple(sizes[d] for d in dims)
        chunks = shards + cell_chunks(dims, cell_shape, last_apart)
        arr = da.full(sweep_shape + cell_shape, fill, dtype=dtype, chunks=chunks)
        data_vars[name] = xr.Variable(grid.dims + dims, arr, attrs)
        encoding[name] = {"fill_value": fill, "chunks": chunks}  # one object per shard (two: cell_chunks)

    for d in fam.diagnostics(plan.first_model):
        attrs: dict[str, Any] = {"units": _units(d.units, sysdef), "long_name": d.long_name}
        if d.description:
            attrs["description"] = d.description
        if d.computed_over:
            attrs["computed_over"] = d.computed_over
        add(d.name, d.dims, d.dtype, attrs, _fill(d.dtype))
    add(
        "status",
        (),
        "int8",
        {
            "long_name": "integration status",
            "flag_values": [int(k) for k in STATUS_MEANINGS],
            "flag_meanings": " ".join(STATUS_MEANINGS.values()),
            "description": "0 ok; >0 the trajectory failed (see flag_meanings); -1 not run yet; "
            "-2 not applicable (filler cell of a mixed fixed-step/adaptive grid)",
        },
        -1,
    )
    add("wall_time", (), "float64", {"units": "s", "long_name": "wall-clock time of the cell"}, np.nan)
    add(
        "completed_at",
        (),
        "float64",
        {"units": "seconds since 1970-01-01", "long_name": "time the cell was written (provenance stamp)"},
        np.nan,
    )
    add(
        "progress",
        (),
        "float64",
        {"units": "1", "long_name": "fraction of the cell's time span integrated (1 once complete)"},
        0.0,
    )
    add(
        "checksum",
        (),
        "int64",
        {"long_name": "checksum of the cell's stored values (geosweep.sweeps.store.cell_checksum; geosweep verify)"},
        0,
    )
    add("done", (), "int8", {"long_name": "1 once every value of the cell is written"}, 0)

    coords: dict[str, Any] = {}
    for i, axis in enumerate(grid.axes):
        kind = sysdef.param(axis.name).kind if i >= grid.n_method_axes else None
        values = _coord_values(axis.values, kind)
        coords[axis.name] = xr.Variable((axis.name,), values, {"units": axis.units, "long_name": axis.doc})
    idefs = [plan.idefs[name] for name in spec.integrators]
    orders = [min(i.order_for(m) for m in plan.models.values()) for i in idefs]  # on this sweep's models
    for name, values, doc in (
        ("integrator_family", np.array([i.family for i in idefs]).astype(str), "family the integrator belongs to"),
        ("integrator_order", np.array(orders, dtype=np.int64), "order of accuracy"),
        ("integrator_adaptive", np.array([i.adaptive for i in idefs], dtype=bool), "adaptive (swept over tol)"),
    ):
        coords[name] = xr.Variable(("integrator",), values, {"long_name": doc})
    coords["time"] = xr.Variable(
        ("time",), np.arange(sizes["time"]) * spec.dt_out, {"units": sysdef.time_units, "long_name": "time"}
    )
    coords["snapshot_time"] = xr.Variable(
        ("snapshot",),
        np.arange(sizes["snapshot"]) * spec.snapshot_interval,
        {"units": sysdef.time_units, "long_name": "time of the stored state"},
    )
    if "component" in sizes:
        coords["component"] = xr.Variable(("component",), np.array(["x", "y", "z"]), {"long_name": "Cartesian axis"})
    if fam.state_labels and "state" in sizes:
        if len(fam.state_labels) != sizes["state"]:
            raise ValueError(f"family {fam.name}: {len(fam.state_labels)} state_labels, state dim {sizes['state']}")
        coords["state"] = xr.Variable(
            ("state",), np.array(fam.state_labels).astype(str), {"long_name": "entry of the state vector of a body"}
        )
    elif "state" in sizes:  # families whose state depends on the system (dg): the models' own labels
        labels = {_state_labels(m) for m in plan.models.values()}
        if len(labels) == 1 and len(next(iter(labels))) == sizes["state"]:
            coords["state"] = xr.Variable(
                ("state",), np.array(next(iter(labels))).astype(str), {"long_name": "entry of the state vector"}
            )
    for dim, n in sizes.items():
        if dim not in coords:
            coords[dim] = xr.Variable((dim,), np.arange(n), {"long_name": f"{dim} index"})
    swept = set(spec.swept_params())
    for p in sysdef.params:
        if p.name in swept:
            continue
        value = spec.params.get(p.name, p.default)
        if value is None:
            continue
        meta = {"units": p.units, "long_name": p.doc, "fixed_parameter": 1}
        coords[p.name] = xr.Variable((), _coord_values([value], p.kind)[0], meta)
    options = {name: grid.options(name) for name in spec.integrators}
    prov = provenance()
    attrs = {
        "title": f"geosweep results: {spec.name}",
        "geosweep_format": FORMAT_VERSION,
        "sweep_name": spec.name,
        "system": spec.system,
        "system_family": sysdef.family,
        "system_doc": sysdef.doc,
        "spec": spec.canonical_json(),
        "spec_hash": spec.spec_hash,
        "integrator_options": json.dumps(options, sort_keys=True),
        "T": spec.T,
        "dt_out": spec.dt_out,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **prov,
        "Conventions": "CF-1.11",
        "history": f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} created by geosweep "
        f"{prov.get('geosweep_version', '?')} from spec {spec.name!r} ({spec.spec_hash[:12]})",
        "geosweep_conventions": "status != 0 marks failed or missing cells; select with ds.where(ds.status == 0)",
    }
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    _cf_attrs(ds, sysdef)
    return ds, encoding


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


def _readable_format(found: Any) -> bool:
    """True for a format number this geosweep reads (:data:`READ_FORMATS`; not ``True``, ``"2"`` or ``2.0``)."""
    return isinstance(found, int) and not isinstance(found, bool) and found in READ_FORMATS


def check_format(url: str, attrs: dict) -> None:
    """Refuse a store written in another format (raises :class:`StoreFormatError`, store untouched)."""
    found = attrs.get("geosweep_format")
    if _readable_format(found):
        return
    if "spec" not in attrs and found is None:
        raise StoreFormatError(f"{url} exists but is not a geosweep store (no spec in its attributes)")
    if found is None:
        has = "an unversioned store format (before format 2)"
    elif isinstance(found, int) and not isinstance(found, bool):
        has = f"store format {found}"
    else:  # "2" is not format 2: a hand-edited or foreign attribute
        has = f"an unrecognised store format (geosweep_format = {_echo(found)}, not a format number)"
    by = attrs.get("geosweep_version")
    raise StoreFormatError(
        f"store {url} has {has}{f', written by geosweep {by}' if by else ''}; this geosweep reads "
        f"store formats {' and '.join(map(str, READ_FORMATS))} only (stored names changed), so it refuses the store "
        f"rather than misread it. "
        f"Write a new store (another --store path) to run or resume this sweep, or open the old store with the "
        f"geosweep version that wrote it."
    )


#: Group attribute written last when a store's template is complete (see :func:`ensure_store`).
CREATED_ATTR = "geosweep_created"


def _remove(ref: StoreRef) -> None:
    """Delete a store (only ever one this module was creating and did not finish)."""
    if ref.is_local:
        import shutil

        shutil.rmtree(ref.url, ignore_errors=True)
        return
    import fsspec

    fs, root = fsspec.core.url_to_fs(ref.url, **(ref.storage_options or {}))
    try:
        fs.rm(root, recursive=True)
    except FileNotFoundError:
        pass


def _no_results(group) -> bool:
    """True if no cell of the group was ever computed (status still only ``not_run``/``not_applicable``)."""
    try:
        return bool((np.asarray(group["status"][...]) < 0).all())
    except Exception:  # noqa: BLE001 - arrays missing or unreadable: creation did not get that far
        return True


def ensure_store(plan: Plan, ref: StoreRef, log=None, grow: bool = False) -> bool:
    """Create the store from the template, or check an existing one belongs to ``plan``
    (``grow``: or grow it to ``plan`` when ``plan``'s spec adds values to its axes, :mod:`geosweep.sweeps.grow`).

    Returns True if the store was created. Raises :class:`StoreFormatError` if the store has
    another format and :class:`StoreMismatchError` if it holds a different sweep (it is never
    modified in either case).

    Creation is crash-safe: the template (whose attrs name the format and the spec) is written
    first, then the not-applicable fillers, and the marker attr ``geosweep_created`` last. A
    store of ours without the marker holds no result (creation was interrupted, or failed): it
    is deleted and created again. A failed creation removes what it wrote — only that, and only
    while the run still holds the lease; every write is fenced by it (:func:`geosweep.sweeps.lease.fence`).
    """
    from geosweep.sweeps.lease import fence

    with fence(ref):  # no takeover of the lease while this run creates or removes the store
        return _create_or_check(plan, ref, log, grow)


def _create_or_check(plan: Plan, ref: StoreRef, log=None, grow: bool = False) -> bool:
    ds, encoding = template(plan)
    if ref.exists():
        group = ref.open_group("r")
        attrs = dict(group.attrs)
        ours = _readable_format(attrs.get("geosweep_format")) and not attrs.get(CREATED_ATTR)
        # killed before the template's attributes were written: a bare group holding nothing but
        # (some of) the arrays this template creates
        bare = not attrs and set(group.keys()) <= set(ds.variables)
        if (ours or bare) and _no_results(group):
            if log:
                log(f"store {ref.url}: its creation was interrupted; creating it again")
            _remove(ref)
        else:
            check_format(ref.url, attrs)
            from geosweep.sweeps.grow import GROWING_ATTR, grow_store

            if GROWING_ATTR in attrs or (grow and attrs.get("spec_hash") != plan.spec.spec_hash):
                grow_store(plan, ref, attrs, ds, log)  # refused (StoreMismatchError) unless it only adds values
                return False
            if attrs.get("spec_hash") != plan.spec.spec_hash or not _spec_attr_intact(attrs):
                raise StoreMismatchError(_mismatch_message(ref.url, attrs, plan.spec))
            return False
    from zarr.errors import ContainsArrayError, ContainsGroupError

    kwargs: dict[str, Any] = {"zarr_format": 3, "mode": "w-", "compute": False, "encoding": encoding}
    if not ref.is_local:
        kwargs["storage_options"] = ref.storage_options or {}
    try:
        ds.to_zarr(ref.url, consolidated=True, **kwargs)
        group = ref.open_group("r+")
        filler = ~plan.grid.applicable_mask()
        if filler.any():  # whole-array writes: each shard object written once
            group["status"][...] = np.where(filler, np.int8(Status.NOT_APPLICABLE), np.int8(-1)).astype(np.int8)
            group["done"][...] = filler.astype(np.int8)
        group.attrs[CREATED_ATTR] = 1
        _consolidate(ref)
    except (ContainsGroupError, ContainsArrayError, FileExistsError) as e:  # made meanwhile by another: not ours
        from geosweep.sweeps.lease import StoreBusyError

        raise StoreBusyError(f"store {ref.url} was created by another process while this run created it") from e
    except BaseException:
        _remove_ours(ref)
        raise
    return True


def _remove_ours(ref: StoreRef) -> None:
    """Remove a store this run was creating, only while it still holds the store's lease."""
    from geosweep.sweeps.lease import LeaseLost, fence

    try:
        with fence(ref):
            _remove(ref)
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
    from geosweep.sweeps.lease import fence

    status[filler], done[filler] = np.int8(Status.NOT_APPLICABLE), np.int8(1)
    with fence(ref):
        group = ref.open_group("r+")
        group["status"][...] = status
        group["done"][...] = done
    return int(lost.sum())


def _consolidate(ref: StoreRef) -> None:
    import warnings

    import zarr

    opts: dict[str, Any] = {} if ref.is_local else {"storage_options": ref.storage_options or {}}
    try:
        with warnings.catch_warnings():  # the checkpoint objects beside the arrays are not zarr nodes
            warnings.filterwarnings("ignore", message="Object at .* is not recognized as a component")
            zarr.consolidate_metadata(ref.url, **opts)
    except Exception:  # noqa: BLE001 - consolidation is an optimisation only
        pass


def _echo(value: Any, limit: int = 100) -> str:
    """``repr(value)`` cut to about ``limit`` characters (a stored attribute as echoed in a message)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _spec_attr_intact(attrs: dict) -> bool:
    """True if the stored ``spec`` text is the one its ``spec_hash`` was computed from (not edited)."""
    text = attrs.get("spec")
    return isinstance(text, str) and hashlib.sha256(text.encode()).hexdigest() == attrs.get("spec_hash")


def _mismatch_message(url: str, attrs: dict, spec: SweepSpec) -> str:
    old_text = attrs.get("spec")
    if not old_text:
        return f"{url} exists but is not a geosweep store (no spec in its attributes); choose another --store"
    if attrs.get("spec_hash") == spec.spec_hash and not _spec_attr_intact(attrs):
        return (
            f"store {url}: its spec attribute was changed after the store was written (it no longer matches "
            f"its spec_hash); refusing to resume a store whose sweep cannot be told. Use a new --store path."
        )
    try:
        old = json.loads(old_text) if isinstance(old_text, str) else None
    except ValueError:
        old = None
    if not isinstance(old, dict):  # e.g. edited by hand: the hashes differ, the text says nothing
        return (
            f"store {url} was created by a different sweep spec (its spec attribute is not a spec: "
            f"{_echo(old_text)}); refusing to mix results. Use a new --store path (or delete the old store)."
        )
    new = json.loads(spec.canonical_json())
    from geosweep.sweeps.compact import MAX_ITEMS, joined

    details = joined(_differences("", old, new), most=MAX_ITEMS, sep="; ")
    from geosweep.sweeps.grow import grow_hint

    hint = grow_hint(attrs, spec.canonical_json())
    return (
        f"store {url} was created by a different sweep spec ({_echo(old.get('name'))}); refusing to mix results. "
        f"Differences: {details}. Use a new --store path (or delete the old store).{hint}"
    )


def _differences(key: str, old: Any, new: Any) -> list[str]:
    """``field: store has …, spec has …`` per differing field of two spec dicts (nested tables by
    dotted name, ``params.seed``), each bounded however long its axes (:func:`_spec_value`)."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return [line for k in keys for line in _differences(f"{key}.{k}" if key else k, old.get(k), new.get(k))]
    text = f"{key}: store has {_spec_value(old)}, spec has {_spec_value(new)}"
    if isinstance(old, list) and isinstance(new, list):
        try:
            only_old, only_new = len(set(old) - set(new)), len(set(new) - set(old))
        except TypeError:  # unhashable entries (a hand-edited spec): the values say enough
            return [text]
        text += f" ({only_old} only in the store, {only_new} only in the spec)"
    return [text]


def _spec_value(value: Any) -> str:
    """A spec value in a message: a short list in full, a long one by its count and first and last
    values (exact, as ``repr``), anything else as :func:`_echo`."""
    from geosweep.sweeps.compact import is_large

    if isinstance(value, list) and is_large(value):
        return f"{len(value)} values, {_echo(value[0], 40)} … {_echo(value[-1], 40)}"
    return _echo(value)


# ---------------------------------------------------------------------------------------
# reading progress and writing cells
# ---------------------------------------------------------------------------------------
def done_mask(ref: StoreRef, log=None) -> np.ndarray:
    """Boolean array over the sweep axes: True where the cell is complete.

    A ``done`` chunk that cannot be read (damaged) counts as not done and is reset, so the
    cell is recomputed instead of the store becoming unusable; a flag array that is missing
    altogether is rebuilt first (:func:`geosweep.sweeps.repair.repair_flags`: cells whose checksum
    verifies stay done). Call it as the store's writer (under its lease)."""
    from geosweep.sweeps.repair import repair_flags

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


class ArrayCache(dict):
    """``name → zarr array`` of one open group, each opened once (saves a metadata read per write)."""

    def __init__(self, group):
        super().__init__()
        self.group = group

    def __missing__(self, name: str):
        arr = self[name] = self.group[name]
        return arr


def _stored(arr, value) -> np.ndarray:
    """``value`` as the cell's chunk stores it: padded with the fill value to the per-cell shape."""
    value = np.asarray(value, dtype=arr.dtype)
    shape = arr.shape[len(arr.shape) - value.ndim :] if value.ndim else ()
    if value.shape == shape:
        return value
    out = np.full(shape, arr.fill_value, dtype=arr.dtype)
    out[tuple(slice(0, n) for n in value.shape)] = value
    return out


#: stored values that differ from run to run (timings, stamps): not part of a cell's checksum
CHECKSUM_SKIP = RUN_DEPENDENT


_DTYPE_NAMES: dict[np.dtype, bytes] = {}


def _dtype_name(dtype: np.dtype) -> bytes:
    """``str(dtype).encode()``, remembered (numpy builds the name anew on every call)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).encode()
    return name


def cell_checksum(arrays: dict[str, np.ndarray], status: int) -> int:
    """A 63-bit checksum of a cell: its status and every stored value (name, dtype, bytes),
    timings (:data:`CHECKSUM_SKIP`) left out, so identical physics gives identical checksums."""
    h = _checksum_start(status)
    for name in sorted(arrays):
        if name in CHECKSUM_SKIP:
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode() + _dtype_name(a.dtype) + str(a.shape).encode())
        h.update(a.tobytes())
    return _checksum_end(h)


def _checksum_start(status: int):
    """The hash :func:`cell_checksum` feeds, with the status in it."""
    h = hashlib.blake2b(digest_size=8)
    h.update(str(int(status)).encode())
    return h


def _checksum_end(h) -> int:
    return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1) or 1


#: bytes of cell rows hashed at once by :func:`shard_checksums` (bounds its extra memory)
CHECKSUM_BATCH_BYTES = 64 << 20


def shard_checksums(blocks: dict[str, np.ndarray], status: np.ndarray, cells: np.ndarray | None = None) -> np.ndarray:
    """:func:`cell_checksum` of many cells of one shard at once, bitwise the same.

    ``blocks``: each stored variable's block over the shard (sweep axes first, then the per-cell
    axes), ``status``: the block of status codes (the sweep axes), ``cells``: boolean mask over
    them of the cells to check (default: all). Returns the checksums of those cells, in C order
    of the sweep axes. Each cell's bytes are laid out once for all cells (header and values of
    every variable, by name) and hashed row by row: no per-variable Python work per cell."""
    import hashlib

    status = np.asarray(status)
    mask = np.ones(status.shape, bool) if cells is None else np.asarray(cells, bool)
    picked = np.flatnonzero(mask.ravel())
    parts: list[tuple[np.ndarray, bytes]] = []  # (per-cell bytes (n_cells, k), header) by variable
    for name in sorted(blocks):
        if name in CHECKSUM_SKIP:
            continue
        a = np.asarray(blocks[name])
        cell_shape = a.shape[status.ndim :] or (1,)  # np.ascontiguousarray of a cell: at least 1-d
        header = name.encode() + _dtype_name(a.dtype) + str(cell_shape).encode()
        rows = np.ascontiguousarray(a.reshape(status.size, -1)[picked]).view(np.uint8)
        parts.append((rows.reshape(len(picked), -1), header))
    width = sum(len(h) + r.shape[1] for r, h in parts)
    step = max(1, CHECKSUM_BATCH_BYTES // max(width, 1))
    texts = {c: str(c).encode() for c in np.unique(status).tolist()}
    codes = [texts[c] for c in status.ravel()[picked].tolist()]
    digests: list[bytes] = []
    for lo in range(0, len(picked), step):
        hi = min(lo + step, len(picked))
        pieces = []
        for rows, header in parts:
            pieces.append(np.broadcast_to(np.frombuffer(header, np.uint8), (hi - lo, len(header))))
            pieces.append(rows[lo:hi])
        batch = np.concatenate(pieces, axis=1) if pieces else np.zeros((hi - lo, 0), np.uint8)
        for k in range(hi - lo):
            h = hashlib.blake2b(codes[lo + k], digest_size=8)
            h.update(batch[k])
            digests.append(h.digest())
    sums = np.frombuffer(b"".join(digests), dtype="<u8") & np.uint64((1 << 63) - 1)  # as int.from_bytes(…, "little")
    return np.where(sums == 0, np.uint64(1), sums).astype(np.int64)


def read_blocks(arrays: dict[str, Any], region: tuple[slice, ...]) -> dict[str, np.ndarray | BaseException]:
    """``{name: arr[region]}`` read concurrently (one event-loop batch); a read that fails gives its exception."""
    import asyncio

    from zarr.core.sync import sync

    names = list(arrays)

    async def read_all() -> list:
        return await asyncio.gather(*(arrays[n]._async_array.getitem(region) for n in names), return_exceptions=True)

    return {n: (r if isinstance(r, BaseException) else np.asarray(r)) for n, r in zip(names, sync(read_all()))}


class _ShardChecksums:
    """The :func:`cell_checksum` of each cell of a shard write, fed variable by variable in sorted
    name order: whole shards of values at once (:meth:`add_rows`, one hash update per cell at the
    end) or one cell's value (:meth:`add_one`) — the same bytes in the same order either way."""

    def __init__(self, cells: list[Cell], statuses: list[int]) -> None:
        self.cells = cells
        self.hashes = [_checksum_start(s) for s in statuses]
        self.pending: list[np.ndarray] = []

    def add_rows(self, head: bytes, rows: np.ndarray) -> None:
        """``head`` then row ``i`` of ``rows`` (C order) into cell ``i``'s hash."""
        n = len(self.cells)
        self.pending.append(np.broadcast_to(np.frombuffer(head, dtype=np.uint8), (n, len(head))))
        self.pending.append(np.ascontiguousarray(rows).reshape(n, -1).view(np.uint8))

    def add_one(self, i: int, head: bytes, value: np.ndarray) -> None:
        self._flush()
        self.hashes[i].update(head)
        self.hashes[i].update(np.ascontiguousarray(value).tobytes())

    def _flush(self) -> None:
        if self.pending:
            joined = np.concatenate(self.pending, axis=1)
            for h, row in zip(self.hashes, joined):
                h.update(row)
            self.pending = []

    def result(self) -> dict[Cell, int]:
        self._flush()
        return {c: _checksum_end(h) for c, h in zip(self.cells, self.hashes)}


_MISSING = object()


def _fill_block(arr, name: str, data: np.ndarray, values: list[dict], index: tuple, sums: _ShardChecksums) -> None:
    """Put each cell's value of ``name`` into the shard block ``data`` as :func:`_stored` stores it
    (``values[i]``: cell ``i``'s values, at ``data[index][i]``) and feed it to the cells' checksums.
    The common case — every cell has the value, of the per-cell shape — is one vectorised
    assignment; otherwise cell by cell (padded by :func:`_stored`)."""
    nd = len(index)
    cell_shape = tuple(int(n) for n in data.shape[nd:])
    skip = name in CHECKSUM_SKIP
    head = name.encode() + _dtype_name(data.dtype)
    rows = None
    if all(name in v for v in values):
        try:
            rows = np.array([v[name] for v in values], dtype=data.dtype)
        except ValueError:  # values of different shapes
            rows = None
        if rows is not None and rows.shape != (len(values), *cell_shape):
            rows = None
    if rows is not None:
        data[index] = rows
        if not skip:  # the shape as cell_checksum sees it: np.ascontiguousarray makes scalars (1,)
            sums.add_rows(head + str(cell_shape or (1,)).encode(), rows)
        return
    for i, vals in enumerate(values):
        v = vals.get(name, _MISSING)
        if v is _MISSING:
            continue
        value = _stored(arr, v)
        data[tuple(ix[i] for ix in index)] = value
        if not skip:
            sums.add_one(i, head + str(np.shape(value) or (1,)).encode(), value)


def sweep_shards(group) -> tuple[int, ...]:
    """Shard extents along the sweep axes of an open store (1, 1, … for a store without shards)."""
    arr = group["done"]  # sweep dims only
    return tuple(int(n) for n in (getattr(arr, "shards", None) or arr.chunks))


def shard_of(cell: Cell, shards: tuple[int, ...]) -> tuple[int, ...]:
    """Index of the shard holding ``cell``."""
    return tuple(int(c) // s for c, s in zip(cell, shards))


def shard_region(index: tuple[int, ...], shards: tuple[int, ...], shape: tuple[int, ...]) -> tuple[slice, ...]:
    """The sweep-axis slices of shard ``index`` (edge shards are cut at the array's shape)."""
    return tuple(slice(i * s, min((i + 1) * s, n)) for i, s, n in zip(index, shards, shape))


def group_by_shard(cells: list[Cell], shards: tuple[int, ...]) -> dict[tuple[int, ...], list[Cell]]:
    """``cells`` grouped by shard, in order of first appearance."""
    out: dict[tuple[int, ...], list[Cell]] = {}
    for cell in cells:
        out.setdefault(shard_of(cell, shards), []).append(tuple(int(i) for i in cell))
    return out


#: one computed cell: (values by stored name, status, wall time in s)
CellOutput = tuple[dict[str, Any], int, float]


def set_blocks(blocks: list[tuple[Any, np.ndarray]], region: tuple[slice, ...]) -> None:
    """``arr[region] = data`` for every ``(arr, data)``, all at once (one trip through zarr's event
    loop, the objects encoded and stored concurrently); returns when every block is written."""
    if not all(hasattr(arr, "_async_array") for arr, _ in blocks):  # not a zarr 3 Array: one by one
        for arr, data in blocks:
            arr[region] = data
        return
    import asyncio

    from zarr.core.sync import sync

    async def write_all() -> list:
        # every write ends before this returns (also when one fails): none outlives the caller's fence
        return await asyncio.gather(
            *(arr._async_array.setitem(region, data) for arr, data in blocks), return_exceptions=True
        )

    for result in sync(write_all()):
        if isinstance(result, BaseException):
            raise result


def write_shard(group, outputs: dict[Cell, CellOutput], rows: dict[str, int] | None = None) -> list[Cell]:
    """Write computed cells of ONE shard: every value variable, then the flags and checksums,
    then ``done`` — each variable's shard as one whole-object write. Returns the cells written.
    ``rows`` (a grown store, :mod:`geosweep.sweeps.extension`): per-cell axis → first row to write; the rows
    before it are compared with the stored ones, and written only from the first that differs
    (the checksums still cover every row of the given values).

    Cells already ``done`` in the store are left as stored (their values are read and written
    back unchanged with the shard); so are filler cells. ``group`` is a zarr group or an
    :class:`ArrayCache` of one. The caller must be the shard's only writer.
    """
    if not outputs:
        return []
    shards = sweep_shards(group)
    shape = tuple(group["done"].shape)
    index = shard_of(next(iter(outputs)), shards)
    if any(shard_of(c, shards) != index for c in outputs):
        raise ValueError("write_shard: cells of more than one shard")
    region = shard_region(index, shards, shape)
    local = {c: tuple(int(ci) - r.start for ci, r in zip(c, region)) for c in outputs}
    done = np.asarray(group["done"][region]).astype(np.int8)
    cells = [c for c in outputs if done[local[c]] != 1]
    if not cells:
        return []
    keep = bool(done.any()) or bool(rows)  # the shard holds finished (or filler) cells: keep their stored values
    block_shape = tuple(r.stop - r.start for r in region)

    def block(arr) -> np.ndarray:
        if keep:
            return np.array(arr[region])
        return np.full(block_shape + tuple(arr.shape[len(shape) :]), arr.fill_value, dtype=arr.dtype)

    sums = _ShardChecksums(cells, [outputs[c][1] for c in cells])
    cell_values = [outputs[c][0] for c in cells]
    cell_index = tuple(np.array([local[c][k] for c in cells], dtype=np.intp) for k in range(len(shape)))
    values: list[Any] = []  # (arr, block) or, for grown rows, (arr, block, stored block)
    names = list(dict.fromkeys(name for v in cell_values for name in v))
    for name in sorted(names):  # the checksums take the names in sorted order
        try:
            arr = group[name]
        except KeyError:  # a value this store was not created with (a newer diagnostic): not stored
            continue
        data = block(arr)
        stored = data.copy() if rows else None
        _fill_block(arr, name, data, cell_values, cell_index, sums)
        values.append((arr, data, stored) if rows else (arr, data))
    if rows:
        values = _rows_from(values, region, rows)
    else:
        set_blocks(values, region)
    now = time.time()
    checksums = sums.result()
    flags = {
        "status": lambda c: np.int8(outputs[c][1]),
        "wall_time": lambda c: float(outputs[c][2]),
        "completed_at": lambda c: now,
        "progress": lambda c: 1.0,
        "checksum": lambda c: np.int64(checksums[c]),
    }
    blocks = []
    for name, value in flags.items():
        arr = group[name]
        data = block(arr)
        for c in cells:
            data[local[c]] = value(c)
        blocks.append((arr, data))
    set_blocks(blocks, region)
    for c in cells:
        done[local[c]] = 1
    group["done"][region] = done  # the completion marker, last
    return cells


def _rows_from(
    values: list[tuple[Any, np.ndarray, np.ndarray]], region: tuple[slice, ...], rows: dict[str, int]
) -> list:
    """Write each ``(arr, block, stored block)`` of a shard from the first of ``rows`` along its
    per-cell axes, or from the first row where the block differs (bitwise) from what is stored, if
    earlier: the rows before are left as stored, compared instead of rewritten (a grown store's
    recomputed samples). Arrays with no such axis are written whole. Returns ``(arr, block)``."""
    by_region: dict[tuple, list[tuple[Any, np.ndarray]]] = {}
    for arr, data, stored in values:
        dims = tuple(getattr(getattr(arr, "metadata", None), "dimension_names", None) or ())
        sub = list(region) + [slice(None)] * (data.ndim - len(region))
        for k in range(len(region), data.ndim):
            if k < len(dims) and rows.get(dims[k] or "", 0) > 0:
                start = min(rows[dims[k]], data.shape[k], _first_differing(data, stored, k))
                sub[k] = slice(start, None)
        local = tuple(slice(None) if k < len(region) else sub[k] for k in range(data.ndim))
        key = tuple((s.start, s.stop) for s in sub)
        by_region.setdefault(key, []).append((arr, data[local]))
    for key, blocks in by_region.items():
        set_blocks(blocks, tuple(slice(a, b) for a, b in key))
    return [(arr, data) for arr, data, _ in values]


def _first_differing(new: np.ndarray, old: np.ndarray, axis: int) -> int:
    """The first index along ``axis`` where ``new`` and ``old`` differ bitwise (their length if none)."""
    a, b = np.ascontiguousarray(new), np.ascontiguousarray(old)
    if a.dtype.kind in "fiub" and a.dtype.itemsize in (1, 2, 4, 8):  # bitwise (NaN payloads, -0.0 included)
        a, b = a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
    differs = np.asarray(a != b)
    along = differs.any(axis=tuple(k for k in range(differs.ndim) if k != axis)) if differs.ndim > 1 else differs
    hits = np.flatnonzero(along)
    return int(hits[0]) if hits.size else int(a.shape[axis])


def verify(ref: StoreRef, value_names: list[str] | None = None) -> dict[str, list[Cell]]:
    """Check every finished cell against its checksum, reading the store shard by shard.

    Returns ``{"damaged": cells whose values or checksum cannot be read or do not match,
    "flags": cells whose ``done`` flag could not be read}``; ``value_names`` are the stored
    variables (default: every variable with the store's sweep dims, except the run flags).
    A shard's variables are read concurrently and its cells checked at once
    (:func:`shard_checksums`); a shard with an unreadable object is checked cell by cell.
    """
    group = ref.open_group("r")
    shape = tuple(group["status"].shape)
    if value_names is None:
        value_names = [name for name in open_results(ref).data_vars if name not in SWEEP_FLAGS]
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


def shape_of(region: tuple[slice, ...]) -> tuple[int, ...]:
    """Extents of a region of slices."""
    return tuple(r.stop - r.start for r in region)


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
    from geosweep.sweeps.lease import fence
    from geosweep.sweeps.repair import drop_undecodable

    with fence(ref):
        drop_undecodable(ref, cells)
        group = ref.open_group("r+")
        for cell in cells:
            group["done"][cell] = np.int8(0)
            group["checksum"][cell] = np.int64(0)
            group["progress"][cell] = 0.0


def record_run(ref: StoreRef, entry: dict[str, Any]) -> None:
    """Append a run record (who, when, how many cells) to the store's ``runs`` attribute."""
    from geosweep.sweeps.lease import fence

    with fence(ref):
        group = ref.open_group("r+")
        runs = list(group.attrs.get("runs", []))
        runs.append(entry)
        group.attrs["runs"] = runs
        line = f"{entry.get('finished', '')} geosweep run: {entry.get('cells_run', 0)} cells computed"
        group.attrs["history"] = "\n".join(x for x in (group.attrs.get("history", ""), line) if x)  # CF history
        _consolidate(ref)


def open_results(store: str | os.PathLike | StoreRef, storage_options: dict | None = None):
    """Open a store as a lazily loaded xarray Dataset (``xr.open_zarr``).

    Raises :class:`StoreFormatError` for a store of another format (e.g. written before format 2).
    """
    import xarray as xr

    ref = StoreRef.of(store, storage_options)
    kwargs: dict[str, Any] = {}
    if not ref.is_local:
        kwargs["storage_options"] = ref.storage_options or {}
    ds = xr.open_zarr(ref.url, **kwargs)
    check_format(ref.url, dict(ds.attrs))
    return ds
