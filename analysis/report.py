"""``geosweep report STORE --out DIR``: PNG figures and an index (Markdown and HTML).

Figures (each written only if the store holds the variables; the index says why one is
absent): ``energy_error_vs_time.png``, ``error_vs_step.png``, ``work_precision.png``,
``constraint_errors.png``, ``momentum_errors.png``, ``status_map.png``; and per system
``ke_map.png`` (lj_sphere), ``torus_energy_partition.png`` and ``torus_snapshots.png``
(torus), ``chain_step_sizes.png`` (any store with an adaptive integrator, coord
``integrator_adaptive``). Status labels everywhere come from the store's ``flag_meanings``.
"""

from __future__ import annotations

import html
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xarray as xr

import analysis  # noqa: F401 - registers ds.geosweep
from analysis import figures as F
from analysis import system_figures as S
from analysis.accessor import CellsDroppedWarning

MAX_FAILURE_ROWS = 50


@dataclass
class Report:
    """What :func:`make_report` wrote."""

    out: Path
    figures: dict[str, Path] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    location: str = ""  # where the report ended up (``out``, or the URL it was uploaded to)

    @property
    def index(self) -> Path:
        return self.out / "index.md"

    @property
    def index_location(self) -> str:
        return f"{(self.location or str(self.out)).rstrip('/')}/index.md"


def _save(rep: Report, name: str, fig, caption: str) -> None:
    import matplotlib.pyplot as plt

    if fig is None:
        rep.notes.append(f"{name}: not drawn (nothing to plot in this store)")
        return
    path = rep.out / f"{name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    rep.figures[name] = path
    rep.captions[name] = caption


def _table(df) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row) + " |")
    return "\n".join(lines)


def make_report(
    store: str | os.PathLike | xr.Dataset,
    out: str | os.PathLike,
    *,
    storage_options: dict | None = None,
    select: dict[str, Any] | None = None,
    ke_times: tuple[float, ...] = S.PAPER_KE_TIMES,
    sections: list[tuple[str, str]] | None = None,
) -> Report:
    """Write every applicable figure and ``index.md``/``index.html`` of a store into ``out``.

    ``select`` fixes the label of swept parameters for time-series figures (default: each
    axis's first label); ``ke_times`` are the KE-map times (nearest snapshots are used);
    ``sections`` are (heading, Markdown) pairs placed first in the index (e.g. a comparison).
    """
    import matplotlib

    matplotlib.use("Agg")
    if isinstance(store, xr.Dataset):
        ds, where = store, "(in-memory Dataset)"
    else:
        from sweeps.store import open_results  # refuses a store of another format (StoreFormatError)

        ds, where = open_results(os.fspath(store), storage_options), os.fspath(store)
    rep = Report(Path(out))
    rep.out.mkdir(parents=True, exist_ok=True)
    acc = ds.geosweep
    counts = acc.status_counts()
    sub, desc = F.representative(ds, select)
    at = f" at {desc}" if desc else ""
    system = acc.system
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CellsDroppedWarning)  # stated once in the index instead
        _save(
            rep,
            "energy_error_vs_time",
            F.energy_error_vs_time(sub, desc),
            f"|E(t) − E0|/|E0| on log–log axes, one panel per integrator, one line per step size{at}.",
        )
        _save(
            rep,
            "energy_envelope",
            F.energy_envelope(sub, desc),
            "Envelope of |E − E0|/|E0|: its max over every step of each output interval (solid) beside the "
            f"point samples (dotted), log–log{at}. Bounded for a variational integrator, drifting for RK.",
        )
        _save(
            rep,
            "error_vs_step",
            F.error_vs_step(ds),
            f"{acc.default_error_var()} against h (and tol) for ok cells, with least-squares slopes "
            "(observed order p). Swept parameters: the slice with the most points.",
        )
        _save(
            rep,
            "work_precision",
            F.work_precision(ds),
            f"{acc.default_error_var()} against wall time and force evaluations (ok cells, all parameters).",
        )
        if not any(v in ds for v in F.CONSTRAINT_VARS):
            rep.notes.append(
                f"constraint_errors: the {acc.family} family stores no constraint error "
                "(SE(3) states are group elements; no unit-length or tangency constraint)"
            )
        _save(rep, "constraint_errors", F.constraint_errors(sub, desc), f"Constraint errors against time{at}.")
        if all(bool(da.isnull().all()) for da in F.momentum_series(sub).values()):
            rep.notes.append(
                "momentum_errors: every stored momentum error is NaN or absent: this system's "
                "momentum map is not conserved (e.g. spring_pendula has no symmetry)"
            )
        _save(
            rep,
            "momentum_errors",
            F.momentum_errors(sub, desc),
            f"Momentum-map errors against time{at}. NaN (not drawn) where the momentum is not conserved.",
        )
        _save(
            rep,
            "status_map",
            F.status_map(ds),
            "Status of every cell (0 ok, > 0 failed, −1 not run, −2 not applicable; labels from the store).",
        )
        specific: list[tuple[str, Any]] = []
        if system == "lj_sphere":
            specific.append(("ke_map", lambda: S.ke_map(sub, ke_times)))
        if system == "torus":
            specific += [
                ("torus_energy_partition", lambda: S.torus_energy_partition(sub)),
                ("torus_snapshots", lambda: S.torus_snapshots(sub)),
            ]
        if "integrator_adaptive" in ds.coords and bool(ds["integrator_adaptive"].any()):
            specific.append(("chain_step_sizes", lambda: S.chain_step_sizes(sub)))
        for name, make in specific:
            fig, caption, notes = make()
            rep.notes += notes
            _save(rep, name, fig, caption + (f" Parameters{at}." if desc else ""))
        tables = list(sections or []) + _summary_tables(ds, sub)
    _write_index(rep, ds, where, counts, tables)
    return rep


def _summary_tables(ds: xr.Dataset, sub: xr.Dataset) -> list[tuple[str, str]]:
    out = []
    fails = ds.geosweep.failures()
    if len(fails):
        cols = [c for c in fails.columns if c != "status"]
        more = f"; first {MAX_FAILURE_ROWS} of {len(fails)}" if len(fails) > MAX_FAILURE_ROWS else ""
        out.append((f"Failed cells (status > 0{more})", _table(fails[cols].head(MAX_FAILURE_ROWS))))
    try:
        c = sub.geosweep.classify(relative=True).compute()
        df = c[["slope", "slope_stderr", "ratio", "classification"]].to_dataframe().reset_index()
        keep = [d for d in c["slope"].dims] + ["slope", "slope_stderr", "ratio", "classification"]
        df = df[keep][df["classification"] != "undetermined"]
        out.append(
            (f"Energy drift and classification ({c.attrs['criterion']}; relative energy error, whole run)", _table(df))
        )
    except Exception as e:  # noqa: BLE001 - a table must not stop the figures
        out.append(("Energy drift", f"not computed: {e}"))
    for dim in (d for d in F.STEP_DIMS if d in ds.geosweep.sweep_dims):
        try:
            o = ds.geosweep.order(dim=dim).compute()
            df = o[["order", "order_stderr", "n_points"]].to_dataframe().reset_index()
            if "expected_order" in o.coords and dim == "h":  # a tol slope is not an order in h
                df["expected_order"] = o["expected_order"].to_series().reindex(df["integrator"]).to_numpy()
            cols = (
                [d for d in o["order"].dims]
                + ["order", "order_stderr", "n_points"]
                + (["expected_order"] if "expected_order" in df else [])
            )
            df = df[cols][df["n_points"] >= 2]
            out.append((f"Observed order vs {dim} ({o.attrs['error_var']})", _table(df)))
        except Exception as e:  # noqa: BLE001
            out.append((f"Observed order vs {dim}", f"not computed: {e}"))
    return out


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in counts.items())


def _write_index(
    rep: Report, ds: xr.Dataset, where: str, counts: dict[str, int], tables: list[tuple[str, str]]
) -> None:
    title = f"geosweep report: {ds.attrs.get('sweep_name', '')} ({ds.attrs.get('system', '')})"
    not_ok = {k: v for k, v in counts.items() if k != "ok"}
    md = [
        f"# {title}",
        "",
        f"store: `{where}`  ",
        f"family: {ds.attrs.get('system_family', '?')}; "
        f"sweep axes: {', '.join(f'{d} ({ds.sizes[d]})' for d in ds.geosweep.sweep_dims)}  ",
        f"cells: {sum(counts.values())}; status counts: {_counts(counts)}. "
        + (f"Cells with status ≠ 0 are left out of every figure and table ({_counts(not_ok)})." if not_ok else ""),
        "",
    ]
    for head, body in tables:
        md += [f"## {head}", "", body, ""]
    md += ["## Figures", ""]
    for name, path in rep.figures.items():
        md += [f"### {name}", "", rep.captions[name], "", f"![{name}]({path.name})", ""]
    if rep.notes:
        md += ["## Notes and missing data", ""] + [f"- {n}" for n in rep.notes] + [""]
    rep.index.write_text("\n".join(md))
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>store: <code>{html.escape(where)}</code><br>status counts: {html.escape(_counts(counts))}</p>",
    ]
    for head, table in tables:
        body += [f"<h2>{html.escape(head)}</h2>", f"<pre>{html.escape(table)}</pre>"]
    for name, path in rep.figures.items():
        body += [
            f"<h3>{name}</h3><p>{html.escape(rep.captions[name])}</p>",
            f'<img src="{path.name}" alt="{name}" style="max-width:100%">',
        ]
    if rep.notes:
        body += ["<h2>Notes and missing data</h2><ul>"] + [f"<li>{html.escape(n)}</li>" for n in rep.notes] + ["</ul>"]
    (rep.out / "index.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>"
        + html.escape(title)
        + "</title></head><body>"
        + "\n".join(body)
        + "</body></html>"
    )


def default_report_location(store: str | os.PathLike) -> str:
    """``<store>.report`` beside the store, for a local path and for a URL alike."""
    return os.fspath(store).rstrip("/") + ".report"


def write_report(
    store: str | os.PathLike,
    out: str | os.PathLike | None = None,
    storage_options: dict | None = None,
    sections: list[tuple[str, str]] | None = None,
) -> Report:
    """:func:`make_report` into ``out`` (default beside the store); a URL ``out`` is written locally, then uploaded."""
    import tempfile

    target = os.fspath(out) if out is not None else default_report_location(store)
    if "://" not in target:
        rep = make_report(store, target, storage_options=storage_options, sections=sections)
        rep.location = str(Path(target).absolute())
        return rep
    import fsspec

    with tempfile.TemporaryDirectory(prefix="geosweep-report-") as tmp:
        rep = make_report(store, tmp, storage_options=storage_options, sections=sections)
        fs, root = fsspec.core.url_to_fs(target, **(storage_options or {}))
        for path in sorted(Path(tmp).iterdir()):
            fs.put_file(str(path), f"{root.rstrip('/')}/{path.name}")
    rep.location = target
    return rep


def main_report(store: str, out: str | None, storage_options: dict | None = None) -> Report:
    """CLI helper: the report goes to ``<store>.report`` beside the store unless ``out`` is given."""
    return write_report(store, out, storage_options)


# ---------------------------------------------------------------------------------------
# night against night
# ---------------------------------------------------------------------------------------
#: per-cell values that are run stamps, not results: never compared between nights
RUN_STAMPS = frozenset({"wall_time", "completed_at", "done", "steps_per_second"})
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

    from sweeps.store import open_results

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
        if v.dtype.kind in "fiub"
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
