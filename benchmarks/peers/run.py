"""Side-by-side comparisons of geosweep's kernels against peers, each peer in its own venv.

``python3 benchmarks/peers/run.py [--only chain|md|dg] [--repeats R] [--md-steps N] ...``

* ``chain`` — 20-link 3D pendulum (T = 3): work–precision at equal final error of ``rkmk853``,
  ``rkmk8`` (and ``dop853_ambient``) against diffrax ``Dopri8`` (JAX, venv ``peer-diffrax``)
  and SciPy ``DOP853`` (main environment), constraint drift beside it; draws the figure.
* ``md`` — 642-molecule LJ sphere, explicit VI against LAMMPS (``fix rattle``, venv
  ``peer-lammps``) and OpenMM (CPU platform, RATTLE ``CustomIntegrator``, venv ``peer-openmm``):
  the same exported initial state, energy over ``--md-steps`` steps, time per step.
* ``dg`` — PETSc TSDISCGRAD (venv ``peer-petsc``): skipped with its reason when absent.

geosweep runs in this process (single-threaded), each peer in a subprocess of its venv
(``harness.py``); states go through ``.npy`` files. Timings alternate between the sides in
rounds (round 0 is a warm-up) and every ratio is the median of the per-round ratios, so a
change of machine load between rounds cancels. A peer that is not installed is skipped with
one line giving the reason and the install command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from harness import PEERS, PeerError, PeerProcess, set_single_thread, unavailable  # noqa: E402

set_single_thread()

import numpy as np  # noqa: E402

TARGETS = tuple(float(e) for e in 10.0 ** -np.arange(4, 12))


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


# --------------------------------------------------------------------------------------
# chain: work–precision
# --------------------------------------------------------------------------------------
def _diffrax_method(peer: PeerProcess, case, work: Path):
    from geosweep_side import TOLS, ChainMethod, constraint_errors

    def solve(tol: float):
        out = str(work / "diffrax_y.npy")
        r = peer.call("solve", tol=tol, out=out)
        y = np.load(out)
        peer.call("solve", tol=tol, out=out, steps=True)
        cu, ct = constraint_errors(np.concatenate([case.model.y0[None], np.load(out)]))
        return y, int(r["accepted"] + r["rejected"]), cu, ct

    def seconds(tol: float) -> tuple[float, float]:
        r = peer.call("time", tol=tol, repeats=1)
        return float(r["seconds"][0]), float(r["cpu_seconds"][0])

    return ChainMethod("diffrax_dopri8", TOLS, solve, seconds, side="diffrax")


def _bracket(curve: list[tuple], err: float):
    """(i, w): log(err) lies between the final errors of knobs i and i + 1, weight w on i + 1."""
    le = np.log([c[0] for c in curve])
    x = np.log(err)
    for i in range(len(le) - 1):
        if min(le[i], le[i + 1]) <= x <= max(le[i], le[i + 1]) and le[i] != le[i + 1]:
            return i, float((x - le[i]) / (le[i + 1] - le[i]))
    return None


def compare_chain(repeats: int, ic: str, figure: Path | None, work: Path) -> dict:
    from geosweep_side import ChainCase, chain_methods

    print(f"== chain: 20-link pendulum, T = 3, ic = {ic}; {_load()}")
    case = ChainCase(ic=ic)
    case.reference()
    methods = chain_methods(case)
    versions: dict = {}
    reason = unavailable(PEERS["diffrax"])
    peer = None
    if reason:
        print(f"SKIP {reason}")
    else:
        peer = PeerProcess(PEERS["diffrax"])
        versions = peer.call("init", **case.export(work / "chain"))["versions"]
        print(f"diffrax side: {versions}")
        from geosweep.kernels.chain.rhs import chain_F, work_size

        F = np.empty((case.n, 6))
        chain_F(case.model.y0, case.model.params, np.zeros(work_size(case.n)), F)
        peer.call("field", y=str(work / "chain" / "y0.npy"), out=str(work / "F.npy"))
        print(f"field check at y0: max abs(F_jax − F_geosweep) = {np.abs(np.load(work / 'F.npy') - F).max():.1e}")
        methods.append(_diffrax_method(peer, case, work))
    try:
        return _chain_table(case, methods, repeats, figure, versions)
    finally:
        if peer is not None:
            peer.close()


def _chain_table(case, methods, repeats: int, figure: Path | None, versions: dict) -> dict:
    curves = {}
    for m in methods:
        curves[m.name] = [(case.error(y), nf, cu, ct) for y, nf, cu, ct in map(m.solve, m.knobs)]
        for knob, (e, nf, cu, ct) in zip(m.knobs, curves[m.name]):
            print(f"{m.name:15s} knob={knob:8.1e} err={e:.2e} evals={nf:7d} max|‖q‖-1|={cu:.1e} max|q·ω|={ct:.1e}")
    rows = []
    for err in TARGETS:
        br = {m.name: _bracket(curves[m.name], err) for m in methods}
        live = [m for m in methods if br[m.name] is not None]
        times = {m.name: np.zeros((repeats, 2)) for m in live}  # rounds × (wall, cpu)
        for r in range(repeats + 1):
            for m in live:
                i, w = br[m.name]
                lt = np.log([m.seconds(m.knobs[k]) for k in (i, i + 1)])
                if r:  # round 0 warms up
                    times[m.name][r - 1] = np.exp((1 - w) * lt[0] + w * lt[1])
        row: dict = {"err": err, "ms": {}, "cpu_ms": {}, "cpu_over_wall": {}, "constraints": {}, "ratio": {}}
        row["cpu_ratio"] = {}
        for m in live:
            i, w = br[m.name]
            near = curves[m.name][i + (w >= 0.5)]
            row["ms"][m.name] = 1e3 * float(np.median(times[m.name][:, 0]))
            row["cpu_ms"][m.name] = 1e3 * float(np.median(times[m.name][:, 1]))
            row["cpu_over_wall"][m.name] = float(np.median(times[m.name][:, 1] / times[m.name][:, 0]))
            row["constraints"][m.name] = (near[2], near[3])
        for peer_name in ("diffrax_dopri8", "scipy_dop853"):
            for ours in ("rkmk853", "rkmk8"):
                if peer_name in times and ours in times:
                    q = times[peer_name] / times[ours]
                    row["ratio"][f"{peer_name}/{ours}"] = float(np.median(q[:, 0]))
                    row["cpu_ratio"][f"{peer_name}/{ours}"] = float(np.median(q[:, 1]))
        rows.append(row)
    _print_chain(rows, repeats, [m.name for m in methods])
    if figure is not None:
        _chain_figure(rows, curves, figure, versions)
    return {"versions": versions, "rows": rows}


def _print_chain(rows: list[dict], repeats: int, names: list[str]) -> None:
    ratios = sorted({k for r in rows for k in r["ratio"]})
    print(f"\nmedian ms per whole call at equal final error; ratios = medians of {repeats} per-round ratios")
    print("| final error | " + " | ".join(f"{n} ms" for n in names) + " | " + " | ".join(ratios) + " |")
    print("|---" * (1 + len(names) + len(ratios)) + "|")
    for r in rows:
        ms = [f"{r['ms'][n]:.2f}" if n in r["ms"] else "—" for n in names]
        rt = [f"{r['ratio'][k]:.2f}×" if k in r["ratio"] else "—" for k in ratios]
        print(f"| {r['err']:.0e} | " + " | ".join(ms + rt) + " |")
    print("\nthe same on CPU seconds (each process's own, all its threads), and CPU/wall of each method")
    print("| final error | " + " | ".join(f"{n} CPU ms" for n in names) + " | " + " | ".join(ratios) + " |")
    print("|---" * (1 + len(names) + len(ratios)) + "|")
    for r in rows:
        ms = [f"{r['cpu_ms'][n]:.2f}" if n in r["cpu_ms"] else "—" for n in names]
        rt = [f"{r['cpu_ratio'][k]:.2f}×" if k in r["cpu_ratio"] else "—" for k in ratios]
        print(f"| {r['err']:.0e} | " + " | ".join(ms + rt) + " |")
    print("\n| final error | " + " | ".join(f"{n} CPU/wall" for n in names) + " |")
    print("|---" * (1 + len(names)) + "|")
    for r in rows:
        cw = [f"{r['cpu_over_wall'][n]:.2f}" if n in r["cpu_over_wall"] else "—" for n in names]
        print(f"| {r['err']:.0e} | " + " | ".join(cw) + " |")
    print("\nconstraint drift at the bracketing run nearest each error: max abs(‖q_i‖−1) / max abs(q_i·ω_i)")
    print("| final error | " + " | ".join(names) + " |")
    print("|---" * (1 + len(names)) + "|")
    for r in rows:
        c = [("{:.1e} / {:.1e}".format(*r["constraints"][n])) if n in r["constraints"] else "—" for n in names]
        print(f"| {r['err']:.0e} | " + " | ".join(c) + " |")


def _chain_figure(rows: list[dict], curves: dict, path: Path, versions: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.3))
    style = {"rkmk853": "o-", "rkmk8": "s-", "dop853_ambient": "^--", "scipy_dop853": "v:", "diffrax_dopri8": "D-"}
    for name in curves:
        pts = [(r["err"], r["cpu_ms"][name]) for r in rows if name in r["cpu_ms"]]
        if pts:
            e, t = zip(*pts)
            a.loglog(e, t, style.get(name, "x-"), label=name, ms=4)
        c = np.array(curves[name])
        b.loglog(c[:, 0], np.maximum(np.maximum(c[:, 2], c[:, 3]), 1e-17), style.get(name, "x-"), label=name, ms=4)
    a.set_xlabel("final error ‖y(T) − y_ref‖₂")
    a.set_ylabel("CPU ms per whole call (median of rounds)")
    a.set_title("20-link pendulum, T = 3: work–precision")
    a.invert_xaxis()
    b.set_xlabel("final error ‖y(T) − y_ref‖₂")
    b.set_ylabel("max over steps of abs(‖q‖−1), abs(q·ω)")
    b.set_title("constraint drift")
    b.invert_xaxis()
    for ax in (a, b):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if versions:
        fig.text(0.01, 0.01, "peer: " + ", ".join(f"{k} {v}" for k, v in versions.items()), fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


# --------------------------------------------------------------------------------------
# MD: lj_sphere step
# --------------------------------------------------------------------------------------
def compare_md(
    peers: list[str], steps: int, every: int, chunk: int, repeats: int, work: Path, styles: list[str], level: int = 3
) -> dict:
    from geosweep_side import SphereCase

    case = SphereCase(level=level)
    print(f"\n== MD: lj_sphere n = {case.q0.shape[0]}, h = {case.h}, ε, σ = {case.eps_sigma}; {_load()}")
    setup = case.export(work / "sphere")
    E_ours, r = case.energy_run(steps, every)
    E0 = E_ours[0]
    print(f"geosweep explicit VI: E0 = {E0:.12g}, max abs(E − E0)/abs(E0) over {steps} steps = "
          f"{np.abs(E_ours - E0).max() / abs(E0):.2e}")  # fmt: skip
    print("| peer | peer ms/step | geosweep ms/step | peer/geosweep wall (range) | on CPU s (range) "
          "| CPU/wall peer / geosweep | peer max rel ΔE "
          "| geosweep max rel ΔE | max abs(E_peer − E_ours)/abs(E0) | energies within 1e-9 / 1e-6 until step "
          "| final max abs(Δq) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    out: dict = {}
    for name in peers:
        reason = unavailable(PEERS[name])
        if reason:
            print(f"SKIP {reason}")
            continue
        for style in styles if name == "lammps" else [""]:
            label = f"{name} {style}".strip()
            try:
                with PeerProcess(PEERS[name]) as peer:
                    info = peer.call("init", **setup, **({"pair_style": style} if style else {}))
                    print(f"{label}: {info['versions']}")
                    out[label] = _md_one(case, peer, label, E_ours, r, steps, every, chunk, repeats, work)
                    out[label]["versions"] = info["versions"]
            except PeerError as exc:
                print(f"FAILED {label}: {exc}")
                out[label] = {"failed": str(exc)}
    return out


def _agree_until(E_p: np.ndarray, E_o: np.ndarray, every: int, rel: float) -> int:
    """Last sampled step up to which abs(E_p − E_o) ≤ rel·abs(E_o[0]), −1 if not even at step 0
    (the trajectories of two codes separate after a while: the chaos amplifies their different
    round-off)."""
    bad = np.flatnonzero(np.abs(E_p - E_o) > rel * abs(E_o[0]))
    if not bad.size:
        return every * (len(E_o) - 1)
    return every * (int(bad[0]) - 1) if bad[0] > 0 else -1


def _md_one(case, peer: PeerProcess, label: str, E_ours, r, steps, every, chunk, repeats, work: Path) -> dict:
    files = {k: str(work / f"{label.replace('/', '_').replace(' ', '_')}_{k}.npy") for k in ("E", "q", "w")}
    extra = peer.call("energy", steps=steps, every=every, out=files["E"], out_q=files["q"], out_w=files["w"])
    E_p = np.load(files["E"])
    E0 = E_ours[0]
    k = min(len(E_p), len(E_ours))
    res = {
        "E0_peer": float(E_p[0]),
        "E0_ours": float(E0),
        "drift_peer": float(np.abs(E_p - E_p[0]).max() / abs(E0)),
        "drift_ours": float(np.abs(E_ours - E0).max() / abs(E0)),
        "max_abs_dE_peer_vs_ours": float(np.abs(E_p[:k] - E_ours[:k]).max() / abs(E0)),
        "final_q_distance": float(np.abs(np.load(files["q"]) - r.q).max()),
        "agree_1e-9_until_step": _agree_until(E_p[:k], E_ours[:k], every, 1e-9),
        "agree_1e-6_until_step": _agree_until(E_p[:k], E_ours[:k], every, 1e-6),
        **extra,
    }
    ours, theirs = np.zeros((repeats, 2)), np.zeros((repeats, 2))  # rounds × (wall, cpu) per step
    for rnd in range(repeats + 1):
        t_o = case.seconds(chunk)
        rep = peer.call("time", steps=chunk, repeats=1)
        if rnd:  # round 0 warms up
            ours[rnd - 1] = np.array(t_o) / chunk
            theirs[rnd - 1] = np.array([rep["seconds"][0], rep["cpu_seconds"][0]]) / chunk
    q = theirs / ours
    res.update(
        ms_per_step_ours=1e3 * float(np.median(ours[:, 0])),
        ms_per_step_peer=1e3 * float(np.median(theirs[:, 0])),
        cpu_ms_per_step_ours=1e3 * float(np.median(ours[:, 1])),
        cpu_ms_per_step_peer=1e3 * float(np.median(theirs[:, 1])),
        ratio_median=float(np.median(q[:, 0])),
        ratio_range=(float(q[:, 0].min()), float(q[:, 0].max())),
        cpu_ratio_median=float(np.median(q[:, 1])),
        cpu_ratio_range=(float(q[:, 1].min()), float(q[:, 1].max())),
        cpu_over_wall_ours=float(np.median(ours[:, 1] / ours[:, 0])),
        cpu_over_wall_peer=float(np.median(theirs[:, 1] / theirs[:, 0])),
    )
    print(
        f"| {label} | {res['ms_per_step_peer']:.3f} | {res['ms_per_step_ours']:.3f} | {res['ratio_median']:.2f}× "
        f"({res['ratio_range'][0]:.2f}–{res['ratio_range'][1]:.2f}) | {res['cpu_ratio_median']:.2f}× "
        f"({res['cpu_ratio_range'][0]:.2f}–{res['cpu_ratio_range'][1]:.2f}) "
        f"| {res['cpu_over_wall_peer']:.2f} / {res['cpu_over_wall_ours']:.2f} "
        f"| {res['drift_peer']:.2e} | {res['drift_ours']:.2e} "
        f"| {res['max_abs_dE_peer_vs_ours']:.2e} | {res['agree_1e-9_until_step']} / {res['agree_1e-6_until_step']} "
        f"| {res['final_q_distance']:.1e} |"
    )
    return res


# --------------------------------------------------------------------------------------
def compare_dg() -> dict:
    reason = unavailable(PEERS["petsc"])
    if reason:
        print(f"\n== discrete gradients: SKIP {reason}")
        return {"skipped": reason}
    print("\n== discrete gradients: petsc4py is installed but the TSDISCGRAD driver is not written (see README)")
    return {"skipped": "driver not written"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("chain", "md", "dg"), action="append", help="run only these (repeatable)")
    ap.add_argument("--repeats", type=int, default=7, help="timed rounds after the warm-up round")
    ap.add_argument("--ic", default="paper", help="chain initial condition (paper, twisted)")
    ap.add_argument("--md-peers", default="lammps,openmm")
    ap.add_argument("--lammps-styles", default="lj/cut,lj/cut/opt", help="pair styles to time in LAMMPS")
    ap.add_argument("--md-steps", type=int, default=10_000, help="steps of the energy comparison")
    ap.add_argument("--md-every", type=int, default=100, help="energy sample interval (steps)")
    ap.add_argument("--md-level", type=int, default=3, help="icosphere level of the MD system (3: n = 642)")
    ap.add_argument("--md-chunk", type=int, default=1000, help="steps per timed run")
    ap.add_argument("--figure", type=Path, default=HERE / "chain_work_precision.png")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    only = set(args.only or ("chain", "md", "dg"))
    results: dict = {"load_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="geosweep-peers-") as tmp:
        work = Path(tmp)
        if "chain" in only:
            try:
                results["chain"] = compare_chain(args.repeats, args.ic, args.figure, work)
            except PeerError as exc:  # one line, then the other comparisons
                print(f"FAILED chain: {exc}")
                results["chain"] = {"failed": str(exc)}
        if "md" in only:
            results["md"] = compare_md(
                [p for p in args.md_peers.split(",") if p], args.md_steps, args.md_every, args.md_chunk,
                args.repeats, work, args.lammps_styles.split(","), args.md_level,
            )  # fmt: skip
        if "dg" in only:
            results["dg"] = compare_dg()
    results["load_end"] = os.getloadavg()
    print(f"\n{_load()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
