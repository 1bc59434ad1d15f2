"""System-specific figures: sphere KE map (Fig. 7), torus energy partition and deformed
states (Figs. 3–4), chain adaptive step sizes (Figs. 8/10/11). Each returns
``(figure or None, caption, notes)``; notes say what the store lacks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from analysis.figures import STEP_DIMS, cells

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


def ke_map(ds: xr.Dataset, times: tuple[float, ...] = PAPER_KE_TIMES):
    """Per-face kinetic energy on the 5120-face icosphere at the snapshot times nearest ``times``."""
    import matplotlib.pyplot as plt

    from analysis.kemap import ke_face, plot_face_field

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
    fig, axes = plt.subplots(1, len(fields), figsize=(3.0 * len(fields) + 1.0, 3.4), squeeze=False)
    sm = None
    for ax, (t, f) in zip(axes[0], fields):
        sm = plot_face_field(ax, f, vmin=0.0, vmax=vmax, cmap="jet")
        ax.set_title(f"t = {t:g}", fontsize=9)
    if sm is not None:
        fig.colorbar(sm, ax=list(axes[0]), shrink=0.8, label="mean KE over vertex patch")
    fig.suptitle(f"kinetic-energy map, {name} {dim} = {value:g} (view from +z; grey: empty patch)", fontsize=9)
    caption = (
        f"Per-face kinetic energy (spec sphere.md §3.6) on the level-4 icosphere (5120 faces), orthographic "
        f"view from +z, jet colour map with one scale for all panels; cell {name}, {dim} = {value:g}."
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
    fig, axes = plt.subplots(1, len(runs), figsize=(4.6 * len(runs), 3.6), squeeze=False)
    t = ds["time"].values
    for ax, (name, (dim, value, cell)) in zip(axes[0], runs.items()):
        for p in parts:
            ax.plot(t, cell[p].values, lw=2 if p == "energy" else 1, color="k" if p == "energy" else None, label=p)
        ax.set_title(f"{name}, {dim} = {value:g}", fontsize=9)
        ax.set_xlabel("time")
        ax.set_ylabel("energy")
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7, ncol=2)
    fig.suptitle("torus energy partition (paper Fig. 4)")
    fig.tight_layout()
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
    fig, axes = plt.subplots(1, len(chosen), figsize=(3.0 * len(chosen), 3.4), squeeze=False, sharey=True)
    all_x = xs.isel(snapshot=chosen).values
    lo, hi = np.nanmin(all_x, axis=(0, 1)) - radius, np.nanmax(all_x, axis=(0, 1)) + radius
    for ax, k in zip(axes[0], chosen):
        x = xs.isel(snapshot=int(k)).values
        for p in x[np.isfinite(x[:, 0])]:
            ax.add_patch(Circle((p[0], p[ax2]), radius, fc="tab:blue", ec="k", lw=0.4, alpha=0.8))
        ax.axvline(0.0, color="k", lw=2)
        ax.set_xlim(min(lo[0], -0.2), hi[0])
        ax.set_ylim(lo[ax2], hi[ax2])
        ax.set_aspect("equal")
        ax.set_title(f"t = {st[k]:g}", fontsize=9)
        ax.set_xlabel("x")
    axes[0][0].set_ylabel("yz"[ax2 - 1])
    fig.suptitle(f"torus deformed states, {name} {dim} = {value:g} (wall at x = 0)", fontsize=9)
    fig.tight_layout()
    return fig, f"Particle positions at snapshot times (paper Fig. 3), cell {name}, {dim} = {value:g}.", []


def chain_step_sizes(ds: xr.Dataset):
    """Adaptive methods: accepted step size against time (paper Figs. 8/10/11) and step counts vs tol.

    ``step_size(time)`` is the accepted step in force at each output sample, so steps shorter
    than the output interval that contain no sample time do not appear; ``h_min_used`` (the
    true minimum) is marked on each curve's label.
    """
    import matplotlib.pyplot as plt

    if "tol" not in ds["status"].dims or "step_size" not in ds:
        return None, "", ["chain step size: no adaptive (tol) cells with a step_size record in this store"]
    runs = [(n, v, c) for n, d, v, c in cells(ds) if d == "tol"]
    if not runs:
        return None, "", ["chain step size: no ok adaptive cell"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [2, 1]})
    names = sorted({r[0] for r in runs})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    for color, name in zip(colors, names):
        mine = sorted((v, c) for n, v, c in runs if n == name)
        for style, (tol, c) in zip(styles * 10, mine):
            hmin = float(c["h_min_used"])
            a1.semilogy(
                c["time"].values,
                c["step_size"].values,
                style,
                color=color,
                lw=1,
                label=f"{name}, tol = {tol:g} (h_min {hmin:.2g})",
            )
        tol = np.array([v for v, _ in mine])
        steps = np.array([float(c["steps"]) for _, c in mine])
        rej = np.array([float(c["rejected_steps"]) for _, c in mine])
        a2.loglog(tol, steps, "o-", color=color, label=f"{name} accepted")
        a2.loglog(tol, np.maximum(rej, 0.8), "s--", color=color, label=f"{name} rejected")
    units = ds["time"].attrs.get("units", "")
    a1.set_xlabel(f"time [{units}]")
    a1.set_ylabel(f"accepted step [{units}]")
    a2.set_xlabel("tol")
    a2.set_ylabel("steps")
    for a in (a1, a2):
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle("adaptive step size against time (step in force at each output sample)", fontsize=9)
    fig.tight_layout()
    caption = (
        "Accepted step size of the adaptive methods against time (paper Figs. 8/10/11), and "
        "accepted/rejected step counts against tol."
    )
    return fig, caption, []


def step_dims_present(ds: xr.Dataset) -> list[str]:
    return [d for d in STEP_DIMS if d in ds["status"].dims]
