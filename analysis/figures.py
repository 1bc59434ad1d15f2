"""Generic figures of a geosweep Dataset (any family). Each returns a ``Figure`` or ``None``.

Time-series figures show one line per (integrator, h or tol) at one slice of every other sweep
axis (``ds.geosweep.slice()``: the system's declared default, e.g. the sphere's vortex case, or
the labels chosen with ``--sel``). Conventions for every figure: colour = integrator (a
qualitative palette), line style / marker = step size or parameter combination; legends sit
outside the axes; axis labels are ``long_name [units]`` from the data (dimensionless: no
brackets), time carries the system's units; filler (not applicable) and failed cells are never
drawn.
"""

from __future__ import annotations

import textwrap
from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

import geosweep  # noqa: F401 - registers ds.geosweep
from geosweep.analysis.accessor import EPS, EVAL_VAR, status_label

STEP_DIMS = ("h", "tol")
STYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
#: a jump of more than this many decades between two samples makes a log time axis misleading
JUMP_DECADES = 2.0
#: samples a level must hold before a jump for the jump to be an event, not the start-up rise
JUMP_MIN_BEFORE = 5


def representative(ds: xr.Dataset, select: dict[str, Any] | None = None) -> tuple[xr.Dataset, str]:
    """``ds`` at one label of every sweep axis other than integrator/h/tol, and a description.

    ``select`` maps axis → label; unspecified axes take the system's default slice
    (:meth:`GeosweepAccessor.default_selection`).
    """
    return ds.geosweep.slice(select)


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


def units_text(units: Any) -> str:
    """``" [units]"``, or ``""`` for dimensionless (``"1"``) or missing units."""
    u = str(units or "").strip()
    return "" if u.replace(" ", "") in ("", "1", "1/1") else f" [{u}]"


#: Short axis names of stored variables whose long_name is a definition, not a name.
SHORT_NAMES = {
    "energy_error_38": "RMS relative energy error (003 eq. 38)",
    "global_error": "global error ‖y(T) − y_ref(T)‖",
    "momentum_error": "momentum error",
    "casimir_error": "Casimir error",
    "max_casimir_error": "max Casimir error",
    "f_evals": "force / gradient evaluations",
}


_SMALL_WORDS = frozenset({"a", "an", "the", "of", "on", "in", "at", "to", "for", "and", "or", "with", "by"})


def short_name(text: str, limit: int = 48) -> str:
    """A long_name without its explanatory tail: the part after ``"; "`` (e.g. ``"; NaN if none"``)
    and a leading source reference (``"paper (38): "``) always go; if still longer than
    ``limit``, it is cut at ``", "``, ``" ("`` or ``" against "``: the first cut that leaves
    balanced brackets and no dangling operator."""
    text = text.split("; ")[0].strip()
    text += ")" * max(text.count("(") - text.count(")"), 0)  # a bracket the cut left open
    head, sep, rest = text.partition(": ")
    if sep and len(head) <= 20 and ("paper" in head or "spec" in head):
        text = rest
    if len(text) <= limit:
        return text
    seps = (", ", " (", " against ", " in ")
    cuts = sorted(i for sep in seps for i in range(12, len(text)) if text.startswith(sep, i))
    for i in cuts:
        head = text[:i].rstrip()
        balanced = all(head.count(a) == head.count(b) for a, b in ("()", "[]", "{}"))
        dangling = head[-1] in "/+−-*·=" or head.rsplit(" ", 1)[-1] in _SMALL_WORDS
        if balanced and not dangling and len(head) <= limit:
            return head
    return text[: limit - 1] + "…"


def axis_label(da: xr.DataArray, width: int = 42) -> str:
    """``long_name [units]`` of a variable (long names shortened), wrapped; never the raw variable
    name if a long_name exists."""
    name = SHORT_NAMES.get(str(da.name)) or short_name(str(da.attrs.get("long_name") or str(da.name).replace("_", " ")))
    return textwrap.fill(name + units_text(da.attrs.get("units")), width)


_axis_label = axis_label  # backwards-compatible name


def time_label(ds: xr.Dataset) -> str:
    """The time axis label with the system's time units (from the store's ``time`` coordinate)."""
    units = str(ds["time"].attrs.get("units", "")).strip()
    return "time (nondimensional)" if units in ("", "1") else f"time [{units}]"


def step_label(ds: xr.Dataset, dim: str) -> str:
    return f"{'step size h' if dim == 'h' else 'tolerance tol'}{units_text(ds[dim].attrs.get('units'))}"


def integrator_colors(names: list[str]) -> dict[str, Any]:
    """A distinct qualitative colour per integrator (tab10, then tab20)."""
    import matplotlib as mpl

    cmap = mpl.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {n: cmap(k % cmap.N) for k, n in enumerate(names)}


def _colors(n: int):
    import matplotlib as mpl

    return [mpl.colormaps["viridis"](x) for x in np.linspace(0.0, 0.8, max(n, 1))]


def _grid(n: int, width: float = 4.0, height: float = 3.2, sharey: bool = False, ncols: int = 3):
    import matplotlib.pyplot as plt

    ncols = min(n, ncols)
    nrows = int(np.ceil(n / ncols))
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(width * ncols + 2.2, height * nrows + 0.4),
        squeeze=False,
        sharey=sharey,
        layout="constrained",
    )
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, list(axes.ravel()[:n])


def legend_outside(fig, axes, title: str | None = None, fontsize: float = 7) -> None:
    """One legend for the figure, right of every axes (unique labels, in drawing order)."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        ncol = min(4, len(seen)) if len(seen) > 6 else len(seen)
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=ncol, fontsize=fontsize,
                   title=title, title_fontsize=fontsize, frameon=False)  # fmt: skip


#: the most entries a legend may have (larger ones are split into colour and line-style keys)
MAX_LEGEND = 12
#: values at or below ``LOG_FLOOR_ULPS · ε · scale`` are zero for a log axis (noted in the panel)
LOG_FLOOR_ULPS = 0.01


def key_legend(fig, colors: dict[str, Any], styles: dict[str, dict[str, Any]], fontsize: float = 7,
               title: str | None = None) -> None:  # fmt: skip
    """One legend below the figure with two keys: colour = integrator (``colors``: name → colour)
    and line style / marker = step or parameter set (``styles``: label → Line2D keywords), so it has
    len(colors) + len(styles) entries instead of their product."""
    from matplotlib.lines import Line2D

    from geosweep.sweeps.compact import MAX_LISTED, spread

    handles = [Line2D([], [], color=c, lw=2.2, label=n) for n, c in colors.items()]
    labels = list(styles)
    shown = [labels[i] for i in spread(labels, MAX_LISTED)]  # many parameter sets: a few keys, and their count
    handles += [Line2D([], [], **{"color": "0.35", "lw": 1.2, **styles[lab]}, label=lab) for lab in shown]
    if len(shown) < len(labels):
        handles.append(Line2D([], [], color="none", label=f"… {len(labels) - len(shown)} more of {len(labels)}"))
    if handles:
        ncol = min(6, max(len(colors), len(styles), 1))
        fig.legend(handles=handles, loc="outside lower center", ncol=ncol, fontsize=fontsize, frameon=False,
                   title=title, title_fontsize=fontsize)  # fmt: skip


def log_values(y: np.ndarray, floor: float) -> tuple[np.ndarray, int]:
    """``|y|`` for a log axis: values at or below ``floor`` (exact zeros, and rounding noise far
    below round-off such as 1e-45) become NaN; returns them and how many samples after the first
    (t = 0, the reference) were finite but at or below the floor. ``floor`` is
    ``LOG_FLOOR_ULPS · ε · max(scale, 1)`` for a quantity of magnitude ``scale``."""
    a = np.abs(np.asarray(y, dtype=np.float64))
    low = np.isfinite(a) & (a <= floor)
    return np.where(low, np.nan, a), int(low[1:].sum()) if a.ndim == 1 else int(low.sum())


def note_zeros(ax, zeros: dict[str, tuple[int, int]], floor: float) -> None:
    """Say in the panel which curves had samples at 0 (or ≤ ``floor``) that a log axis cannot show."""
    hit = {n: (k, m) for n, (k, m) in zeros.items() if k}
    if not hit:
        return

    def pct(k: int, m: int) -> str:
        x = 100.0 * k / max(m, 1)
        return "< 1 %" if x < 1 else f"{x:.0f} %"

    most = sorted(hit.items(), key=lambda kv: -kv[1][0] / max(kv[1][1], 1))  # the most zeros first
    what = ", ".join(f"{n} {pct(k, m)}" for n, (k, m) in most[:2])
    more = f" +{len(hit) - 2} more" if len(hit) > 2 else ""
    text = textwrap.fill(f"0 (≤ {floor:.0e}), not drawn: {what}{more} of samples", 52)
    ax.text(0.01, 0.01, text, transform=ax.transAxes,
            fontsize=6, color="0.25", va="bottom", ha="left",
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.7", alpha=0.85))  # fmt: skip


def readable_log_ticks(ax, axis: str = "x") -> None:
    """Log-axis ticks that do not overlap: no minor labels; 1-2-5 labels in plain ``%g`` when the
    data span less than two decades (else one label per decade)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    a = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    a.set_minor_formatter(NullFormatter())
    if lo > 0 and hi > 0 and np.log10(hi / lo) < 2.0:
        a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _positive(y: np.ndarray) -> np.ndarray:
    y = np.abs(np.asarray(y, dtype=np.float64))
    return np.where(y > 0, y, np.nan)


def jump_dominates(ys: list[np.ndarray]) -> bool:
    """True if some curve jumps up by more than :data:`JUMP_DECADES` between two samples and stays
    there (median level after vs before), after holding a level for at least
    :data:`JUMP_MIN_BEFORE` samples: an event such as the torus's wall impact (round-off until
    t ≈ 0.5, 2 % of the samples of ``torus_impact.toml``, then 1e-3). A linear time axis shows the
    long run after such an event; a log one squeezes it. A rise over the first few samples is the
    start-up, not an event."""
    for y in ys:
        ly = np.log10(y[np.isfinite(y)]) if np.isfinite(y).any() else np.array([])
        if ly.size < 2 * JUMP_MIN_BEFORE:
            continue
        for k in np.flatnonzero(np.diff(ly) > JUMP_DECADES):
            if k + 1 >= JUMP_MIN_BEFORE and np.median(ly[k + 1 :]) - np.median(ly[: k + 1]) > JUMP_DECADES:
                return True
    return False


def _step_styles(ds: xr.Dataset, runs: list[tuple[str, Hashable, float, xr.Dataset]]) -> dict[tuple, Any]:
    keys = sorted({(str(d), v) for _, d, v, _ in runs}, key=lambda k: (k[0], -k[1]))
    return {k: STYLES[i % len(STYLES)] for i, k in enumerate(keys)}


def _title(ds: xr.Dataset, what: str, desc: str) -> str:
    return f"{what} — {ds.attrs.get('system', '')}{'; ' + desc if desc else ''}"


def energy_error_vs_time(ds: xr.Dataset, desc: str = ""):
    """|E(t) − E0|/|E0| against t, one panel per integrator on one shared y scale, a line per h/tol.

    Log–log, unless a jump of more than two decades dominates (then linear time, log error)."""
    rel = ds.geosweep.relative_energy_error()
    runs = list(cells(ds))
    ints = [n for n in (str(i) for i in ds["integrator"].values) if any(r[0] == n for r in runs)]
    if not ints:
        return None
    t = ds["time"].values
    pos = t > 0
    curves, zeros = [], {}
    floor = LOG_FLOOR_ULPS * EPS  # of a relative error
    for name, dim, value, cell in runs:
        y, low = log_values(rel.sel({k: cell[k].values for k in ds["status"].dims}).values, floor)
        zeros.setdefault(name, {})[f"{dim} = {value:g}" if dim else name] = (low, int(np.isfinite(y[1:]).sum()) + low)
        if np.isfinite(y[pos]).any():
            curves.append((name, dim, value, y))
    if not curves:
        return None
    linear_t = jump_dominates([c[3] for c in curves])
    styles = _step_styles(ds, runs)
    colors = _colors(len(styles))
    color_of = {k: colors[i] for i, k in enumerate(styles)}
    fig, axes = _grid(len(ints), sharey=True)
    for ax, name in zip(axes, ints):
        for n, dim, value, y in curves:
            if n != name:
                continue
            k = (str(dim), value)
            label = f"{dim} = {value:g}" if dim else name
            if linear_t:
                ax.semilogy(t[pos], y[pos], ls=styles[k], color=color_of[k], lw=1.1, label=label)
            else:
                ax.loglog(t[pos], y[pos], ls=styles[k], color=color_of[k], lw=1.1, label=label)
                readable_log_ticks(ax, "x")
        note_zeros(ax, zeros.get(name, {}), floor)
        readable_log_ticks(ax, "y")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(time_label(ds) + (" (linear: a jump dominates)" if linear_t else ""), fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("|E − E0| / |E0|")
    legend_outside(fig, axes, "step")
    fig.suptitle(_title(ds, "relative energy error", desc), fontsize=10)
    return fig


def energy_envelope(ds: xr.Dataset, desc: str = ""):
    """The envelope of |E − E0|/|E0| over every step of each output interval (store variables
    ``energy_error_lower``/``_upper``) against t on log–log axes, the point samples beside it:
    what a plot of a 10⁶-step cell should show (bounded VI, drifting RK). None without envelopes."""
    if "energy_error_upper" not in ds or "E0" not in ds:
        return None
    runs = list(cells(ds))
    ints = [n for n in (str(i) for i in ds["integrator"].values) if any(r[0] == n for r in runs)]
    t = ds["time"].values
    pos = t > 0
    curves = []
    for name, dim, value, cell in runs:
        scale = abs(float(cell["E0"].values)) or 1.0
        lo = cell["energy_error_lower"].values / scale
        hi = cell["energy_error_upper"].values / scale
        env = _positive(np.maximum(np.abs(lo), np.abs(hi)))
        pt = _positive(cell["energy_error"].values / scale)
        if np.isfinite(env[pos]).any():
            curves.append((name, dim, value, env, pt))
    if not curves:
        return None
    linear_t = jump_dominates([c[3] for c in curves])
    styles = _step_styles(ds, runs)
    colors = _colors(len(styles))
    color_of = {k: colors[i] for i, k in enumerate(styles)}
    fig, axes = _grid(len(ints), sharey=True)
    for ax, name in zip(axes, ints):
        plot = ax.semilogy if linear_t else ax.loglog
        for n, dim, value, env, pt in curves:
            if n != name:
                continue
            k = (str(dim), value)
            label = f"{dim} = {value:g}" if dim else name
            plot(t[pos], env[pos], ls=styles[k], color=color_of[k], lw=1.2, label=label)
            plot(t[pos], pt[pos], color=color_of[k], lw=0.6, alpha=0.5, ls=":")
            if not linear_t:
                readable_log_ticks(ax, "x")
        readable_log_ticks(ax, "y")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(time_label(ds) + (" (linear: a jump dominates)" if linear_t else ""), fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("|E − E0| / |E0|")
    key_legend(fig, {}, {**{f"{d} = {v:g}" if d else "line": {"ls": styles[(d, v)], "color": color_of[(d, v)]}
                            for d, v in styles},
                         "max over each interval": {"lw": 1.2}, "point samples": {"ls": ":", "lw": 0.6}})  # fmt: skip
    fig.suptitle(_title(ds, "energy error envelope", desc), fontsize=10)
    return fig


def order_comment(
    order: float,
    stderr: float,
    n: int,
    expected: float,
    dim: str,
    regime: str = "fitted",
    n_roundoff: int = 0,
    error_range: tuple[float, float] | None = None,
) -> str:
    """How to read an observed order: against the nominal order for ``h`` (fixed-step methods),
    as a plain slope for ``tol`` (adaptive methods: there is no nominal value to match). ``regime``
    (from :meth:`GeosweepAccessor.order`) says when there is no order to read: every error at
    round-off, or O(1) errors that barely fall (pre-asymptotic; ``error_range`` = (largest h's
    error, smallest h's error))."""
    if regime == "round-off":
        return f"every error at round-off ({n_roundoff} points): exact to machine precision, no order to fit"
    if regime == "pre-asymptotic":
        ok = error_range is not None and np.isfinite(error_range).all()
        what = f"errors {error_range[0]:.3g} … {error_range[1]:.3g}" if ok else "errors"
        slope = f" (slope {order:.2f})" if np.isfinite(order) else ""
        return (f"pre-asymptotic: {what} are O(1) and barely fall{slope}; not in the asymptotic regime, "
                "the slope is not an order — refine the step")  # fmt: skip
    if not np.isfinite(order):
        return "too few points"
    parts = []
    if n < 3 or not np.isfinite(stderr):
        parts.append(f"{n} points: no standard error")
    if dim == "tol":
        parts.append("slope vs tol (≈ 1 for a tolerance-proportional controller; not an order in h)")
    elif np.isfinite(expected):
        gap = order - expected
        if abs(gap) <= 0.3:
            parts.append(f"matches the nominal order {expected:g}")
        elif gap > 0:
            parts.append(f"above the nominal {expected:g}: pre-asymptotic or error cancellation; refine h")
        else:
            parts.append(f"below the nominal {expected:g}: not in the asymptotic regime (or a non-smooth event)")
    if n_roundoff:
        parts.append(f"{n_roundoff} more point{'s' if n_roundoff > 1 else ''} at round-off, left out of the fit")
    return "; ".join(parts)


def _fit_label(name: str, f: xr.Dataset, dim: str) -> str:
    """Legend text of one fit: ``name: p = 4.00 ± 0.02 (nominal 4)``, or why there is no order."""
    p, se, n = float(f["order"]), float(f["order_stderr"]), int(f["n_points"])
    regime = str(f["regime"].values) if "regime" in f else "fitted"
    k = int(f["n_roundoff"]) if "n_roundoff" in f else 0
    if regime == "round-off":
        return f"{name}: at round-off (×), no order"
    if regime == "pre-asymptotic":
        return f"{name}: pre-asymptotic (slope {p:.2f}), not an order"
    lab = name
    if np.isfinite(p):
        exp = float(f["expected_order"]) if "expected_order" in f.coords else np.nan
        lab += f": {'slope' if dim == 'tol' else 'p'} = {p:.2f}"
        lab += f" ± {se:.2f}" if n >= 3 and np.isfinite(se) else ""
        lab += f" (nominal {exp:g})" if dim == "h" and np.isfinite(exp) else ""
        lab += "" if n >= 3 else f" [{n} pts]"
    return lab + (f"; {k} at round-off (×)" if k else "")


def error_vs_step(ds: xr.Dataset, error_var: str | None = None, desc: str = ""):
    """Summary error against h (fixed-step methods) and against tol (adaptive methods), log–log,
    with least-squares slopes; a method appears only on the axis it was swept over, an axis only
    if it has at least two values. Errors at round-off are drawn as × and left out of the fit."""
    acc = ds.geosweep
    error_var = error_var or acc.default_error_var()
    dims = [d for d in STEP_DIMS if d in acc.sweep_dims and ds.sizes[d] >= 2]
    if not dims or error_var not in ds:
        return None
    colors = integrator_colors([str(n) for n in ds["integrator"].values])
    fig, axes = _grid(len(dims), 4.6, 3.6)
    drawn = False
    import warnings

    from geosweep.analysis.accessor import CellsDroppedWarning

    for ax, dim in zip(axes, dims):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CellsDroppedWarning)
            fit = acc.order(error_var, dim=dim).compute()
        other = [d for d in fit["order"].dims if d != "integrator"]
        k = 0
        for name in fit["integrator"].values:
            adaptive = acc.is_adaptive(str(name))
            if adaptive is not None and adaptive != (dim == "tol"):
                continue  # a fixed-step method on the tol panel (or adaptive on h) would be a filler point
            f = fit.sel(integrator=name)
            if other:  # the slice with the most points (the applicable tol of a fixed-step method)
                f = f.isel(f["n_points"].argmax(other) if int(f["n_points"].max()) else f["n_roundoff"].argmax(other))
            x, y = f[dim].values, f["error"].values
            good = np.isfinite(y) & (y > 0)
            rnd = f["roundoff"].values if "roundoff" in f else np.zeros_like(good)
            if not good.any() and not rnd.any():
                continue
            p = float(f["order"])
            c = colors[str(name)]
            m = MARKERS[k % len(MARKERS)]
            if good.any():
                ax.loglog(x[good], y[good], m, color=c, mfc="none", mew=1.4, ms=7 + 2 * (k % 3),
                          label=_fit_label(str(name), f, dim))  # fmt: skip
            if rnd.any():
                vals = f["roundoff_error"].values
                ax.loglog(x[rnd], vals[rnd], "x", color=c, mew=1.4, ms=8,
                          label=None if good.any() else _fit_label(str(name), f, dim))  # fmt: skip
            if np.isfinite(p) and str(f["regime"].values) == "fitted":
                xs = np.array([x[good].min(), x[good].max()])
                ax.loglog(xs, 10 ** float(f["log10_C"]) * xs**p, "--", color=c, lw=1)
            k += 1
            drawn = True
        ax.set_xlabel(step_label(ds, dim))
        ax.set_ylabel(axis_label(ds[error_var], 36), fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        steps = np.unique(ds[dim].values.astype(np.float64))
        if 1 < len(steps) <= 6:  # label exactly the swept values
            from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

            ax.xaxis.set_major_locator(FixedLocator(steps))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
        else:
            readable_log_ticks(ax, "x")
        readable_log_ticks(ax, "y")
        ax.set_title(f"{'fixed-step methods vs h' if dim == 'h' else 'adaptive methods vs tol'}", fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
        else:
            ax.text(0.5, 0.5, f"no ok cell with a finite {error_var}", transform=ax.transAxes, ha="center", fontsize=8)
    fig.suptitle(_title(ds, "error against step size (ok cells; dashed: least-squares fit; ×: at round-off)", desc),
                 fontsize=10)  # fmt: skip
    return fig if drawn else None


def _natural(text: str) -> list:
    """Sort key that orders numbers by value (``N = 2`` before ``N = 10``)."""
    import re

    number = r"[-+]?\d+(?:\.\d*)?(?:e[-+]?\d+)?"
    return [(0, float(t), "") if re.fullmatch(number, t) else (1, 0.0, t) for t in re.split(f"({number})", text) if t]


def _combo(row, dims: list[str]) -> str:
    return ", ".join(f"{d} = {row[d]:g}" if isinstance(row[d], float) else f"{d} = {row[d]}" for d in dims)


#: parameter sets (per integrator) beyond which :func:`work_precision` draws, per integrator, the median
#: over the parameter sets at each step size with 10–90 % bars instead of one curve per set
MAX_CURVES = 12
#: the percentiles of those bars
BAND = (10.0, 90.0)


def work_precision(ds: xr.Dataset, error_var: str | None = None):
    """Error against wall time and against force evaluations: one curve per (integrator,
    parameter combination), its points (step sizes or tolerances) sorted by cost, with markers.

    With more than :data:`MAX_CURVES` parameter combinations (an ensemble), one curve per
    integrator instead: at each step size (or tolerance) the median cost and median error over
    the combinations, with bars from the 10th to the 90th percentile of each — a bounded figure
    at any number of cells."""
    import warnings

    acc = ds.geosweep
    error_var = error_var or acc.default_error_var()
    if error_var not in ds:
        return None
    costs = ["wall_time"] + ([EVAL_VAR] if EVAL_VAR in ds else [])
    params = [str(d) for d in acc.sweep_dims if d not in ("integrator", *STEP_DIMS)]
    colors = integrator_colors([str(n) for n in ds["integrator"].values])
    fig, axes = _grid(len(costs), 4.6, 3.6, sharey=True)
    drawn = False
    combos: list[str] = []
    names: set[str] = set()
    ensemble = 0  # parameter sets aggregated (0: one curve each)
    for ax, cost in zip(axes, costs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the report states the dropped cells once
            df = acc.work_precision(error_var, cost_var=cost)
        df = df[(df[error_var] > 0) & (df[cost] > 0)]
        n_sets = len(df.drop_duplicates(params)) if params else 1
        if n_sets > MAX_CURVES:
            ensemble = max(ensemble, n_sets)
            names |= _median_curves(ax, df, error_var, cost, colors)
            drawn = drawn or bool(names)
        else:
            groups = df.groupby(["integrator", *params], sort=False) if params else df.groupby("integrator", sort=False)
            new = sorted({_combo(g.iloc[0], params) for _, g in groups} - set(combos), key=_natural) if params else [""]
            combos += [c for c in new if c not in combos]
            for _, g in groups:
                name = str(g["integrator"].iloc[0])
                combo = _combo(g.iloc[0], params) if params else ""
                k = combos.index(combo)
                g = g.sort_values(cost)
                ax.loglog(g[cost], g[error_var], marker=MARKERS[k % len(MARKERS)], ls=STYLES[k % len(STYLES)],
                          color=colors[name], lw=1, ms=5, label=f"{name}{', ' + combo if combo else ''}")  # fmt: skip
                names.add(name)
                drawn = True
        ax.set_xlabel(axis_label(ds[cost], 36) if cost != "wall_time" else "wall time [s]", fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        readable_log_ticks(ax, "x")
        readable_log_ticks(ax, "y")
    axes[0].set_ylabel(axis_label(ds[error_var], 36), fontsize=8)
    keys = {c: {"marker": MARKERS[k % len(MARKERS)], "ls": STYLES[k % len(STYLES)]} for k, c in enumerate(combos)}
    if ensemble:
        lo, hi = BAND
        keys = {f"median over {ensemble} parameter sets, bars {lo:g}–{hi:g} %": {"marker": "o", "ls": "-"}}
    key_legend(fig, {n: colors[n] for n in map(str, ds["integrator"].values) if n in names}, keys if params else {})
    system = ds.attrs.get("system", "")
    what = "median per integrator over the parameter sets" if ensemble else "a curve per integrator and parameter set"
    fig.suptitle(f"work–precision (ok cells; {what}) — {system}", fontsize=10)
    return fig if drawn else None


def _median_curves(ax, df: pd.DataFrame, error_var: str, cost: str, colors: dict[str, Any]) -> set[str]:
    """Per integrator, one curve through the median (cost, error) at each step size, sorted by cost,
    with bars from the :data:`BAND` percentiles of each; returns the integrators drawn."""
    steps = [d for d in STEP_DIMS if d in df.columns]
    q = [BAND[0] / 100, 0.5, BAND[1] / 100]
    stats = df.groupby(["integrator", *steps], sort=False)[[cost, error_var]].quantile(q).unstack()
    names = set()
    for name, g in stats.groupby(level="integrator", sort=False):
        g = g.sort_values((cost, 0.5))
        x, y = g[cost].to_numpy(), g[error_var].to_numpy()  # columns: the percentiles q
        bars = {"xerr": np.abs(x[:, [0, 2]] - x[:, [1]]).T, "yerr": np.abs(y[:, [0, 2]] - y[:, [1]]).T}
        ax.errorbar(x[:, 1], y[:, 1], **bars, marker="o", ls="-", color=colors[str(name)], lw=1, ms=5,
                    elinewidth=0.8, capsize=2, label=str(name))  # fmt: skip
        names.add(str(name))
    ax.set_xscale("log")
    ax.set_yscale("log")
    return names


def _series_state(ds: xr.Dataset, da: xr.DataArray) -> str | None:
    """None if ``da`` has finite, non-zero values in some ok cell; else why the panel is skipped."""
    ok = ds["status"] == 0
    vals = np.asarray(da.where(ok).values, dtype=np.float64)
    fin = vals[np.isfinite(vals)]
    if fin.size == 0:
        return "NaN in every ok cell (not conserved or not defined here)"
    if bool(np.all(fin == 0)):
        return (
            "identically 0 for every method in this store (e.g. a planar initial condition makes it 0 whatever "
            "the integrator): a property of the problem, not a sign of an exact method"
        )
    return None


def time_lines(ds: xr.Dataset, series: dict[str, xr.DataArray], title: str):
    """Log-y panels of time series, colour = integrator, line style = step size; one shared legend.

    Panels whose values are NaN or identically 0 in every ok cell are not drawn; returns
    ``(figure or None, notes)`` with one note per skipped panel."""
    notes, keep = [], {}
    for label, da in series.items():
        why = _series_state(ds, da)
        if why:
            notes.append(f"{label}: {why}; panel omitted")
        else:
            keep[label] = da
    if not keep:
        return None, notes
    runs = list(cells(ds))
    order = [str(n) for n in ds["integrator"].values]
    colors = integrator_colors(order)
    styles = _step_styles(ds, runs)
    t = ds["time"].values
    fig, axes = _grid(len(keep))
    drawn: set[str] = set()
    for ax, (label, da) in zip(axes, keep.items()):
        floor = LOG_FLOOR_ULPS * EPS * max(float(da.attrs.get("roundoff_scale", 1.0) or 1.0), 1.0)
        zeros: dict[str, tuple[int, int]] = {}
        for name, dim, value, cell in runs:
            sel = {k: cell[k].values for k in ds["status"].dims if k in da.dims}
            sub = da.sel(sel)
            if "time" not in sub.dims:
                continue
            extra = [d for d in sub.dims if d != "time"]
            y, low = log_values(sub.max(extra).values if extra else sub.values, floor)
            k, m = zeros.get(name, (0, 0))
            zeros[name] = (k + low, m + int(np.isfinite(y[1:]).sum()) + low)
            if np.isfinite(y).any():
                width = max(0.8, 2.6 - 0.6 * order.index(name))  # earlier integrators wider: equal curves stay visible
                ax.semilogy(t, y, color=colors[name], ls=styles[(str(dim), value)], lw=width,
                            label=_label(name, dim, value))  # fmt: skip
                drawn.add(name)
        note_zeros(ax, zeros, floor)
        ax.set_title(textwrap.fill(label.split(" [")[0], 48), fontsize=8)
        readable_log_ticks(ax, "y")
        ax.set_ylabel(units_text(da.attrs.get("units")).strip(" []") or "dimensionless", fontsize=8)
        ax.set_xlabel(time_label(ds), fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    key_legend(fig, {n: colors[n] for n in order if n in drawn}, _style_keys(styles))
    fig.suptitle(title, fontsize=10)
    return fig, notes


def _style_keys(styles: dict[tuple, Any]) -> dict[str, dict[str, Any]]:
    """Legend keys of the step line styles (``h = 0.01`` → ``{"ls": "--"}``)."""
    return {(f"{d} = {v:g}" if d else "line"): {"ls": ls} for (d, v), ls in styles.items()}


_time_lines = time_lines


CONSTRAINT_VARS = ("unit_error", "tangency_error", "rho_norm_error", "rho_dot_Omega", "constraint_error")


def constraint_errors(ds: xr.Dataset, desc: str = ""):
    """Constraint errors (|q| − 1, q·ω, …) against time, log y: ``(figure or None, notes)``."""
    series = {axis_label(ds[v], 200): ds[v] for v in CONSTRAINT_VARS if v in ds}
    if not series:
        return None, []
    return time_lines(ds, series, _title(ds, "constraint errors", desc))


def momentum_series(ds: xr.Dataset) -> dict[str, xr.DataArray]:
    """Momentum errors over time, only where the momentum is conserved (family-dependent).

    With wall contacts (torus: ``first_wall_contact_t``), |P − P0| and |L − L0| are shown only
    before the first contact: the wall exerts a force and a torque, so P and L are not conserved
    through contact (the store's ``P_drift_free``/``L_drift_free`` summarise the drift inside
    every contact-free window)."""
    out: dict[str, xr.DataArray] = {}
    if "momentum_error" in ds:
        out[axis_label(ds["momentum_error"], 200)] = ds["momentum_error"]
    if "J" in ds and "time" in ds["J"].dims:
        out["|J − J0| (J = e3·L, vertical angular momentum)"] = abs(ds["J"] - ds["J"].isel(time=0)).assign_attrs(
            units=ds["J"].attrs.get("units", ""), roundoff_scale=_scale(ds["J"].isel(time=0))
        )
    if "dJ3" in ds and "time" in ds["dJ3"].dims:
        out[axis_label(ds["dJ3"], 200)] = abs(ds["dJ3"]).assign_attrs(units=ds["dJ3"].attrs.get("units", ""))
    for v in ("P", "L"):
        if v in ds and "component" in ds[v].dims and "momentum_error" not in ds:
            d = ds[v] - ds[v].isel(time=0)
            err = np.sqrt((d**2).sum("component", min_count=1))
            what = "linear" if v == "P" else "angular"
            label = f"|{v} − {v}0| ({what} momentum)"
            if "first_wall_contact_t" in ds:
                first = ds["first_wall_contact_t"]
                err = err.where(first.isnull() | (ds["time"] < first))
                label += ", before the first wall contact"
            p0 = np.sqrt((ds[v].isel(time=0) ** 2).sum("component"))
            out[label] = err.assign_attrs(units=ds[v].attrs.get("units", ""), roundoff_scale=_scale(p0))
    return out


def _scale(da: xr.DataArray) -> float:
    """The largest finite |value| (≥ 1e-300): the magnitude round-off in a difference is relative to."""
    v = np.abs(np.asarray(da.values, dtype=np.float64))
    v = v[np.isfinite(v)]
    return max(float(v.max()), 1e-300) if v.size else 1.0


def momentum_errors(ds: xr.Dataset, desc: str = ""):
    """Momentum-map errors against time, log y, where conserved: ``(figure or None, notes)``."""
    series = momentum_series(ds)
    if not series:
        return None, []
    return time_lines(ds, series, _title(ds, "momentum errors (only where conserved)", desc))


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


def _column_labels(ds: xr.Dataset, dims: list) -> list[str]:
    """``"d1=v1, d2=v2"`` for every combination of ``dims``' labels, the last dim fastest (each label
    formatted once)."""
    texts = []
    for d in dims:
        values = ds[d].values
        number = np.issubdtype(values.dtype, np.number)
        texts.append(np.array([f"{d}={v:g}" if number else f"{d}={v}" for v in values], dtype=object))
    if not texts:
        return [""]
    out = texts[0]
    for t in texts[1:]:
        out = (out[:, None] + ", " + t[None, :]).ravel()
    return out.tolist()


def _mixed_status_rows(ds: xr.Dataset, other: list, filler: int):
    """Mixed h/tol grid: each integrator's row along its own step axis (h for fixed-step, tol for
    adaptive methods) at the label of the other axis where it ran, so that filler cells do not
    fill the map. Returns (codes (n_int, n_cols), column labels, per-cell step texts)."""
    st = ds["status"]
    params = [d for d in other if d not in ("h", "tol")]
    n_step = max(st.sizes["h"], st.sizes["tol"])
    rows, texts = [], []
    for name in ds["integrator"].values:
        own = "tol" if ds.geosweep.is_adaptive(str(name)) else "h"
        oth = "h" if own == "tol" else "tol"
        r = st.sel(integrator=name)
        k = int(np.argmax((r != filler).sum([d for d in r.dims if d != oth]).values))
        a = r.isel({oth: k}).transpose(own, *params).values.reshape(r.sizes[own], -1).astype(int)
        pad = np.full((n_step, a.shape[1]), filler, dtype=int)
        pad[: a.shape[0]] = a
        rows.append(pad.T.ravel())
        vals = [f"{own}={v:g}" for v in ds[own].values] + [""] * (n_step - r.sizes[own])
        texts.append([vals[j] for _ in range(a.shape[1]) for j in range(n_step)])
    prefix = _column_labels(ds, params)
    cols = [f"{p + ', ' if p else ''}step {j + 1}" for p in prefix for j in range(n_step)]
    return np.array(rows), cols, texts


#: columns of the status map drawn one by one (labelled, failures numbered); a wider map is drawn at
#: this width with a few spread tick labels
STATUS_MAP_COLUMNS = 60


def status_map(ds: xr.Dataset):
    """Every cell's status: rows integrators, columns the other sweep axes (flattened).

    The legend labels each code present with its ``flag_meanings`` label from the data.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    from geosweep.sweeps.compact import spread

    st = ds["status"]
    other = [d for d in st.dims if d != "integrator"]
    filler = [c for c, lab in ds.geosweep.status_labels().items() if lab == "not_applicable"]
    texts = None
    if {"h", "tol"} <= set(other) and "integrator_adaptive" in ds.coords:
        arr, cols, texts = _mixed_status_rows(ds, other, filler[0] if filler else -2)
    else:
        arr = st.transpose("integrator", *other).values.reshape(st.sizes["integrator"], -1).astype(int)
        cols = _column_labels(ds, other)
    live = ~np.isin(arr, filler).all(axis=0)  # columns where some integrator applies
    arr, cols = arr[:, live], [c for c, keep in zip(cols, live) if keep]
    texts = [[t for t, keep in zip(row, live) if keep] for row in texts] if texts is not None else None
    hidden = int((~live).sum())
    labels = ds.geosweep.status_labels()
    colors = status_colors([*labels, *np.unique(arr).tolist()])
    codes = sorted(colors)
    img = np.searchsorted(np.asarray(codes), arr)  # each code's index in codes (sorted)
    wide = arr.shape[1] > STATUS_MAP_COLUMNS  # a pixel row per cell: no per-cell text, ticks spread over it
    width = min(max(5.0, 0.6 * arr.shape[1] + 2.5), 0.6 * STATUS_MAP_COLUMNS + 2.5)
    fig, ax = plt.subplots(figsize=(width, max(3.2, 0.45 * arr.shape[0] + 1.8)))
    ax.imshow(img, cmap=ListedColormap([colors[c] for c in codes]), vmin=-0.5, vmax=len(codes) - 0.5, aspect="auto")
    for (r, c), s in [] if wide else np.ndenumerate(arr):
        text = texts[r][c] if texts is not None and s not in filler else ""
        text = f"{text}\n{s}" if s > 0 and text else (str(s) if s > 0 else text)  # failures carry their code
        if text:
            ax.text(c, r, text, ha="center", va="center", fontsize=6, color="w" if s > 0 else "k")
    ax.set_yticks(range(arr.shape[0]), [str(v) for v in ds["integrator"].values], fontsize=8)
    ticks = spread(cols, STATUS_MAP_COLUMNS // 3) if wide else range(arr.shape[1])
    ax.set_xticks(list(ticks), [cols[i] for i in ticks], rotation=60, ha="right", fontsize=7)
    if not wide:
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
    mixed = " (mixed grid: each method along its own h or tol, written in the cell)" if texts is not None else ""
    title = "cell status" + mixed + (f" ({hidden} all-filler columns omitted)" if hidden else "")
    title += f" ({arr.shape[1]} columns, {len(ticks)} labelled)" if wide else ""
    ax.set_title(textwrap.fill(title, 60), fontsize=9)
    fig.tight_layout()
    return fig
