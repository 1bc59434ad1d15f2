"""Growing a finished study to a longer ``T`` without recomputing it (``geosweep extend``).

Every cell that finished keeps its *final carry* — the arrays of
:meth:`geosweep.kernels.core.trajectory.Trajectory.checkpoint` (state, accumulators of every summary over
every step, envelopes, samples, snapshots, adaptive controller) — in the store, one ``.npz``
object per store shard under ``<store>/_carries/`` (compressed when the cells' arrays are large).
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

import hashlib
import io
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geosweep.kernels.vocabulary import RUN_DEPENDENT
from geosweep.sweeps import crashpoint
from geosweep.sweeps.checkpoints import _fs, _put
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.grow import EXTENDING_ATTR, interrupted
from geosweep.sweeps.lease import fence
from geosweep.sweeps.store import (
    FIRST_STEP_ATTR,
    StoreRef,
    consolidate,
    ensure_store,
    group_by_shard,
    integrator_options_attr,
    open_unconsolidated,
    sweep_shards,
)
from geosweep.sweeps.store.layout import cell_block

DIRNAME = "_carries"
#: keys of a kept pre-final carry inside a checkpoint (adaptive dense-output cells)
CARRY_PREFIX = "carry."
#: key of the (samples, snapshots) rows a grown cell leaves as stored, inside its checkpoint
ROWS_KEY = "geosweep_rows_kept"


#: a shard's carries are compressed when they hold more than this per cell (bytes)
COMPRESS_BYTES_PER_CELL = 32_768


class ExtendError(ValueError):
    """A store cannot be extended as asked (exit 2, one line naming the problem)."""


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
    # compressed where it pays: long cells (big sample arrays), not sub-millisecond ones (zlib per array)
    save = np.savez_compressed if raw > COMPRESS_BYTES_PER_CELL * max(n_cells, 1) else np.savez
    save(buf, **flat)  # type: ignore[arg-type]
    fs, path = _path(ref, index)
    with fence(ref):
        if ref.is_local and os.path.isdir(path):  # a directory in the object's place: replaced
            shutil.rmtree(path)
        _put(ref, fs, path, buf.getvalue())


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


def split(saved: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None, tuple[int, int]]:
    """A checkpoint's own arrays, the pre-final carry kept inside it (or None) and its rows kept."""
    own = {k: v for k, v in saved.items() if not k.startswith(CARRY_PREFIX) and k != ROWS_KEY}
    pre = {k[len(CARRY_PREFIX) :]: v for k, v in saved.items() if k.startswith(CARRY_PREFIX)}
    rows = tuple(int(x) for x in saved[ROWS_KEY]) if ROWS_KEY in saved else (0, 0)
    return own, (pre or None), (rows[0], rows[1])


def joined(own: dict[str, np.ndarray], pre: dict[str, np.ndarray] | None, rows: tuple[int, int]) -> dict:
    """The inverse of :func:`split`: what a checkpoint object holds."""
    out = dict(own)
    if pre is not None:
        out.update({CARRY_PREFIX + k: v for k, v in pre.items()})
    if rows != (0, 0):
        out[ROWS_KEY] = np.array(rows, dtype=np.int64)
    return out


# ---------------------------------------------------------------------------------------
# a carry's identity: whose trajectory it continues, and that it is intact
# ---------------------------------------------------------------------------------------
#: the one entry of a sealed carry that says whose it is (int64): ``[digest, trajectory, T (the
#: bits of the float64), samples, *cell]`` — the 63-bit :func:`digest` of the carry, the 63-bit
#: identity of the cell's trajectory (:func:`identities`), the final time of the run that kept it,
#: the cell's stored checksum written with it (the samples it continues) and the cell's grid index
ID = "geosweep.identity"
#: what the cell's computation records before the shard's writer seals the carry (not stored)
ID_TRAJECTORY, ID_T = "geosweep.trajectory", "geosweep.T"
_IDENTITY_NAMES = (ID, ID_TRAJECTORY, ID_T)
#: spec fields that are not part of a cell's trajectory (T: a carry continues to a later one;
#: the sweep axes and the other integrators' options: the cell's coordinates say its own)
_NOT_TRAJECTORY = ("T", "name", "integrators", "h", "tol", "integrator_options", "params")


def _hash63(*parts: bytes) -> int:
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(part)
    return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1)


def identities(plan) -> Callable[[Cell], int]:
    """``cell → hash`` of what defines a cell's trajectory: the spec without T, the sweep axes and
    the adaptive first step ``h0`` (pinned by an extension, :func:`pin_first_steps`), the cell's
    coordinates and its integrator's options. Equal for a cell of the store before and after an
    extension or a grow along its axes; different for another system, model, initial condition."""
    spec = json.loads(plan.spec.canonical_json())
    base = {k: v for k, v in spec.items() if k not in _NOT_TRAJECTORY}
    base["params"] = {k: v for k, v in (spec.get("params") or {}).items() if not isinstance(v, list)}
    options = spec.get("integrator_options") or {}
    grid = plan.grid

    def of(cell: Cell) -> int:
        coords = grid.coords(cell)
        mine = {k: v for k, v in (options.get(str(coords.get("integrator")), {}) or {}).items() if k != "h0"}
        text = json.dumps([base, mine, coords], sort_keys=True, default=lambda x: np.asarray(x).item())
        return _hash63(text.encode())

    return of


def digest(carry: dict[str, np.ndarray]) -> int:
    """63-bit hash of every entry of ``carry`` (name, dtype, shape, bytes; the identity's digest
    slot as 0) but the run's timings (:data:`~geosweep.kernels.vocabulary.RUN_DEPENDENT`: equal
    physics, equal digest)."""
    parts = []
    for name in sorted(carry):
        if name in RUN_DEPENDENT:
            continue
        a = np.ascontiguousarray(carry[name])
        if name == ID:
            a = a.copy()
            a.reshape(-1)[:1] = 0
        parts += [name.encode(), a.dtype.str.encode(), str(a.shape).encode(), a.tobytes()]
    return _hash63(*parts)


def stamped(carry: dict[str, np.ndarray], trajectory: int, T: float) -> dict[str, Any]:
    """``carry`` with the trajectory's identity and the run's T recorded (by the cell's computation)."""
    return {**carry, ID_TRAJECTORY: np.int64(trajectory), ID_T: np.float64(T)}


def _identity(trajectory, T, samples, cells: np.ndarray) -> np.ndarray:
    """The identity rows (digest slot 0) of cells ``cells`` (n, ndim): one int64 row per cell."""
    n = len(cells)
    head = np.zeros((n, 4), dtype=np.int64)
    head[:, 1] = np.asarray(trajectory, dtype=np.int64).reshape(n)
    head[:, 2] = np.asarray(T, dtype=np.float64).reshape(n).view(np.int64)
    head[:, 3] = np.asarray(samples, dtype=np.int64).reshape(n)
    return np.concatenate([head, np.asarray(cells, dtype=np.int64).reshape(n, -1)], axis=1)


def sealed(carry: dict[str, np.ndarray], cell: Cell, samples: int) -> dict[str, np.ndarray]:
    """``carry`` (:func:`stamped`) sealed by the shard's writer: its :data:`ID` entry with the cell,
    the cell's stored checksum and the digest."""
    out = {k: v for k, v in carry.items() if k not in _IDENTITY_NAMES}
    out[ID] = _identity(carry.get(ID_TRAJECTORY, 0), carry.get(ID_T, np.nan), samples, cell_block([cell]))[0]
    out[ID][0] = digest(out)
    return out


def sealed_stack(cells: list[Cell], arrays: dict[str, np.ndarray], samples: list[int]) -> dict[str, np.ndarray]:
    """:func:`sealed` of stacked carries (cells computed together: arrays with a leading cell axis)."""
    n = len(cells)
    out = {k: v for k, v in arrays.items() if k not in _IDENTITY_NAMES}
    out[ID] = _identity(arrays.get(ID_TRAJECTORY, np.zeros(n)), arrays.get(ID_T, np.full(n, np.nan)), samples,
                        cell_block(cells))  # fmt: skip
    out[ID][:, 0] = _row_digests(out, n)
    return out


def _row_digests(stacked: dict[str, np.ndarray], n: int) -> np.ndarray:
    """:func:`digest` of each row of stacked carries (digest slots 0), bitwise the same: each row's
    bytes laid out once for all rows and hashed row by row (no per-array Python work per row)."""
    pieces = []
    for name in sorted(stacked):
        if name in RUN_DEPENDENT:
            continue
        a = np.ascontiguousarray(stacked[name])
        head = name.encode() + a.dtype.str.encode() + str(a.shape[1:] or (1,)).encode()
        pieces.append(np.broadcast_to(np.frombuffer(head, np.uint8), (n, len(head))))
        pieces.append(a.reshape(n, -1).view(np.uint8))
    rows = np.concatenate(pieces, axis=1) if pieces else np.zeros((n, 0), np.uint8)
    return np.array([_hash63(row.tobytes()) for row in rows], dtype=np.int64)


def problem(cell: Cell, carry: dict[str, np.ndarray], trajectory: int | None = None,
            T: float | None = None, samples: int | None = None) -> str | None:  # fmt: skip
    """Why ``carry`` is not ``cell``'s (None: it is): no identity recorded, arrays other than those
    it was sealed with, another cell or trajectory, another T or other stored samples.
    ``trajectory``/``T``/``samples``: what it must record (None: not checked)."""
    ident = carry.get(ID)
    if ident is None:
        return "no identity"
    ident = np.asarray(ident)
    if ident.dtype != np.int64 or ident.shape != (4 + len(cell),) or int(ident[0]) != digest(carry):
        return "damaged"
    if tuple(int(i) for i in ident[4:]) != tuple(cell):
        return "another cell's"
    if trajectory is not None and int(ident[1]) != trajectory:
        return "another trajectory's"
    if (T is not None and float(ident[2:3].view(np.float64)[0]) != float(T)) or (
        samples is not None and int(ident[3]) != int(samples)
    ):
        return "stale"
    return None


def usable(carry: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The trajectory's arrays of a checked carry (its identity left out)."""
    return {k: v for k, v in carry.items() if k not in _IDENTITY_NAMES}


def unusable_carries(ref) -> list[Cell]:
    """Finished cells whose kept carry is not theirs or not intact (``geosweep verify``): an
    unreadable object, another cell's, one not written with the cell's stored checksum or at the
    store's T, changed arrays, or no identity (an older geosweep). Cells without a carry are fine."""
    from geosweep.kernels.status import Status

    group = open_unconsolidated(ref, "r")
    T = float(group.attrs["T"])
    status, done = np.asarray(group["status"][...]), np.asarray(group["done"][...])
    checksum = np.asarray(group["checksum"][...])
    ok = [tuple(int(i) for i in c) for c in np.argwhere((done == 1) & (status >= int(Status.OK)))]
    bad: list[Cell] = []
    for index, members in group_by_shard(ok, sweep_shards(group)).items():
        stored = read_shard(ref, index)
        if stored is None:
            bad.extend(members)
            continue
        bad.extend(c for c in members if c in stored and problem(c, stored[c], None, T, int(checksum[c])) is not None)
    return sorted(bad)


def drop_carries(ref, cells: list[Cell]) -> None:
    """Drop the kept carries of ``cells`` (an unreadable object: removed whole)."""
    group = open_unconsolidated(ref, "r")
    for index, members in group_by_shard(cells, sweep_shards(group)).items():
        if read_shard(ref, index) is None:
            drop_shard(ref, index)
        else:
            save_shard(ref, index, dict.fromkeys(members))


# ---------------------------------------------------------------------------------------
# the grown spec and the store's preparation
# ---------------------------------------------------------------------------------------
def stored_spec(ref) -> dict[str, Any]:
    """The spec a store was written for (its ``spec`` attribute, as a dict)."""
    attrs = dict(ref.open_group("r").attrs)
    text = attrs.get("spec")
    if not isinstance(text, str):
        raise ExtendError(f"store {ref.url}: no geosweep spec in its attributes; nothing to extend")
    return json.loads(text)


def legacy_first_steps(ref) -> bool:
    """True for a store written before the T-independent starting-step rule: its adaptive cells
    without an explicit ``h0`` started from T/100 (:data:`geosweep.sweeps.store.FIRST_STEP_ATTR` absent)."""
    return FIRST_STEP_ATTR not in ref.open_group("r").attrs


def _effective_h0(spec: dict[str, Any], name: str) -> float:
    h0 = float(spec.get("integrator_options", {}).get(name, {}).get("h0", 0.0))
    return h0 if h0 > 0 else float(spec["T"]) / 100.0


def pin_first_steps(old: dict[str, Any], new: dict[str, Any], legacy: bool = True) -> dict[str, Any]:
    """``new`` (a copy) with, when ``legacy`` (a store whose default first step was T/100: a longer
    T would change it), ``h0`` set for each adaptive integrator that takes it to the first step the
    store used, unless ``new`` sets one. Not ``legacy``: ``new`` as it is (the default first step
    does not depend on T)."""
    from geosweep.kernels.registry import INTEGRATORS

    new = json.loads(json.dumps(new))
    if not legacy:
        return new
    for name in new.get("integrators", []):
        idef = INTEGRATORS.get(name)
        if idef is None or not idef.adaptive or not any(p.name == "h0" for p in idef.params):
            continue
        opts = new.setdefault("integrator_options", {}).setdefault(name, {})
        if float(opts.get("h0", 0.0)) <= 0:
            opts["h0"] = _effective_h0(old, name)
    return new


def stored_first_steps(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new`` with the ``h0`` the store's spec ``old`` pinned (an earlier extension) for each
    integrator of ``new`` that does not set one: the spec a user wrote for the first run still
    names the store's sweep after it was extended."""
    new = json.loads(json.dumps(new))
    for name, opts in old.get("integrator_options", {}).items():
        if name in new.get("integrators", []) and "h0" in opts:
            mine = new.setdefault("integrator_options", {}).setdefault(name, {})
            mine.setdefault("h0", opts["h0"])
    return new


def grown_spec(ref, T: float) -> dict[str, Any]:
    """The store's spec with final time ``T`` (a store older than the starting-step rule: its first
    steps pinned, :func:`pin_first_steps`)."""
    old = stored_spec(ref)
    return typed(pin_first_steps(old, {**old, "T": float(T)}, legacy_first_steps(ref)))


def typed(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec from its canonical JSON (integers written as floats) with integer-kind parameters
    and integrator options as integers again, so that it validates as the original did."""
    from geosweep.kernels.registry import INTEGRATORS, SYSTEMS, load_for

    load_for(spec.get("system", ""))

    def as_kind(kind: type, v: Any) -> Any:
        if isinstance(v, list):
            return [as_kind(kind, x) for x in v]
        return int(v) if kind is int and isinstance(v, float) and v.is_integer() else v

    out = json.loads(json.dumps(spec))
    sysdef = SYSTEMS.get(out.get("system", ""))
    if sysdef is not None:
        kinds = {p.name: p.kind for p in sysdef.params}
        out["params"] = {k: as_kind(kinds.get(k, object), v) for k, v in out.get("params", {}).items()}
    for name, opts in out.get("integrator_options", {}).items():
        idef = INTEGRATORS.get(name)
        kinds = {p.name: p.kind for p in idef.params} if idef is not None else {}
        out["integrator_options"][name] = {k: as_kind(kinds.get(k, object), v) for k, v in opts.items()}
    return out


#: spec fields that are not part of a sweep's identity (kept from the asked spec when growing)
_NOT_IDENTITY = ("checkpoint_every", "limits", "description")


def _only_T_differs(old: dict[str, Any], new: dict[str, Any]) -> bool:
    a = {k: v for k, v in old.items() if k != "T"}
    b = {k: v for k, v in new.items() if k != "T"}
    return a == b


def prepare(plan, ref, log=None, recompute: bool = False):
    """Before a run with ``grow``: when ``plan``'s spec is the store's with a larger T, grow the
    store to it (arrays resized, finished cells to be continued from their carries, the spec and
    the extension recorded) and return the plan to run (a store older than the starting-step
    rule: first steps pinned); a larger T with values appended to sweep axes grows the axes first
    (:mod:`geosweep.sweeps.grow`); otherwise return ``plan`` unchanged (the usual identity check
    follows). Call under the store's lease.

    Raises :class:`ExtendError` for a smaller T, a spec whose cells cannot be continued, or
    finished cells without a carry (unless ``recompute``: they are computed again from t = 0).
    """
    from geosweep.sweeps.plan import make_plan

    log = log or (lambda msg: None)
    if not ref.exists():
        return plan
    old = stored_spec(ref)
    legacy = legacy_first_steps(ref)
    keep = {k: v for k, v in plan.spec.model_dump(mode="json").items() if k in _NOT_IDENTITY and v is not None}
    given = json.loads(plan.spec.canonical_json())
    asked = stored_first_steps(old, given)
    if asked != given:  # the store was extended before: its first steps are pinned, the user's spec does not say
        plan = make_plan({**typed(asked), **keep})
    new = pin_first_steps(old, asked, legacy)
    if float(asked.get("T", 0.0)) > float(old["T"]) and not _only_T_differs(pin_first_steps(old, old, legacy), new):
        # a larger T and more: values appended to sweep axes (anything else is refused there, the
        # field named). The axes grow first, at the store's T (geosweep.sweeps.grow: the new cells are
        # not run yet), then the time axis below; the new cells run from t = 0 to the new T.
        ensure_store(make_plan({**typed({**asked, "T": old["T"]}), **keep}), ref, log, grow=True)
        old = stored_spec(ref)
        new = pin_first_steps(old, asked, legacy)
    if old == asked or not _only_T_differs(pin_first_steps(old, old, legacy), new):
        return plan  # the same sweep, or one the usual identity check judges
    if new == old:  # an extension that was interrupted: resume it with the store's (pinned) spec
        consolidate(ref)  # (killed before its metadata was consolidated: readers read each array's own)
        return make_plan({**typed(new), **keep})
    T1, T2 = float(old["T"]), float(new["T"])
    if T2 < T1:
        raise ExtendError(f"T: the store reaches T = {T1:g}; it cannot shrink to {T2:g} (a study only grows)")
    for name, opts in new.get("integrator_options", {}).items():
        if opts.get("global_error"):
            raise ExtendError(
                f"integrator_options.{name}.global_error: the reference error at T cannot be continued "
                "to a later T; extend a store without it (or compute a new store)"
            )
    grown = make_plan({**typed(new), **keep})
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
    (the cell's stored ``checksum``) of the store's T ``T1`` (:func:`problem`)."""
    out = _Survey()
    if not ok:
        return out
    checksum = np.asarray(group["checksum"][...])
    ident = identities(plan)
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
    """
    from geosweep.sweeps.engine import run_sweep

    ref = StoreRef.of(store, storage_options)
    if not ref.exists():
        raise ExtendError(f"no store at {ref.url}")
    return run_sweep(grown_spec(ref, T), ref, grow=True, recompute=recompute, **kwargs)
