"""The families' old kernels-alone ``integrate`` functions (issue 51 item 3): deprecated aliases for one
release, each warning with the front-door call that runs the same cell and returning bitwise what the
family's implementation returns; nothing of the project calls them.

The warning's call is run as written: its stored values are bitwise the old call's (the message names
the call precisely, blowup and snapshot interval included)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import geosweep
from geosweep.kernels.vocabulary import RUN_DEPENDENT

ROOT = Path(__file__).resolve().parent.parent
#: the modules of the deprecated aliases (each ``integrate``, wrapping the module's ``_integrate``; by module
#: name: the package ``geosweep.kernels.s2`` exports the function under its module's name)
_NAMES = ("s2.integrate", "torus.integrate", "chain.integrate", "top.family", "quad.family")
MODULES = {f"geosweep.kernels.{n}": importlib.import_module(f"geosweep.kernels.{n}") for n in _NAMES}
s2, se3, chain, top, quad = MODULES.values()
#: (module, system, positional arguments after the model, keyword arguments): every family, both step kinds
CASES = [
    (s2, "double_pendulum", ("rk4", 0.01, 20, 5), {}),
    (s2, "spring_pendula", ("explicit_vi", 0.01, 20, 5), {"snapshot_stride": 10}),
    (se3, "so3_pendulum", ("v1", 0.01, 20, 5), {"snapshot_interval": 0.1}),
    (chain, "pendulum_chain", ("rkmk4", 0.01, 20, 5), {}),
    (chain, "pendulum_chain", ("rkmk45", 0.1, 3), {"adaptive": True, "tol": 1e-8}),
    (top, "heavy_top", ("lp_rkmk4", 0.01, 20, 5), {"blowup": 0.25}),
    (quad, "two_quadrotors", ("quad_rkmk4", 0.05, 5), {}),
]


def _bitwise(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same_result(old, new) -> None:
    """Every field of two kernels-alone results bitwise equal (timings aside); the core trajectories'
    final state and samples too."""
    assert type(old) is type(new)
    for f in dataclasses.fields(old):
        a, b = getattr(old, f.name), getattr(new, f.name)
        if f.name == "wall_time" or f.name in ("model", "system", "collect"):
            continue
        if f.name == "core":
            assert _bitwise(a.S, b.S) and _bitwise(a.out, b.out)
        elif isinstance(a, dict):
            assert a.keys() == b.keys() and all(_bitwise(a[k], b[k]) for k in a if k != "wall_time"), f.name
        elif isinstance(a, np.ndarray):
            assert _bitwise(a, b), f.name
        else:
            assert a == b, f.name
    assert all(_bitwise(v, new.values[k]) for k, v in old.values.items() if k not in RUN_DEPENDENT)


@pytest.mark.parametrize(("module", "system", "args", "kwargs"), CASES, ids=[f"{c[1]}-{c[2][0]}" for c in CASES])
def test_alias_warns_with_the_front_door_call_and_returns_what_it_did(module, system, args, kwargs):
    model = geosweep.system(system).model
    with pytest.warns(DeprecationWarning, match=rf"^{re.escape(module.__name__)}(\.integrate)? is deprecated") as got:
        old = module.integrate(model, *args, **kwargs)
    ours = [w for w in got if w.category is DeprecationWarning]
    assert len(ours) == 1 and ours[0].filename == __file__  # one, attributed to the caller
    _same_result(old, module._integrate(model, *args, **kwargs))
    call = re.search(r"call (geosweep\.integrate\(.*?\)) \(", str(ours[0].message)).group(1)
    assert call.startswith(f'geosweep.integrate("{system}", "{args[0]}", ')
    sol = eval(call, {"geosweep": geosweep})  # the call as the warning writes it
    assert set(sol.values) == set(old.values) and sol.status == old.status
    for name, value in old.values.items():
        if name not in RUN_DEPENDENT:
            assert _bitwise(np.asarray(sol[name], dtype=np.asarray(value).dtype), value), name


def test_the_old_guard_default_is_spelled_out():
    """The old s2/ts2/top functions ran without the energy guard; the front door guards at 0.5 unless
    told: the named call says ``blowup=0.0`` (and the state overrides the front door has no form of)."""
    model = geosweep.system("double_pendulum").model
    with pytest.warns(DeprecationWarning) as got:
        s2.integrate(model, "rk4", 0.01, 4, 2, q0=model.q0)
    message = next(str(w.message) for w in got if w.category is DeprecationWarning)
    assert 'geosweep.integrate("double_pendulum", "rk4", T=0.04, dt_out=0.02, h=0.01, blowup=0.0)' in message
    assert "q0: the front door starts from the system's own initial state" in message
    assert s2.integrate.__doc__.startswith("Deprecated (one release): use :func:`geosweep.integrate`")


def test_an_alias_call_fails_the_suite():
    """pyproject's filterwarnings turns the aliases' warning into an error outside ``pytest.warns``:
    a project test or helper that calls one fails."""
    model = geosweep.system("heavy_top").model
    with pytest.raises(DeprecationWarning, match="geosweep.kernels.top.family.integrate is deprecated"):
        top.integrate(model, "lp_rkmk4", 0.01, 2)


def _alias_uses(path: Path, aliases: set[int], modules: set[str]) -> list[str]:
    """Lines of ``path`` that import a deprecated alias or call one through its module."""
    tree = ast.parse(path.read_text(), str(path))
    bound, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in {m.rsplit(".", k)[0] for m in modules for k in (0, 1)}:
            if path.name == "__init__.py" and node.module in modules:  # a package re-exporting its alias
                continue
            for name in node.names:
                full = f"{node.module}.{name.name}"
                try:
                    obj = getattr(importlib.import_module(node.module), name.name)
                except (ImportError, AttributeError):
                    continue
                if id(obj) in aliases:
                    found.append(f"{path.name}:{node.lineno}")
                elif full in modules:
                    bound.add(name.asname or name.name)
        elif isinstance(node, ast.Import):
            bound |= {n.asname for n in node.names if n.name in modules and n.asname}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "integrate" and isinstance(node.value, ast.Name):
            if node.value.id in bound:
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_nothing_of_the_project_calls_an_alias():
    """kernels, sweeps, flows, analysis, benchmarks and the tests call the implementations (``_integrate``)
    or the front door; only this file calls the aliases."""
    aliases = {id(m.integrate) for m in MODULES.values()}
    files = [p for d in ("kernels", "sweeps", "flows", "analysis", "benchmarks", "tests", "geosweep", "examples")
             for p in (ROOT / d).rglob("*.py")]  # fmt: skip
    assert len(files) > 200
    found = [line for p in files if p.name != Path(__file__).name for line in _alias_uses(p, aliases, set(MODULES))]
    assert not found, found


#: the old calls of the jobs the front door does (geosweep.run, geosweep.open, geosweep.extend)
_OLD_CALLS = re.compile(r"\brun_sweep\(|\bopen_zarr\(|sweeps\.extend\(|\bextend_store\(")


def test_every_notebook_and_example_uses_the_front_door(tmp_path):
    """examples/: every notebook's code (and any example script) runs, opens and extends stores through
    ``geosweep.run``/``open``/``extend`` and calls no deprecated alias."""
    import nbformat

    aliases = {id(m.integrate) for m in MODULES.values()}
    notebooks = sorted((ROOT / "examples").glob("*.ipynb"))
    assert notebooks
    for nb_path in notebooks:
        code = "\n".join(c.source for c in nbformat.read(nb_path, as_version=4).cells if c.cell_type == "code")
        script = tmp_path / f"{nb_path.stem}.py"
        script.write_text(code)
        assert not _OLD_CALLS.search(code), (nb_path.name, _OLD_CALLS.search(code).group(0))
        assert "geosweep.open(" in code and not _alias_uses(script, aliases, set(MODULES)), nb_path.name
    for path in (ROOT / "examples").rglob("*.py"):
        assert not _OLD_CALLS.search(path.read_text()), path.name
