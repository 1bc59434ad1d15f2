"""Every figure of `geosweep report` reads correctly for every shipped example spec (issue 22, item 8).

Each spec of sweeps/examples/ runs shortened (short T, fewer parameter values, the same integrators
and step sizes, so legends and panels have their real size) and its report is inspected through
the matplotlib objects: every panel has data, legends are keyed (≤ 12 entries; more than 10 only
outside the axes), log axes span a sane number of decades and stop above rounding noise, labels
are short names (no "; NaN if …" or "paper (38): …"), zeros on log axes are noted in the panel,
and the index has no table without rows."""

from __future__ import annotations

import re
import tomllib
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import geosweep  # noqa: F401 - registers ds.geosweep
from geosweep.analysis.accessor import CellsDroppedWarning
from geosweep.sweeps.engine import run_sweep

EXAMPLES = resources.files("geosweep.sweeps").joinpath("examples")
#: per example: what is shortened (T, output interval, parameter values); integrators and steps stay
SHORT = {
    "catalogue": {"T": 0.5},
    "chain_dg": {"T": 0.1},
    "chain_e3": {"T": 0.2},
    "gearbox_long": {"T": 20.0, "dt_out": 1.0},
    "heavy_top": {"T": 0.5},
    "long_energy": {"T": 0.2, "dt_out": 0.05},
    "quadrotors": {"T": 0.2},
    "sphere_demo": {"T": 0.25},
    "torus_impact": {"T": 1.0, "params": {"v0": [1.0], "tilt": [0.0, 0.5235987755982988]}},
    "torus_long": {"T": 1.0, "dt_out": 0.05},
}
MAX_LEGEND = 12  # entries; a legend inside the axes has at most 10
MAX_DECADES = 20  # a log axis spanning more shows rounding noise
LOG_BOTTOM = 1e-20  # no log axis reaches below this (the old momentum axis went to 1e-45)
RAW = ("; ", "NaN if", "paper (", "NaN unless", "against DOP853")


def short_spec(name: str) -> dict:
    spec = tomllib.loads(EXAMPLES.joinpath(f"{name}.toml").read_text())
    spec.pop("checkpoint_every", None)
    spec.update(SHORT[name])
    spec["name"] = f"{spec['name']}-short"
    return spec


def test_every_example_is_covered():
    assert sorted(SHORT) == sorted(p.name[:-5] for p in EXAMPLES.iterdir() if p.name.endswith(".toml"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """name → (report with its figures kept open, store path); the figures are closed at the end."""
    import matplotlib.pyplot as plt

    from geosweep.analysis.report import make_report

    plt.rcParams["figure.max_open_warning"] = 0  # every report's figures stay open for inspection
    root = tmp_path_factory.mktemp("examples")
    out = {}
    for name in SHORT:
        store = root / f"{name}.zarr"
        assert run_sweep(short_spec(name), store, serial=True).complete
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CellsDroppedWarning)
            out[name] = (make_report(store, root / f"{name}.report", keep_figures=True), store)
    yield out
    plt.close("all")


def _panels(fig):
    """The visible data axes of a figure (colour bars left out)."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]


def _has_data(ax) -> bool:
    for ln in ax.get_lines():
        y = np.asarray(ln.get_ydata(), dtype=float)
        if np.isfinite(y).any():
            return True
    return bool(ax.collections or ax.images or ax.patches)


def _legends(fig):
    """(legend, inside an axes?) for every legend of the figure."""
    out = [(ax.get_legend(), True) for ax in fig.axes if ax.get_legend() is not None]
    for leg in fig.legends:
        out.append((leg, False))
    for ax in fig.axes:  # a legend anchored outside the axes box (bbox_to_anchor x > 1) is outside
        leg = ax.get_legend()
        if leg is not None and leg.get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1:
            out = [(g, inside and g is not leg) for g, inside in out]
    return out


def _labels(fig) -> list[str]:
    """Axis labels and panel titles (the figure title may carry "; slice")."""
    out = []
    for ax in _panels(fig):
        out += [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
    return [t for t in out if t]


def check_figure(where: str, fig, png: Path) -> None:
    """The checks of one figure (see the module docstring)."""
    from tests.test_report_families import check_png

    check_png(png)
    panels = _panels(fig)
    assert panels, where
    for ax in panels:
        assert _has_data(ax), (where, ax.get_title())
        for axis, scale, lim in (("x", ax.get_xscale(), ax.get_xlim()), ("y", ax.get_yscale(), ax.get_ylim())):
            if scale == "log":
                lo, hi = sorted(lim)
                assert lo >= LOG_BOTTOM and np.log10(hi / lo) <= MAX_DECADES, (where, ax.get_title(), axis, lim)
    for leg, inside in _legends(fig):
        n = len(leg.get_texts())
        assert n <= MAX_LEGEND and (n <= 10 or not inside), (where, n, inside)
    for text in _labels(fig):
        assert all(len(line) <= 60 for line in text.splitlines()), (where, text)
        if not where.endswith("status_map"):
            assert not any(r in text for r in RAW), (where, text)


@pytest.mark.parametrize("name", sorted(SHORT))
def test_every_figure_reads(reports, name):
    rep, _ = reports[name]
    assert rep.figures, (name, rep.notes)
    for fig_name, fig in rep.open_figures.items():
        check_figure(f"{name}/{fig_name}", fig, rep.figures[fig_name])


@pytest.mark.parametrize("name", sorted(SHORT))
def test_index_has_no_empty_table_and_no_exact_claim(reports, name):
    rep, _ = reports[name]
    md = rep.index.read_text()
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\|(---\|)+$", line):  # a table's separator: a row must follow
            assert i + 1 < len(lines) and lines[i + 1].startswith("| "), (name, lines[i - 1])
    assert "exact by construction" not in md
    assert "vortex cores (high KE)" not in md


def test_specific_readings(reports):
    """What the issue saw, figure by figure."""
    # torus_impact: the wall contact at t ≈ 0.5 switches to linear time
    rep, _ = reports["torus_impact"]
    assert rep.open_figures["energy_error_vs_time"].axes[0].get_xscale() == "linear"
    # catalogue: rk4_proj's unit error is exactly 0 at many samples: the panel says so
    rep, _ = reports["catalogue"]
    fig = rep.open_figures["constraint_errors"]
    notes = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("0 (≤" in t and "rk4_proj" in t and "not drawn" in t for t in notes), notes
    # torus momentum: no axis down to 1e-45 (rounding in the near-zero components of P)
    rep, _ = reports["torus_impact"]
    for ax in _panels(rep.open_figures["momentum_errors"]):
        assert min(ax.get_ylim()) >= 1e-19, ax.get_ylim()
    # quadrotors without snapshot_dt: no empty path panel, the notes say why
    rep, _ = reports["quadrotors"]
    assert len(_panels(rep.open_figures["quad_trajectory"])) == 1
    assert any("load path not drawn" in n and "snapshot_dt" in n for n in rep.notes)
    # gearbox_long sweeps one h: no h panel in error_vs_step, no order table with headers only
    rep, _ = reports["gearbox_long"]
    titles = [ax.get_title() for ax in _panels(rep.open_figures["error_vs_step"])]
    assert titles == ["adaptive methods vs tol"], titles
    # one h and no tol (long_energy, torus_long): no error-vs-h figure for a single point, a note instead
    for name in ("long_energy", "torus_long"):
        rep, _ = reports[name]
        assert "error_vs_step" not in rep.figures
        assert any(n.startswith("error_vs_step: only one h") for n in rep.notes), rep.notes
    # adaptive step sizes: the quoted minimum is not the final step cut to end at T
    for name in ("heavy_top", "gearbox_long", "chain_e3"):
        rep, store = reports[name]
        ax = _panels(rep.open_figures["adaptive_step_sizes"])[0]
        for ln in ax.get_lines():
            quoted = float(re.search(r"\(min ([0-9.e+-]+) after the first step\)", ln.get_label()).group(1))
            assert quoted == pytest.approx(np.nanmin(ln.get_ydata()[1:]), rel=0.05), (name, ln.get_label())
            assert ln.get_xdata()[-1] < float(xr.open_zarr(store).time[-1])  # the cut last step is not drawn
    # sphere KE map: both hemispheres
    rep, _ = reports["sphere_demo"]
    titles = [ax.get_title() for ax in _panels(rep.open_figures["ke_map"])]
    assert any("from +z" in t for t in titles) and any("from −z" in t for t in titles)
    assert "ring" in rep.captions["ke_map"]
    # legends are keyed: chain_e3's 18 (integrator, step) curves → 6 colours + 6 steps
    rep, _ = reports["chain_e3"]
    (leg,) = rep.open_figures["constraint_errors"].legends
    assert len(leg.get_texts()) == 12


def test_paths(reports):
    """Every written figure is a file of the report (the figures kept open are those written)."""
    for rep, _ in reports.values():
        assert set(rep.open_figures) == set(rep.figures)
        assert all(Path(p).exists() for p in rep.figures.values())
