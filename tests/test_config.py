"""Configuration in one place (geosweep/config.py): every ``GEOSWEEP_*`` variable declared once with its
kind, default and doc, parsed by one parser per kind; a bad value is one line and exit 2 from the command
before any work; no other module reads or writes the environment; the docs' table is the module's."""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geosweep import config
from geosweep.flows.cli import main

ROOT = Path(__file__).resolve().parent.parent
#: the folders of the package geosweep.* (pyproject's package-dir)
PACKAGE_DIRS = ("geosweep", "kernels", "sweeps", "flows", "analysis", "deploy")
#: h1's files (the execution layer, rewritten on another branch): their reads go through geosweep.config
#: when that branch is merged; until then at most this many environment accesses each
PENDING: dict[str, int] = {}
#: names that are not geosweep's variables: a credentials variable the deploy README's example names
#: (``--storage-options env:GEOSWEEP_S3``: any name works)
NOT_SETTINGS = {"GEOSWEEP_S3"}


def _py_files(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py") if ".venv" not in p.parts)


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _environ_accesses(path: Path) -> list[int]:
    """Lines where ``path`` reads or writes the environment: ``os.environ`` (except a copy for a child,
    ``{**os.environ, …}`` or ``dict(os.environ)``), ``os.getenv``/``putenv``/``unsetenv``, ``env_seconds(…)``."""
    tree = _tree(path)
    copied = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            copied |= {id(v) for k, v in zip(node.keys, node.values) if k is None}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            copied |= {id(a) for a in node.args}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr in ("getenv", "putenv", "unsetenv") or (node.attr == "environ" and id(node) not in copied):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "env_seconds":
            lines.append(node.lineno)
    return sorted(lines)


def test_no_module_but_config_reads_or_sets_the_environment():
    """Every read and write of a variable goes through geosweep.config (its declarations), so that the
    list of variables is the module's."""
    found = {}
    for path in _py_files(*PACKAGE_DIRS):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "geosweep/config.py":
            continue
        lines = _environ_accesses(path)
        if len(lines) > PENDING.get(rel, 0):
            found[rel] = lines
    assert not found, f"environment accessed outside geosweep/config.py (declare it there): {found}"


def _project_files() -> list[str]:
    """The project's files (relative paths): git's list in a checkout, else (CI's copy of the files,
    which has no .git) every file but virtual environments, caches and results."""
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.split()
    junk = {".venv", ".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "results"}
    return [
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*")
        if p.is_file() and not junk & set(p.relative_to(ROOT).parts) and not p.name.endswith(".egg-info")
        and ".egg-info" not in p.as_posix()
    ]  # fmt: skip


def _tracked_text_files() -> list[Path]:
    suffixes = {".py", ".md", ".ipynb", ".toml", ".yaml", ".yml", ".sh", ".cfg", ".txt", ""}
    skip = ("tests/", "CHANGELOG.md")  # the tests name variables of their own; the changelog is history
    return [ROOT / f for f in _project_files() if Path(f).suffix in suffixes and not f.startswith(skip)]


def test_every_geosweep_variable_named_anywhere_is_declared():
    named: dict[str, str] = {}
    for path in _tracked_text_files():
        if path.is_file():
            for name in re.findall(r"\bGEOSWEEP_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")):
                named.setdefault(name, path.relative_to(ROOT).as_posix())
    undeclared = {n: where for n, where in named.items() if n not in config.SETTINGS and n not in NOT_SETTINGS}
    assert not undeclared, f"declare these in geosweep/config.py: {undeclared}"
    unused = set(config.SETTINGS) - set(named)
    assert not unused, f"declared but read nowhere: {unused}"


def test_every_declaration_is_complete_and_its_default_parses_to_itself(monkeypatch):
    for name, s in config.SETTINGS.items():
        assert name.startswith("GEOSWEEP_") and s.name == name and s.doc and s.reader
        assert (ROOT / s.reader).exists(), s.reader
        monkeypatch.delenv(name, raising=False)
        assert s.get() == s.default
        if s.default not in (None, (), False):
            monkeypatch.setenv(name, ",".join(s.default) if isinstance(s.default, tuple) else str(s.default))
            assert s.get() == s.default, name
        monkeypatch.setenv(name, "  ")
        assert s.get() == s.default  # blank is unset
    for name, e in config.EXPORTED.items():
        assert e.name == name and e.why and e.where
    assert all(why for why in config.FOREIGN.values())


def test_each_kind_parses_its_values(monkeypatch):
    cases = [
        (config.LEASE_TIMEOUT, " 2.5 ", 2.5),
        (config.FIRST_WORKER_TIMEOUT, "0", 0.0),
        (config.CHECKED_CALLS, "1", True),
        (config.CHECKED_CALLS, "Off", False),
        (config.TEST_PAUSE, "tail, import", ("tail", "import")),
        (config.TEST_EXIT_AT, "grow.marked", "grow.marked"),
        (config.BROWSER, sys.executable, sys.executable),
        (config.BROWSER, "sh", shutil.which("sh")),  # a program on PATH: its path
    ]
    for setting, raw, value in cases:
        monkeypatch.setenv(setting.name, raw)
        assert setting.get() == value, (setting.name, raw)


#: one bad value per kind, and what its line says
BAD = [
    ("GEOSWEEP_LEASE_TIMEOUT", "soon", "must be a number of seconds > 0"),  # seconds (> 0)
    ("GEOSWEEP_IN_DRIVER_BELOW", "-1", "must be a number of seconds >= 0"),  # seconds (>= 0)
    ("GEOSWEEP_CHECKED_CALLS", "maybe", "must be one of 1, true, yes, on, 0, false, no, off"),  # flag
    ("GEOSWEEP_BROWSER", "/no/such/browser", "no such program on PATH and no such file"),  # program
    ("GEOSWEEP_TEST_EXIT_AT", "grow.never", "must be one of grow.marked"),  # choice
    ("GEOSWEEP_TEST_PAUSE", "tail,nowhere", "nowhere not among import, prefect-start"),  # choices
]


@pytest.mark.parametrize("name, raw, says", BAD, ids=[b[0] for b in BAD])
def test_a_bad_value_of_each_kind_is_refused_in_one_line_exit_2(monkeypatch, capsys, tmp_path, name, raw, says):
    monkeypatch.setenv(name, raw)
    with pytest.raises(config.ConfigError, match=rf"^{name}='{re.escape(raw)}': {re.escape(says)}"):
        config.SETTINGS[name].get()
    store = tmp_path / "none.zarr"
    assert main(["status", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"geosweep: {name}={raw!r}: ") and says in err[0], err
    assert not store.exists()


def test_the_command_refuses_a_bad_lease_timeout_before_any_work(tmp_path):
    """The console script: one line, exit 2, no traceback (a bad GEOSWEEP_LEASE_TIMEOUT used to be
    taken silently as the default)."""
    store = tmp_path / "s.zarr"
    env = {**os.environ, "GEOSWEEP_LEASE_TIMEOUT": "-3"}
    cmd = [sys.executable, "-c", "import sys; from geosweep.flows.cli import main; sys.exit(main())", "demo"]
    p = subprocess.run([*cmd, "--serial", "--store", str(store)], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip().splitlines() == [
        "geosweep: GEOSWEEP_LEASE_TIMEOUT='-3': must be a number of seconds > 0"
    ], p.stderr
    assert not store.exists()


def test_the_declared_defaults_are_the_modules_defaults():
    from geosweep.sweeps import execution, first_worker, lease, liveness

    assert lease.timeouts() == (config.LEASE_TIMEOUT.default, lease.HEARTBEAT)
    assert execution.IN_DRIVER_SECONDS == config.IN_DRIVER_BELOW.default
    assert first_worker.FIRST_WORKER_SECONDS == config.FIRST_WORKER_TIMEOUT.default
    assert liveness.UNRESPONSIVE_SECONDS == config.WORKER_TIMEOUT.default


def _literal_calls(func: str) -> set[str]:
    """The string literals passed to calls of ``func`` (a name or an attribute) in the package."""
    points = set()
    for path in _py_files(*PACKAGE_DIRS):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == func:
                if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    points.add(node.args[0].value)
    return points


def test_the_test_hooks_points_are_the_declared_choices():
    assert _literal_calls("pause") == set(config.PAUSE_POINTS)
    assert _literal_calls("reached") == set(config.EXIT_POINTS)


def test_the_docs_list_every_variable():
    """docs/environment.md is :func:`geosweep.config.markdown`'s output."""
    doc = (ROOT / "docs" / "environment.md").read_text()
    assert doc == config.markdown(), "regenerate: python -c 'from geosweep import config; config.write_docs()'"
    for name in [*config.SETTINGS, *config.FOREIGN, *config.EXPORTED]:
        assert f"`{name}`" in doc


def test_foreign_and_exported_names_must_be_declared(monkeypatch):
    with pytest.raises(KeyError, match="NOT_A_DECLARED_NAME"):
        config.environ("NOT_A_DECLARED_NAME")
    with pytest.raises(KeyError):
        config.put("NOT_A_DECLARED_NAME", "1")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    config.put("OMP_WAIT_POLICY")
    assert os.environ["OMP_WAIT_POLICY"] == "passive"
    config.put("OMP_WAIT_POLICY", "active")  # only when unset
    assert os.environ["OMP_WAIT_POLICY"] == "passive"
    assert config.values("PYTHONSAFEPATH", "NUMBA_NUM_THREADS") == {"PYTHONSAFEPATH": "1", "NUMBA_NUM_THREADS": "1"}
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    with config.without():  # the variables declared removed
        assert "MALLOC_TRIM_THRESHOLD_" not in os.environ
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"


def test_the_suite_runs_with_the_users_defaults():
    """tests/conftest.py sets no variable for the whole suite (a test that needs the Dask path asks for it,
    the ``dask_path`` fixture): what the tests run is what users run."""
    assert _environ_accesses(ROOT / "tests" / "conftest.py") == []
    source = (ROOT / "tests" / "conftest.py").read_text()
    assert "GEOSWEEP_IN_DRIVER_BELOW" not in source.partition("def dask_path")[0]


def test_dask_path_sends_a_small_run_to_the_workers(dask_path):
    from geosweep.sweeps.execution import runs_in_driver

    assert config.IN_DRIVER_BELOW.get() == 0.0
    assert not runs_in_driver([2e-5] * 10)  # under the default 0.025 s these 10 cells stay in the driver
