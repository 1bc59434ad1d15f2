"""Generic figures of a geosweep Dataset (any family). Each returns a ``Figure`` or ``None``.

Time-series figures show one line per (integrator, h or tol) at a *representative* value of
every other sweep axis (its first label unless chosen, see :func:`representative`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np
import xarray as xr

import analysis  # noqa: F401 - registers ds.geosweep
from analysis.accessor import EVAL_VAR, status_label

STEP_DIMS = ("h", "tol")


def representative(ds: xr.Dataset, select: dict[str, Any] | None = None) -> tuple[xr.Dataset, str]:
    """``ds`` at one label of every sweep axis other than integrator/h/tol, and a description.

    ``select`` maps axis → label; unspecified axes take their first label.
    """
    select = dict(select or {})
    extra = [d for d in ds.geosweep.sweep_dims if d not in ("integrator", *STEP_DIMS)]
    picks = {d: select.get(d, ds[d].values[0]) for d in extra}
    sub = ds.sel(picks) if picks else ds
    desc = ", ".join(f"{d} = {v}" for d, v in picks.items())
    return sub, desc


def cells(ds: xr.Dataset) -> Iterator[tuple[str, Hashable, float, xr.Dataset]]:
    """(integrator, step dim, step value, cell Dataset) for every ok cell of a Dataset whose
    only sweep axes are ``integrator`` and ``h``/``tol`` (see :func:`representative`).

    In a mixed grid an adaptive integrator (coord ``integrator_adaptive``) is labelled by
    ``tol``, the others by ``h``; without that coord, one that ran only at the first ``h``.
    """
    st = ds["status"]
    steps = [d for d in STEP_DIMS if d in st.dims]
    for name in ds["integrator"].values:
        row = st.sel(integrator=name)
        label = steps[0] if steps else ""
        if len(steps) == 2:
            adaptive = ds.geosweep.is_adaptive(str(name))
            if adaptive is not None:
                label = "tol" if adaptive else "h"
            elif row.sizes["h"] > 1 and bool((row.isel(h=slice(1, None)) == -2).all()):
                label = "tol"
        idx = np.argwhere(row.values == 0) if steps else (np.zeros((1, 0), int) if int(row) == 0 else [])
        for cell_idx in idx:
            sel = dict(zip(steps, (int(i) for i in cell_idx)))
            cell = ds.sel(integrator=name).isel(sel)
            value = float(cell[label].values) if label else np.nan
            yield str(name), label, value, cell


def _label(name: str, dim: Hashable, value: float) -> str:
    return f"{name}, {dim} = {value:g}" if dim else name


def _axis_label(da: xr.DataArray) -> str:
    """``long_name [units]`` of a variable (its name if it has no long_name)."""
    units = da.attrs.get("units", "")
    return f"{da.attrs.get('long_name', da.name)}" + (f" [{units}]" if units else "")


def _colors(n: int):
    import matplotlib as mpl

    return [mpl.colormaps["viridis"](x) for x in np.linspace(0.0, 0.85, max(n, 1))]


def _grid(n: int, width: float = 4.2, height: float = 3.3):
    import matplotlib.pyplot as plt

    ncols = min(n, 3)
    nrows = int(np.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def _positive(y: np.ndarray) -> np.ndarray:
    y = np.abs(np.asarray(y, dtype=np.float64))
    return np.where(y > 0, y, np.nan)


def energy_error_vs_time(ds: xr.Dataset, desc: str = ""):
    """|E(t) − E0|/|E0| against t on log–log axes, one panel per integrator, a line per h/tol."""
    rel = ds.geosweep.relative_energy_error()
    ints = [str(n) for n in ds["integrator"].values]
    fig, axes = _grid(len(ints))
    t = ds["time"].values
    drawn = False
    for ax, name in zip(axes, ints):
        runs = [(d, v, c) for n, d, v, c in cells(ds) if n == name]
        for color, (dim, value, cell) in zip(_colors(len(runs)), runs):
            y = _positive(rel.sel({k: cell[k].values for k in ds["status"].dims}).values)
            if np.isfinite(y[t > 0]).any():
                ax.loglog(t[t > 0], y[t > 0], color=color, lw=1, label=f"{dim} = {value:g}" if dim else name)
                drawn = True
        ax.set_title(name)
        ax.set_xlabel(f"time [{ds['time'].attrs.get('units', '')}]")
        ax.set_ylabel("|E − E0| / |E0|")
        ax.grid(True, which="both", alpha=0.3)
        if runs:
            ax.legend(fontsize=7)
    fig.suptitle(f"relative energy error ({ds.attrs.get('system', '')}{'; ' + desc if desc else ''})")
    fig.tight_layout()
    return fig if drawn else None


def energy_envelope(ds: xr.Dataset, desc: str = ""):
    """The envelope of |E − E0|/|E0| over every step of each output interval (store variables
    ``energy_error_lower``/``_upper``) against t on log–log axes, the point samples beside it:
    what a plot of a 10⁶-step cell should show (bounded VI, drifting RK). None without envelopes."""
    if "energy_error_upper" not in ds or "E0" not in ds:
        return None
    ints = [str(n) for n in ds["integrator"].values]
    fig, axes = _grid(len(ints))
    t = ds["time"].values
    pos = t > 0
    drawn = False
    for ax, name in zip(axes, ints):
        runs = [(d, v, c) for n, d, v, c in cells(ds) if n == name]
        for color, (dim, value, cell) in zip(_colors(len(runs)), runs):
            scale = abs(float(cell["E0"].values)) or 1.0
            lo = cell["energy_error_lower"].values / scale
            hi = cell["energy_error_upper"].values / scale
            env = _positive(np.maximum(np.abs(lo), np.abs(hi)))
            pt = _positive(cell["energy_error"].values / scale)
            if np.isfinite(env[pos]).any():
                label = f"{dim} = {value:g}" if dim else name
                ax.loglog(t[pos], env[pos], color=color, lw=1.2, label=f"{label}: max over each interval")
                ax.loglog(t[pos], pt[pos], color=color, lw=0.6, alpha=0.45, ls=":", label=f"{label}: point samples")
                drawn = True
        ax.set_title(name)
        ax.set_xlabel(f"time [{ds['time'].attrs.get('units', '')}]")
        ax.set_ylabel("|E − E0| / |E0|")
        ax.grid(True, which="both", alpha=0.3)
        if runs:
            ax.legend(fontsize=6)
        else:
            ax.text(0.5, 0.5, "no cell finished with status ok", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(f"energy error envelope ({ds.attrs.get('system', '')}{'; ' + desc if desc else ''})")
    fig.tight_layout()
    return fig if drawn else None


def error_vs_step(ds: xr.Dataset, error_var: str | None = None):
    """Summary error against h (and against tol), log–log, with least-squares slopes."""
    acc = ds.geosweep
    error_var = error_var or acc.default_error_var()
    dims = [d for d in STEP_DIMS if d in acc.sweep_dims]
    if not dims:
        return None
    fig, axes = _grid(len(dims), 5.0, 3.8)
    drawn = False
    for ax, dim in zip(axes, dims):
        fit = acc.order(error_var, dim=dim).compute()
        other = [d for d in fit["order"].dims if d != "integrator"]
        for color, name in zip(_colors(fit.sizes["integrator"]), fit["integrator"].values):
            adaptive = acc.is_adaptive(str(name))
            if adaptive is not None and adaptive != (dim == "tol"):
                continue  # a fixed-step method on the tol panel (or adaptive on h) is a filler point
            f = fit.sel(integrator=name)
            if other:  # pick the slice with the most points (e.g. the applicable tol of a fixed-step method)
                best = f["n_points"].argmax(other)
                f = f.isel(best)
            x = f[dim].values
            y = f["error"].values
            if not np.isfinite(y).any():
                continue
            exp = float(f["expected_order"]) if "expected_order" in f.coords else np.nan
            lab = f"{name}: p = {float(f['order']):.2f}" if np.isfinite(f["order"]) else f"{name}"
            if np.isfinite(exp) and dim == "h":
                lab += f" (expected {exp:g})"
            ax.loglog(x, y, "o", color=color, label=lab)
            if np.isfinite(f["order"]):
                xs = np.array([np.nanmin(x[np.isfinite(y)]), np.nanmax(x[np.isfinite(y)])])
                ax.loglog(xs, 10 ** float(f["log10_C"]) * xs ** float(f["order"]), "-", color=color, lw=1)
            drawn = True
        ax.set_xlabel(f"{dim} [{ds[dim].attrs.get('units', '')}]")
        ax.set_ylabel(_axis_label(ds[error_var]))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"{error_var} vs {dim} (ok cells; line: least-squares fit)", fontsize=9)
    fig.tight_layout()
    return fig if drawn else None


def work_precision(ds: xr.Dataset, error_var: str | None = None):
    """Error against wall time and against force evaluations, one line per integrator."""
    import warnings

    acc = ds.geosweep
    costs = ["wall_time"] + ([EVAL_VAR] if EVAL_VAR in ds else [])
    fig, axes = _grid(len(costs), 5.0, 3.8)
    drawn = False
    for ax, cost in zip(axes, costs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the report states the dropped cells once
            df = acc.work_precision(error_var, cost_var=cost)
        ev = df.attrs["error_var"]
        for color, (name, g) in zip(_colors(df["integrator"].nunique()), df.groupby("integrator", sort=False)):
            g = g.sort_values(cost)
            ok = (g[ev] > 0) & (g[cost] > 0)
            if ok.any():
                ax.loglog(g[cost][ok], g[ev][ok], "o-", color=color, lw=1, label=str(name))
                drawn = True
        ax.set_xlabel(f"{cost} [{ds[cost].attrs.get('units', '')}]")
        ax.set_ylabel(ev)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("work–precision (ok cells)")
    fig.tight_layout()
    return fig if drawn else None


def _time_lines(ds: xr.Dataset, series: dict[str, xr.DataArray], title: str):
    fig, axes = _grid(len(series))
    runs = list(cells(ds))
    t = ds["time"].values
    drawn = False
    for ax, (label, da) in zip(axes, series.items()):
        finite = zero = True
        nfin = 0
        for color, (name, dim, value, cell) in zip(_colors(len(runs)), runs):
            sel = {k: cell[k].values for k in ds["status"].dims if k in da.dims}
            raw = np.asarray(da.sel(sel).values, dtype=np.float64)
            finite &= not np.isfinite(raw).any()
            zero &= bool(np.all(raw[np.isfinite(raw)] == 0))
            nfin += int(np.isfinite(raw).sum())
            y = _positive(raw)
            if np.isfinite(y).any():
                ax.semilogy(t, y, color=color, lw=1, label=_label(name, dim, value))
                drawn = True
        if runs and (finite or zero):
            msg = "NaN in every cell (not conserved by this system)" if finite else "identically 0 in every cell"
            ax.text(0.5, 0.5, msg, transform=ax.transAxes, ha="center", va="center", fontsize=9)
            drawn = drawn or (zero and nfin > 0)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel(f"time [{ds['time'].attrs.get('units', '')}]")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, ncol=2)
            break
    fig.suptitle(title)
    fig.tight_layout()
    return fig if drawn else None


CONSTRAINT_VARS = ("unit_error", "tangency_error", "rho_norm_error", "rho_dot_Omega")


def constraint_errors(ds: xr.Dataset, desc: str = ""):
    """Constraint errors (|q| − 1, q·ω, …) against time, log y; None if the family stores none."""
    series = {f"{v} [{ds[v].attrs.get('units', '')}]": ds[v] for v in CONSTRAINT_VARS if v in ds}
    if not series:
        return None
    return _time_lines(ds, series, f"constraint errors{' (' + desc + ')' if desc else ''}")


def momentum_series(ds: xr.Dataset) -> dict[str, xr.DataArray]:
    """Momentum errors over time that the store holds or implies (family-dependent)."""
    out: dict[str, xr.DataArray] = {}
    if "momentum_error" in ds:
        out["momentum_error |J − J0| (or axial)"] = ds["momentum_error"]
    if "J" in ds and "time" in ds["J"].dims:
        out["|J − J0| (J = e3·L)"] = abs(ds["J"] - ds["J"].isel(time=0))
    for v in ("P", "L"):
        if v in ds and "component" in ds[v].dims and "momentum_error" not in ds:
            d = ds[v] - ds[v].isel(time=0)
            out[f"|{v} − {v}0|"] = np.sqrt((d**2).sum("component", min_count=1))
    return out


def momentum_errors(ds: xr.Dataset, desc: str = ""):
    """Momentum-map errors against time, log y."""
    series = momentum_series(ds)
    if not series:
        return None
    return _time_lines(ds, series, f"momentum errors{' (' + desc + ')' if desc else ''}")


#: Colours of the non-failure codes (0 ok, −1 not run, −2 not applicable); failures (> 0) take
#: ``_FAILURE_COLORS`` in code order. Labels come from the data (``flag_meanings``).
_FIXED_COLORS = {0: "#4caf50", -1: "#9e9e9e", -2: "#ffffff"}
_FAILURE_COLORS = ("#e53935", "#fb8c00", "#8e24aa", "#6d4c41", "#d81b60", "#1e88e5", "#fdd835", "#00897b")


def status_colors(codes: list[int]) -> dict[int, str]:
    """A colour per status code: fixed for 0/−1/−2, distinct ones for the failure codes."""
    failures = sorted(c for c in set(codes) if c not in _FIXED_COLORS)
    out = {c: _FAILURE_COLORS[k % len(_FAILURE_COLORS)] for k, c in enumerate(failures)}
    out.update({c: _FIXED_COLORS[c] for c in set(codes) if c in _FIXED_COLORS})
    return out


def status_map(ds: xr.Dataset):
    """Every cell's status: rows integrators, columns the other sweep axes (flattened).

    The legend labels each code present with its ``flag_meanings`` label from the data.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    st = ds["status"]
    other = [d for d in st.dims if d != "integrator"]
    arr = st.transpose("integrator", *other).values.reshape(st.sizes["integrator"], -1).astype(int)
    idx = (
        np.stack(np.meshgrid(*[np.arange(st.sizes[d]) for d in other], indexing="ij"), -1).reshape(-1, len(other))
        if other
        else np.zeros((1, 0), int)
    )
    cols = [
        ", ".join(
            f"{d}={ds[d].values[i]:g}" if np.issubdtype(ds[d].dtype, np.number) else f"{d}={ds[d].values[i]}"
            for d, i in zip(other, row)
        )
        for row in idx
    ]
    labels = ds.geosweep.status_labels()
    colors = status_colors([*labels, *np.unique(arr).tolist()])
    codes = sorted(colors)
    lut = {c: k for k, c in enumerate(codes)}
    img = np.vectorize(lambda s: lut[s])(arr)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * arr.shape[1] + 2.5), max(2.2, 0.45 * arr.shape[0] + 1.6)))
    ax.imshow(img, cmap=ListedColormap([colors[c] for c in codes]), vmin=-0.5, vmax=len(codes) - 0.5, aspect="auto")
    for (r, c), s in np.ndenumerate(arr):
        ax.text(c, r, str(s), ha="center", va="center", fontsize=7)
    ax.set_yticks(range(arr.shape[0]), [str(v) for v in ds["integrator"].values], fontsize=8)
    ax.set_xticks(range(arr.shape[1]), cols, rotation=60, ha="right", fontsize=7)
    ax.set_xticks(np.arange(arr.shape[1] + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(arr.shape[0] + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="k", lw=0.5)
    ax.tick_params(which="minor", length=0)
    present = sorted(set(arr.ravel().tolist()))
    ax.legend(
        handles=[Patch(facecolor=colors[s], edgecolor="k", label=f"{s} {status_label(s, labels)}") for s in present],
        bbox_to_anchor=(1.01, 1),
        loc="upper left",
        fontsize=7,
    )
    ax.set_title("cell status")
    fig.tight_layout()
    return fig
