"""A kept carry's identity: whose trajectory it continues, at which T, over which stored samples,
and that it is intact (a digest of its arrays). The shard's writer seals each carry
(:func:`sealed`, :func:`sealed_stack`); an extension and ``geosweep verify`` check it
(:func:`problem`, :func:`unusable_carries`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from geosweep.kernels.vocabulary import RUN_DEPENDENT
from geosweep.sweeps.carries import drop_shard, read_shard, save_shard
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.store import group_by_shard, open_unconsolidated, sweep_shards
from geosweep.sweeps.store.layout import cell_block

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
    the adaptive first step ``h0`` (pinned by an extension,
    :func:`geosweep.sweeps.extend_spec.pin_first_steps`), the cell's coordinates and its integrator's
    options. Equal for a cell of the store before and after an
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
