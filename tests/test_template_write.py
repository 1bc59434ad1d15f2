"""A store's template is written with zarr alone (:func:`geosweep.sweeps.store.template_write.write_template`,
no xarray, no Dask): the objects it writes must be the ones xarray's ``to_zarr(compute=False)`` writes
for the same template as a Dataset (:func:`geosweep.sweeps.store.template_dataset.template`), byte for
byte, for every example spec (every family: s2, se3/torus, chain, dg, quadrotors, heavy top), before and
after consolidation; ``xr.open_zarr`` gives identical Datasets; and a store that exists is refused."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import xarray as xr
import zarr
from zarr.errors import ContainsGroupError

from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store.schema import store_template
from geosweep.sweeps.store.template_dataset import template
from geosweep.sweeps.store.template_write import write_template

EXAMPLES = sorted(
    p.name for p in resources.files("geosweep.sweeps").joinpath("examples").iterdir() if p.name.endswith(".toml")
)


def _objects(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _differing(a: Path, b: Path) -> list[str]:
    ours, theirs = _objects(a), _objects(b)
    assert sorted(ours) == sorted(theirs)
    return [k for k in ours if ours[k] != theirs[k]]


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_template_is_written_as_to_zarr_writes_it(tmp_path, name):
    plan = make_plan(str(resources.files("geosweep.sweeps").joinpath("examples", name)))
    tpl = store_template(plan)
    ds, encoding = template(plan, tpl)
    theirs, ours = tmp_path / "xarray.zarr", tmp_path / "ours.zarr"
    ds.to_zarr(theirs, mode="w-", zarr_format=3, compute=False, consolidated=False, encoding=encoding)
    write_template(tpl, str(ours))
    assert len(_objects(ours)) > len(ds.data_vars)  # every array's metadata, the coordinates' values
    assert _differing(ours, theirs) == []
    for store in (theirs, ours):
        zarr.consolidate_metadata(str(store))
    assert _differing(ours, theirs) == []  # the consolidated metadata too
    opened = xr.open_zarr(ours)
    xr.testing.assert_identical(opened, xr.open_zarr(theirs))
    assert set(opened.data_vars) == set(ds.data_vars) and opened.attrs["spec_hash"] == plan.spec.spec_hash


def test_an_existing_store_is_refused(tmp_path):
    tpl = store_template(make_plan(str(resources.files("geosweep.sweeps").joinpath("examples", EXAMPLES[0]))))
    write_template(tpl, str(tmp_path / "s.zarr"))
    before = _objects(tmp_path / "s.zarr")
    with pytest.raises((ContainsGroupError, FileExistsError)):  # as to_zarr(mode="w-")
        write_template(tpl, str(tmp_path / "s.zarr"))
    assert _objects(tmp_path / "s.zarr") == before
