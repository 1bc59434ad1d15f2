"""Integrators as data, one encoding (issue 51 item 2): every Runge–Kutta-type integrator of every family
takes its coefficients and order from one table of tableau records (:data:`geosweep.kernels.tableaux.TABLEAUX`),
has an object form (:mod:`geosweep.methods`) that ``geosweep.integrate`` runs bitwise as the name, and a
tableau added at run time is one record that shows up in ``geosweep.integrators()``, ``geosweep systems``,
the docs' table and the observed-order study."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import geosweep
from geosweep import methods
from geosweep.kernels import tableaux as rk
from geosweep.kernels.dg import steppers as dg
from geosweep.kernels.lie import tableaux as lie
from geosweep.kernels.registry import INTEGRATORS, load_builtins
from geosweep.kernels.s2 import stepper as s2
from geosweep.kernels.tableaux import Tableau
from geosweep.kernels.vocabulary import RUN_DEPENDENT
from geosweep.methods import RKMK, Ambient, CommutatorFree
from geosweep.sweeps.spec import SpecError

ROOT = Path(__file__).resolve().parents[1]
load_builtins()


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return a is None and b is None or (a is not None and b is not None and a.tobytes() == b.tobytes())


# ---- one table -------------------------------------------------------------------------------------------
def test_every_tableau_satisfies_its_order_conditions():
    for t in rk.TABLEAUX.values():
        assert t.order_conditions_hold(), t
        assert not t.order_conditions_hold(t.order + 1) or t.order >= 4, t  # the order is not understated


def test_every_rk_integrator_takes_coefficients_and_order_from_its_tableau_record():
    seen = set()
    for e in methods.entries():
        idef = INTEGRATORS[e.name]
        assert (idef.order, idef.adaptive) == (e.method.order, e.method.adaptive), e
        seen.add(e.family)
    assert seen == {"s2", "ts2", "top", "quad", "dg"}
    for m in lie.METHODS.values():  # the Lie records: arrays of the tableau, main stages or all when adaptive
        if m.kind == lie.CF:
            continue
        t = rk.get(m.tableau)
        s = t.stages if m.adaptive else t.s_main
        assert _same(m.A, t.A_f64(s)) and _same(m.b, t.b_f64(s)) and m.order == t.order, m.name
        assert _same(m.bhat, t.bhat_f64() if m.adaptive else None) and _same(m.P, t.P_f64() if m.adaptive else None)
    for name, (tab, _) in s2.RK_BASELINES.items():  # (S²)ⁿ: A, the weights over their denominator
        kind, A, b, d, proj = s2.METHODS[name]
        w, den = rk.get(tab).scaled_weights()
        assert kind == s2.EXPLICIT_RK and _same(A, rk.get(tab).A_f64()) and _same(b, w) and d == den
    t5 = rk.get(dg.RK_TABLEAUX["dopri5_skew"])  # dg: the DOPRI5 block of the method record
    block = np.concatenate([t5.A_f64().ravel(), t5.b_f64(), t5.bhat_f64(), t5.P_f64().ravel()])
    o = dg.M_HEAD + 2 * dg.S_MAX
    assert dg.method_record("dopri5_skew")[o : o + block.size].tobytes() == block.tobytes()


def test_a_tableau_that_does_not_reach_its_declared_order_is_refused():
    with pytest.raises(ValueError, match="declared order 4"):
        Tableau.of("not_rk4", 4, [[0, 0, 0], ["1/2", 0, 0], [0, "3/4", 0]], ["2/9", "1/3", "4/9"], "Ralston 3 as 4")


def test_dg_hand_coded_rk4_loop_is_checked_against_its_record(monkeypatch):
    rk4 = rk.get("rk4")
    other = Tableau.of("rk4", 4, [[0, 0, 0, 0], ["1/3", 0, 0, 0], ["-1/3", 1, 0, 0], [1, -1, 1, 0]],
                       ["1/8", "3/8", "3/8", "1/8"], "Kutta's 3/8 rule")  # fmt: skip
    assert other.order_conditions_hold() and rk4.order_conditions_hold()
    monkeypatch.setitem(rk.TABLEAUX, "rk4", other)
    with pytest.raises(ValueError, match="hand-coded RK4"):
        dg._check_hand_coded_rk4()


def test_no_tableau_coefficient_is_written_twice():
    """DOPRI5's and RK4's coefficients appear once in the sources (kernels/tableaux.py)."""
    marks = {"dopri5": "-25360/2187", "dopri5 b̂": "5179/57600", "dopri5 P": "8663915743/2820520608"}
    sources = {p: p.read_text() for p in (ROOT / "kernels").rglob("*.py")}
    for what, mark in marks.items():
        where = sorted(str(p.relative_to(ROOT)) for p, text in sources.items() if mark in text)
        assert where == ["kernels/tableaux.py"], (what, where)
    rk4_rows = re.compile(r"\[0(\.0)?, 0(\.0)?, 1(\.0)?, 0(\.0)?\]")  # RK4's last row of A
    assert sorted(str(p.relative_to(ROOT)) for p, text in sources.items() if rk4_rows.search(text)) == [
        "kernels/tableaux.py"
    ]


# ---- the object form --------------------------------------------------------------------------------------
def test_the_object_form_reads_the_record():
    m = RKMK(tableau="dop853")
    assert (m.order, m.stages, m.adaptive, m.dense_output) == (8, 16, True, True)
    assert (RKMK("dop853", adaptive=False).stages, RKMK("dopri5").stages, RKMK("rk4").adaptive) == (13, 7, False)
    assert repr(m) == "RKMK(tableau='dop853', adaptive=True)" and eval(repr(m)) == m
    assert m.preserves and Ambient("rk4").preserves == () and Ambient("rk4", project=True).preserves
    assert CommutatorFree("cf43").stages == 4 and not CommutatorFree("cf43").adaptive
    names = {s: m.integrator_for(s) for s in ("pendulum_chain", "heavy_top", "two_quadrotors")}
    assert names == {"pendulum_chain": "rkmk853", "heavy_top": "lp_rkmk853", "two_quadrotors": "quad_rkmk853"}
    assert (
        Ambient("rk4").integrator_for("lj_sphere") == "rk4" and Ambient("rk4").integrator_for("gearbox") == "rk4_skew"
    )
    assert Ambient("midpoint", project=True).integrator_for("double_pendulum") == "rk2_proj"
    table = geosweep.integrators("heavy_top")
    assert table.loc["lp_rkmk853", "method"] == m and table.loc["slgi_half", "method"] is None
    with pytest.raises(ValueError, match="tableau"):
        RKMK(tableau="no_such")


def test_a_method_no_family_of_the_system_offers_is_refused_naming_the_field():
    with pytest.raises(SpecError, match="integrator.*RKMK.*s2"):
        geosweep.integrate("double_pendulum", RKMK(tableau="rk4"), T=0.1, dt_out=0.05, h=0.01)


def _values(sol) -> dict:
    return {k: np.asarray(v) for k, v in sol.values.items() if k not in RUN_DEPENDENT}


@pytest.mark.parametrize(
    ("system", "method", "name", "step"),
    [
        ("heavy_top", RKMK(tableau="dop853"), "lp_rkmk853", {"tol": 1e-8}),
        ("pendulum_chain", CommutatorFree("cf4"), "cf4", {"h": 0.01}),
        ("double_pendulum", Ambient("midpoint", project=True), "rk2_proj", {"h": 0.01}),
        ("gearbox", Ambient("dopri5"), "dopri5_skew", {"tol": 1e-8}),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_integrate_runs_an_object_bitwise_as_its_name(system, method, name, step):
    by_obj = geosweep.integrate(system, method, T=0.1, dt_out=0.05, **step)
    by_name = geosweep.integrate(system, name, T=0.1, dt_out=0.05, **step)
    assert by_obj.integrator == name and by_obj.status.name == "OK"
    a, b = _values(by_obj), _values(by_name)
    assert a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a), name


# ---- adding a tableau is one record ----------------------------------------------------------------------
#: Ralston's third-order tableau, written once
RALSTON3 = Tableau.of(
    "ralston3", 3, [[0, 0, 0], ["1/2", 0, 0], [0, "3/4", 0]], ["2/9", "1/3", "4/9"], "Ralston's third-order method."
)


@pytest.fixture
def ralston3():
    entries = methods.register(RALSTON3, kinds=("RKMK", "ambient", "s2"))
    try:
        yield entries
    finally:
        methods.unregister(RALSTON3.name)


def test_a_tableau_registered_at_run_time_shows_up_everywhere(ralston3, capsys):
    from geosweep.flows.cli.systems import cmd_systems

    assert RALSTON3.order_conditions_hold() and not RALSTON3.order_conditions_hold(4)
    names = {i.name for i in ralston3}
    lie_names = {f"{p}{k}" for p in ("", "lp_", "quad_") for k in ("rkmk_ralston3", "ralston3_ambient")}
    assert names == lie_names | {"ralston3", "ralston3_proj"}  # the (S²)ⁿ baselines too
    table = geosweep.integrators()
    assert names <= set(table.index) and set(table.loc[sorted(names), "order"]) == {3}
    assert table.loc["lp_rkmk_ralston3", "method"] == RKMK(tableau="ralston3")
    assert RKMK(tableau="ralston3").integrator_for("two_quadrotors") == "quad_rkmk_ralston3"
    cmd_systems(argparse.Namespace())
    out = capsys.readouterr().out
    assert "  rkmk_ralston3  [family ts2, order 3]" in out and "quad_ralston3_ambient" in out
    assert "  ralston3_proj  [family s2, order 3]" in out
    assert Ambient("ralston3", project=True).integrator_for("double_pendulum") == "ralston3_proj"
    assert "| `RKMK(tableau='ralston3', adaptive=False)` | 3 | 3 | no | no |" in methods.markdown_table()
    sol = geosweep.integrate("heavy_top", RKMK(tableau="ralston3"), T=0.02, dt_out=0.01, h=0.001)
    assert sol.integrator == "lp_rkmk_ralston3" and sol.status.name == "OK"


@pytest.mark.parametrize("integrator", ["rkmk_ralston3", "lp_ralston3_ambient", "ralston3_proj"])
def test_a_tableau_registered_at_run_time_reaches_its_declared_order(ralston3, integrator):
    from tests.test_registry_orders import observed_order, tolerance

    system = {"rkmk_ralston3": "pendulum_chain", "lp_ralston3_ambient": "heavy_top"}.get(integrator, "double_pendulum")
    idef = INTEGRATORS[integrator]
    p, d = observed_order(system, idef)
    assert idef.order == 3 and abs(p - 3) <= tolerance(3), (p, d)


def test_unregister_leaves_the_tables_as_they_were():
    from geosweep.kernels.s2 import stepper as s2_stepper

    before = (dict(rk.TABLEAUX), dict(lie.METHODS), dict(INTEGRATORS), dict(s2_stepper.METHODS))
    methods.register(RALSTON3, kinds=("RKMK", "s2"))
    methods.unregister(RALSTON3.name)
    assert (rk.TABLEAUX, lie.METHODS, INTEGRATORS, s2_stepper.METHODS) == before


# ---- the docs' tables --------------------------------------------------------------------------------------
def test_docs_methods_table_is_the_records():
    """docs/methods.md is generated: ``python -c 'from geosweep import methods; methods.write_docs()'``."""
    assert (ROOT / "docs" / "methods.md").read_text() == methods.docs_text()


def _hand_table_rows() -> list[tuple[list[str], str]]:
    """(integrator names, order cell) of the hand-written integrator table of the docs' explanation page."""
    text = (ROOT / "docs" / "explanation" / "preservation.md").read_text()
    rows = text.split("| integrator | family | order | notes |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    out = []
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
        out.append((re.findall(r"`([^`]+)`", cells[0]), cells[2]))
    return out


def test_the_hand_integrator_table_states_the_records_orders():
    """Every row of docs/explanation/preservation.md's hand table that lists only Runge–Kutta-type
    integrators states the orders of their records: one per name ("2, 4"), one for all, or their range
    ("1–8"); "(…)" is the estimate's."""
    orders = {e.name: e.method.order for e in methods.entries()}
    checked = 0
    for names, cell in _hand_table_rows():
        if not names or not all(n in orders for n in names):
            continue
        want = [orders[n] for n in names]
        stated = re.sub(r"\([^)]*\)", "", cell)
        if "–" in stated:
            lo, hi = (int(x) for x in stated.split("–"))
            assert (lo, hi) == (min(want), max(want)), (names, cell)
        else:
            got = [int(x) for x in re.findall(r"\d+", stated)]
            assert got == want or (len(got) == 1 and set(want) == set(got)), (names, cell, want)
        checked += 1
    assert checked >= 8


def test_geosweep_methods_imports_light():
    """``geosweep.methods`` and a tableau method's properties need no heavy library, nor Numba."""
    heavy = ["xarray", "pandas", "prefect", "distributed", "dask", "zarr", "numba"]
    probe = (
        "import geosweep.methods as m, json, sys; m.RKMK(tableau='dop853').stages; "
        f"print(json.dumps([x for x in {heavy!r} if x in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_modules_examples_run():
    import doctest

    result = doctest.testmod(methods, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
