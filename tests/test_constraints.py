"""The environment the suite runs in has the versions CI tested: ``constraints.txt``.

Both README set-up commands install with ``-c constraints.txt`` (tests/test_lint.py); here every
distribution ``geosweep[test]`` needs, followed through its requirements with their environment
markers, is pinned there, and the installed version of each is its pin. A new dependency without a
refresh (``.ci/refresh-constraints``), or an environment built without the file, fails here by name.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"


def _canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    """``name → version`` of constraints.txt; every line a comment or ``name==version``."""
    pins = {}
    for n, line in enumerate(CONSTRAINTS.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        assert m, f"constraints.txt line {n}: {line!r} is not name==version"
        pins[_canonical(m.group(1))] = m.group(2)
    return pins


def _project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in (*project["dependencies"], *project["optional-dependencies"]["test"])]


def _needed(roots: list[Requirement]) -> set[str]:
    """Every distribution the requirements ``roots`` pull in (their extras and markers honoured)."""
    seen: set[str] = set()
    todo = [(r, frozenset(r.extras)) for r in roots if r.marker is None or r.marker.evaluate()]
    while todo:
        req, extras = todo.pop()
        name = _canonical(req.name)
        key = f"{name}[{','.join(sorted(extras))}]"
        if key in seen:
            continue
        seen.add(key)
        for text in metadata.requires(req.name) or []:
            sub = Requirement(text)
            wanted = [{"extra": e} for e in extras] or [{"extra": ""}]
            if sub.marker is None or any(sub.marker.evaluate(env) for env in wanted):
                todo.append((sub, frozenset(sub.extras)))
    return {key.split("[", 1)[0] for key in seen}


def test_the_constraints_file_says_how_it_is_made():
    head = CONSTRAINTS.read_text().split("\n\n", 1)[0]
    assert head.startswith("# The versions CI tests") and ".ci/refresh-constraints" in head
    assert (ROOT / ".ci" / "refresh-constraints").stat().st_mode & 0o111  # executable
    assert "geosweep" not in _pins()  # the project itself is installed editable, never pinned


def test_pytest_randomly_is_a_test_dependency():
    """The suite runs in a random order wherever it is installed for testing (it must pass in any)."""
    assert "pytest-randomly" in {_canonical(r.name) for r in _project_requirements()}


def test_every_needed_distribution_is_pinned_and_installed_at_its_pin():
    pins = _pins()
    needed = _needed(_project_requirements())
    assert sorted(needed - pins.keys()) == [], "not in constraints.txt: run .ci/refresh-constraints"
    wrong = {n: (metadata.version(n), pins[n]) for n in sorted(needed) if metadata.version(n) != pins[n]}
    assert wrong == {}, "installed ≠ pinned (install with -c constraints.txt): {name: (installed, pinned)}"
