"""Small modules and functions in ``sweeps/`` and ``flows/`` (issue 50 item 1).

ruff checks McCabe complexity (C901, at most 15) and statements per function (PLR0915) there
(pyproject's ``[tool.ruff.lint]``; ``tests/test_lint.py`` runs ``ruff check .``); this file checks
what ruff does not: a function (nested ones counted inside it) spans at most
:data:`MAX_FUNCTION_LINES` lines from its ``def`` to its last line, a module at most
:data:`MAX_MODULE_LINES` lines.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("sweeps", "flows")
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 400
MAX_COMPLEXITY = 15
#: files not held to the rules yet, each with the reason; delete an entry once its file keeps them
#: (the last test fails on an entry that is no longer needed)
ALLOWED: dict[str, str] = {}


def _files() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _long_functions(path: Path) -> list[str]:
    """``file:line name (n lines)`` of every function of ``path`` longer than :data:`MAX_FUNCTION_LINES`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            if n > MAX_FUNCTION_LINES:
                out.append(f"{_name(path)}:{node.lineno} {node.name} ({n} lines)")
    return out


def _module_lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_function_in_sweeps_or_flows_is_longer_than_80_lines():
    long = [hit for path in _files() if _name(path) not in ALLOWED for hit in _long_functions(path)]
    assert long == [], f"split these into named steps (at most {MAX_FUNCTION_LINES} lines each): {long}"


def test_no_module_in_sweeps_or_flows_is_longer_than_400_lines():
    big = {_name(p): n for p in _files() if _name(p) not in ALLOWED and (n := _module_lines(p)) > MAX_MODULE_LINES}
    assert big == {}, f"split these by responsibility (at most {MAX_MODULE_LINES} lines each): {big}"


def test_ruff_checks_complexity_and_statements_in_sweeps_and_flows():
    """The ruff rules are selected, at McCabe 15, and exempt no file of ``sweeps/`` or ``flows/`` but
    the allowed ones: ``ruff check .`` (tests/test_lint.py) enforces them there."""
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    assert {"C901", "PLR0915"} <= set(lint["select"]) and not {"C901", "PLR0915"} & set(lint.get("ignore", []))
    assert lint["mccabe"]["max-complexity"] == MAX_COMPLEXITY
    exempt = {pattern for pattern, codes in lint["per-file-ignores"].items() if {"C901", "PLR0915"} & set(codes)}
    assert exempt - set(ALLOWED) == {"!{sweeps,flows}/**"}, exempt


def test_every_allowed_file_still_needs_its_exemption():
    """An entry of :data:`ALLOWED` goes (with its line in pyproject's per-file-ignores, if any) once
    its file keeps the rules."""
    for name, reason in ALLOWED.items():
        path = ROOT / name
        assert path.is_file(), f"{name}: gone; remove it from ALLOWED"
        still = _long_functions(path) or _module_lines(path) > MAX_MODULE_LINES
        assert still, f"{name} keeps the rules now ({reason}): remove it from ALLOWED and pyproject's per-file-ignores"
