"""The nightly's stores: one date-stamped store per night (``{store_root}/{name}/{YYYY-MM-DD}.zarr``,
the UTC date of the flow run's scheduled start) and the latest earlier one to compare with, or one
store grown by ΔT every night (``{store_root}/{name}/extended.zarr``) with each night's summaries
kept beside it (:func:`extending_night`)."""

from __future__ import annotations

import datetime as dt
import math
import os
from pathlib import Path

from geosweep.sweeps.plan import make_plan


def run_day() -> dt.date:
    """The UTC date of the current flow run's scheduled start (today, outside a flow run)."""
    from prefect.runtime import flow_run

    start = flow_run.scheduled_start_time if flow_run.id else None
    when = start if start is not None else dt.datetime.now(dt.UTC)
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC)
    return when.date()


def dated_store(store_root: str | os.PathLike, name: str, day: dt.date | str | None = None) -> str:
    """``{store_root}/{name}/{YYYY-MM-DD}.zarr`` for a local directory or an fsspec URL."""
    if day is None:
        day = run_day()
    if isinstance(day, str):
        day = dt.date.fromisoformat(day)
    root = os.fspath(store_root)
    if "://" in root:
        return f"{root.rstrip('/')}/{name}/{day.isoformat()}.zarr"
    return str(Path(root).expanduser().absolute() / name / f"{day.isoformat()}.zarr")


def night_stores(store_root: str | os.PathLike, name: str, storage_options: dict | None = None) -> dict[dt.date, str]:
    """The dated stores ``{store_root}/{name}/{YYYY-MM-DD}.zarr`` that exist, by date."""
    root = os.fspath(store_root)
    if "://" in root:
        import fsspec

        folder = f"{root.rstrip('/')}/{name}"
        fs, path = fsspec.core.url_to_fs(folder, **(storage_options or {}))
        try:
            entries = [e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(path, detail=False)]
        except FileNotFoundError:
            entries = []
        found = {e: f"{folder}/{e}" for e in entries}
    else:
        folder_path = Path(root).expanduser().absolute() / name
        found = {p.name: str(p) for p in folder_path.glob("*.zarr")} if folder_path.is_dir() else {}
    out = {}
    for entry, where in found.items():
        if not entry.endswith(".zarr"):
            continue
        try:
            out[dt.date.fromisoformat(entry.removesuffix(".zarr"))] = where
        except ValueError:
            continue
    return dict(sorted(out.items()))


def previous_night(
    store_root: str | os.PathLike, name: str, day: dt.date, storage_options: dict | None = None
) -> str | None:
    """The latest dated store before ``day``, or None."""
    earlier = [where for d, where in night_stores(store_root, name, storage_options).items() if d < day]
    return earlier[-1] if earlier else None


def failed_cells(store: str, storage_options: dict | None = None) -> tuple[int, int]:
    """(cells with status > 0, runnable cells) of a store."""
    from geosweep.sweeps.store import open_results

    status = open_results(store, storage_options)["status"].values
    return int((status > 0).sum()), int((status != -2).sum())


#: the store an extending nightly grows, and the folder of each night's summaries, under ROOT/<name>/
EXTENDED_STORE = "extended.zarr"
NIGHTS_DIR = "extended.nights"


def extend_by_problem(extend_by: float | None) -> str | None:
    """Why ``extend_by`` (ΔT, the spec's time unit) cannot grow a nightly store, or None: it must be a
    finite number > 0 (``None``: a dated store each night)."""
    if extend_by is None or (isinstance(extend_by, int | float) and math.isfinite(extend_by) and extend_by > 0):
        return None
    return f"--extend-by {extend_by!r}: must be a finite duration > 0 (in the spec's time unit)"


def night_summary_name(T: float) -> str:
    """The folder of the summaries kept at ``T``: ``T<repr>.zarr``, the shortest text that reads back as
    exactly ``T`` (two distinct T never share a name; ``T0.5.zarr``, ``T100000.5.zarr``, ``T1e+16.zarr``)."""
    return f"T{float(T)!r}.zarr"


def _join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *parts]) if "://" in root else os.path.join(root, *parts)


def extending_night(plan, store_root: str, extend_by: float, storage_options: dict | None, log) -> tuple:
    """(plan, store, previous) of a night that grows ``ROOT/<name>/extended.zarr`` by ``extend_by``
    (:mod:`geosweep.sweeps.extension`): the first night runs the spec; a later night, once the store is complete,
    keeps the store's summaries as ``extended.nights/T<T>.zarr`` (the previous night, to compare
    with) and continues every cell to T + ``extend_by``; an unfinished store is resumed first."""
    from geosweep.sweeps.extend_spec import grown_spec
    from geosweep.sweeps.store import StoreRef, open_results

    base = _join(store_root, plan.spec.name)
    store = _join(base, EXTENDED_STORE)
    ref = StoreRef.of(store, storage_options)
    if not ref.exists():
        return plan, store, None
    ds = open_results(ref)
    T = float(ds.attrs["T"])
    unfinished = bool(((ds["done"] != 1) & (ds["status"] != -2)).any())
    nights = _join(base, NIGHTS_DIR)
    if unfinished:  # an interrupted night: finish it (compared with the night before it, if kept)
        prev = sorted(_night_summaries(nights, storage_options), key=lambda kv: kv[0])
        log(f"extending nightly: store {store} unfinished at T = {T:g}: resumed")
        return make_plan(grown_spec(ref, T)), store, (prev[-1][1] if prev else None)
    previous = _join(nights, night_summary_name(T))
    names = [n for n, v in ds.data_vars.items() if set(v.dims) == set(ds["done"].dims)]
    summaries = ds[names].load()
    for v in summaries.variables.values():
        v.encoding = {}
    summaries.to_zarr(previous, mode="w", storage_options=storage_options if "://" in previous else None)
    log(f"extending nightly: T {T:g} -> {T + extend_by:g} (summaries of T = {T:g} kept in {previous})")
    return make_plan(grown_spec(ref, T + extend_by)), store, previous


def _night_summaries(nights: str, storage_options: dict | None) -> list[tuple[float, str]]:
    import fsspec

    fs, root = fsspec.core.url_to_fs(nights, **(storage_options or {}))
    try:
        names = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)]
    except FileNotFoundError:
        return []
    # new names (repr, exact) and those written as T{T:g} before both read as their T
    return [(T, _join(nights, n)) for n in names if (T := _summary_T(n)) is not None]


def _summary_T(name: str) -> float | None:
    """The T of a night summary's folder name ``T<number>.zarr``, or None for any other name."""
    if not (name.startswith("T") and name.endswith(".zarr")):
        return None
    try:
        return float(name[1:-5])
    except ValueError:
        return None
