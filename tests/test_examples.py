"""Every shipped example spec validates (they are documented entry points)."""

from __future__ import annotations

from importlib import resources

import pytest

from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.spec import load_spec

EXAMPLES = sorted(
    p.name for p in resources.files("geosweep.sweeps").joinpath("examples").iterdir() if p.name.endswith(".toml")
)


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_spec_is_valid(name):
    plan = make_plan(str(resources.files("geosweep.sweeps").joinpath("examples", name)))
    assert plan.grid.size >= 4
    assert sum(plan.cost(c) for c in plan.grid.cells()) > 0


def test_examples_cover_every_family():
    from geosweep.kernels.registry import SYSTEMS

    families = {
        SYSTEMS[load_spec(str(resources.files("geosweep.sweeps").joinpath("examples", n))).system].family
        for n in EXAMPLES
    }
    import importlib

    from geosweep.kernels.registry import BUILTIN_FAMILIES

    # every built-in family ships at least one example spec
    assert families == {importlib.import_module(m).FAMILY.name for m in BUILTIN_FAMILIES}
