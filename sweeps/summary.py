"""Text summaries of a store (used by ``geosweep status`` and the flow's artifact)."""

from __future__ import annotations

import json
import warnings

import numpy as np

from geosweep.sweeps.compact import axis_text, spread
from geosweep.sweeps.store.checks import check_format
from geosweep.sweeps.store.location import StoreRef


class StoreView:
    """The arrays and attributes of a store as the summary reads them: with zarr alone (no xarray,
    no Dask), each array read whole on first use, coordinates included."""

    def __init__(self, ref: StoreRef) -> None:
        self.group = ref.open_group("r")
        self.attrs = dict(self.group.attrs)
        check_format(ref.url, self.attrs)
        self._values: dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.group

    def values(self, name: str) -> np.ndarray:
        """The whole array ``name``."""
        if name not in self._values:
            self._values[name] = np.asarray(self.group[name][...])
        return self._values[name]

    def dims(self, name: str) -> tuple[str, ...]:
        """The dimension names of the array ``name``."""
        return tuple(self.group[name].metadata.dimension_names or ())

    def array_attrs(self, name: str) -> dict:
        return dict(self.group[name].attrs)


def status_counts(view: StoreView) -> dict[str, int]:
    """Cells per status label; labels from the store's ``flag_values``/``flag_meanings`` attrs."""
    attrs = view.array_attrs("status")
    labels = dict(zip((int(v) for v in attrs["flag_values"]), attrs["flag_meanings"].split()))
    values, counts = np.unique(view.values("status"), return_counts=True)
    return {labels.get(int(v), f"status_{int(v)}"): int(c) for v, c in zip(values, counts)}


def partial_lines(view: StoreView, ref: StoreRef, most: int = 10) -> list[str]:
    """Lines naming the partial cells (checkpointed, not complete) with their percentage done
    (read from their checkpoints, :func:`geosweep.sweeps.checkpoints.progress`)."""
    from geosweep.sweeps import checkpoints

    done = view.values("done")
    part = {c: f for c, f in sorted(checkpoints.progress(ref).items()) if len(c) == done.ndim and done[c] != 1}
    if not part:
        return []
    dims = view.dims("done")
    lines = [f"partial cells (resume continues them from their last checkpoint): {len(part)}  "]
    for cell, fraction in list(part.items())[:most]:
        where = ", ".join(f"{d}={view.values(d)[i].item()}" for d, i in zip(dims, cell))
        lines.append(f"- {where}: {100 * fraction:.0f} %  ")
    if len(part) > most:
        lines.append(f"- … and {len(part) - most} more  ")
    return lines


def status_table(store, storage_options: dict | None = None) -> str:
    """Markdown: completion and status counts, then mean|ΔE| per integrator × h. Read by this process
    from the store itself with zarr (never through a Dask cluster that may be active, whose workers may
    see another copy of a local path)."""
    ref = StoreRef.of(store, storage_options)
    view = StoreView(ref)
    status, done_flags = view.values("status"), view.values("done")
    runnable = status != -2
    done = int(((done_flags == 1) & runnable).sum())
    total = int(runnable.sum())
    spec = json.loads(view.attrs["spec"])
    lines = [
        f"## {spec['name']} ({view.attrs['system']})",
        "",
        f"store: `{StoreRef.of(store).url}`  ",
        "axes: " + "; ".join(axis_text(d, list(view.values(d))) for d in view.dims("done")) + "  ",
        t_reached(view.attrs) + "  ",
        f"cells complete: {done}/{total}; status counts: {status_counts(view)}"
        + (" (not_applicable: filler cells of a mixed h/tol grid)" if total < done_flags.size else ""),
        "",
    ]
    lines[-1:-1] = partial_lines(view, ref)
    for metric, meaning in SUMMARY_METRICS:  # the first with a finite value: the quadrotors store no energy error
        if metric in view and (table := _median_table(view, metric, meaning)):
            lines.extend(table)
            break
    return "\n".join(lines)


def t_reached(attrs: dict) -> str:
    """``T reached: …`` with the store's extensions (from → to, when; :mod:`geosweep.sweeps.extension`),
    from the store's attributes ``attrs``."""
    ext = [r["extension"] for r in attrs.get("runs", []) if isinstance(r, dict) and "extension" in r]
    text = f"T reached: {float(attrs['T']):g} (dt_out {float(attrs['dt_out']):g})"
    if ext:
        text += "; extended " + ", ".join(f"{e['from']:g} → {e['to']:g} ({e['when']})" for e in ext[-3:])
    return text


#: what the summary tabulates: the first of these a store holds with a finite value in an ok cell
SUMMARY_METRICS = (
    ("max_rel_energy_error", "max_k |E_k − E_0| / |E_0|"),
    ("e_y_final", "load tracking error |y − y_d| at T"),
)


def _ok_medians(view: StoreView, metric: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """``metric`` where the cell's status is ok (NaN elsewhere), its median over every axis but
    ``integrator``, ``h`` and ``tol`` (NaN where no ok cell), and the dims of that median."""
    values, dims = view.values(metric), view.dims(metric)
    status = view.values("status")
    ok = np.where((status == 0).reshape(status.shape + (1,) * (values.ndim - status.ndim)), values, np.nan)
    other = tuple(i for i, d in enumerate(dims) if d not in ("integrator", "h", "tol"))
    if not other:
        return ok, dims
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: failed/n.a. cells
        return np.nanmedian(ok, axis=other), tuple(d for i, d in enumerate(dims) if i not in other)


def _step_row(med: np.ndarray, dims: tuple[str, ...], i: int, step: str) -> np.ndarray:
    """The medians of integrator ``i`` along ``step`` (the other step axis at its first value)."""
    row = np.take(med, i, axis=dims.index("integrator"))
    rest = [d for d in dims if d != "integrator"]
    for d in [d for d in rest if d != step]:
        row = np.take(row, 0, axis=rest.index(d))
        rest.remove(d)
    return np.atleast_1d(row)


def _median_table(view: StoreView, metric: str, meaning: str) -> list[str]:
    """Markdown tables of ``metric`` per integrator × step (h, tol), the median over the other axes
    of the ok cells; [] when no integrator has a finite value (no heading without a table)."""
    lines: list[str] = []
    med, dims = _ok_medians(view, metric)
    integrators = view.values("integrator")
    adaptive = dict(zip(integrators, view.values("integrator_adaptive")))  # from the store
    for step in [d for d in ("h", "tol") if d in dims]:
        steps = view.values(step)
        shown = spread(list(steps))  # a long step axis: columns spread over it, first and last included
        vals = [f"{step} = {steps[i]:g}" for i in shown]
        axis = dims.index("integrator")
        rows = {
            n: _step_row(med, dims, i, step)
            for i, n in enumerate(integrators)
            if bool(adaptive[n]) == (step == "tol") and bool(np.isfinite(np.take(med, i, axis=axis)).any())
        }
        if not rows:
            continue
        lines.append("| integrator | " + " | ".join(vals) + " |")
        lines.append("|---|" + "---|" * len(vals))
        for name, row in rows.items():
            cells = ["—" if np.isnan(v) else f"{v:.3e}" for v in row[shown]]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        if len(shown) < steps.size:
            lines += ["", f"({len(shown)} columns of {axis_text(step, list(steps))})"]
        lines.append("")
    if not lines:
        return []
    return [f"median over other axes of {metric} ({meaning}; status ok only)", "", *lines]
