"""A store's template is written through xarray's encoding without the dask graph of
``to_zarr(compute=False)`` and with its arrays created together
(:func:`geosweep.sweeps.store.template_write.write_template`): the objects it writes must be the ones
``to_zarr`` writes, byte for byte, for every example spec (every family), and a store that exists is
refused as before."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import xarray as xr
from zarr.errors import ContainsGroupError

from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store import template_write
from geosweep.sweeps.store.schema import template
from geosweep.sweeps.store.template_write import write_template

EXAMPLES = sorted(
    p.name for p in resources.files("geosweep.sweeps").joinpath("examples").iterdir() if p.name.endswith(".toml")
)


def _objects(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_template_is_written_as_to_zarr_writes_it(tmp_path, name):
    plan = make_plan(str(resources.files("geosweep.sweeps").joinpath("examples", name)))
    ds, encoding = template(plan)
    ds.to_zarr(tmp_path / "xarray.zarr", mode="w-", zarr_format=3, compute=False, consolidated=False, encoding=encoding)
    write_template(ds, encoding, str(tmp_path / "ours.zarr"))
    theirs, ours = _objects(tmp_path / "xarray.zarr"), _objects(tmp_path / "ours.zarr")
    assert len(ours) > len(ds.data_vars)  # every array's metadata, the coordinates' values
    assert sorted(ours) == sorted(theirs)
    assert [k for k in ours if ours[k] != theirs[k]] == []
    opened = xr.open_zarr(tmp_path / "ours.zarr", consolidated=False)
    assert set(opened.data_vars) == set(ds.data_vars)
    assert opened.attrs["spec_hash"] == plan.spec.spec_hash


def test_without_the_writer_functions_it_expects_it_writes_through_to_zarr(tmp_path, monkeypatch):
    """Another xarray or zarr layout (their functions not where write_template expects them): the same
    objects, through ``to_zarr``."""
    plan = make_plan(str(resources.files("geosweep.sweeps").joinpath("examples", EXAMPLES[0])))
    ds, encoding = template(plan)
    write_template(ds, encoding, str(tmp_path / "fast.zarr"))
    monkeypatch.setattr(template_write, "_xarray_writer", lambda: None)
    write_template(ds, encoding, str(tmp_path / "public.zarr"))
    assert _objects(tmp_path / "public.zarr") == _objects(tmp_path / "fast.zarr")


def test_an_existing_store_is_refused(tmp_path):
    plan = make_plan(str(resources.files("geosweep.sweeps").joinpath("examples", EXAMPLES[0])))
    ds, encoding = template(plan)
    write_template(ds, encoding, str(tmp_path / "s.zarr"))
    before = _objects(tmp_path / "s.zarr")
    with pytest.raises((ContainsGroupError, FileExistsError)):  # as to_zarr(mode="w-")
        write_template(ds, encoding, str(tmp_path / "s.zarr"))
    assert _objects(tmp_path / "s.zarr") == before
