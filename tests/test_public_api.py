"""The public API is documented and typed (issue 51 item 4).

Every public name — ``geosweep.__all__``, the ``ds.geosweep`` accessor's public members, ``Solution``'s and
the classes and functions the front door hands out (``SystemDef``, ``Param``, ``S2System``,
``SkewSystem``, ``RunRequest``, ``Execution``, ``run_sweep``, ``SweepResult``, ``make_plan``, ``Plan``,
``extend``) — has a docstring with an example, and every example runs (doctest; the accessor's examples
read ``ds``, the small store their class docstring makes). mypy's typed core (pyproject ``[tool.mypy]
files``, run by tests/test_lint.py) holds the modules that define them."""

from __future__ import annotations

import doctest
import inspect
import tomllib
from pathlib import Path

import pytest

import geosweep
from geosweep.analysis.accessor import GeosweepAccessor
from geosweep.kernels.dg.model import SkewSystem
from geosweep.kernels.registry import Param, RunRequest, SystemDef
from geosweep.kernels.s2.model import S2System
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.execution import Execution
from geosweep.sweeps.extension import extend
from geosweep.sweeps.plan import Plan, make_plan
from geosweep.sweeps.progress import SweepResult

ROOT = Path(__file__).resolve().parent.parent
EXPOSED = (
    SystemDef,
    Param,
    RunRequest,
    S2System,
    SkewSystem,
    Execution,
    run_sweep,
    SweepResult,
    make_plan,
    Plan,
    extend,
)


def _members(cls: type) -> dict[str, object]:
    """A class's own public members (methods, properties, class methods) by qualified name."""
    return {f"{cls.__name__}.{n}": m for n, m in vars(cls).items() if not n.startswith("_")}


def _public() -> dict[str, object]:
    names = {n: getattr(geosweep, n) for n in geosweep.__all__ if n != "__version__"}  # a str: no docstring
    names |= {o.__qualname__: o for o in EXPOSED}
    return names | _members(GeosweepAccessor) | _members(geosweep.Solution)


def _doc(obj: object) -> str:
    if isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, classmethod | staticmethod):
        obj = obj.__func__
    return inspect.getdoc(obj) or ""


def test_every_public_name_has_a_docstring_with_an_example():
    public = _public()
    assert len(public) > 50 and "GeosweepAccessor.order" in public and "Solution.continue_to" in public
    missing = sorted(name for name, obj in public.items() if ">>>" not in _doc(obj))
    assert not missing, f"no docstring example: {missing}"


@pytest.fixture(scope="module")
def demo_ds():
    """``ds``, the store the accessor's class docstring makes (its members' examples read it): that
    docstring's example, run."""
    ns: dict = {}
    for example in doctest.DocTestParser().get_examples(GeosweepAccessor.__doc__ or ""):
        exec(example.source, ns)
    return ns["ds"]


def _run_examples(obj: object, name: str, globs: dict) -> doctest.TestResults:
    finder = doctest.DocTestFinder(recurse=isinstance(obj, type))
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    module = inspect.getmodule(obj)
    for test in finder.find(obj, name, module=module, globs={**vars(module), **globs}):
        runner.run(test)
    return runner.summarize(verbose=False)


@pytest.mark.parametrize("obj", [*EXPOSED, GeosweepAccessor], ids=lambda o: o.__qualname__)
def test_the_examples_run(obj, demo_ds):
    result = _run_examples(obj, obj.__qualname__, {"ds": demo_ds})
    assert result.attempted > 0 and result.failed == 0


def test_the_typed_core_holds_the_public_modules():
    """Every module that defines a public name is in mypy's typed core (a folder listed covers its files)."""
    files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    modules = {inspect.getmodule(o) for o in _public().values() if not isinstance(o, property | classmethod)}
    for module in {*modules, geosweep}:
        path = Path(inspect.getfile(module)).resolve().relative_to(ROOT).as_posix()
        assert any(path == f or path.startswith(f"{f}/") for f in files), path
    assert (ROOT / "geosweep" / "py.typed").is_file()
