"""The code base is ruff clean and ruff formatted (the checks a reviewer runs); README and CI agree."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


needs_ruff = pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed (pip install -e '.[test]')")


@needs_ruff
def test_ruff_check_is_clean():
    out = subprocess.run(["ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]


@needs_ruff
def test_ruff_format_is_clean():
    out = subprocess.run(["ruff", "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]


@pytest.mark.skipif(not _has_module("mypy"), reason="mypy not installed (pip install -e '.[test]')")
def test_mypy_is_clean_on_the_typed_core():
    """pyproject's [tool.mypy] files (kernels/core, the registry, the Lie records, sweeps) type-check
    under their installed names (``geosweep.kernels`` …; .ci/typecheck.py maps the folders)."""
    out = subprocess.run([sys.executable, ".ci/typecheck.py"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]


def _set_up_commands() -> tuple[str, str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    demo, tests = re.findall(r"```\n(.+?)\n```", section, flags=re.S)
    return demo, tests


def test_readme_set_up_commands_and_ci_run_the_same_test_command():
    """Both set-up commands are one line that makes a virtual environment (a PEP 668 "externally
    managed" Python refuses pip), upgrades pip (pip 23's resolver backtracks for minutes) and installs
    with the tested versions; ``.ci/run`` runs the test command word for word."""
    demo, tests = _set_up_commands()
    start = "python3 -m venv .venv && . .venv/bin/activate && python3 -m pip install -U pip && "
    assert demo == f"{start}python3 -m pip install -c constraints.txt -e . && geosweep demo"
    assert tests == f'{start}python3 -m pip install -c constraints.txt -e ".[test]" && python3 -m pytest'
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci


def test_ci_runs_the_test_command_in_a_fresh_copy_without_the_machines_packages():
    """``.ci/run`` copies the project's files (no ``.venv``, no ignored files) into a new directory and
    runs the README's command there, so its ``python3 -m venv .venv`` makes a new environment with no
    access to the machine's site-packages, PYTHONPATH or an activated environment."""
    _, tests = _set_up_commands()
    text = (ROOT / ".ci" / "run").read_text()
    code = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "--system-site-packages" not in text and "unset PYTHONPATH PYTHONHOME VIRTUAL_ENV" in code
    copy = next(i for i, line in enumerate(code) if "git ls-files" in line)
    assert "--exclude-standard" in code[copy] and 'cp -P --parents -t "$work"' in code[copy + 2]
    assert code.index('cd "$work"') > copy and code[-1] == tests  # the last thing it does, in the copy
