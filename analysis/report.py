"""``geosweep report STORE --out DIR``: PNG figures and an index (Markdown and HTML).

Figures (each written only if the store holds the variables; the index says why one is
absent): ``energy_error_vs_time.png``, ``error_vs_step.png``, ``work_precision.png``,
``constraint_errors.png``, ``momentum_errors.png``, ``status_map.png``; and per system
``ke_map.png`` (lj_sphere), ``torus_energy_partition.png`` and ``torus_snapshots.png``
(torus), ``adaptive_step_sizes.png`` (any store with an adaptive integrator, coord
``integrator_adaptive``). Status labels everywhere come from the store's ``flag_meanings``.
"""

from __future__ import annotations

import html
import os
import string
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

import geosweep  # noqa: F401 - registers ds.geosweep
from geosweep.analysis import figures as F
from geosweep.analysis import system_figures as S
from geosweep.analysis.accessor import ROUNDOFF_ULPS, CellsDroppedWarning
from geosweep.kernels.vocabulary import RUN_DEPENDENT

MAX_FAILURE_ROWS = 50


@dataclass
class Report:
    """What :func:`make_report` wrote."""

    out: Path
    figures: dict[str, Path] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    location: str = ""  # where the report ended up (``out``, or the URL it was uploaded to)
    selection: str = ""  # the slice of the per-slice figures, e.g. "omega = 3.25"
    keep_figures: bool = False  # keep the matplotlib figures open in ``open_figures`` (for inspection)
    open_figures: dict[str, Any] = field(default_factory=dict)

    @property
    def index(self) -> Path:
        return self.out / "index.md"

    @property
    def index_location(self) -> str:
        return f"{(self.location or str(self.out)).rstrip('/')}/index.md"


#: bytes: a store this small is read into memory before the figures are drawn (see :func:`_open`)
LOAD_BYTES = 256 * 2**20


def _save(rep: Report, name: str, fig, caption: str) -> None:
    import matplotlib.pyplot as plt

    if fig is None:
        if not any(n.startswith(f"{name}:") for n in rep.notes):
            rep.notes.append(f"{name}: not drawn (nothing to plot in this store)")
        return
    path = rep.out / f"{name}.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    if rep.keep_figures:
        rep.open_figures[name] = fig
    else:
        plt.close(fig)
    rep.figures[name] = path
    rep.captions[name] = caption


def _table(df) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt_cell(v) for v in row) + " |")
    return "\n".join(lines)


def make_report(
    store: str | os.PathLike | xr.Dataset,
    out: str | os.PathLike,
    *,
    storage_options: dict | None = None,
    select: dict[str, Any] | None = None,
    ke_times: tuple[float, ...] | None = None,
    sections: list[tuple[str, str]] | None = None,
    keep_figures: bool = False,
) -> Report:
    """Write every applicable figure and ``index.md``/``index.html`` of a store into ``out``.

    ``select`` fixes the label of swept parameters for the per-slice figures (default: the
    system's declared slice, :meth:`GeosweepAccessor.default_selection`; text values are
    converted, bad ones raise ``ValueError``); ``ke_times`` are the KE-map times (default: up to
    five evenly spaced snapshots);
    ``sections`` are (heading, Markdown) pairs placed first in the index (e.g. a comparison);
    ``keep_figures`` leaves the matplotlib figures open in ``Report.open_figures`` (close them).
    """
    import matplotlib

    matplotlib.use("Agg")
    ds, where = _open(store, storage_options)
    rep = Report(Path(out), keep_figures=keep_figures)
    rep.out.mkdir(parents=True, exist_ok=True)
    acc = ds.geosweep
    counts = acc.status_counts()
    sub, desc = acc.slice(select)
    err = acc.default_error_var()
    _absent_figure_notes(rep, ds, err)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CellsDroppedWarning)  # stated once in the index instead
        _error_figures(rep, ds, sub, desc, F.axis_label(ds[err], 200) if err in ds else err)
        _invariant_figures(rep, ds, sub, desc)
        _save(
            rep,
            "status_map",
            F.status_map(ds),
            "Status of every cell (labels from the store's flag_meanings); columns that are filler in every row "
            "of a mixed h/tol grid are omitted. Look for: failures (numbered cells) and where in the grid they sit.",
        )
        for name, make in S.system_figures(acc.system, acc.family, ds, sub, ke_times):
            fig, caption, notes = make()
            rep.notes += notes
            _save(rep, name, fig, caption + (f" Parameters at {desc}." if desc else ""))
        rep.selection = desc
        tables = [(h, t, "") for h, t in sections or []] + _summary_tables(ds, sub, desc)
    _write_index(rep, ds, where, counts, tables)
    return rep


def _open(store: str | os.PathLike | xr.Dataset, storage_options: dict | None) -> tuple[xr.Dataset, str]:
    """The store's dataset and where it is (a path or URL, or "(in-memory Dataset)"). A store of at
    most :data:`LOAD_BYTES` is read into memory once: the figures index it cell by cell, and each
    index of a lazy (dask) dataset builds and computes a task graph of its own (benchmarks/README.md:
    the same figures and index, in less time)."""
    if isinstance(store, xr.Dataset):
        return store, "(in-memory Dataset)"
    from geosweep.sweeps.store import open_results  # refuses a store of another format (StoreFormatError)

    ds = open_results(os.fspath(store), storage_options)
    return (ds.load() if ds.nbytes <= LOAD_BYTES else ds), os.fspath(store)


def _absent_figure_notes(rep: Report, ds: xr.Dataset, err: str) -> None:
    """The index's notes on the error figures this store cannot draw, and why."""
    acc = ds.geosweep
    if "energy_error" in ds and not bool(ds["energy_error"].where(ds["status"] == 0).notnull().any()):
        for name in ("energy_error_vs_time", "energy_envelope"):
            rep.notes.append(f"{name}: the energy error is NaN in every ok cell (energy not conserved here, e.g. a "
                             "controlled system whose inputs do work)")  # fmt: skip
    single = [f"one {d} ({ds[d].values[0]:g})" for d in F.STEP_DIMS if d in acc.sweep_dims and ds.sizes[d] < 2]
    if single and all(ds.sizes[d] < 2 for d in F.STEP_DIMS if d in acc.sweep_dims):
        rep.notes.append(f"error_vs_step: only {' and '.join(single)} swept: no convergence to draw or fit")
    if err not in ds or not bool(ds[err].where(ds["status"] == 0).notnull().any()):
        for name in ("error_vs_step", "work_precision"):
            rep.notes.append(f"{name}: no finite {err} in any ok cell (e.g. global_error not requested)")


def _error_figures(rep: Report, ds: xr.Dataset, sub: xr.Dataset, desc: str, err_name: str) -> None:
    """The energy error against time and its envelope (the slice ``sub``), the error against the step
    and the work-precision diagram."""
    at = f" at {desc}" if desc else ""
    _save(
        rep,
        "energy_error_vs_time",
        F.energy_error_vs_time(sub, desc),
        f"|E(t) − E0|/|E0|, one panel per integrator on one shared y scale, one line per step size{at}. "
        "Look for: a flat, bounded error (variational / symplectic methods) against a growing one (RK); "
        "the time axis is linear when an event (e.g. an impact) makes the error jump.",
    )
    _save(
        rep,
        "energy_envelope",
        F.energy_envelope(sub, desc),
        "Envelope of |E − E0|/|E0|: its max over every step of each output interval (solid) beside the "
        f"point samples (dotted){at}. Look for: a bounded envelope for a variational integrator, a drifting "
        "one for RK; samples far below the envelope mean the output interval misses the peaks.",
    )
    _save(
        rep,
        "error_vs_step",
        F.error_vs_step(sub, desc=desc),
        f"{err_name} against h for fixed-step methods and against tol for adaptive ones (ok cells){at}, "
        "with least-squares slopes. Look for: p close to the nominal order on the h panel; the tol panel's "
        "slope is not an order and has no nominal value.",
    )
    _save(
        rep,
        "work_precision",
        F.work_precision(ds),
        f"{err_name} against wall time and force evaluations: one curve per integrator and parameter set "
        f"(ok cells, every parameter value; beyond {F.MAX_CURVES} parameter sets, one curve per integrator "
        "through the median cost and error at each step size, bars from the 10th to the 90th percentile). "
        "Look for: the curve lowest and furthest left is the cheapest method for a given accuracy.",
    )


def _invariant_figures(rep: Report, ds: xr.Dataset, sub: xr.Dataset, desc: str) -> None:
    """The constraint and momentum-map errors against time (the slice ``sub``), with the notes on what
    the store does not hold."""
    at = f" at {desc}" if desc else ""
    fig, notes = F.constraint_errors(sub, desc)
    if not any(v in ds for v in F.CONSTRAINT_VARS):
        notes.append(f"constraint_errors: the {ds.geosweep.family} family stores no generic constraint error")
    rep.notes += notes
    _save(
        rep,
        "constraint_errors",
        fig,
        f"Constraint errors against time{at}; colour = integrator, line style = step size. "
        "Look for: round-off level (≈ 1e-15) for methods that keep the constraint, growth for the others.",
    )
    fig, notes = F.momentum_errors(sub, desc)
    rep.notes += notes
    if not F.momentum_series(sub):
        rep.notes.append("momentum_errors: this store holds no conserved momentum map")
    _save(
        rep,
        "momentum_errors",
        fig,
        f"Momentum-map errors against time{at}, only where the momentum is conserved (with a wall: before "
        "the first contact). Look for: round-off level for methods that keep the symmetry.",
    )


#: (heading, table or Markdown text, caption saying what to look for)
Table = tuple[str, Any, str]


def _summary_tables(ds: xr.Dataset, sub: xr.Dataset, desc: str = "") -> list[Table]:
    out: list[Table] = []
    fails = ds.geosweep.failures()
    if len(fails):
        cols = [c for c in fails.columns if c != "status"]
        more = f"; first {MAX_FAILURE_ROWS} of {len(fails)}" if len(fails) > MAX_FAILURE_ROWS else ""
        out.append(
            (
                f"Failed cells (status > 0{more})",
                fails[cols].head(MAX_FAILURE_ROWS),
                "Each failed cell with its label (from the store's flag_meanings), the step and time of the failure "
                "and the offending body and value. Look for: failures clustered at the largest h.",
            )
        )
    try:
        t = sub["time"].values
        window = (float(t[len(t) // 2]), float(t[-1]))  # the second half: past the start-up transient
        c = sub.geosweep.classify(window=window, relative=True).compute()
        cols = ["level", "slope", "slope_stderr", "ratio", "classification"]
        df = c[cols].to_dataframe().reset_index().rename(columns={"level": "max_abs_error"})
        keep = [d for d in c["slope"].dims] + ["max_abs_error", *cols[1:]]
        df = _one_step_column(ds, df[keep][df["classification"] != "undetermined"])
        head = f"Energy drift and classification{' at ' + desc if desc else ''}"
        if df.empty:
            why = "no ok cell has a finite energy error in the second half of the run (e.g. a controlled system "
            out.append((head, f"Not classified: {why}whose inputs do work stores none).", ""))
        else:
            df, note = _bounded(df, [*c["slope"].dims, "step"], "slope")
            table = _drift_table(head, df, window, c.attrs["criterion"])
            out.append((table[0], table[1], table[2] + note))
    except Exception as e:  # noqa: BLE001 - a table must not stop the figures
        out.append(("Energy drift", f"not computed: {e}", ""))
    for dim in (d for d in F.STEP_DIMS if d in ds.geosweep.sweep_dims):
        try:
            out.append(_order_table(ds, dim))
        except Exception as e:  # noqa: BLE001
            out.append((f"Observed order vs {dim}", f"not computed: {e}", ""))
    return out


def _drift_table(head: str, df: pd.DataFrame, window: tuple[float, float], criterion: str) -> Table:
    """The classification table with its caption (``window``: the fitted time span)."""
    return (
        head,
        df,
        f"Least-squares slope of the relative energy error over the second half of the run, t = "
        f"{window[0]:g} … {window[1]:g} ({criterion}; slope per time unit; max_abs_error: the "
        "largest |E − E0|/|E0| in that window). Look for: bounded for variational/symplectic methods, "
        "drifting for RK, round-off for methods exact in energy (discrete gradients): their error is "
        "rounding, not a drift.",
    )


def _error_range(o: xr.Dataset, dims: list[str], dim: str) -> pd.DataFrame:
    """Per fit (row over ``dims``), the error at the largest and at the smallest ``dim`` it used."""
    e = o["error"].to_dataframe().dropna(subset=["error"]).reset_index()
    if e.empty:
        return pd.DataFrame(columns=[*dims, "err_big", "err_small"])
    e = e.sort_values(dim)
    g = e.groupby(dims, sort=False)["error"]
    return pd.concat([g.last().rename("err_big"), g.first().rename("err_small")], axis=1).reset_index()


def _order_table(ds: xr.Dataset, dim: str) -> Table:
    """The observed order (``h``) or slope (``tol``) of every fit with ≥ 2 points or at round-off;
    the order is blank where there is none to read (round-off, pre-asymptotic: see the comment)."""
    o = ds.geosweep.order(dim=dim).compute()
    cols = ["order", "order_stderr", "n_points", "n_roundoff", "regime"]
    df = o[cols].to_dataframe().reset_index()
    exp = o["expected_order"].to_series() if "expected_order" in o.coords else None
    adaptive = {n: ds.geosweep.is_adaptive(n) for n in df["integrator"].unique()}
    df = df[[adaptive[n] is None or adaptive[n] == (dim == "tol") for n in df["integrator"]]]
    dims = [str(d) for d in o["order"].dims]
    df = df[(df["n_points"] >= 2) | (df["regime"] == "round-off")][[*dims, *cols]]
    df = df.merge(_error_range(o, dims, dim), on=dims, how="left") if dims else df
    df = df.drop(columns=[d for d in F.STEP_DIMS if d in df and d != dim])  # filler axis of a mixed grid
    none = pd.Series(np.nan, index=df.index)
    nominal = df["integrator"].map(exp) if exp is not None and dim == "h" else none
    big, small = df.get("err_big", none), df.get("err_small", none)
    df["comment"] = [
        F.order_comment(p, se, int(n), e, dim, regime=str(r), n_roundoff=int(k), error_range=(b, s))
        for p, se, n, e, r, k, b, s in zip(
            df["order"], df["order_stderr"], df["n_points"], nominal, df["regime"], df["n_roundoff"], big, small
        )
    ]
    meaningless = df["regime"] != "fitted"
    df.loc[meaningless, ["order", "order_stderr"]] = np.nan  # no order to read: the comment says why
    df = df.drop(columns=["regime", "err_big", "err_small"], errors="ignore")
    if dim == "h" and exp is not None:
        df.insert(df.columns.get_loc("n_points") + 1, "nominal_order", nominal.to_numpy())
    else:
        df = df.rename(columns={"order": "slope_vs_tol", "order_stderr": "slope_stderr"})
    what = "Observed order vs h (fixed-step methods)" if dim == "h" else "Slope vs tol (adaptive methods)"
    look = (
        "Look for: the observed order close to the nominal one; with 2 points there is no standard error."
        if dim == "h"
        else "A slope vs tol is not an order in h and has no nominal value; ≈ 1 means the error follows tol."
    )
    caption = (
        f"Least-squares slope of log error vs log {dim}; errors at round-off (energy errors ≤ "
        f"{ROUNDOFF_ULPS:g}·ε·steps relative) are left out of the fit (n_roundoff) and an order is blank where "
        f"there is none to read (the comment says why). {look}"
    )
    head = f"{what}, {o.attrs['error_var']}"
    if df.empty:
        swept = int(o[dim].size)
        why = f"only one {dim} value is swept" if swept < 2 else f"no method has two ok points along {dim}"
        return head, f"No order to fit: {why}.", ""
    df, note = _bounded(df, dims, "order" if "order" in df.columns else "slope_vs_tol")
    return head, df, caption + note


#: rows of a results table at most: beyond, it is aggregated over the large axes (:func:`_bounded`)
MAX_TABLE_ROWS = 40


def _bounded(df: pd.DataFrame, dims: list[str], principal: str) -> tuple[pd.DataFrame, str]:
    """``df`` (one row per fit or cell over ``dims``) as it is when it has at most :data:`MAX_TABLE_ROWS`
    rows, else one row per value of the small axes (at most :data:`geosweep.sweeps.compact.MAX_LISTED` values; the
    integrator and step always kept): ``rows`` aggregated, the ``principal`` column's min, median and
    max, other numbers' medians, and the most common text with its count. Also the caption's note."""
    from geosweep.sweeps.compact import MAX_LISTED, axis_values_text

    dims = [d for d in dims if d in df.columns]
    if len(df) <= MAX_TABLE_ROWS or not dims:
        return df, ""
    fixed = [d for d in ("integrator", "step", "h", "tol") if d in dims]
    keep = fixed + [d for d in dims if d not in fixed and df[d].nunique() <= MAX_LISTED]
    if df.groupby(keep, sort=False, dropna=False).ngroups > MAX_TABLE_ROWS:
        keep = fixed
    big = [d for d in dims if d not in keep]
    if not big:
        return df, ""
    rows = []
    for key, g in df.groupby(keep, sort=False, dropna=False) if keep else [((), df)]:
        row = dict(zip(keep, key if isinstance(key, tuple) else (key,)), count=len(g))
        for col in (c for c in df.columns if c not in dims):
            if pd.api.types.is_numeric_dtype(df[col]):
                vals = pd.to_numeric(g[col], errors="coerce")
                if col == principal:
                    row[f"{col} min"] = vals.min()
                row[f"{col} median" if col == principal else col] = vals.median()
                if col == principal:
                    row[f"{col} max"] = vals.max()
            else:
                counts = g[col].astype(str).value_counts()
                top, n = (counts.index[0], int(counts.iloc[0])) if len(counts) else ("", 0)
                row[col] = top if n == len(g) else f"{top} ({n} of {len(g)})"
        rows.append(row)
    over = "; ".join(f"{d} ({axis_values_text(pd.unique(df[d]))})" for d in big)
    note = (
        f" Aggregated over {over}: one row per {', '.join(keep) or 'table'} (count: the rows it stands for, "
        f"{len(df)} in all), the min, median and max of {principal}, the median of the other numbers and the "
        "most common text."
    )
    return pd.DataFrame(rows), note


def _one_step_column(ds: xr.Dataset, df: pd.DataFrame) -> pd.DataFrame:
    """In a mixed h/tol grid: one ``step`` column (``h = 0.01`` or ``tol = 1e-06``, whichever the
    integrator runs over) instead of an h and a tol column, one of which is filler."""
    if not {"h", "tol"} <= set(df.columns) or "integrator_adaptive" not in ds.coords:
        return df
    ada = {n: ds.geosweep.is_adaptive(n) for n in df["integrator"].unique()}
    step = [f"tol = {t:g}" if ada[n] else f"h = {h:g}" for n, h, t in zip(df["integrator"], df["h"], df["tol"])]
    out = df.drop(columns=["h", "tol"])
    out.insert(1, "step", step)
    return out


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items())


def _facts(rep: Report, ds: xr.Dataset, where: str, counts: dict[str, int]) -> list[tuple[str, str]]:
    """(label, value) lines at the top of both index files."""
    not_ok = {k: v for k, v in counts.items() if k not in ("ok", "not_applicable")}
    out = [
        ("store", where),
        ("family", str(ds.attrs.get("system_family", "?"))),
        ("sweep axes", ", ".join(f"{d} ({ds.sizes[d]})" for d in ds.geosweep.sweep_dims)),
        ("cells", f"{sum(counts.values())}; status counts: {_counts(counts)}"),
    ]
    if "not_applicable" in counts:
        out.append(("not applicable", f"{counts['not_applicable']} filler cells of the mixed h/tol grid (never run)"))
    if not_ok:
        out.append(("left out", f"cells with status ≠ 0 are left out of every figure and table ({_counts(not_ok)})"))
    if rep.selection:
        out.append(("slice", f"per-slice figures at {rep.selection} (choose another with --sel NAME=VALUE)"))
    return out


def _md_table(content: Any) -> str:
    return _table(content) if isinstance(content, pd.DataFrame) else str(content)


def _fmt_cell(v: Any) -> str:
    if isinstance(v, float | np.floating):
        return "—" if not np.isfinite(v) else f"{v:.3g}"
    return str(v)


def _html_table(content: Any) -> str:
    if isinstance(content, pd.DataFrame):
        return content.to_html(
            index=False, classes="data", border=0, na_rep="—", formatters=None, float_format=_fmt_cell
        )
    return _md_to_html(str(content))


def _md_to_html(text: str) -> str:
    """The small Markdown subset of the comparison sections: pipe tables, bullets, paragraphs, `code`."""
    import re

    def inline(t: str) -> str:
        return re.sub(r"`([^`]*)`", r"<code>\1</code>", html.escape(t.strip()))

    out, rows, items = [], [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
            continue
        if rows:
            out.append(pd.DataFrame(rows[1:], columns=rows[0]).to_html(index=False, classes="data", border=0))
            rows = []
        if line.startswith("- "):
            items.append(f"<li>{inline(line[2:])}</li>")
            continue
        if items:
            out.append("<ul>" + "".join(items) + "</ul>")
            items = []
        if line.strip():
            out.append(f"<p>{inline(line)}</p>")
    return "\n".join(out)


PAGE = string.Template(
    """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>$title</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1200px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; border-bottom: 2px solid #2c7fb8; padding-bottom: .3em; }
h2 { font-size: 1.25em; margin-top: 1.8em; color: #1f4e79; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
table.data { border-collapse: collapse; font-size: .9em; margin: .5em 0 1em; }
table.data th, table.data td { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
table.data th { background: #e8f1f8; } table.data tr:nth-child(even) td { background: #f7f7f7; }
table.data td:first-child, table.data th:first-child { text-align: left; }
p.caption, figcaption { color: #555; font-size: .92em; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
ul.notes li { margin: .2em 0; }
</style></head>
<body>
<h1>$title</h1>
<dl class="facts">$facts</dl>
$body
</body></html>
"""
)


def _write_index(rep: Report, ds: xr.Dataset, where: str, counts: dict[str, int], tables: list[Table]) -> None:
    title = f"geosweep report: {ds.attrs.get('sweep_name', '')} ({ds.attrs.get('system', '')})"
    facts = _facts(rep, ds, where, counts)
    md = [f"# {title}", ""] + [f"{k}: {v}  " for k, v in facts] + [""]
    body = []
    for head, content, caption in tables:
        md += [f"## {head}", ""] + ([caption, ""] if caption else []) + [_md_table(content), ""]
        body += [f"<h2>{html.escape(head)}</h2>"]
        body += [f'<p class="caption">{html.escape(caption)}</p>'] if caption else []
        body += [_html_table(content)]
    md += ["## Figures", ""]
    body += ["<h2>Figures</h2>"]
    for name, path in rep.figures.items():
        md += [f"### {name}", "", rep.captions[name], "", f"![{name}]({path.name})", ""]
        body += [
            f'<figure id="{name}"><img src="{path.name}" alt="{html.escape(name)}">'
            f"<figcaption><b>{html.escape(name)}.</b> {html.escape(rep.captions[name])}</figcaption></figure>"
        ]
    if rep.notes:
        md += ["## Notes and missing data", ""] + [f"- {n}" for n in rep.notes] + [""]
        body += ["<h2>Notes and missing data</h2>", '<ul class="notes">']
        body += [f"<li>{html.escape(n)}</li>" for n in rep.notes] + ["</ul>"]
    rep.index.write_text("\n".join(md))
    dl = "".join(
        f"<dt>{html.escape(k)}</dt><dd>{f'<code>{html.escape(v)}</code>' if k == 'store' else html.escape(v)}</dd>"
        for k, v in facts
    )
    page = PAGE.substitute(title=html.escape(title), facts=dl, body="\n".join(body))
    (rep.out / "index.html").write_text(page)


def default_report_location(store: str | os.PathLike) -> str:
    """``<store>.report`` beside the store, for a local path and for a URL alike."""
    return os.fspath(store).rstrip("/") + ".report"


def write_report(
    store: str | os.PathLike,
    out: str | os.PathLike | None = None,
    storage_options: dict | None = None,
    sections: list[tuple[str, str]] | None = None,
    select: dict[str, Any] | None = None,
) -> Report:
    """:func:`make_report` into ``out`` (default beside the store); a URL ``out`` is written locally, then uploaded."""
    import tempfile

    target = os.fspath(out) if out is not None else default_report_location(store)
    if "://" not in target:
        rep = make_report(store, target, storage_options=storage_options, sections=sections, select=select)
        rep.location = str(Path(target).absolute())
        return rep
    import fsspec

    with tempfile.TemporaryDirectory(prefix="geosweep-report-") as tmp:
        rep = make_report(store, tmp, storage_options=storage_options, sections=sections, select=select)
        fs, root = fsspec.core.url_to_fs(target, **(storage_options or {}))
        for path in sorted(Path(tmp).iterdir()):
            fs.put_file(str(path), f"{root.rstrip('/')}/{path.name}")
    rep.location = target
    return rep


def main_report(
    store: str, out: str | None, storage_options: dict | None = None, select: dict[str, Any] | None = None
) -> Report:
    """CLI helper: the report goes to ``<store>.report`` beside the store unless ``out`` is given;
    ``select`` (``--sel omega=3.25``) picks the slice of the per-slice figures."""
    return write_report(store, out, storage_options, select=select)


# ---------------------------------------------------------------------------------------
# night against night
# ---------------------------------------------------------------------------------------
#: per-cell values that are run stamps, not results: never compared between nights
RUN_STAMPS = RUN_DEPENDENT
MAX_CHANGE_ROWS = 50


@dataclass
class Comparison:
    """Cells whose status or per-cell values changed between two stores of one sweep."""

    previous: str
    current: str
    rtol: float
    cells: int = 0  # cells complete in both stores and compared
    changes: list[dict[str, Any]] = field(default_factory=list)  # one row per changed (cell, quantity)
    notes: list[str] = field(default_factory=list)

    @property
    def changed_cells(self) -> int:
        return len({tuple(sorted(r["cell"].items())) for r in self.changes})

    @property
    def status_changes(self) -> int:
        return sum(1 for r in self.changes if r["quantity"] == "status")

    def headline(self) -> str:
        if not self.cells:
            return f"nothing compared with {self.previous}" + (f" ({'; '.join(self.notes)})" if self.notes else "")
        return (
            f"{self.changed_cells} of {self.cells} cells changed since {self.previous} "
            f"({self.status_changes} in status; values beyond rtol {self.rtol:g})"
        )

    def markdown(self) -> str:
        lines = [
            f"previous: `{self.previous}`  ",
            f"current: `{self.current}`  ",
            f"{self.headline()}.",
            "",
        ]
        lines += [f"- {n}" for n in self.notes] + ([""] if self.notes else [])
        if self.changes:
            more = f" (first {MAX_CHANGE_ROWS} of {len(self.changes)})" if len(self.changes) > MAX_CHANGE_ROWS else ""
            lines += [f"changes{more}:", "", "| cell | quantity | previous | current | relative change |"]
            lines.append("|---|---|---|---|---|")
            for r in self.changes[:MAX_CHANGE_ROWS]:
                cell = ", ".join(f"{k}={v}" for k, v in r["cell"].items())
                rel = "—" if r["rel_change"] is None else f"{r['rel_change']:.3g}"
                lines.append(f"| {cell} | {r['quantity']} | {r['previous']} | {r['current']} | {rel} |")
        return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def compare_stores(
    previous: str | os.PathLike | xr.Dataset,
    current: str | os.PathLike | xr.Dataset,
    *,
    rtol: float = 1e-6,
    storage_options: dict | None = None,
) -> Comparison:
    """Compare two stores of one sweep cell by cell: status, then every per-cell value (summaries,
    cost counters, failure records; run stamps excepted). A value changed when
    ``|a − b| > rtol·max(|a|, |b|)`` or only one of them is NaN. Only cells complete in both are
    compared; if the spec changed, the cells the two grids share are.
    """
    import numpy as np

    from geosweep.sweeps.store import open_results

    def load(s):
        return s if isinstance(s, xr.Dataset) else open_results(os.fspath(s), storage_options)

    a, b = load(previous), load(current)
    cmp = Comparison(
        previous="(in-memory Dataset)" if isinstance(previous, xr.Dataset) else os.fspath(previous),
        current="(in-memory Dataset)" if isinstance(current, xr.Dataset) else os.fspath(current),
        rtol=rtol,
    )
    dims_a, dims_b = a.geosweep.sweep_dims, b.geosweep.sweep_dims
    if set(dims_a) != set(dims_b):
        cmp.notes.append(f"sweep axes differ ({', '.join(map(str, dims_a))} vs {', '.join(map(str, dims_b))})")
        return cmp
    if a.attrs.get("spec_hash") != b.attrs.get("spec_hash"):
        cmp.notes.append("the spec changed between the two stores: the cells both grids hold are compared")
    dims = tuple(dims_b)
    names = [
        n
        for n, v in b.data_vars.items()
        if v.dims and set(v.dims) == set(dims) and n in a and a[n].dims == v.dims and n not in RUN_STAMPS
        if n != "done" and v.dtype.kind in "fiub"
    ]
    a, b = xr.align(a[[*names, "done"]], b[[*names, "done"]], join="inner")
    a, b = a.load().transpose(*dims), b.load().transpose(*dims)
    both = (a["done"].values == 1) & (b["done"].values == 1) & (a["status"].values != -2) & (b["status"].values != -2)
    cmp.cells = int(both.sum())
    labels = a.geosweep.status_labels()
    changed: list[tuple[tuple[int, ...], str]] = []
    for n in ["status"] + [n for n in names if n != "status"]:
        x, y = a[n].values.astype(float), b[n].values.astype(float)
        with np.errstate(invalid="ignore"):
            scale = np.fmax(np.abs(x), np.abs(y))
            differ = (np.isnan(x) != np.isnan(y)) | (np.abs(x - y) > (0.0 if n == "status" else rtol) * scale)
            differ |= (x != y) & ~np.isfinite(scale) & ~(np.isnan(x) & np.isnan(y))
        changed += [(idx, n) for idx in zip(*np.nonzero(differ & both))]
    for idx, n in sorted(changed, key=lambda c: c[0]):
        cell = {str(d): _fmt(b[d].values[i].item()) for d, i in zip(dims, idx)}
        x, y = a[n].values[idx], b[n].values[idx]
        if n == "status":
            px, py = (labels.get(int(v), str(int(v))) for v in (x, y))
            cmp.changes.append(dict(cell=cell, quantity="status", previous=px, current=py, rel_change=None))
            continue
        x, y = float(x), float(y)
        scale = max(abs(x), abs(y))
        rel = abs(x - y) / scale if np.isfinite(x) and np.isfinite(y) and scale > 0 else None
        cmp.changes.append(dict(cell=cell, quantity=n, previous=_fmt(x), current=_fmt(y), rel_change=rel))
    return cmp
