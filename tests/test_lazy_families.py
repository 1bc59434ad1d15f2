"""A spec imports (and on a cold Numba cache compiles) only its own family: geosweep.kernels.registry.load_for.

Each check runs in a fresh interpreter: the test process itself has imported every family.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

from geosweep.kernels.registry import BUILTIN_FAMILIES, BUILTIN_SYSTEMS

ROOT = Path(__file__).resolve().parent.parent


def _families_after(code: str) -> list[str]:
    """Built-in family modules imported by ``code`` in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted(m for m in {list(BUILTIN_FAMILIES)!r} if m in sys.modules)))"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_spec_loads_only_its_family():
    demo = ROOT / "sweeps" / "examples" / "sphere_demo.toml"
    assert _families_after(f"from geosweep.sweeps.plan import make_plan; make_plan({str(demo)!r})") == [
        "geosweep.kernels.s2.family"
    ]
    # the chain's (S²)ⁿ variational integrator is declared by the s2 family: both, nothing else
    chain = "from geosweep.kernels.registry import load_for; load_for('pendulum_chain', ['rkmk4', 'implicit_vi'])"
    assert _families_after(chain) == sorted(["geosweep.kernels.chain.family", "geosweep.kernels.s2.family"])
    # an unknown name loads every family, so that the error lists every known one
    unknown = (
        "from geosweep.sweeps.spec import SpecError, parse_spec\n"
        "try:\n    parse_spec({'name': 'x', 'system': 'nope', 'integrators': ['rk4'], 'h': [0.1], 'T': 1.0,"
        " 'dt_out': 0.1})\nexcept SpecError as e:\n    assert 'pendulum_chain' in str(e) and 'torus' in str(e)"
    )
    assert _families_after(unknown) == sorted(BUILTIN_FAMILIES)


def test_builtin_systems_map_names_the_declaring_module():
    for system, module in BUILTIN_SYSTEMS.items():
        assert module in BUILTIN_FAMILIES, module
        declared = {s.name for s in importlib.import_module(module).SYSTEMS}
        assert system in declared, (system, module)


def test_builtin_systems_map_lists_every_declared_system():
    """The shortcut map is complete: every system a built-in family declares is in it."""
    for module in BUILTIN_FAMILIES:
        for system in importlib.import_module(module).SYSTEMS:
            assert BUILTIN_SYSTEMS.get(system.name) == module, (system.name, module)


def _string_literals(path: Path) -> set[str]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    }


def test_only_the_families_name_a_family_or_system():
    """No layer above the kernels names a built-in family or system: order variables and figures
    are declared by the family (FamilyDef/SystemDef), the analysis reads them from the registry."""
    from geosweep.kernels.registry import FAMILIES, SYSTEMS, load_builtins

    load_builtins()
    names = set(FAMILIES) | set(SYSTEMS)
    for folder in ("analysis", "sweeps", "flows"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            named = _string_literals(path) & names
            assert not named, f"{path.relative_to(ROOT)} names {sorted(named)}"
