"""The same cell stores the same bits on every CPU.

OpenBLAS picks its kernels for the CPU at run time (``OPENBLAS_CORETYPE`` forces a choice) and NumPy
dispatches its ufuncs on the CPU's SIMD extensions (``NPY_DISABLE_CPU_FEATURES`` turns some off).
Before 2026-11-28 a product (``@``, ``linalg.norm``/``solve``) in a model's set-up, a right-hand
side or a collected value went through BLAS/LAPACK, and NumPy's AVX-512 ``exp`` made a vortex's
velocities: 28 of 58 sampled cells of the shipped examples changed last bits between an AMD node
(Haswell kernels) and an AVX-512 Intel one (SkylakeX kernels). Each variant here runs the cells of
:mod:`tests.test_golden_cells` (more of them) in a fresh process and every stored value must agree
bitwise — except ``global_error``, a distance to SciPy's DOP853 reference, whose own products use
BLAS: it must agree to 10⁻¹² absolute, ten times the reference's tolerance (``ref_tol`` = 10⁻¹³;
measured: differences of 10⁻¹⁷–10⁻¹⁴ on errors of 10⁻¹²–10⁻¹⁰).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CELLS_PER_EXAMPLE = 6
#: values compared to an absolute tolerance, not bitwise (see the module docstring)
NEAR = {"global_error": 1e-12}


def _flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


def variants() -> dict[str, dict[str, str]]:
    """The environments to compare: OpenBLAS kernels this CPU can run, and NumPy without AVX-512."""
    flags = _flags()
    out: dict[str, dict[str, str]] = {"default": {}, "openblas-prescott": {"OPENBLAS_CORETYPE": "Prescott"}}
    if "avx" in flags:
        out["openblas-sandybridge"] = {"OPENBLAS_CORETYPE": "Sandybridge"}
    if {"avx2", "fma"} <= flags:
        out["openblas-haswell"] = {"OPENBLAS_CORETYPE": "Haswell"}
    if {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= flags:
        out["openblas-skylakex"] = {"OPENBLAS_CORETYPE": "SkylakeX"}
        out["numpy-without-avx512"] = {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL"}
    return out


def emit() -> dict[str, object]:
    """Per cell and stored variable: its checksum (``global_error``: its float values)."""
    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.store import cell_checksum
    from tests.test_golden_cells import NAMES, cell_values, short_spec

    out: dict[str, object] = {}
    for name in NAMES:
        plan = make_plan(short_spec(name))
        cells = [tuple(int(i) for i in c) for c in np.argwhere(plan.grid.applicable_mask())]
        picks = sorted(set(np.linspace(0, len(cells) - 1, min(CELLS_PER_EXAMPLE, len(cells))).astype(int)))
        for i in picks:
            status, values = cell_values(plan, cells[i])
            out[f"{name} {cells[i]} status"] = status
            for key, value in values.items():
                if key in NEAR:
                    out[f"{name} {cells[i]} {key}"] = np.asarray(value, dtype=float).ravel().tolist()
                else:
                    out[f"{name} {cells[i]} {key}"] = f"{cell_checksum({key: value}, status):016x}"
    return out


def test_every_stored_value_is_the_same_under_every_blas_kernel_and_simd_level():
    runs = {}
    procs = {
        label: subprocess.Popen(
            [sys.executable, __file__],
            cwd=ROOT,
            env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for label, env in variants().items()
    }
    for label, p in procs.items():
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, f"{label}: {err[-2000:]}"
        runs[label] = json.loads(out.strip().splitlines()[-1])
    base = runs.pop("default")
    assert len(base) > 1000  # every example's sampled cells, every stored variable
    for label, got in runs.items():
        assert got.keys() == base.keys(), label
        differ = []
        for key, value in base.items():
            tol = next((t for k, t in NEAR.items() if key.endswith(" " + k)), None)
            if tol is None:
                if got[key] != value:
                    differ.append(key)
            elif not np.allclose(got[key], value, rtol=0.0, atol=tol, equal_nan=True):
                differ.append(key)
        assert not differ, f"{label}: {len(differ)} stored values differ from the default run: {differ[:12]}"


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(ROOT))
    print(json.dumps(emit()))
