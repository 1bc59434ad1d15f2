"""Text summaries of a store (used by ``geosweep status`` and the flow's artifact)."""

from __future__ import annotations

import json

import numpy as np

from kernels.status import STATUS_MEANINGS
from sweeps.store import StoreRef, open_results


def status_counts(ds) -> dict[str, int]:
    values, counts = np.unique(ds["status"].values, return_counts=True)
    return {STATUS_MEANINGS.get(int(v), str(v)): int(c) for v, c in zip(values, counts)}


def status_table(store, storage_options: dict | None = None) -> str:
    """Markdown: completion and status counts, then mean|ΔE| per integrator × h."""
    ds = open_results(StoreRef.of(store, storage_options))
    done = int(ds["done"].sum())
    total = int(ds["done"].size)
    spec = json.loads(ds.attrs["spec"])
    lines = [
        f"## {spec['name']} ({ds.attrs['system']})",
        "",
        f"store: `{StoreRef.of(store).url}`  ",
        f"cells complete: {done}/{total}; status counts: {status_counts(ds)}",
        "",
    ]
    if "mean_abs_energy_error" in ds:
        ok = ds["mean_abs_energy_error"].where(ds["status"] == 0)
        other = [d for d in ok.dims if d not in ("integrator", "h")]
        med = ok.median(dim=other) if other else ok
        hs = [f"{h:g}" for h in ds["h"].values]
        lines.append("median over other axes of mean|ΔE| (status ok only)")
        lines.append("")
        lines.append("| integrator | " + " | ".join(f"h = {h}" for h in hs) + " |")
        lines.append("|---|" + "---|" * len(hs))
        for name in ds["integrator"].values:
            row = med.sel(integrator=name).values
            lines.append(f"| {name} | " + " | ".join("—" if np.isnan(v) else f"{v:.3e}" for v in row) + " |")
    return "\n".join(lines)
