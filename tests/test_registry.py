"""Registry hygiene: no import cycle, builder defaults declared once, families registered by name."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from geosweep.kernels.registry import BUILTIN_FAMILIES, FAMILIES, SYSTEMS, load_builtins


def test_registry_imports_no_family():
    """``geosweep.kernels.registry`` is pure metadata: importing it loads no family, catalogue or kernel module."""
    code = (
        "import sys, geosweep.kernels.registry; "
        "bad = [m for m in sys.modules if m.startswith('geosweep.kernels.') and m not in "
        "('geosweep.kernels.registry', 'geosweep.kernels.status')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_builtin_families_register_by_name():
    load_builtins()
    assert len(BUILTIN_FAMILIES) >= 3 and {"s2", "se3", "ts2"} <= set(FAMILIES)
    for fam in (FAMILIES[name] for name in ("s2", "se3", "ts2")):
        assert fam.start is not None and fam.state_labels, fam.name
        # every family stores the shared names
        model_sys = next(s for s in SYSTEMS.values() if s.family == fam.name)
        model = model_sys.build(**{p.name: p.default for p in model_sys.params})
        names = {d.name for d in fam.diagnostics(model)}
        assert {
            "energy",
            "energy_error",
            "rel_energy_error",
            "final_state",
            "snapshot_state",
            "fail_step",
            "f_evals",
            "steps",
            "max_abs_energy_error",
        } <= names
        assert fam.sizes(model)["state"] == len(fam.state_labels)


@pytest.mark.parametrize(
    "name",
    sorted(
        {"lj_sphere", "double_pendulum", "spring_pendula", "elastic_rod", "torus", "so3_pendulum", "pendulum_chain"}
    ),
)
def test_builder_defaults_match_declared_defaults(name):
    """A builder's own keyword defaults (used by kernel-level callers) must equal the declared
    ``Param`` defaults (used by sweeps): one value per default."""
    from geosweep.kernels.chain.model import build_chain
    from geosweep.kernels.systems.lj_sphere import lj_sphere
    from geosweep.kernels.torus.model import so3_pendulum, torus

    load_builtins()
    sysdef = SYSTEMS[name]
    underlying = {"torus": torus, "so3_pendulum": so3_pendulum, "pendulum_chain": build_chain, "lj_sphere": lj_sphere}
    sig = inspect.signature(underlying.get(name, sysdef.build))
    checked = 0
    for p in sysdef.params:
        par = sig.parameters.get(p.name)
        if par is None or par.default is inspect.Parameter.empty or par.default is None:  # None: derived
            continue
        assert par.default == p.default, f"{name}.{p.name}: builder {par.default!r} vs declared {p.default!r}"
        checked += 1
    assert checked >= 3
