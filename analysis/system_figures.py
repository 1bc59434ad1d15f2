"""System-specific figures: sphere KE map (Fig. 7), torus energy partition and deformed
states (Figs. 3–4), adaptive step sizes (any store with an adaptive method; 001 Figs. 8/10/11). Each returns
``(figure or None, caption, notes)``; notes say what the store lacks.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import numpy as np
import xarray as xr

from geosweep.analysis.figures import (
    MARKERS,
    STEP_DIMS,
    axis_label,
    cells,
    integrator_colors,
    legend_outside,
    time_label,
    units_text,
)

PAPER_KE_TIMES = (0.0, 0.25, 0.5, 0.75, 5.0)
TORUS_PARTS = ("KE_trans", "KE_rot", "U_m", "U_a", "U_s", "U_pp", "U_pw", "energy")


def _pick_cell(ds: xr.Dataset, prefer: tuple[str, ...]) -> tuple[str, Any, float, xr.Dataset] | None:
    """The ok cell of the preferred integrator (first found) with the smallest step."""
    runs = list(cells(ds))
    if not runs:
        return None
    for name in prefer:
        mine = [r for r in runs if r[0] == name]
        if mine:
            return min(mine, key=lambda r: r[2])
    return min(runs, key=lambda r: r[2])


def ke_map(ds: xr.Dataset, times: tuple[float, ...] | None = None, n_max: int = 5):
    """Per-face kinetic energy on the 5120-face icosphere at the snapshot times nearest ``times``
    (default: up to ``n_max`` evenly spaced stored snapshots), one colour scale (viridis)."""
    import matplotlib.pyplot as plt

    from geosweep.analysis.kemap import ke_face, plot_face_field

    pick = _pick_cell(ds, ("explicit_vi", "implicit_vi"))
    if pick is None:
        return None, "", ["KE map: no ok cell"]
    name, dim, value, cell = pick
    notes: list[str] = []
    states: list[tuple[float, np.ndarray, np.ndarray]] = []
    if "snapshot_state" not in cell:
        return None, "", ["KE map: the store has no state snapshots (snapshot_state)"]
    q_all, w_all = cell.geosweep.state("q", snapshots=True), cell.geosweep.state("w", snapshots=True)
    st = cell["snapshot_time"].values
    if times is None:
        valid = np.flatnonzero(np.isfinite(st))
        pick = np.unique(np.linspace(0, len(valid) - 1, min(n_max, len(valid))).round().astype(int))
        times = tuple(float(st[valid[k]]) for k in pick)
    chosen = sorted({int(np.nanargmin(np.abs(st - t))) for t in times if np.isfinite(st).any()})
    for k in chosen:
        q, w = q_all.isel(snapshot=k).values, w_all.isel(snapshot=k).values
        if np.isfinite(q).all():
            states.append((float(st[k]), q, w))
    if not states:
        return None, "", ["KE map: no finite state snapshot in the chosen cell"]
    missing = [t for t in times if not np.isclose(st, t).any()]
    if missing:
        notes.append(
            f"KE map: no snapshot at t = {', '.join(f'{t:g}' for t in missing)} (set snapshot_dt in the spec); "
            f"shown: the nearest stored times {', '.join(f'{t:g}' for t, _, _ in states)}"
        )
    fields = [(t, ke_face(q, w)) for t, q, w in states]
    finite = np.concatenate([f[np.isfinite(f)] for _, f in fields]) if fields else np.array([])
    vmax = float(finite.max()) if finite.size else 1.0
    fig, axes = plt.subplots(2, len(fields), figsize=(2.6 * len(fields) + 1.2, 5.6), squeeze=False)
    sm = None
    for col, (t, f) in enumerate(fields):
        for row, (view, where) in enumerate((((0.0, 0.0, 1.0), "+z"), ((0.0, 0.0, -1.0), "−z"))):
            sm = plot_face_field(axes[row][col], f, view=view, vmin=0.0, vmax=vmax, cmap="viridis")
            axes[row][col].set_title(f"t = {t:g}{units_text(ds['time'].attrs.get('units'))}, from {where}", fontsize=8)
    if sm is not None:
        eu = units_text(ds["energy"].attrs.get("units")) if "energy" in ds else ""
        fig.colorbar(sm, ax=axes.ravel().tolist(), shrink=0.8, label=f"KE per face, patch mean{eu or ' (LJ units)'}")
    fig.suptitle(f"kinetic-energy map, {name} {dim} = {value:g} (top row from +z, bottom row from −z; grey: "
                 "empty patch)", fontsize=9)  # fmt: skip
    caption = (
        f"Per-face kinetic energy (spec sphere.md §3.6) on the level-4 icosphere (5120 faces), orthographic "
        f"views from +z (the vortex side) and from −z (the far hemisphere), viridis colour map with one scale "
        f"for all panels; cell {name}, {dim} = {value:g}. Look for: at t = 0 the two vortex patches about +z "
        "are rings of high KE around slow centres (the swirl speed grows away from each core centre, then "
        "decays; co-rotating patches merge into one elongated ring), the far hemisphere nearly at rest; "
        "later, how the energy spreads over the sphere."
    )
    return fig, caption, notes


def torus_energy_partition(ds: xr.Dataset):
    """KE_trans, KE_rot, U_m, U_a, U_s, U_pp, U_pw and the total ``energy`` against time (paper Fig. 4)."""
    import matplotlib.pyplot as plt

    parts = [p for p in TORUS_PARTS if p in ds]
    runs = {}
    for name, dim, value, cell in cells(ds):
        if name not in runs or value < runs[name][1]:
            runs[name] = (dim, value, cell)
    if not parts or not runs:
        return None, "", ["torus energy partition: no energy parts or no ok cell"]
    fig, axes = plt.subplots(1, len(runs), figsize=(4.6 * len(runs) + 1.5, 3.6), squeeze=False, layout="constrained")
    t = ds["time"].values
    for ax, (name, (dim, value, cell)) in zip(axes[0], runs.items()):
        for p in parts:
            ax.plot(t, cell[p].values, lw=2 if p == "energy" else 1, color="k" if p == "energy" else None, label=p)
        ax.set_title(f"{name}, {dim} = {value:g}", fontsize=9)
        ax.set_xlabel(time_label(ds))
        ax.set_ylabel("energy" + units_text(ds["energy"].attrs.get("units")) if "energy" in ds else "energy")
        ax.grid(True, alpha=0.3)
    legend_outside(fig, list(axes[0]))
    fig.suptitle("torus energy partition (paper Fig. 4)")
    return fig, "Energy partition over time per integrator at its smallest h (paper Fig. 4).", []


def torus_snapshots(ds: xr.Dataset, n_max: int = 4):
    """Particle positions (``x_*`` of ``snapshot_state``) at up to ``n_max`` snapshot times, with
    the wall x = 0 (Fig. 3)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle

    pick = _pick_cell(ds, ("v2_newmark", "v2_exact"))
    if pick is None or "snapshot_state" not in ds:
        return None, "", ["torus snapshots: no ok cell or no snapshot_state"]
    name, dim, value, cell = pick
    xs = cell.geosweep.state("x", snapshots=True)
    st = cell["snapshot_time"].values
    valid = np.flatnonzero(np.isfinite(st))
    chosen = valid[np.unique(np.linspace(0, len(valid) - 1, min(n_max, len(valid))).round().astype(int))]
    x0 = xs.isel(snapshot=int(chosen[0])).values
    ax2 = 1 + int(np.argmax(np.nanstd(x0[:, 1:], axis=0)))  # in-plane axis with the larger spread
    n = int(np.isfinite(x0[:, 0]).sum())
    radius = 0.5 * float(cell["D_t"]) * np.sin(np.pi / n) if "D_t" in cell.coords else 0.05
    fig, axes = plt.subplots(1, len(chosen), figsize=(3.0 * len(chosen), 3.6), squeeze=False)
    all_x = xs.isel(snapshot=chosen).values
    pad = radius + 0.03 * float(np.nanmax(np.ptp(np.nan_to_num(all_x), axis=1)))
    lo, hi = np.nanmin(all_x, axis=(0, 1)) - pad, np.nanmax(all_x, axis=(0, 1)) + pad
    for ax, k in zip(axes[0], chosen):
        x = xs.isel(snapshot=int(k)).values
        for p in x[np.isfinite(x[:, 0])]:
            ax.add_patch(Circle((p[0], p[ax2]), radius, fc="tab:blue", ec="k", lw=0.4, alpha=0.8))
        ax.axvline(0.0, color="k", lw=2)
        ax.set_xlim(min(lo[0], -0.2), hi[0])
        ax.set_ylim(lo[ax2], hi[ax2])
        ax.set_aspect("equal", adjustable="box")  # every particle inside the axes (nothing clipped)
        ax.set_title(f"t = {st[k]:g}", fontsize=9)
        ax.set_xlabel("x" + units_text(cell["D_t"].attrs.get("units")) if "D_t" in cell.coords else "x")
    axes[0][0].set_ylabel("yz"[ax2 - 1])
    fig.suptitle(f"torus deformed states, {name} {dim} = {value:g} (wall at x = 0)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return fig, f"Particle positions at snapshot times (paper Fig. 3), cell {name}, {dim} = {value:g}.", []


def adaptive_step_sizes(ds: xr.Dataset):
    """Adaptive methods: accepted step size against time (paper 001 Figs. 8/10/11) and step counts vs tol.

    ``step_size(time)`` is the accepted step in force at each output sample, so steps shorter
    than the output interval that contain no sample time do not appear. The last sample's step is
    the final one, cut to end exactly at T: it is not drawn, and the smallest step quoted is the
    smallest sampled one between the initial trial step and it (the store's ``h_min_used`` counts
    the cut step).
    """
    import matplotlib.pyplot as plt

    if "tol" not in ds["status"].dims or "step_size" not in ds:
        return None, "", ["adaptive step sizes: no adaptive (tol) cells with a step_size record in this store"]
    runs = [(n, v, c) for n, d, v, c in cells(ds) if d == "tol"]
    if not runs:
        return None, "", ["adaptive step sizes: no ok adaptive cell"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [2, 1]}, layout="constrained")
    names = sorted({r[0] for r in runs})
    colors = integrator_colors(names)
    styles = ["-", "--", ":", "-."]
    for name in names:
        color = colors[name]
        mine = sorted((v, c) for n, v, c in runs if n == name)
        for style, (tol, c) in zip(styles * 10, mine):
            t, h = c["time"].values[:-1], c["step_size"].values[:-1]  # the last step is cut to end at T
            fin = h[1:][np.isfinite(h[1:]) & (h[1:] > 0)]  # after the controller's initial trial step
            hmin = f" (min {fin.min():.2g} after the first step)" if fin.size else ""
            a1.semilogy(t, h, style, color=color, lw=1, label=f"{name}, tol = {tol:g}{hmin}")
        tol = np.array([v for v, _ in mine])
        steps = np.array([float(c["steps"]) for _, c in mine])
        rej = np.array([float(c["rejected_steps"]) for _, c in mine])
        a2.loglog(tol, steps, "o-", color=color, label=f"{name}: accepted")
        a2.loglog(tol, np.maximum(rej, 0.8), "s--", color=color, mfc="none", label=f"{name}: rejected (0 at 0.8)")
    units = ds["time"].attrs.get("units", "")
    a1.set_xlabel(time_label(ds))
    a1.set_ylabel("accepted step" + units_text(units))
    a2.set_xlabel("tolerance tol")
    a2.set_ylabel("steps")
    for a in (a1, a2):
        a.grid(True, which="both", alpha=0.3)
    a1.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    a2.legend(fontsize=6.5, loc="best", frameon=False)
    fig.suptitle("adaptive step size against time (step in force at each output sample; the last step, cut to "
                 f"end at T, not drawn) — {ds.attrs.get('system', '')}", fontsize=9)  # fmt: skip
    caption = (
        "Accepted step size of the adaptive methods against time (paper 001 Figs. 8/10/11), with the smallest "
        "sampled step of each curve after the first, and accepted/rejected step counts against tol. Look for: the step "
        "shrinking where the motion is fast, and fewer steps at a looser tol."
    )
    return fig, caption, []


def step_dims_present(ds: xr.Dataset) -> list[str]:
    return [d for d in STEP_DIMS if d in ds["status"].dims]


def _per_run_lines(ds: xr.Dataset, panels: list[tuple[str, str]], title: str, log: bool = True):
    """Panels of ``(variable, panel title)`` time series; colour = integrator, line style = step
    (and, for a ``link`` dim, solid quadrotor 1 / dashed quadrotor 2 in the legend label)."""
    import matplotlib.pyplot as plt

    from geosweep.analysis.figures import EPS, LOG_FLOOR_ULPS, STYLES, key_legend, log_values, note_zeros

    runs = list(cells(ds))
    panels = [(v, lab) for v, lab in panels if v in ds and bool(np.isfinite(ds[v].where(ds.status == 0)).any())]
    if not runs or not panels:
        return None
    order = [str(n) for n in ds["integrator"].values]
    colors = integrator_colors(order)
    steps = sorted({(str(d), v) for _, d, v, _ in runs}, key=lambda k: (k[0], -k[1]))
    t = ds["time"].values
    ncols = min(len(panels), 3)
    nrows = int(np.ceil(len(panels) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.0 * ncols + 2.4, 3.1 * nrows + 0.4), squeeze=False,
                             layout="constrained")  # fmt: skip
    axes = list(axes.ravel())
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    floor = LOG_FLOOR_ULPS * EPS
    drawn: set[str] = set()
    links = False
    for ax, (var, lab) in zip(axes, panels):
        zeros: dict[str, tuple[int, int]] = {}
        for name, dim, value, cell in runs:
            da = cell[var]
            parts = [(None, da)] if "link" not in da.dims else [(i, da.isel(link=i)) for i in range(da.sizes["link"])]
            for link, y in parts:
                y = np.asarray(y.values, dtype=np.float64)
                if log:
                    y, low = log_values(y, floor)
                    k, m = zeros.get(name, (0, 0))
                    zeros[name] = (k + low, m + int(np.isfinite(y[1:]).sum()) + low)
                if not np.isfinite(y).any():
                    continue
                links |= link is not None
                style = STYLES[steps.index((str(dim), value)) % len(STYLES)]
                label = f"{name}, {dim} = {value:g}" + ("" if link is None else f", quadrotor {link + 1}")
                kw = dict(color=colors[name], ls=style, lw=1.0 if link in (None, 0) else 0.7,
                          alpha=1.0 if link in (None, 0) else 0.6, label=label)  # fmt: skip
                (ax.semilogy if log else ax.plot)(t, y, **kw)
                drawn.add(name)
        if log:
            note_zeros(ax, zeros, floor)
        ax.set_title(lab, fontsize=8.5)
        ax.set_ylabel(axis_label(ds[var], 34), fontsize=7.5)
        ax.set_xlabel(time_label(ds), fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    keys = {f"{d} = {v:g}": {"ls": STYLES[k % len(STYLES)]} for k, (d, v) in enumerate(steps)}
    if links:
        keys.update({"quadrotor 1": {"lw": 1.0}, "quadrotor 2 (thin, faint)": {"lw": 0.7, "alpha": 0.6}})
    key_legend(fig, {n: colors[n] for n in order if n in drawn}, keys, fontsize=6.5)
    fig.suptitle(title, fontsize=10)
    return fig


def top_invariants(ds: xr.Dataset):
    """Heavy top: energy error and the Casimir / first-integral errors against time (paper 001 §3, Fig. 3)."""
    fig = _per_run_lines(
        ds,
        [
            ("energy_error", "|E − E0|"),
            ("cas_gamma", "Casimir ||Γ|² − 1|"),
            ("dJ3", "|e3·π − J3(0)| (lp_*: Casimir |Π·Γ − C2(0)|)"),
            ("dS", "spin |Π·X − S(0)| (symmetric top)"),
            ("orth", "max|QᵀQ − I| (T*SO(3) forms)"),
        ],
        f"heavy top: energy and Casimir errors — {ds.attrs.get('system', '')}",
    )
    if fig is None:
        return None, "", ["top invariants: no ok cell with invariant time series"]
    caption = (
        "Heavy top: |E − E0| and the errors of the Casimirs and first integrals against time, log scale "
        "(paper 001 §3). Look for: a bounded energy error without drift for the symplectic SLGI methods, a "
        "drifting one for RKMK4/CF4, Casimirs at round-off for the Lie–Poisson methods and |Γ| collapsing for "
        "the ambient RK4."
    )
    return fig, caption, []


def _desired_path(t: np.ndarray) -> np.ndarray:
    """The quadrotors' load reference y_d(t) = (t − 2.5, 0, (t − 2.5)² − 7) [m] (spec heavy_top_quadrotors §5,
    the same curve as ``geosweep.kernels.quad.model.desired``), shape (len(t), 3)."""
    s = np.asarray(t, dtype=np.float64) - 2.5
    return np.stack([s, np.zeros_like(s), s * s - 7.0], axis=-1)


def quad_trajectory(ds: xr.Dataset):
    """Two quadrotors: the load's path y (snapshots of ``y_*``) against y_d in the x–z plane, and e_y(t).

    The path needs snapshots inside the run (``snapshot_dt``); with only t = 0 and T stored the
    path panel is left out (and the notes say so) rather than drawn as two points."""
    import matplotlib.pyplot as plt

    from geosweep.analysis.figures import STYLES, key_legend

    runs = list(cells(ds))
    if not runs or "e_y" not in ds:
        return None, "", ["quadrotor trajectory: no ok cell or no e_y"]
    order = [str(n) for n in ds["integrator"].values]
    colors = integrator_colors(order)
    steps = sorted({(str(d), v) for _, d, v, _ in runs}, key=lambda k: (k[0], -k[1]))
    t = ds["time"].values
    notes = []
    have_snaps = "snapshot_state" in ds and "y_x" in [str(s) for s in ds["state"].values]
    path = have_snaps and ds.sizes.get("snapshot", 0) > 2
    if have_snaps and not path:
        notes.append("quadrotor trajectory: load path not drawn, only t = 0 and T are stored; set snapshot_dt "
                     "in the spec for the path")  # fmt: skip
    if path:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11.5, 3.8), layout="constrained")
        yd = _desired_path(np.linspace(t[0], t[-1], 400))
        a1.plot(yd[:, 0], yd[:, 2], "k-", lw=2.5, alpha=0.35)
    else:
        fig, a2 = plt.subplots(1, 1, figsize=(7.0, 3.8), layout="constrained")
    for name, dim, value, cell in runs:
        k = steps.index((str(dim), value))
        if path:
            ys = cell["snapshot_state"].sel(state=["y_x", "y_y", "y_z"]).isel(body=0).values
            a1.plot(ys[:, 0], ys[:, 2], MARKERS[k % len(MARKERS)], color=colors[name], mfc="none", ms=5)
        e = np.asarray(cell["e_y"].values, dtype=np.float64)
        a2.semilogy(t, np.where(e > 0, e, np.nan), color=colors[name], ls=STYLES[k % len(STYLES)], lw=1)
    if path:
        a1.invert_yaxis()  # e3 points down: plot altitude upwards
        a1.set_xlabel("load x [m]")
        a1.set_ylabel("load z [m] (e3 down; axis inverted)")
        a1.set_title("load path (markers: stored snapshots; grey: desired y_d(t))", fontsize=9)
        a1.grid(True, alpha=0.3)
    a2.set_xlabel(time_label(ds))
    a2.set_ylabel(axis_label(ds["e_y"], 34))
    a2.set_title("tracking error", fontsize=9)
    a2.grid(True, which="both", alpha=0.3)
    keys = {f"{d} = {v:g}": {"ls": STYLES[k % len(STYLES)], **({"marker": MARKERS[k % len(MARKERS)],
                                                                "mfc": "none"} if path else {})}
            for k, (d, v) in enumerate(steps)}  # fmt: skip
    key_legend(fig, {n: colors[n] for n in order if any(r[0] == n for r in runs)}, keys, fontsize=6.5)
    fig.suptitle(f"two quadrotors with a load — {ds.attrs.get('system', '')}", fontsize=10)
    caption = (
        "Two quadrotors carrying a point load (paper 001 §6): the load's path against the desired curve "
        "y_d(t) in the x–z plane (when snapshots are stored), and the tracking error e_y = |y − y_d| against "
        "time. Look for: e_y decaying as the controller converges, the same for every Lie group method and step."
    )
    return fig, caption, notes


def quad_constraints(ds: xr.Dataset):
    """Two quadrotors: constraint residuals |q_i|−1, q_i·ω_i, R_iᵀR_i − I against time (paper 001 §6)."""
    fig = _per_run_lines(
        ds,
        [
            ("unit_err", "|1 − q_i·q_i| (link direction on S²)"),
            ("tang_err", "|q_i·ω_i| (tangency)"),
            ("orth_err", "max|R_iᵀR_i − I| (attitude in SO(3))"),
        ],
        f"two quadrotors: constraint residuals — {ds.attrs.get('system', '')}",
    )
    if fig is None:
        return None, "", ["quadrotor constraints: no ok cell with residual time series"]
    caption = (
        "Constraint residuals of both quadrotors (thin, faint: quadrotor 2) against time, log scale. Look for: "
        "round-off (≤ 1e-13) for the Lie group methods, which act through the group, and growth for the "
        "ambient RK4 baseline."
    )
    return fig, caption, []


def dg_invariants(ds: xr.Dataset):
    """Skew-gradient systems (paper 004, Fig. 4): relative energy error and the constraint and
    Casimir errors against time, log scale."""
    fig = _per_run_lines(
        ds,
        [
            ("rel_energy_error", "relative energy error |H − H0| / |H0|"),
            ("constraint_error", "nonholonomic constraint residual"),
            ("casimir_error", "Casimir error max_j |C_j − C_j(0)|"),
        ],
        f"energy, constraint and Casimir errors — {ds.attrs.get('system', '')}",
    )
    if fig is None:
        return None, "", ["dg invariants: no ok cell with these time series"]
    caption = (
        "Relative energy error and the constraint and Casimir residuals against time, log scale (paper 004, "
        "Fig. 4). Look for: the discrete gradients at round-off in energy for every h; the reduced forms "
        "(GONZALEZ-R) keeping the constraint at round-off while the canonical form (GONZALEZ-F) does not; the "
        "baselines' energy error growing (RK4) or oscillating (implicit midpoint), and si_dla's growing."
    )
    return fig, caption, []


def _maker(path: str) -> Any:
    """The function a :class:`geosweep.kernels.registry.Figure` names (``"package.module:function"``)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _call(figure: Any, sub: xr.Dataset, ke_times: Any) -> Any:
    make = _maker(figure.maker)
    if "times" in inspect.signature(make).parameters:
        return lambda: make(sub, times=ke_times)
    return lambda: make(sub)


def system_figures(system: str, family: str, ds: xr.Dataset, sub: xr.Dataset, ke_times=None) -> list[tuple[str, Any]]:
    """(name, maker) of the figures the system and then its family declare (``SystemDef.figures``,
    ``FamilyDef.figures``), then the step sizes of adaptive methods; each maker returns
    ``(figure or None, caption, notes)``."""
    from geosweep.kernels.registry import declared

    sysdef, famdef = declared(system, family)
    declared_figures = (sysdef.figures if sysdef is not None else ()) + (famdef.figures if famdef is not None else ())
    out: list[tuple[str, Any]] = [(f.name, _call(f, sub, ke_times)) for f in declared_figures]
    if "integrator_adaptive" in ds.coords and bool(ds["integrator_adaptive"].any()):
        out.append(("adaptive_step_sizes", lambda: adaptive_step_sizes(sub)))
    return out
