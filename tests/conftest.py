"""Shared fixtures and how the suite runs on several pytest-xdist workers (``-n 4 --dist loadgroup`` in
pyproject.toml's addopts; ``-n 0`` is one process). The ``s2_`` fixtures serve the (S²)ⁿ physics tests
(spec sphere.md).

On workers: the built-in families' kernels are compiled once, before the workers start (two
processes compiling the same kernels into Numba's on-disk cache at once can race); every test that
uses the real Slurm (the ``slurm`` fixture: one Slurm per machine, installed with apt-get) runs on
one worker (``xdist_group``); a test marked ``exclusive`` (a timing comparison) runs while no other
test does (:func:`pytest_runtest_protocol`).
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

#: the families' kernels, compiled into the on-disk cache (as deploy/Dockerfile does): each family's
#: warm-up, then every kernel of declared signatures it did not run (importing compiles none)
WARM = (
    "from geosweep.kernels.registry import FAMILIES, load_builtins; load_builtins(); "
    "[f.warmup() for f in list(FAMILIES.values())]; "
    "from geosweep.kernels._jit import compile_declared; compile_declared()"
)


#: modules whose tests share a costly module-scoped fixture (see pytest_collection_modifyitems)
ONE_WORKER_MODULES = frozenset(
    {"test_report_figures.py", "test_nightly.py", "test_s2_systems.py", "test_readme_blocks.py"}
)


def _is_controller(config: pytest.Config) -> bool:
    """This process starts pytest-xdist workers (it runs no test itself)."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", 0))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "exclusive: runs while no other test runs (timing comparisons; pytest-xdist workers wait)"
    )
    if _is_controller(config):
        print("warming the kernels' cache before the xdist workers start", flush=True)
        subprocess.run([sys.executable, "-c", WARM], check=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # around pytest-randomly's shuffle (itself a tryfirst wrapper)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Groups marked before pytest-xdist reads the xdist_group markers (loadgroup); the Slurm tests
    first on a worker after pytest-randomly has shuffled the order (a conftest wrapper is registered
    after the installed plugins', so it runs outside theirs)."""
    slurm = [item for item in items if {"slurm", "slurm_user"} & set(getattr(item, "fixturenames", ()))]
    for item in slurm:
        item.add_marker(pytest.mark.xdist_group("slurm"))
    # a module whose module-scoped fixture is costly runs on one worker: its fixture is built once, not
    # on both (the report figures' examples cost 70–75 s per worker, the README's run lines ~100 s, a Prefect
    # server ~10 s)
    for item in items:
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
        if module in ONE_WORKER_MODULES and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(module))
    # on xdist workers (they collect; each the same order): the Slurm tests first, ~10 min on one
    # worker, then the other one-worker groups, while the other workers take the rest; a group shuffled
    # to the end ran alone for minutes at the end; the exclusive tests last
    yield
    if hasattr(config, "workerinput"):
        items[:] = sorted(items, key=_group_rank)


def _group_rank(item: pytest.Item) -> int:
    """0 for the Slurm group, 1 for another ``xdist_group``, 2 for the rest, 3 for an ``exclusive`` test (a
    stable sort keeps the shuffle). The exclusive tests come last: the other workers stop while one waits
    for them, which costs least where the run ends anyway (in the middle of a run, up to ~50 s of
    three idle workers each)."""
    if item.get_closest_marker("exclusive"):
        return 3
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return 2
    return 0 if marker.args and marker.args[0] == "slurm" else 1


@contextlib.contextmanager
def _locked(path: Path, mode: int) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Across xdist workers, for a test's set-up, call and teardown: every test holds a shared lock,
    an ``exclusive`` one the lock alone. A gate lock taken first stops new tests from starting while
    an exclusive test waits for the running ones to end. In one process: nothing to do."""
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:
        yield
        return
    root = Path(tempfile.gettempdir()) / f"geosweep-pytest-{workerinput['testrunuid']}"
    root.mkdir(exist_ok=True)
    gate, run = root / "gate.lock", root / "run.lock"
    if item.get_closest_marker("exclusive"):
        with _locked(gate, fcntl.LOCK_EX), _locked(run, fcntl.LOCK_EX):
            yield
        return
    with _locked(gate, fcntl.LOCK_SH):
        pass
    with _locked(run, fcntl.LOCK_SH):
        yield


@pytest.fixture(scope="session")
def s2_lj_default():
    """Sphere MD, Ex. 6, default parameters (level 3, ε = 0.01, σ = mean_edge, Ω = 3.25 co)."""
    from geosweep.kernels.systems.lj_sphere import lj_sphere

    return lj_sphere()


@pytest.fixture(scope="session")
def s2_lj_default_run(s2_lj_default):
    """Explicit VI on Ex. 6 with the spec's reference setting h = 0.005, T = 5 (N = 1000),
    every step sampled (~1 s)."""
    from geosweep.kernels.s2.integrate import _integrate

    return _integrate(s2_lj_default, "explicit_vi", 0.005, 1000, stride=1)


@pytest.fixture
def dask_path(monkeypatch):
    """Runs of this test go to Dask however small (``GEOSWEEP_IN_DRIVER_BELOW=0``, inherited by the CLI
    subprocesses it starts): the suite otherwise runs with the users' default, under which a run of a few
    short cells stays in the driver's process (:func:`geosweep.sweeps.execution.runs_in_driver`)."""
    monkeypatch.setenv("GEOSWEEP_IN_DRIVER_BELOW", "0")
