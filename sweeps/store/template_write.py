"""Writing the store's template (:func:`geosweep.sweeps.store.schema.store_template`) as a new zarr v3
store with zarr alone (no xarray, no Dask), as xarray's ``to_zarr(compute=False)`` writes it, object
for object and byte for byte (tests/test_template_write.py): each array with its dimension names, fill
value, chunks and attributes as xarray encodes them (:func:`_encoded_attrs`), the coordinates' values,
and the group with its attributes written first."""

from __future__ import annotations

import base64
import struct
from typing import Any

import numpy as np

from geosweep.sweeps.store.schema import StoredArray, StoreTemplate


def _attr_value(value: Any) -> Any:
    """An attribute value as JSON holds it (numpy arrays as lists, numpy scalars as Python's), as xarray
    encodes attributes for zarr."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value.item() if isinstance(value, np.generic) else value


def _nan_fill_attr() -> str:
    """The ``_FillValue`` attribute xarray writes on every floating-point zarr v3 array: NaN (the CF
    default for floats, whatever the array's zarr ``fill_value``), little-endian float64 in base64."""
    return base64.standard_b64encode(struct.pack("<d", float("nan"))).decode()


def _non_dim_coords(tpl: StoreTemplate) -> dict[str, tuple[str, ...]]:
    """The coordinates not named like one of their dims (integrator records, fixed parameters, …): their dims."""
    return {name: c.dims for name, c in tpl.coords.items() if name not in c.dims}


def _encoded_attrs(tpl: StoreTemplate) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Every array's attributes and the group's, as xarray's CF encoding writes them: a variable's
    ``coordinates`` lists (sorted) the non-dimension coordinates whose dims are among its own, those on
    no variable go to the group's ``coordinates``; a float array gets ``_FillValue`` (NaN)."""
    extra = _non_dim_coords(tpl)
    written: set[str] = set()
    out: dict[str, dict[str, Any]] = {}
    for name, arr in {**tpl.data_vars, **tpl.coords}.items():
        attrs = {k: _attr_value(v) for k, v in arr.attrs.items()}
        if name in tpl.data_vars:
            mine = sorted(c for c, dims in extra.items() if set(dims) <= set(arr.dims))
            if mine:
                attrs["coordinates"] = " ".join(mine)
                written.update(mine)
        if arr.dtype.kind == "f":
            attrs["_FillValue"] = _nan_fill_attr()
        out[name] = attrs
    group = {k: _attr_value(v) for k, v in tpl.attrs.items()}
    if unattached := set(extra) - written:
        group["coordinates"] = " ".join(sorted(unattached))
    return out, group


def _array_kwargs(name: str, arr: StoredArray, attrs: dict[str, Any]) -> dict[str, Any]:
    """``create_array``'s arguments for ``arr``, as xarray passes them: a variable's fill value and chunks,
    a coordinate's zarr defaults (chunks ``auto``; NaN fill for floats, zarr's own for the rest)."""
    fill: Any = arr.fill
    chunks: tuple[int, ...] | str | None = arr.chunks
    if arr.values is not None:
        fill, chunks = (np.nan if arr.dtype.kind == "f" else None), "auto"
    return {
        "name": name,
        "shape": arr.shape,
        "dtype": arr.dtype,
        "fill_value": fill,
        "chunks": chunks,
        "dimension_names": arr.dims,
        "overwrite": False,
        "config": {},
        "attributes": attrs,
    }


def write_template(tpl: StoreTemplate, url: str, storage_options: dict | None = None) -> None:
    """Write ``tpl`` as a new zarr v3 store at ``url``: the group with its attributes first, then every
    array (metadata and attributes in one write) and the coordinates' values, together. An existing
    store is refused (zarr's ``ContainsGroupError`` or ``FileExistsError``, as ``to_zarr(mode="w-")``).
    Not consolidated: the caller consolidates once the store is complete."""
    import zarr

    attrs, group_attrs = _encoded_attrs(tpl)
    group = zarr.open_group(
        url, mode="w-", path=None, storage_options=storage_options, zarr_format=3, use_consolidated=False
    )
    group.attrs.put(group_attrs)
    arrays = {**tpl.data_vars, **tpl.coords}
    try:
        from zarr.core.sync import sync
    except ImportError:  # another zarr layout: one array after another (slower, same objects)
        for name, arr in arrays.items():
            created = group.create_array(**_array_kwargs(name, arr, attrs[name]))
            if arr.values is not None:
                created[...] = arr.values
        return
    import asyncio

    parent = group._async_group

    async def create(name: str, arr: StoredArray) -> None:
        created = await parent.create_array(**_array_kwargs(name, arr, attrs[name]))
        if arr.values is not None:
            await created.setitem(..., arr.values)

    async def create_all() -> None:
        await asyncio.gather(*(create(name, arr) for name, arr in arrays.items()))

    sync(create_all())
