"""Checkpoints of partial cells: one object per cell, beside the zarr arrays in the store.

A long cell runs in segments of ``checkpoint_every`` (time). After each segment the worker
saves the trajectory's checkpoint (state, accumulators, counters, samples and snapshots so far,
controller state — :meth:`geosweep.kernels.core.trajectory.Trajectory.checkpoint`) as one ``.npz``
object ``<store>/_checkpoints/<cell>.npz`` (with the fraction of the cell done, which
``geosweep status`` shows). A cell that needed checkpoints also saves its *complete* trajectory
when it finishes, kept until its shard of the store is written (a lost shard write then costs no
recomputation). A resumed run continues every partial cell from its last checkpoint — bitwise
identical to an uninterrupted run — and deletes the object once the cell's values and ``done``
flag are written.

Each cell owns its object (parallel writers never share one). A checkpoint is replaced
atomically: on a local file system it is written under a temporary name and renamed; on an
object store a single PUT replaces it whole. An unreadable checkpoint is ignored (the cell
restarts from t = 0) and reported. Writes under a lease are fenced (:func:`geosweep.sweeps.lease.fence`).
"""

from __future__ import annotations

import io
import os
import uuid
from typing import Any

import numpy as np

from geosweep.sweeps.grid import Cell
from geosweep.sweeps.lease import fence

DIRNAME = "_checkpoints"


def _fs(ref) -> tuple[Any, str]:
    import fsspec

    if ref.is_local:
        return fsspec.filesystem("file"), ref.url
    fs, root = fsspec.core.url_to_fs(ref.url, **(ref.storage_options or {}))
    return fs, root


def cell_key(cell: Cell) -> str:
    return "c" + "_".join(str(int(i)) for i in cell)


def _dir(ref) -> tuple[Any, str]:
    fs, root = _fs(ref)
    return fs, f"{root.rstrip('/')}/{DIRNAME}"


def _path(ref, cell: Cell) -> tuple[Any, str]:
    fs, d = _dir(ref)
    return fs, f"{d}/{cell_key(cell)}.npz"


#: key of the fraction done (0..1) inside a checkpoint object
PROGRESS_KEY = "geosweep_progress"


def save(ref, cell: Cell, arrays: dict[str, np.ndarray], progress: float | None = None) -> None:
    """Replace the checkpoint of ``cell`` with ``arrays`` (atomically, see module docstring)."""
    buf = io.BytesIO()
    extra: dict[str, Any] = {} if progress is None else {PROGRESS_KEY: np.float64(progress)}
    np.savez(buf, **arrays, **extra)  # type: ignore[arg-type]  # numpy's stub types **kwds by its flag
    data = buf.getvalue()
    fs, path = _path(ref, cell)
    with fence(ref):
        _put(ref, fs, path, data)


def _put(ref, fs, path: str, data: bytes) -> None:
    if ref.is_local:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    else:
        fs.pipe_file(path, data)


def load(ref, cell: Cell) -> dict[str, np.ndarray] | None:
    """The last checkpoint of ``cell``, or None if there is none or it cannot be read."""
    fs, path = _path(ref, cell)
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        return None
    try:
        with np.load(io.BytesIO(data)) as z:
            return {k: z[k] for k in z.files if k != PROGRESS_KEY}
    except Exception:  # noqa: BLE001 - a damaged checkpoint means: start the cell again
        return None


def present(ref) -> set[str]:
    """The :func:`cell_key` of every cell with a checkpoint object in the store: one listing of
    the checkpoint folder, so that a slice or a shard write probes the store once, not per cell."""
    if ref.is_local:
        try:
            names = os.listdir(_dir(ref)[1])
        except OSError:  # not there (no checkpoint yet)
            return set()
    else:
        fs, d = _dir(ref)
        try:
            names = [str(p).rsplit("/", 1)[-1] for p in fs.ls(d, detail=False)]
        except FileNotFoundError:
            return set()
    return {name[: -len(".npz")] for name in names if name.endswith(".npz")}


def delete(ref, cell: Cell) -> None:
    fs, path = _path(ref, cell)
    with fence(ref):
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass


def tidy(ref) -> None:
    """After a run, when none of its writers is left: remove the temporary files that killed
    writers left in ``<store>/_checkpoints`` of a local store, and the directory once it is empty
    (a finished sweep then holds only zarr objects; object stores have neither)."""
    if not ref.is_local:
        return
    d = _dir(ref)[1]
    try:
        names = os.listdir(d)
    except OSError:  # not there
        return
    with fence(ref):
        _tidy(d, names)


def _tidy(d: str, names: list[str]) -> None:
    for name in names:
        if name.endswith(".tmp"):
            try:
                os.remove(os.path.join(d, name))
            except FileNotFoundError:
                pass
    try:
        os.rmdir(d)
    except OSError:  # checkpoints of partial cells are left
        pass


def fraction(ref, cell: Cell) -> float:
    """The fraction of ``cell`` its checkpoint holds (0 with no readable checkpoint; a complete one
    kept until its shard is written: 1); reads only that one number."""
    fs, path = _path(ref, cell)
    try:
        with fs.open(path, "rb") as f, np.load(f) as z:
            return float(z[PROGRESS_KEY]) if PROGRESS_KEY in z.files else 0.0
    except Exception:  # noqa: BLE001 - missing or unreadable: no progress to resume from
        return 0.0


def count(ref) -> int:
    """Number of partial cells with a checkpoint in the store."""
    fs, d = _dir(ref)
    try:
        return sum(1 for p in fs.ls(d, detail=False) if str(p).endswith(".npz"))
    except FileNotFoundError:
        return 0


def progress(ref) -> dict[Cell, float]:
    """``cell → fraction done`` of every partial cell with a readable checkpoint (reads only the
    fraction, not the state)."""
    fs, d = _dir(ref)
    try:
        paths = [str(p) for p in fs.ls(d, detail=False) if str(p).endswith(".npz")]
    except FileNotFoundError:
        return {}
    out: dict[Cell, float] = {}
    for path in paths:
        name = path.rsplit("/", 1)[-1][: -len(".npz")]
        if not name.startswith("c"):
            continue
        try:
            cell = tuple(int(i) for i in name[1:].split("_"))
            with fs.open(path, "rb") as f, np.load(f) as z:
                out[cell] = float(z[PROGRESS_KEY]) if PROGRESS_KEY in z.files else float("nan")
        except Exception:  # noqa: BLE001 - an unreadable checkpoint has no known progress
            continue
    return out
