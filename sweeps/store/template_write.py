"""Writing the store's template (:func:`geosweep.sweeps.store.schema.template`) as a new zarr v3 store:
through xarray's own encoding, without the dask graph ``to_zarr(compute=False)`` builds, and with the
arrays created together (:func:`write_template`)."""

from __future__ import annotations

from typing import Any


class _Deferred:
    """What xarray gets for a new array of a template: it records the array's attributes (``attrs.put``)
    and, for a coordinate, its values (:meth:`_TemplateWriter.add`)."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.values: list[tuple[Any, Any]] = []  # (selection, values)
        self.attrs = self

    def put(self, attrs: dict) -> None:
        self.spec["attributes"] = dict(attrs)


class _DeferringGroup:
    """The zarr group xarray writes a template into: it records each new array (:class:`_Deferred`)
    instead of creating it, then its attributes, then its values, each a write of its own; they are
    created together afterwards, each with its attributes in one write (:func:`write_template`).
    Everything else goes to ``group``."""

    def __init__(self, group: Any) -> None:
        self._group = group
        self.deferred: list[_Deferred] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group, name)

    def create(self, name: str, **kwargs: Any) -> _Deferred:
        self.deferred.append(_Deferred({"name": name, **kwargs}))
        return self.deferred[-1]


class _TemplateWriter:
    """xarray's array writer (``xarray.backends.common.ArrayWriter``) for a template: the coordinates'
    values are kept for their arrays (:class:`_Deferred`), the lazily filled data variables are not
    written (their arrays get their metadata only; each shard's writer fills them). ``to_zarr(compute=False)``
    writes the same objects but also builds a dask graph storing every data variable (pickling each
    target array to name its task): ~0.12 s of a 0.3 s store creation at 66 variables, for a graph
    nobody computes."""

    def add(self, source, target: _Deferred, region=None) -> None:
        from xarray.namedarray.pycompat import is_chunked_array

        if not is_chunked_array(source):
            target.values.append((region or ..., source))

    def sync(self, compute: bool = True, chunkmanager_store_kwargs=None) -> None:
        return None


def _xarray_writer() -> tuple[Any, Any, Any] | None:
    """``(dump_to_store, get_writable_zarr_store, sync)`` — xarray's writer functions and zarr's
    ``sync`` — if they and the zarr async API that :func:`write_template` uses are where it expects
    them, else None."""
    try:
        from xarray.backends.writers import dump_to_store, get_writable_zarr_store
        from zarr import AsyncArray, AsyncGroup
        from zarr.core.sync import sync
    except ImportError:
        return None
    if not (hasattr(AsyncGroup, "create_array") and hasattr(AsyncArray, "setitem")):
        return None
    return dump_to_store, get_writable_zarr_store, sync


def write_template(ds: Any, encoding: dict[str, dict], url: str, storage_options: dict | None = None) -> None:
    """Write ``ds`` (:func:`template`) as a new zarr v3 store at ``url``: the same objects, bit for bit,
    as ``ds.to_zarr(url, mode="w-", compute=False, encoding=encoding)`` before consolidation
    (tests/test_template_write.py), through xarray's own encoding, in about half the time: without the
    dask graph nobody computes (:class:`_TemplateWriter`), and with the arrays created together, each
    with its attributes in one write, then the coordinates' values together (:class:`_DeferringGroup`;
    xarray creates an array, writes its attributes, then its values, one after another). The group
    with its attributes is written first, as ``to_zarr`` writes it. An existing store is refused as
    ``to_zarr(mode="w-")`` refuses it (``FileExistsError`` or zarr's ``ContainsGroupError``). Not
    consolidated: the caller consolidates once the store is complete. Falls back to ``to_zarr`` if
    xarray's or zarr's functions used here move."""
    tools = _xarray_writer()
    if tools is None:  # another xarray or zarr layout: the public route (slower, same objects)
        kwargs: dict[str, Any] = {} if storage_options is None else {"storage_options": storage_options}
        ds.to_zarr(url, mode="w-", zarr_format=3, compute=False, consolidated=False, encoding=encoding, **kwargs)
        return
    import asyncio

    dump_to_store, get_writable_zarr_store, sync = tools
    zstore = get_writable_zarr_store(url, mode="w-", consolidated=False, zarr_format=3, storage_options=storage_options)
    group = zstore.zarr_group
    parent = group._async_group
    deferring = zstore.zarr_group = _DeferringGroup(group)
    try:
        dump_to_store(ds, zstore, _TemplateWriter(), encoding=encoding)
    finally:
        zstore.zarr_group = group

    async def create(array: _Deferred) -> None:
        created = await parent.create_array(**array.spec)
        for selection, values in array.values:
            await created.setitem(selection, values)

    async def create_all() -> None:
        await asyncio.gather(*(create(array) for array in deferring.deferred))

    sync(create_all())
