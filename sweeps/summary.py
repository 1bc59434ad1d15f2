"""Text summaries of a store (used by ``geosweep status`` and the flow's artifact)."""

from __future__ import annotations

import json
import warnings

import numpy as np

from geosweep.sweeps.compact import axis_text, spread
from geosweep.sweeps.store import StoreRef, open_results


def status_counts(ds) -> dict[str, int]:
    """Cells per status label; labels from the store's ``flag_values``/``flag_meanings`` attrs."""
    attrs = ds["status"].attrs
    labels = dict(zip((int(v) for v in attrs["flag_values"]), attrs["flag_meanings"].split()))
    values, counts = np.unique(ds["status"].values, return_counts=True)
    return {labels.get(int(v), f"status_{int(v)}"): int(c) for v, c in zip(values, counts)}


def partial_lines(ds, ref: StoreRef, most: int = 10) -> list[str]:
    """Lines naming the partial cells (checkpointed, not complete) with their percentage done
    (read from their checkpoints, :func:`geosweep.sweeps.checkpoints.progress`)."""
    from geosweep.sweeps import checkpoints

    done = np.asarray(ds["done"].values)
    part = {c: f for c, f in sorted(checkpoints.progress(ref).items()) if len(c) == done.ndim and done[c] != 1}
    if not part:
        return []
    dims = ds["done"].dims
    lines = [f"partial cells (resume continues them from their last checkpoint): {len(part)}  "]
    for cell, fraction in list(part.items())[:most]:
        where = ", ".join(f"{d}={ds[d].values[i].item()}" for d, i in zip(dims, cell))
        lines.append(f"- {where}: {100 * fraction:.0f} %  ")
    if len(part) > most:
        lines.append(f"- … and {len(part) - most} more  ")
    return lines


def status_table(store, storage_options: dict | None = None) -> str:
    """Markdown: completion and status counts, then mean|ΔE| per integrator × h. Read by this process
    from the store itself, never through a Dask cluster that may be active (whose workers may see
    another copy of a local path)."""
    import dask
    from dask import threaded

    # the threaded scheduler given as itself and rechunking by tasks, as Dask chooses them without a
    # client: named by a string, or left to Dask, both import distributed to look for a client first
    # (~0.25 s of a --serial run, which never loads distributed otherwise)
    with dask.config.set({"scheduler": threaded.get, "array.rechunk.method": "tasks"}):
        return _status_table(store, storage_options)


def _status_table(store, storage_options: dict | None = None) -> str:
    ds = open_results(StoreRef.of(store, storage_options))
    runnable = ds["status"] != -2
    done = int(((ds["done"] == 1) & runnable).sum())
    total = int(runnable.sum())
    spec = json.loads(ds.attrs["spec"])
    lines = [
        f"## {spec['name']} ({ds.attrs['system']})",
        "",
        f"store: `{StoreRef.of(store).url}`  ",
        "axes: " + "; ".join(axis_text(d, ds[d].values) for d in ds["done"].dims) + "  ",
        t_reached(ds) + "  ",
        f"cells complete: {done}/{total}; status counts: {status_counts(ds)}"
        + (" (not_applicable: filler cells of a mixed h/tol grid)" if total < ds["done"].size else ""),
        "",
    ]
    lines[-1:-1] = partial_lines(ds, StoreRef.of(store, storage_options))
    for metric, meaning in SUMMARY_METRICS:  # the first with a finite value: the quadrotors store no energy error
        if metric in ds and (table := _median_table(ds, metric, meaning)):
            lines.extend(table)
            break
    return "\n".join(lines)


def t_reached(ds) -> str:
    """``T reached: …`` with the store's extensions (from → to, when; :mod:`geosweep.sweeps.extension`)."""
    ext = [r["extension"] for r in ds.attrs.get("runs", []) if isinstance(r, dict) and "extension" in r]
    text = f"T reached: {float(ds.attrs['T']):g} (dt_out {float(ds.attrs['dt_out']):g})"
    if ext:
        text += "; extended " + ", ".join(f"{e['from']:g} → {e['to']:g} ({e['when']})" for e in ext[-3:])
    return text


#: what the summary tabulates: the first of these a store holds with a finite value in an ok cell
SUMMARY_METRICS = (
    ("max_rel_energy_error", "max_k |E_k − E_0| / |E_0|"),
    ("e_y_final", "load tracking error |y − y_d| at T"),
)


def _median_table(ds, metric: str, meaning: str) -> list[str]:
    """Markdown tables of ``metric`` per integrator × step (h, tol), the median over the other axes
    of the ok cells; [] when no integrator has a finite value (no heading without a table)."""
    lines: list[str] = []
    ok = ds[metric].where(ds["status"] == 0)
    step_dims = [d for d in ("h", "tol") if d in ok.dims]
    other = [d for d in ok.dims if d not in ("integrator", *step_dims)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: failed/n.a. cells
        med = (ok.median(dim=other) if other else ok).compute()
    adaptive = dict(zip(ds["integrator"].values, ds["integrator_adaptive"].values))  # from the store
    for step in step_dims:
        shown = spread(ds[step].values)  # a long step axis: columns spread over it, first and last included
        vals = [f"{step} = {ds[step].values[i]:g}" for i in shown]
        names = [
            n
            for n in ds["integrator"].values
            if bool(adaptive[n]) == (step == "tol") and bool(np.isfinite(med.sel(integrator=n)).any())
        ]
        if not names:
            continue
        lines.append("| integrator | " + " | ".join(vals) + " |")
        lines.append("|---|" + "---|" * len(vals))
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
    if not lines:
        return []
    return [f"median over other axes of {metric} ({meaning}; status ok only)", "", *lines]
