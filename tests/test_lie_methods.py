"""Lie group integrators come from the tableaux (issue 24 item 2): every family with a group action
(a ``LIE`` :class:`geosweep.kernels.lie.methods.LieAction`) offers every method of
:data:`geosweep.kernels.lie.tableaux.METHODS` its action supports, with the record's order, adaptivity,
controller defaults and evaluations per step; a method added to the tableaux is one edit."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from geosweep.kernels.chain.family import reference_solution
from geosweep.kernels.chain.integrate import _integrate
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.lie import tableaux
from geosweep.kernels.lie.methods import LieAction
from geosweep.kernels.registry import BUILTIN_FAMILIES, FAMILIES, INTEGRATORS, SYSTEMS, RunRequest, load_builtins

load_builtins()
ACTIONS: list[LieAction] = [
    m.LIE for m in map(importlib.import_module, BUILTIN_FAMILIES) if isinstance(getattr(m, "LIE", None), LieAction)
]


def _model(family: str):
    sysdef = next(s for s in SYSTEMS.values() if s.family == family)
    return sysdef.build(**{p.name: p.default for p in sysdef.params})


def test_the_families_with_an_action():
    assert {a.family for a in ACTIONS} == {"ts2", "top", "quad"}


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.family)
def test_every_supported_method_is_registered_with_its_record(action: LieAction):
    assert all(isinstance(why, str) and why for why in action.unsupported.values())
    assert set(action.unsupported) <= set(tableaux.METHODS)
    names = {action.prefix + n for n in tableaux.METHODS if n not in action.unsupported}
    registered = {i.name for i in INTEGRATORS.values() if i.family == action.family and i.name in names}
    assert registered == names
    for name in names:
        m, idef = tableaux.METHODS[name.removeprefix(action.prefix)], INTEGRATORS[name]
        assert (idef.order, idef.adaptive) == (m.order, m.adaptive), name


def _evals_per_step(family: str, model, name: str) -> float:
    """Evaluations one step of ``name`` makes, counted by the kernel (two runs: the start's cancel)."""
    fam = FAMILIES[family]
    h = 1e-3
    n = [fam.run(model, name, RunRequest(T=k * h, dt_out=k * h, h=h), {}).values["f_evals"] for k in (10, 20)]
    return (int(n[1]) - int(n[0])) / 10


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.family)
def test_a_methods_cost_per_step_follows_the_evaluations_its_step_makes(action: LieAction):
    """The slicing cost of each fixed-step method against what its step does: the kernel's count of
    evaluations per step is the record's ``evals_per_step``, and the family's cost grows with it (for
    methods of one kind: RKMK/CF or ambient) — equal counts cost the same, more cost more above the
    heavy top's floor of 6 evaluations (call overhead), and every cost is positive."""
    model = _model(action.family)
    fam = FAMILIES[action.family]
    rows = []
    for name, m in action.methods().items():
        if m.adaptive:
            continue
        evals = _evals_per_step(action.family, model, name)
        assert evals == m.evals_per_step, (name, evals)
        rows.append((m.kind == tableaux.AMBIENT, evals, fam.cost_per_step(model, name), name))
    assert len(rows) >= 8
    for amb_a, ev_a, cost_a, a in rows:
        assert cost_a > 0, a
        for amb_b, ev_b, cost_b, b in rows:
            if amb_a == amb_b and ev_a == ev_b:
                assert cost_a == cost_b, (a, b)
            elif amb_a == amb_b and ev_a < ev_b:
                assert cost_a <= cost_b and (ev_b <= 6 or cost_a < cost_b), (a, ev_a, cost_a, b, ev_b, cost_b)


def test_evaluations_per_step_come_from_the_record():
    ev = {n: m.evals_per_step for n, m in tableaux.METHODS.items()}
    assert ev == {
        "lie_euler": 1, "lie_euler_heun": 2, "rkmk3": 3, "rkmk4": 4, "rkmk4_2comm": 4, "cf4": 4, "cf3": 3,
        "cf3b": 3, "cf43": 4, "rkmk5": 6, "rkmk45": 6, "rkmk8": 12, "rkmk853": 15, "rk4_ambient": 4,
        "dopri5_ambient": 6, "dop853_ambient": 15,
    }  # fmt: skip


def test_dop853_methods_default_to_the_exponent_one_eighth():
    for action in ACTIONS:
        for name in ("rkmk853", "dop853_ambient"):
            idef = INTEGRATORS[action.prefix + name]
            assert next(p.default for p in idef.params if p.name == "exponent") == 0.125
            assert action.options(idef.name, {})["exponent"] == 0.125
            assert action.options(idef.name, {"exponent": 0.2})["exponent"] == 0.2
        assert action.options(action.prefix + "rkmk45", {})["exponent"] == 0.25


# ---- a toy method: one record, and every family offers it ----------------------------------------
#: Ralston's third-order tableau as RKMK, written once
TOY = tableaux.Method(
    name="ralston3",
    kind=tableaux.RKMK,
    order=3,
    A=np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.75, 0.0]]),
    b=np.array([2.0, 3.0, 4.0]) / 9.0,
    s_main=3,
    doc="RKMK with Ralston's third-order tableau.",
)


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.family)
def test_a_method_added_to_the_tableaux_appears_in_every_family(action: LieAction):
    table = {**tableaux.METHODS, TOY.name: TOY}
    generated = {i.name: i for i in action.integrators(table)}
    assert set(generated) == set(action.methods(table)) and action.prefix + "ralston3" in generated
    toy = generated[action.prefix + "ralston3"]
    assert (toy.family, toy.order, toy.adaptive) == (action.family, 3, False)
    assert toy.doc.startswith(TOY.doc) and toy.params == action.params
    assert action.step_cost(_model(action.family), TOY) > 0
    # every other entry is still its own record's, recomputed here from tableaux.METHODS
    assert set(generated) - {toy.name} == {action.prefix + n for n in tableaux.METHODS if n not in action.unsupported}
    for name, idef in generated.items():
        m = TOY if name == toy.name else tableaux.METHODS[name.removeprefix(action.prefix)]
        assert (idef.name, idef.family, idef.order, idef.adaptive) == (name, action.family, m.order, m.adaptive)
        assert idef.doc.startswith(m.doc), name
        options = {p.name: p.default for p in idef.params}
        assert {p.name for p in action.params} <= set(options), name
        if m.adaptive:
            assert {p.name for p in action.adaptive_params} <= set(options), name
            assert options["exponent"] == (m.controller[0] if m.controller else 0.25), name
        else:
            assert not {p.name for p in action.adaptive_params} & set(options), name


def test_the_toy_method_reaches_its_order_on_the_shared_stepper():
    model = build_chain(2, masses="e1", ic="random", seed=1)
    ref = reference_solution(model, 0.5, 1e-13)
    errs = [np.linalg.norm(_integrate(model, TOY, 0.5 / n, n, n).y - ref) for n in (20, 40, 80)]
    assert abs(np.log2(errs[-2] / errs[-1]) - 3) < 0.25, errs


# ---- the integrator table of docs/explanation/preservation.md lists the registry --------------------
def _readme_table() -> dict[str, set[str]]:
    """Integrator name → the families its row names (the table under `| integrator | family |` of
    docs/explanation/preservation.md, the prose companion of the generated integrator reference)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "explanation" / "preservation.md").read_text()
    rows = text.split("| integrator | family | order | notes |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    out: dict[str, set[str]] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
        for name in re.findall(r"`([^`]+)`", cells[0]):
            out.setdefault(name, set()).update(f.strip() for f in cells[1].split(","))
    return out


def test_the_readme_integrator_table_matches_the_registry():
    table = _readme_table()
    missing = sorted(i.name for i in INTEGRATORS.values() if i.family not in table.get(i.name, ()))
    assert not missing, f"docs/explanation/preservation.md's integrator table lacks {missing}"
    assert not sorted(set(table) - set(INTEGRATORS)), "the docs' table names integrators the registry does not have"
