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


def test_readme_set_up_commands_and_ci_run_the_same_test_command():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    demo, tests = re.findall(r"```\n(.+?)\n```", section, flags=re.S)
    assert demo.startswith("python3 -m pip install -U pip && ") and demo.endswith("geosweep demo")
    assert tests.startswith("python3 -m pip install -U pip && ")  # pip 23's resolver backtracks for minutes
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in ci
