"""The closing status table is read from the store with zarr alone (:mod:`geosweep.sweeps.summary`,
issue 50 item 5): the text must be the one the xarray reading gave (kept below as the reference) on
stores of every example spec holding ok, failed, not-run and filler cells, an extension record, and
both h and tol axes (catalogue: a mixed fixed-step/adaptive grid)."""

from __future__ import annotations

import json
import warnings
from importlib import resources

import numpy as np
import pytest
import xarray as xr
import zarr

from geosweep.sweeps.compact import axis_text, spread
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store.schema import store_template
from geosweep.sweeps.store.template_write import write_template
from geosweep.sweeps.summary import SUMMARY_METRICS, status_table

EXAMPLES = sorted(
    p.name for p in resources.files("geosweep.sweeps").joinpath("examples").iterdir() if p.name.endswith(".toml")
)


def _xarray_table(path) -> str:
    """The status table as the xarray reading made it (the lines a store's contents decide)."""
    ds = xr.open_zarr(path)
    runnable = ds["status"] != -2
    done, total = int(((ds["done"] == 1) & runnable).sum()), int(runnable.sum())
    attrs = ds["status"].attrs
    labels = dict(zip((int(v) for v in attrs["flag_values"]), attrs["flag_meanings"].split()))
    values, counts = np.unique(ds["status"].values, return_counts=True)
    ext = [r["extension"] for r in ds.attrs.get("runs", []) if isinstance(r, dict) and "extension" in r]
    reached = f"T reached: {float(ds.attrs['T']):g} (dt_out {float(ds.attrs['dt_out']):g})"
    if ext:
        reached += "; extended " + ", ".join(f"{e['from']:g} → {e['to']:g} ({e['when']})" for e in ext[-3:])
    lines = [
        f"## {json.loads(ds.attrs['spec'])['name']} ({ds.attrs['system']})",
        "",
        f"store: `{path}`  ",
        "axes: " + "; ".join(axis_text(d, ds[d].values) for d in ds["done"].dims) + "  ",
        reached + "  ",
        f"cells complete: {done}/{total}; status counts: "
        + str({labels.get(int(v), f"status_{int(v)}"): int(c) for v, c in zip(values, counts)})
        + (" (not_applicable: filler cells of a mixed h/tol grid)" if total < ds["done"].size else ""),
        "",
    ]
    for metric, meaning in SUMMARY_METRICS:
        if metric in ds and (table := _xarray_median_table(ds, metric, meaning)):
            return "\n".join(lines + table)
    return "\n".join(lines)


def _xarray_median_table(ds, metric: str, meaning: str) -> list[str]:
    lines: list[str] = []
    ok = ds[metric].where(ds["status"] == 0)
    step_dims = [d for d in ("h", "tol") if d in ok.dims]
    other = [d for d in ok.dims if d not in ("integrator", *step_dims)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        med = (ok.median(dim=other) if other else ok).compute()
    adaptive = dict(zip(ds["integrator"].values, ds["integrator_adaptive"].values))
    for step in step_dims:
        shown = spread(ds[step].values)
        vals = [f"{step} = {ds[step].values[i]:g}" for i in shown]
        names = [
            n
            for n in ds["integrator"].values
            if bool(adaptive[n]) == (step == "tol") and bool(np.isfinite(med.sel(integrator=n)).any())
        ]
        if not names:
            continue
        lines += ["| integrator | " + " | ".join(vals) + " |", "|---|" + "---|" * len(vals)]
        for name in names:
            row = med.sel(integrator=name)
            for d in step_dims:
                if d != step:
                    row = row.isel({d: 0})
            cells = ["—" if np.isnan(v) else f"{v:.3e}" for v in np.atleast_1d(row.values)[shown]]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        if len(shown) < ds[step].size:
            lines += ["", f"({len(shown)} columns of {axis_text(step, ds[step].values)})"]
        lines.append("")
    return [f"median over other axes of {metric} ({meaning}; status ok only)", "", *lines] if lines else []


def _filled_store(path, plan, seed: int) -> None:
    """A store of ``plan`` whose cells are ok (most), failed, not run or fillers, with random metrics."""
    write_template(store_template(plan), str(path))
    group = zarr.open_group(str(path), mode="r+")
    rng = np.random.default_rng(seed)
    shape = group["status"].shape
    status = rng.choice(np.array([0, 0, 0, 0, 5, -1], dtype=np.int8), size=shape)
    status[~plan.grid.applicable_mask()] = -2
    group["status"][...] = status
    group["done"][...] = (status != -1).astype(np.int8)
    for metric, _ in SUMMARY_METRICS:
        if metric in group:
            values = rng.lognormal(-20, 3, size=group[metric].shape)
            values[rng.random(values.shape) < 0.1] = np.nan  # an ok cell without a value
            group[metric][...] = values.astype(group[metric].dtype)
    group.attrs["runs"] = [{"cells_run": 3}, {"extension": {"from": 1.0, "to": 2.0, "when": "2026-12-02"}}]
    zarr.consolidate_metadata(str(path))


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_status_table_read_with_zarr_is_the_xarray_one(tmp_path, name):
    plan = make_plan(str(resources.files("geosweep.sweeps").joinpath("examples", name)))
    path = tmp_path / "s.zarr"
    _filled_store(path, plan, seed=len(name))
    text = status_table(str(path))
    assert text == _xarray_table(str(path))
    assert "cells complete:" in text and "extended 1 → 2" in text
