"""Process-wide state is named as such: every module-level mutable container of ``sweeps/``, ``flows/`` and
``kernels/`` is either state that must outlive a call (a compiled-call cache, a registry: listed in
:data:`PROCESS_STATE`, its ``#:`` comment says "process-wide state"), or a constant table the package never
changes (:data:`TABLES`, checked: no assignment into it, no mutating call on it in its module). A new one
is neither until it is declared here; no function rebinds a module global (``global``)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIRS = ("sweeps", "flows", "kernels")

#: state that must exist for the life of the process, by module
PROCESS_STATE = {
    "sweeps/cells.py": {"_RUN_ARRAYS"},
    "sweeps/first_worker.py": {"_DESCRIBERS"},
    "sweeps/lease.py": {"_ACTIVE"},
    "sweeps/spec_file.py": {"_PARSED"},
    "sweeps/store/checksums.py": {"_DTYPE_NAMES"},
    "sweeps/visibility.py": {"_PROVEN"},
    "kernels/_jit.py": {"_DECLARED"},
    "kernels/core/addressed.py": {"_ENTRIES"},
    "kernels/core/driver.py": {"_DRIVERS", "_BY_ID"},
    "kernels/core/fastcall.py": {"_DRIVERS", "_FUNCS", "_ENTRIES", "_LAST", "_TYPED", "_BINDINGS"},
    "kernels/core/observables.py": {"_MODEL_FREE"},
    "kernels/lie/methods.py": {"ACTIONS"},
    "kernels/lie/stepper.py": {"_RECORDS", "_CALLBACKS"},
    "kernels/lie/tableaux.py": {"METHODS"},
    "kernels/quad/family.py": {"_REFS"},
    "kernels/registry.py": {"SYSTEMS", "INTEGRATORS", "FAMILIES"},
    "kernels/s2/model.py": {"_LAZY", "_THREADED"},
    "kernels/top/family.py": {"_REFS"},
}
#: h1's files (the execution layer, rewritten on another branch): named there when it is merged
PENDING: dict[str, set[str]] = {}
#: constant tables: module-level data the package reads and never changes
TABLES = {
    "sweeps/__init__.py": {"_HOMES"},
    "sweeps/estimate.py": {"OVERHEAD_SECONDS"},
    "sweeps/execution.py": {"LOCAL_WORKER"},
    "sweeps/grow.py": {"METHOD_FIELDS"},
    "sweeps/lease_file.py": {"STORE_ERRNOS"},
    "sweeps/numba_env.py": {"_CANDIDATES"},
    "sweeps/spec_limits.py": {"LIMITS"},
    "sweeps/store/__init__.py": {"_HOMES"},
    "sweeps/store/schema.py": {"FLAG_LAYOUT", "_COORD_DTYPES"},
    "flows/cli/__init__.py": {"COMMANDS", "_LAZY"},
    "flows/firstrun.py": {"COLD_SECONDS"},
    "flows/output.py": {"BUCKET_PROTOCOLS"},
    "kernels/_jit.py": {"JIT_OPTIONS"},
    "kernels/chain/family.py": {"_SPHERE"},
    "kernels/dg/dla.py": {"METHODS"},
    "kernels/dg/family.py": {"_ON_COLUMNS", "_ON_CHAIN"},
    "kernels/dg/steppers.py": {"METHODS", "RK_TABLEAUX"},
    "kernels/tableaux.py": {"_D8_E5", "_D8_B3", "TABLEAUX"},
    "kernels/registry.py": {"BUILTIN_SYSTEMS"},
    "kernels/s2/family.py": {"_RK_DOC"},
    "kernels/s2/integrate.py": {"METHODS"},
    "kernels/s2/model.py": {"SYMMETRY_CODES"},
    "kernels/s2/stepper.py": {"RK_BASELINES", "METHODS", "STEPS"},
    "kernels/status.py": {"STATUS_MEANINGS"},
    "kernels/systems/icosphere.py": {"SHA256", "_BASE_VERTICES", "_BASE_FACES"},
    "kernels/top/family.py": {"SLGI"},
    "kernels/torus/integrate.py": {"FAIL_REASONS"},
    "kernels/torus/stepper.py": {"METHODS"},
    "kernels/vocabulary.py": {"RUN_DEPENDENT"},
}
MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "bytearray"}
MUTABLE_CALLS |= {"WeakKeyDictionary", "WeakValueDictionary", "WeakSet"}
MUTATORS = {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add", "discard"}
MUTATORS |= {"remove", "sort", "reverse", "__setitem__", "__delitem__"}


@functools.cache
def _modules() -> dict[str, tuple[ast.Module, list[str]]]:
    out = {}
    for d in DIRS:
        for path in sorted((ROOT / d).rglob("*.py")):
            text = path.read_text()
            out[path.relative_to(ROOT).as_posix()] = (ast.parse(text), text.splitlines())
    return out


def _mutable(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    func = value.func if isinstance(value, ast.Call) else None
    return func is not None and getattr(func, "id", getattr(func, "attr", None)) in MUTABLE_CALLS


def _containers(tree: ast.Module) -> dict[str, int]:
    """Module-level names bound to a mutable container (``__all__`` aside) → their line."""
    found = {}
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if targets and _mutable(node.value):
            found.update({t.id: node.lineno for t in targets if isinstance(t, ast.Name) and t.id != "__all__"})
    return found


def _comment_above(lines: list[str], lineno: int) -> str:
    """The ``#`` comment block right above line ``lineno`` (1-based), and that line's own comment."""
    block, i = [lines[lineno - 1].partition("#")[2]], lineno - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        block.insert(0, lines[i].lstrip("# "))
        i -= 1
    return " ".join(block)


def test_every_module_level_mutable_container_is_declared():
    unknown = {}
    for rel, (tree, _) in _modules().items():
        known = PROCESS_STATE.get(rel, set()) | PENDING.get(rel, set()) | TABLES.get(rel, set())
        new = set(_containers(tree)) - known
        if new:
            unknown[rel] = sorted(new)
    assert not unknown, (
        f"module-level mutable containers {unknown}: make them locals or attributes (an object the caller "
        "holds), immutable (tuple, frozenset, MappingProxyType), or process-wide state named as such "
        "(PROCESS_STATE here and a '#: process-wide state: …' comment)"
    )
    for listed in (PROCESS_STATE, TABLES, PENDING):  # no stale entry
        for rel, names in listed.items():
            assert names <= set(_containers(_modules()[rel][0])), (rel, names)


def test_process_wide_state_says_so():
    unnamed = []
    for rel, names in PROCESS_STATE.items():
        tree, lines = _modules()[rel]
        for name, lineno in _containers(tree).items():
            if name in names and "process-wide state" not in _comment_above(lines, lineno):
                unnamed.append(f"{rel}:{lineno} {name}")
    assert not unnamed, f"say why it must outlive a call ('#: process-wide state: …'): {unnamed}"


def _mutations(tree: ast.Module, names: set[str]) -> list[str]:
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and getattr(t.value, "id", None) in names:
                    hits.append(f"{t.value.id}[…] at {node.lineno}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            if getattr(node.func.value, "id", None) in names:
                hits.append(f"{node.func.value.id}.{node.func.attr} at {node.lineno}")
    return hits


def test_constant_tables_are_never_changed():
    changed = {}
    for rel, names in TABLES.items():
        if hits := _mutations(_modules()[rel][0], names):
            changed[rel] = hits
    assert not changed, f"a table the code changes is state: name it (PROCESS_STATE) or make it an attribute: {changed}"


def test_no_function_rebinds_a_module_global():
    rebinding = [
        f"{rel}:{node.lineno} global {', '.join(node.names)}"
        for rel, (tree, _) in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Global)
    ]
    assert not rebinding, f"module state rebound by functions (make it an object): {rebinding}"


def test_the_first_run_protocol_is_an_object():
    """flows/firstrun.py keeps no module-level state: a command's FirstRun holds what it prepared."""
    from geosweep.flows import firstrun

    tree, _ = _modules()["flows/firstrun.py"]
    assert set(_containers(tree)) <= TABLES["flows/firstrun.py"]
    a, b = firstrun.FirstRun(), firstrun.FirstRun()
    a.announce()
    assert a.compiled and not b.compiled  # said once per command, not once per process
    assert b.prepare(families=False) is False and b.key == ""
    b.mark_warm()  # nothing prepared: no stamp
