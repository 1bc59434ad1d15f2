"""The store is a package of small modules with no import cycle (issue 24 item 4).

The import graph of ``geosweep.sweeps.*`` is read from the source with :mod:`ast`: every
``import``/``from … import`` of one of its modules, at module level and inside functions (a
function-level import that dodges a cycle is still a cycle: the two modules need each other), left
out only under ``if TYPE_CHECKING:``. A name imported from the package root
``geosweep.sweeps.store`` counts as an import of the module it lives in (the package loads it from
there, ``_HOMES``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = ROOT / "sweeps"
STORE = "geosweep.sweeps.store"
#: most lines of one module of the store package
MAX_LINES = 400
#: imports that close a cycle on purpose, with the reason (none may be module-level)
DEFERRED = {
    # sweeps.extend(store, T) is a notebook shortcut that runs the engine, which continues cells
    # with the extension's carries; the engine is the caller in every other case
    ("geosweep.sweeps.extension", "geosweep.sweeps.engine"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SWEEPS.rglob("*.py")):
        parts = [p for p in path.relative_to(SWEEPS).with_suffix("").parts if p != "__init__"]
        out[".".join(["geosweep.sweeps", *parts])] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, module_level: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of a module: at module level only, or everywhere; never the ones
    under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
            elif isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            elif not (module_level and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)):
                visit(child)

    visit(tree)
    return found


def _homes() -> dict[str, str]:
    """The package's table ``name → module`` (empty while the store is one module)."""
    import importlib

    return {k: f"{STORE}.{v}" for k, v in getattr(importlib.import_module(STORE), "_HOMES", {}).items()}


def _graph(module_level: bool) -> dict[str, set[str]]:
    """``module → modules of geosweep.sweeps it imports``."""
    modules, homes = _modules(), _homes()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text()), module_level):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = node.module or ""
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in modules else homes.get(alias.name, base) if base == STORE else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    if homes:  # the package root itself may load any of its modules
        graph[STORE] |= set(homes.values())
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _edges_within(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    return [f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in component]


def test_no_import_cycle_among_the_sweeps_modules():
    """Neither at import time nor through imports inside functions do two modules of
    ``geosweep.sweeps`` need each other (the store needed lease, repair and grow, which needed the
    store, and plan reached into the store's privates); the one deliberate exception is named."""
    top = _graph(module_level=True)
    assert _cycles(top) == [], [_edges_within(top, c) for c in _cycles(top)]
    for a, b in DEFERRED:
        assert b not in top[a], f"{a} -> {b} is a deferred import: it must stay inside a function"
    every = _graph(module_level=False)
    for a, b in DEFERRED:
        every[a].discard(b)
    assert _cycles(every) == [], [_edges_within(every, c) for c in _cycles(every)]


def test_the_store_is_a_package_of_small_modules():
    folder = SWEEPS / "store"
    assert (folder / "__init__.py").is_file() and not (SWEEPS / "store.py").exists()
    lengths = {p.name: len(p.read_text().splitlines()) for p in sorted(folder.glob("*.py"))}
    assert len(lengths) >= 7, lengths
    assert max(lengths.values()) <= MAX_LINES, lengths


def _public_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def test_every_public_name_of_the_package_is_importable_from_its_root():
    """The package's table lists exactly the public names of its modules, each in the module that
    defines it, and every ``from geosweep.sweeps.store import …`` in the repository (code, tests,
    benchmarks) names one of them or a module of the package."""
    import geosweep.sweeps.store as store

    defined = {
        name: f"{STORE}.{path.stem}"
        for path in sorted((SWEEPS / "store").glob("*.py"))
        if path.stem != "__init__"
        for name in _public_names(path)
    }
    assert _homes() == defined
    assert store.__all__ == sorted(defined)
    typed = {
        alias.asname or alias.name
        for node in ast.walk(ast.parse((SWEEPS / "store" / "__init__.py").read_text()))
        if isinstance(node, ast.If) and _is_type_checking(node)
        for imp in node.body
        if isinstance(imp, ast.ImportFrom)
        for alias in imp.names
    }
    assert typed == set(defined)  # what mypy sees is what the package gives
    modules = {p.stem for p in (SWEEPS / "store").glob("*.py")}
    wanted = set()
    for folder in ("sweeps", "flows", "analysis", "deploy", "kernels", "tests", "benchmarks", "geosweep"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == STORE:
                    wanted.update((alias.name, path.name) for alias in node.names)
    missing = sorted((n, where) for n, where in wanted if n not in defined and n not in modules)
    assert missing == []
    for name in defined:
        assert getattr(store, name) is getattr(sys.modules[defined[name]], name)


def test_the_package_is_a_plain_module_holding_none_of_its_names():
    """The package root is an ordinary module (PEP 562 ``__getattr__``, no module subclass): it holds
    no public name itself, so each is its module's object on every read, and a patched tunable is
    read from the module that owns it."""
    import geosweep.sweeps.store as store
    from geosweep.sweeps.store import layout

    assert type(store) is types.ModuleType
    assert not set(store._HOMES) & set(vars(store)), "the package holds a name: it would shadow its module's"
    assert store.SHARD_CELLS is layout.SHARD_CELLS and store.shard_shape is layout.shard_shape
    assert set(store._HOMES) <= set(dir(store))
    with pytest.raises(AttributeError, match="no attribute 'SHARD_CELL'"):
        store.SHARD_CELL  # noqa: B018 - a misspelt name fails like any module's


def test_patching_the_module_that_owns_a_tunable_changes_the_layout_and_is_undone(monkeypatch):
    """``monkeypatch.setattr(layout, "SHARD_CELLS", 1)`` gives one cell per object and pytest restores
    it (setting it on the package root instead was left set by pytest 9.2, for every later test)."""
    import geosweep.sweeps.store as store
    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.store import layout

    spec = {
        "name": "one-cell-shards",
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01, 0.005],
        "T": 0.1,
        "dt_out": 0.01,
        "params": {"N": 3, "ic": "random", "seed": [0, 1, 2, 3]},
    }
    plan = make_plan(spec)
    before = layout.shard_shape(plan)
    shipped = layout.SHARD_CELLS, layout.MIN_SHARD_SECONDS
    with monkeypatch.context() as m:
        m.setattr(layout, "SHARD_CELLS", 1)
        m.setattr(layout, "MIN_SHARD_SECONDS", 0.0)
        assert store.SHARD_CELLS == 1 and store.shard_shape(plan) == (1, 1, 1)
    assert (layout.SHARD_CELLS, layout.MIN_SHARD_SECONDS) == shipped == (64, 0.05)
    assert layout.shard_shape(plan) == before != (1, 1, 1)


def _package_aliases(tree: ast.Module) -> set[str]:
    """The expressions a file uses for the package root ``geosweep.sweeps.store``."""
    aliases = {STORE}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update(a.asname for a in node.names if a.name == STORE and a.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "geosweep.sweeps":
            aliases.update(a.asname or a.name for a in node.names if a.name == "store")
    return aliases


def _sets_on_package(path: Path) -> list[str]:
    """``setattr(pkg, …)``, ``monkeypatch.setattr(pkg, …)``, ``setattr("geosweep.sweeps.store.X", …)``
    and ``pkg.X = …`` of one file, where ``pkg`` is the package root."""
    tree = ast.parse(path.read_text())
    aliases = _package_aliases(tree)
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "setattr") or (
                isinstance(func, ast.Attribute) and func.attr == "setattr"
            ):
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    if first.value.rsplit(".", 1)[0] == STORE:
                        found.append(f"{path.name}:{node.lineno}")
                    continue
                targets = [first]
        elif isinstance(node, ast.Assign | ast.AugAssign):
            assigned = node.targets if isinstance(node, ast.Assign) else [node.target]
            targets = [t.value for t in assigned if isinstance(t, ast.Attribute)]
        found += [f"{path.name}:{node.lineno}" for t in targets if ast.unparse(t) in aliases]
    return found


def test_no_test_sets_a_name_on_the_package_root():
    """Tests and benchmarks change a store tunable in the module that owns it
    (``geosweep.sweeps.store.layout``): set on the package root it would only shadow the name there
    (the layout would not see it) and, under pytest 9.2's monkeypatch, not be undone."""
    paths = [p for folder in ("tests", "benchmarks") for p in sorted((ROOT / folder).rglob("*.py"))]
    assert [hit for path in paths for hit in _sets_on_package(path)] == []


def test_each_sweeps_module_imports_first_in_a_fresh_interpreter():
    """Importing any module of ``geosweep.sweeps`` first (its dependencies loaded from it, the
    store's names on first use) raises no ImportError of a half-initialised module. The package
    ``geosweep.sweeps`` is put in place bare for each module, so that its ``__init__`` (which
    imports the flow-facing modules) does not decide the order."""
    names = sorted(_modules())
    code = (
        "import importlib, sys, types\n"
        f"for name in {names!r}:\n"
        "    for m in [m for m in sys.modules if m.startswith('geosweep.sweeps')]:\n"
        "        del sys.modules[m]\n"
        "    if name != 'geosweep.sweeps':\n"
        "        bare = types.ModuleType('geosweep.sweeps')\n"
        f"        bare.__path__ = [{str(SWEEPS)!r}]\n"
        "        sys.modules['geosweep.sweeps'] = bare\n"
        "    importlib.import_module(name)\n"
        "print(len(names := [m for m in sys.modules if m.startswith('geosweep.sweeps')]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout) > 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
