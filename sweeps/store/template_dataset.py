"""The store's template (:func:`geosweep.sweeps.store.schema.store_template`) as an xarray Dataset of
lazily filled Dask arrays, and its ``to_zarr`` encoding: what ``run --grow`` extends a store to
(:mod:`geosweep.sweeps.grow`) and a one-cell :class:`geosweep.Solution` fills. A store is created from
the template with zarr alone (:func:`geosweep.sweeps.store.template_write.write_template`); this
Dataset written by ``to_zarr`` gives the same objects."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from geosweep.sweeps.store.schema import StoreTemplate, store_template

if TYPE_CHECKING:
    from geosweep.sweeps.plan import Plan


def template(plan: Plan, tpl: StoreTemplate | None = None) -> tuple[Any, dict[str, dict]]:
    """The lazily filled xarray Dataset describing the store of ``plan`` (nothing computed), and its
    encoding (fill value and chunks of each variable). ``tpl``: that store template (default: built)."""
    import dask.array as da
    import xarray as xr

    tpl = store_template(plan) if tpl is None else tpl
    data_vars, encoding = {}, {}
    for name, arr in tpl.data_vars.items():
        # one dask chunk: nothing is computed. Named by what it holds: dask's own name pickles the
        # arguments (1 ms an array)
        key = f"geosweep-template-{name}-{arr.dtype}-{arr.fill}-" + "x".join(map(str, arr.shape))
        lazy = da.full(arr.shape, arr.fill, dtype=arr.dtype, chunks=-1, name=key)
        data_vars[name] = xr.Variable(arr.dims, lazy, dict(arr.attrs))
        encoding[name] = {"fill_value": arr.fill, "chunks": arr.chunks}
    coords = {name: xr.Variable(c.dims, c.values, dict(c.attrs)) for name, c in tpl.coords.items()}
    return xr.Dataset(data_vars, coords=coords, attrs=dict(tpl.attrs)), encoding
