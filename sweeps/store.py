"""The zarr (format 3) store of a sweep: layout, template, per-cell writes, resume state.

Layout: one xarray Dataset. Dimensions are the sweep axes (``integrator``, ``h``, swept
parameters) followed by per-cell dimensions (``time``, ``component``, ``body`` …). Every
variable is chunked with size 1 along each sweep axis, so each cell owns whole chunks and
parallel writers never touch the same chunk (zarr 3 has no write synchronisers).

The template (metadata, coordinates, attrs) is written once. A cell is written by one task:
all its values, then ``status``/``wall_time``/``completed_at``, and last ``done = 1``; a
cell is complete only when ``done`` is 1, so an interrupted write is redone on resume and a
complete cell is never rewritten.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kernels.status import STATUS_MEANINGS, Status
from sweeps.grid import Cell
from sweeps.spec import SweepSpec

if TYPE_CHECKING:
    from sweeps.plan import Plan

SWEEP_FLAGS = ("status", "wall_time", "completed_at", "progress", "checksum", "done")
#: Store format written (and the only one read) by this geosweep. 2: the family contract's
#: stored names (``final_state``/``snapshot_state``, absolute ``energy_error`` …), integrator coords.
FORMAT_VERSION = 2

warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification.*")
warnings.filterwarnings("ignore", message=".*Consolidated metadata is currently not part.*")
# the per-cell checkpoint objects (sweeps.checkpoints) live under _checkpoints/, outside the zarr hierarchy
warnings.filterwarnings("ignore", message=".*_checkpoints is not recognized as a component.*")


class StoreMismatchError(ValueError):
    """The store exists but was created for a different spec."""


class StoreFormatError(StoreMismatchError):
    """The store was written in another store format (older geosweep): refused, never misread."""


@dataclass(frozen=True)
class StoreRef:
    """Where a store lives: a local path or an fsspec URL (``s3://…``) with options."""

    url: str
    storage_options: dict | None = None

    @classmethod
    def of(cls, store: str | os.PathLike | StoreRef, storage_options: dict | None = None) -> StoreRef:
        if isinstance(store, StoreRef):
            return store
        s = os.fspath(store)
        if "://" not in s:
            s = str(Path(s).expanduser().absolute())
        return cls(s, storage_options)

    @property
    def is_local(self) -> bool:
        return "://" not in self.url

    def open_group(self, mode: str = "r+"):
        import zarr

        if self.is_local:
            return zarr.open_group(self.url, mode=mode)
        return zarr.open_group(self.url, mode=mode, storage_options=self.storage_options or {})

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


def _fill(dtype: str):
    return np.nan if dtype.startswith("float") else -1


def template(plan: Plan) -> tuple[Any, dict[str, dict]]:
    """The lazily filled xarray Dataset describing the store (nothing computed), and its encoding."""
    import dask.array as da
    import xarray as xr

    spec, grid, sysdef, fam = plan.spec, plan.grid, plan.sysdef, plan.famdef
    sizes = dict(plan.sizes)
    sweep_shape = grid.shape
    sweep_chunks = (1,) * len(sweep_shape)
    data_vars = {}
    encoding = {}

    def add(name: str, dims: tuple[str, ...], dtype: str, attrs: dict, fill) -> None:
        shape = sweep_shape + tuple(sizes[d] for d in dims)
        chunks = sweep_chunks + tuple(sizes[d] for d in dims)
        arr = da.full(shape, fill, dtype=dtype, chunks=chunks)
        data_vars[name] = xr.Variable(grid.dims + dims, arr, attrs)
        encoding[name] = {"fill_value": fill}

    for d in fam.diagnostics(plan.first_model):
        attrs = {"units": _units(d.units, sysdef), "long_name": d.long_name}
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
        {"long_name": "checksum of the cell's stored values (sweeps.store.cell_checksum; geosweep verify)"},
        0,
    )
    add("done", (), "int8", {"long_name": "1 once every value of the cell is written"}, 0)

    coords: dict[str, Any] = {}
    for axis in grid.axes:
        values = np.array(axis.values, dtype=object if isinstance(axis.values[0], str) else None)
        if values.dtype == object:
            values = values.astype(str)
        coords[axis.name] = xr.Variable((axis.name,), values, {"units": axis.units, "long_name": axis.doc})
    idefs = [plan.idefs[name] for name in spec.integrators]
    for name, values, doc in (
        ("integrator_family", np.array([i.family for i in idefs]).astype(str), "family the integrator belongs to"),
        ("integrator_order", np.array([i.order for i in idefs], dtype=np.int64), "order of accuracy"),
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
        coords[p.name] = xr.Variable((), value, {"units": p.units, "long_name": p.doc, "fixed_parameter": 1})
    options = {name: grid.options(name) for name in spec.integrators}
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
        **provenance(),
        "conventions": "status != 0 marks failed or missing cells; select with ds.where(ds.status == 0)",
    }
    return xr.Dataset(data_vars, coords=coords, attrs=attrs), encoding


def check_format(url: str, attrs: dict) -> None:
    """Refuse a store written in another format (raises :class:`StoreFormatError`, store untouched)."""
    found = attrs.get("geosweep_format")
    if found == FORMAT_VERSION:
        return
    if "spec" not in attrs and found is None:
        raise StoreFormatError(f"{url} exists but is not a geosweep store (no spec in its attributes)")
    has = f"store format {found}" if found is not None else "an unversioned store format (before format 2)"
    by = attrs.get("geosweep_version")
    raise StoreFormatError(
        f"store {url} has {has}{f', written by geosweep {by}' if by else ''}; this geosweep reads and writes "
        f"store format {FORMAT_VERSION} only (stored names changed), so it refuses the store rather than misread it. "
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


def ensure_store(plan: Plan, ref: StoreRef, log=None) -> bool:
    """Create the store from the template, or check an existing one belongs to ``plan``.

    Returns True if the store was created. Raises :class:`StoreFormatError` if the store has
    another format and :class:`StoreMismatchError` if it holds a different sweep (it is never
    modified in either case).

    Creation is crash-safe: the template (whose attrs name the format and the spec) is written
    first, then the not-applicable fillers, and the marker attr ``geosweep_created`` last. A
    store of ours without the marker holds no result (creation was interrupted, or failed): it
    is deleted and created again. A failed creation removes what it wrote.
    """
    if ref.exists():
        group = ref.open_group("r")
        attrs = dict(group.attrs)
        if attrs.get("geosweep_format") == FORMAT_VERSION and not attrs.get(CREATED_ATTR) and _no_results(group):
            if log:
                log(f"store {ref.url}: its creation was interrupted; creating it again")
            _remove(ref)
        else:
            check_format(ref.url, attrs)
            if attrs.get("spec_hash") != plan.spec.spec_hash:
                raise StoreMismatchError(_mismatch_message(ref.url, attrs, plan.spec))
            return False
    ds, encoding = template(plan)
    kwargs: dict[str, Any] = {"zarr_format": 3, "mode": "w-", "compute": False, "encoding": encoding}
    if not ref.is_local:
        kwargs["storage_options"] = ref.storage_options or {}
    try:
        ds.to_zarr(ref.url, consolidated=True, **kwargs)
        group = ref.open_group("r+")
        for cell in plan.grid.cells():
            if not plan.grid.applicable(cell):
                group["status"][cell] = np.int8(Status.NOT_APPLICABLE)
                group["done"][cell] = np.int8(1)
        group.attrs[CREATED_ATTR] = 1
        _consolidate(ref)
    except BaseException:
        _remove(ref)
        raise
    return True


def _consolidate(ref: StoreRef) -> None:
    import zarr

    try:
        if ref.is_local:
            zarr.consolidate_metadata(ref.url)
        else:
            zarr.consolidate_metadata(ref.url, storage_options=ref.storage_options or {})
    except Exception:  # noqa: BLE001 - consolidation is an optimisation only
        pass


def _mismatch_message(url: str, attrs: dict, spec: SweepSpec) -> str:
    old_text = attrs.get("spec")
    if not old_text:
        return f"{url} exists but is not a geosweep store (no spec in its attributes); choose another --store"
    old = json.loads(old_text)
    new = json.loads(spec.canonical_json())
    diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    details = "; ".join(f"{k}: store has {old.get(k)!r}, spec has {new.get(k)!r}" for k in diff)
    return (
        f"store {url} was created by a different sweep spec ({old.get('name')!r}); refusing to mix results. "
        f"Differences: {details}. Use a new --store path (or delete the old store)."
    )


# ---------------------------------------------------------------------------------------
# reading progress and writing cells
# ---------------------------------------------------------------------------------------
def done_mask(ref: StoreRef) -> np.ndarray:
    """Boolean array over the sweep axes: True where the cell is complete.

    A ``done`` chunk that cannot be read (damaged) counts as not done and is reset, so the
    cell is recomputed instead of the store becoming unusable."""
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


#: stored values that differ from run to run (timings): not part of a cell's checksum
CHECKSUM_SKIP = ("steps_per_second",)


def cell_checksum(arrays: dict[str, np.ndarray], status: int) -> int:
    """A 63-bit checksum of a cell: its status and every stored value (name, dtype, bytes),
    timings (:data:`CHECKSUM_SKIP`) left out, so identical physics gives identical checksums."""
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    h.update(str(int(status)).encode())
    for name in sorted(arrays):
        if name in CHECKSUM_SKIP:
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode() + str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1) or 1


def write_cell(group, cell: Cell, values: dict[str, Any], status: int, wall_time: float) -> None:
    """Write one cell's values, then its flags and checksum, then ``done`` (the completion marker).

    ``group`` is a zarr group or an :class:`ArrayCache` of one (faster for many cells).
    """
    stored = {}
    for name, value in values.items():
        arr = group[name]
        # per-cell dims may be shorter than the store's (padded sweeps over N): write a prefix
        arr[cell + tuple(slice(0, n) for n in np.shape(value))] = value
        stored[name] = _stored(arr, value)
    group["status"][cell] = np.int8(status)
    group["wall_time"][cell] = float(wall_time)
    group["completed_at"][cell] = time.time()
    group["progress"][cell] = 1.0
    group["checksum"][cell] = np.int64(cell_checksum(stored, status))
    group["done"][cell] = np.int8(1)


def verify(ref: StoreRef, value_names: list[str] | None = None) -> dict[str, list[Cell]]:
    """Check every finished cell against its checksum.

    Returns ``{"damaged": cells whose values or checksum cannot be read or do not match,
    "flags": cells whose ``done`` flag could not be read}``; ``value_names`` are the stored
    variables (default: every variable with the store's sweep dims, except the run flags).
    """
    group = ref.open_group("r")
    sweep_shape = group["status"].shape
    if value_names is None:
        value_names = [name for name in open_results(ref).data_vars if name not in SWEEP_FLAGS]
    out: dict[str, list[Cell]] = {"damaged": [], "flags": []}
    for cell in np.ndindex(*sweep_shape):
        try:
            done = int(group["done"][cell]) == 1
            status = int(group["status"][cell])
        except Exception:  # noqa: BLE001 - an unreadable flag chunk
            out["flags"].append(cell)
            continue
        if not done or status == int(Status.NOT_APPLICABLE):
            continue
        try:
            stored = {name: np.asarray(group[name][cell]) for name in value_names}
            ok = int(group["checksum"][cell]) == cell_checksum(stored, status)
        except Exception:  # noqa: BLE001 - a missing or undecodable chunk is damage
            ok = False
        if not ok:
            out["damaged"].append(cell)
    return out


def mark_for_rerun(ref: StoreRef, cells: list[Cell]) -> None:
    """Clear ``done`` (and the checksum) of ``cells`` so that a resume recomputes exactly them."""
    group = ref.open_group("r+")
    for cell in cells:
        group["done"][cell] = np.int8(0)
        group["checksum"][cell] = np.int64(0)
        group["progress"][cell] = 0.0


def record_run(ref: StoreRef, entry: dict[str, Any]) -> None:
    """Append a run record (who, when, how many cells) to the store's ``runs`` attribute."""

    group = ref.open_group("r+")
    runs = list(group.attrs.get("runs", []))
    runs.append(entry)
    group.attrs["runs"] = runs
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
