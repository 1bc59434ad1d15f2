"""The final carries of finished cells, kept in the store (:mod:`geosweep.sweeps.extension` continues
cells from them): one ``.npz`` object per store shard under ``<store>/_carries/``, the cells' arrays
stacked per group of equal names, shapes and dtypes, compressed when a shard's cells are large or
its carries thin (:func:`thin`: without the samples, envelopes and snapshots the store holds); and
the pre-final carry kept inside a cell's checkpoint (:func:`split`, :func:`joined`)."""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from geosweep.kernels.core import layout as L
from geosweep.sweeps.checkpoints import _fs, _put
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.lease import fence
from geosweep.sweeps.store.layout import cell_block

DIRNAME = "_carries"
#: keys of a kept pre-final carry inside a checkpoint (adaptive dense-output cells)
CARRY_PREFIX = "carry."
#: key of the (samples, snapshots) rows a grown cell leaves as stored, inside its checkpoint
ROWS_KEY = "geosweep_rows_kept"


#: a shard's carries are compressed when they hold more than this per cell (bytes)
COMPRESS_BYTES_PER_CELL = 32_768


# ---------------------------------------------------------------------------------------
# carries in the store: one object per shard
# ---------------------------------------------------------------------------------------
def shard_key(index: tuple[int, ...]) -> str:
    return "s" + "_".join(str(int(i)) for i in index)


def _path(ref, index: tuple[int, ...]) -> tuple[Any, str]:
    fs, root = _fs(ref)
    return fs, f"{root.rstrip('/')}/{DIRNAME}/{shard_key(index)}.npz"


def read_shard(ref, index: tuple[int, ...]) -> dict[Cell, dict[str, np.ndarray]] | None:
    """The carries of the cells of shard ``index`` (empty when none is kept), or None when its
    object cannot be read (truncated, empty, not a zip, a bad CRC, a directory …)."""
    fs, path = _path(ref, index)
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        return {}
    except Exception:  # noqa: BLE001 - a directory or an unreadable object: no carry of it is usable
        return None
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return _unpacked({key: z[key] for key in z.files})
    except Exception:  # noqa: BLE001 - a damaged object: its cells have no usable carry
        return None


def load_shard(ref, index: tuple[int, ...]) -> dict[Cell, dict[str, np.ndarray]]:
    """The carries of the cells of shard ``index`` (empty when none is kept or its object is damaged)."""
    return read_shard(ref, index) or {}


def carried_cells(ref, index: tuple[int, ...]) -> set[Cell]:
    """The cells of shard ``index`` with a kept carry (reads the object's index, and the cell lists
    of a stacked object; none for a damaged object)."""
    fs, path = _path(ref, index)
    try:
        with fs.open(path, "rb") as f, np.load(f, allow_pickle=False) as z:
            names = list(z.files)
            lists = [z[n] for n in names if n.startswith(GROUP_PREFIX) and n.endswith(CELLS_SUFFIX)]
    except FileNotFoundError:
        return set()
    except Exception:  # noqa: BLE001 - a damaged object holds no usable carry
        return set()
    out = {_cell_of(n.split(".", 1)[0]) for n in names if not n.startswith(GROUP_PREFIX)}  # one entry per cell
    out.update(tuple(int(i) for i in row) for cells in lists for row in cells)
    return out


#: a stacked object's entries: ``g<j>.cells`` (the group's cells, one row each) and ``g<j>.<array>``
#: (that array of every cell of group j, stacked along a first axis); an older object has one
#: entry ``c<i>_<j>….<array>`` per cell and array, and is still read
GROUP_PREFIX = "g"
CELLS_SUFFIX = ".cells"


def _cell_of(key: str) -> Cell:
    return tuple(int(i) for i in key[1:].split("_"))


def _shape_dtype(v: Any) -> tuple[tuple[int, ...], str]:
    """``(np.shape(v), np.asarray(v).dtype.str)``, read off an array or NumPy scalar directly."""
    if isinstance(v, (np.ndarray, np.generic)):
        return v.shape, v.dtype.str
    a = np.asarray(v)
    return a.shape, a.dtype.str


def _packed(
    carries: dict[Cell, dict[str, np.ndarray]], stacked: Sequence[tuple[list[Cell], dict[str, np.ndarray]]] = ()
) -> dict[str, np.ndarray]:
    """The entries of a stacked carries object: the cells grouped by their arrays' names, shapes and
    dtypes, each array stacked over a group (a few dozen entries per shard instead of ~9 per cell:
    a zip entry costs more than a sub-millisecond cell). ``stacked``: groups already stacked, (cells,
    arrays with a leading cell axis), written as they are."""
    groups: dict[tuple, list[Cell]] = {}
    for cell, arrays in carries.items():
        sig: tuple  # (name, shape, dtype) per array
        try:  # arrays and NumPy scalars (a carry's own): their shape and dtype read off directly
            sig = tuple([(k, v.shape, v.dtype) for k, v in arrays.items()])
        except AttributeError:
            sig = tuple((k, *_shape_dtype(v)) for k, v in arrays.items())
        groups.setdefault(sig, []).append(cell)
    flat: dict[str, np.ndarray] = {}
    for j, (sig, cells) in enumerate(groups.items()):
        flat[f"{GROUP_PREFIX}{j}{CELLS_SUFFIX}"] = cell_block(cells)
        for k, _shape, dtype in sig:  # one shape and dtype in the group: np.stack's array, built in one call
            flat[f"{GROUP_PREFIX}{j}.{k}"] = np.array([carries[c][k] for c in cells], dtype=dtype)
    for j, (cells, arrays) in enumerate(stacked, start=len(groups)):
        flat[f"{GROUP_PREFIX}{j}{CELLS_SUFFIX}"] = cell_block(cells)
        for k, a in arrays.items():
            flat[f"{GROUP_PREFIX}{j}.{k}"] = np.asarray(a)
    return flat


def _unpacked(flat: dict[str, np.ndarray]) -> dict[Cell, dict[str, np.ndarray]]:
    """The carries of an object's entries, stacked (:func:`_packed`) or one per cell and array."""
    out: dict[Cell, dict[str, np.ndarray]] = {}
    for key, value in flat.items():
        if key.startswith(GROUP_PREFIX):
            continue
        ck, name = key.split(".", 1)
        out.setdefault(_cell_of(ck), {})[name] = value
    for key, cells in flat.items():
        if not (key.startswith(GROUP_PREFIX) and key.endswith(CELLS_SUFFIX)):
            continue
        group = key[: -len(CELLS_SUFFIX)] + "."
        names = [k[len(group) :] for k in flat if k.startswith(group) and k != key]
        for i, row in enumerate(cells):
            out[tuple(int(x) for x in row)] = {name: flat[group + name][i, ...] for name in names}
    return out


def save_shard(
    ref,
    index: tuple[int, ...],
    carries: Mapping[Cell, dict[str, np.ndarray] | None],
    stacked: Sequence[tuple[list[Cell], dict[str, np.ndarray]]] = (),
) -> None:
    """Replace the carries of ``carries``' cells in shard ``index`` (None: drop the cell's carry);
    the other cells' carries stay. ``stacked``: more cells' carries, stacked (cells, arrays with a
    leading cell axis: cells computed together, :mod:`geosweep.sweeps.together`). One atomic object
    write, fenced by the run's lease."""
    if not carries and not stacked:
        return
    kept = load_shard(ref, index)
    if not kept and not stacked and all(a is None for a in carries.values()):
        return
    for cell, arrays in carries.items():
        if arrays is None:
            kept.pop(cell, None)
        else:
            kept[cell] = arrays
    for cells, _ in stacked:
        for cell in cells:
            kept.pop(cell, None)
    n_cells = len(kept) + sum(len(cells) for cells, _ in stacked)
    buf = io.BytesIO()
    flat = _packed(kept, stacked)
    raw = sum(int(np.asarray(v).nbytes) for v in flat.values())
    # compressed where it pays: long cells (big sample arrays), and objects with thin carries (their
    # controls and counters repeat from cell to cell: ~1 kB → ~0.3 kB at level 1, ~13 µs per cell;
    # whole carries beside them too), not only the whole carries of sub-millisecond cells
    if raw > COMPRESS_BYTES_PER_CELL * max(n_cells, 1):
        np.savez_compressed(buf, **flat)  # type: ignore[arg-type]
    elif any(is_thin(c) for c in kept.values()) or any(is_thin(a) for _, a in stacked):
        _save_deflated(buf, flat, THIN_LEVEL)
    else:
        np.savez(buf, **flat)  # type: ignore[arg-type]
    fs, path = _path(ref, index)
    with fence(ref):
        if ref.is_local and os.path.isdir(path):  # a directory in the object's place: replaced
            shutil.rmtree(path)
        _put(ref, fs, path, buf.getvalue())


#: the deflate level of an object of thin carries (level 6 saves 4 % more for 20 % more time)
THIN_LEVEL = 1


def _save_deflated(buf: io.BytesIO, arrays: dict[str, np.ndarray], level: int) -> None:
    """``np.savez_compressed(buf, **arrays)`` at deflate ``level`` (``np.load`` reads it alike)."""
    import zipfile

    from numpy.lib import format as npy_format

    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as z:
        for name, a in arrays.items():
            with z.open(name + ".npy", "w", force_zip64=True) as f:
                npy_format.write_array(f, np.asanyarray(a), allow_pickle=False)


def drop_shard(ref, index: tuple[int, ...]) -> None:
    """Remove the carries object of shard ``index`` (whatever it holds, a directory included)."""
    fs, path = _path(ref, index)
    with fence(ref):
        if ref.is_local:
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.remove(path)
            return
        try:
            fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass


def carry_bytes(ref) -> int:
    """Bytes of every carry object of a store."""
    fs, root = _fs(ref)
    try:
        return sum(int(fs.size(p)) for p in fs.ls(f"{root.rstrip('/')}/{DIRNAME}", detail=False))
    except FileNotFoundError:
        return 0


#: a checkpoint's parts: own arrays, pre-final carry, rows kept, rows of those from the store
Parts = tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None, tuple[int, int], tuple[int, int]]


def split(saved: dict[str, np.ndarray]) -> Parts:
    """A checkpoint's own arrays, the pre-final carry kept inside it (or None), its rows kept and the
    rows of those whose values are the store's (a run continued from a :func:`thin` carry)."""
    own = {k: v for k, v in saved.items() if not k.startswith(CARRY_PREFIX) and k != ROWS_KEY}
    pre = {k[len(CARRY_PREFIX) :]: v for k, v in saved.items() if k.startswith(CARRY_PREFIX)}
    rows = tuple(int(x) for x in saved[ROWS_KEY]) if ROWS_KEY in saved else (0, 0)
    from_store = (rows[2], rows[3]) if len(rows) >= 4 else (0, 0)
    return own, (pre or None), (rows[0], rows[1]), from_store


def joined(
    own: dict[str, np.ndarray], pre: dict[str, np.ndarray] | None, rows: tuple[int, int],
    from_store: tuple[int, int] = (0, 0),
) -> dict:  # fmt: skip
    """The inverse of :func:`split`: what a checkpoint object holds."""
    out = dict(own)
    if pre is not None:
        out.update({CARRY_PREFIX + k: v for k, v in pre.items()})
    if rows != (0, 0):
        out[ROWS_KEY] = np.array([*rows, *from_store] if from_store != (0, 0) else rows, dtype=np.int64)
    return out


# ---------------------------------------------------------------------------------------
# thin carries: the samples, envelopes and snapshots the store already holds left out
# ---------------------------------------------------------------------------------------
#: a carry's per-sample arrays (:meth:`~geosweep.kernels.core.trajectory.Trajectory.checkpoint`)
SAMPLE_ARRAYS = ("out", "env", "snaps")
#: the entry of a thin carry that keeps its first sample (values relative to t = 0 read it)
FIRST_SAMPLE = "out0"
#: the bits of the NaN a trajectory's rows not taken yet hold
_NAN_BITS = np.float64(np.nan).view(np.uint64)


def _untaken_shapes(ictl: np.ndarray, n_obs: int) -> dict[str, tuple[int, ...]]:
    """The shapes of :data:`SAMPLE_ARRAYS` of a trajectory with control ``ictl`` and ``n_obs``
    observation columns (as :class:`~geosweep.kernels.core.trajectory.Trajectory` makes them)."""
    n_out, every = int(ictl[L.C_N_OUT]), max(int(ictl[L.C_SNAP_EVERY]), 1)
    snaps = (n_out // every + 1, int(ictl[L.C_N_CHECK]))
    return {"out": (n_out + 1, n_obs + 1), "env": (n_out + 1, n_obs + 2), "snaps": snaps}


def _only_nan_after(a: np.ndarray, taken: np.ndarray) -> bool:
    """Whether every row of ``a`` (cells, rows, columns) from row ``taken[cell]`` on is the untaken NaN."""
    bits = np.ascontiguousarray(a, dtype=np.float64).view(np.uint64)
    if len(bits) == 1:  # one carry: its rows from taken on
        return bool((bits[0, int(taken[0]) :] == _NAN_BITS).all())
    later = np.arange(a.shape[1])[None, :] >= np.asarray(taken).reshape(-1, 1)
    return bool((bits[later] == _NAN_BITS).all())


def thin(carry: dict[str, Any], stacked: bool = False) -> dict[str, Any]:
    """``carry`` without :data:`SAMPLE_ARRAYS` but its first sample (:data:`FIRST_SAMPLE`) — kept in
    a store, whose rows hold every sample, envelope and snapshot the carry took (its rows from
    ``info``'s counts on are all NaN, rebuilt by :func:`widened`) — or ``carry`` itself when any of
    those rows is not, or its arrays are not the shapes :func:`widened` rebuilds. ``stacked``:
    carries with a leading cell axis."""
    if any(k not in carry for k in (*SAMPLE_ARRAYS, "info", "ictl")):
        return carry
    out_, env, snaps, info, ictl = (np.asarray(carry[k]) for k in (*SAMPLE_ARRAYS, "info", "ictl"))
    if not stacked:
        out_, env, snaps, info, ictl = out_[None], env[None], snaps[None], info[None], ictl[None]
    n_obs = out_.shape[-1] - 1
    for row in np.unique(ictl, axis=0) if len(ictl) > 1 else ictl:
        want = _untaken_shapes(row, n_obs)
        if (out_.shape[1:], env.shape[1:], snaps.shape[1:]) != (want["out"], want["env"], want["snaps"]):
            return carry
    nsamp, nsnap = info[:, L.I_NSAMP], info[:, L.I_NSNAP]
    if not (_only_nan_after(out_, nsamp) and _only_nan_after(env, nsamp) and _only_nan_after(snaps, nsnap)):
        return carry
    kept = {k: v for k, v in carry.items() if k not in SAMPLE_ARRAYS}
    kept[FIRST_SAMPLE] = np.array(np.asarray(carry["out"])[..., 0, :])
    return kept


def is_thin(carry: dict[str, Any]) -> bool:
    """Whether ``carry`` is :func:`thin` (its samples, envelopes and snapshots left out)."""
    return "out" not in carry


def widened(carry: dict[str, Any], n_obs: int) -> dict[str, Any]:
    """A :func:`thin` carry with :data:`SAMPLE_ARRAYS` rebuilt, every row NaN but the first sample
    (the rows it had taken are the store's); any other carry as it is. ``n_obs``: the stepper's
    observation columns."""
    if not is_thin(carry) or "ictl" not in carry:
        return carry
    shapes = _untaken_shapes(np.asarray(carry["ictl"]), n_obs)
    out = {k: v for k, v in carry.items() if k != FIRST_SAMPLE}
    out.update({k: np.full(shape, np.nan) for k, shape in shapes.items()})
    if FIRST_SAMPLE in carry:
        out["out"][0] = carry[FIRST_SAMPLE]
    return out


# ---------------------------------------------------------------------------------------
# a carry's identity: whose trajectory it continues, and that it is intact
# ---------------------------------------------------------------------------------------
#: the one entry of a sealed carry that says whose it is (int64): ``[digest, trajectory, T (the
