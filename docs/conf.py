"""Sphinx configuration of geosweep's documentation (docs/index.md says why Sphinx + MyST-NB).

Build: ``python -m sphinx -W --keep-going -n -b html docs docs/_build/html`` (tests/test_docs_build.py).
The reference pages under ``reference/generated/`` are written from the code when a build starts
(``_ext/geosweep_reference.py``); tutorials are notebooks executed at build time.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "geosweep"
author = "the geosweep developers"
copyright = "2026, the geosweep developers"  # noqa: A001 - Sphinx's name

extensions = [
    "myst_nb",  # Markdown (MyST) pages and notebooks executed at build time
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "geosweep_reference",  # the generated reference pages
]

exclude_patterns = ["_build", "**.ipynb_checkpoints", "report", "jupyter_execute"]
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3
suppress_warnings: list[str] = []

# notebooks: executed at every build, each cell limited; an error in a cell fails the build
nb_execution_mode = "force"
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = True  # the tutorial's store is made in a temporary folder, not in docs/

autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}


def _plain_bars(app, what, name, obj, options, lines):
    """Docstrings write |x| for an absolute value or a norm, as plain text: a bar that does not
    start a table row or line block is escaped, so reStructuredText does not read it as a substitution."""
    for i, line in enumerate(lines):
        if not line.lstrip().startswith(("| ", "+-", "+=")):  # a line block or a table row keeps its bars
            lines[i] = re.sub(r"(?<!\\)\|", r"\\|", line)


def _resolve(target: str, module: str | None, cls: str | None) -> object | None:
    """The Python object ``target`` names (absolute, or relative to the module/class it is written in)."""
    prefixes = [p for p in (f"{module}.{cls}" if module and cls else None, module) if p] + [""]
    for prefix in prefixes:
        parts = f"{prefix}.{target}".strip(".").split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            try:
                for name in parts[i:]:
                    obj = getattr(obj, name)
            except AttributeError:
                break
            return obj
    return None


def _code_reference(app, env, node, contnode):
    """A Python reference to code this site does not document (a private helper, an internal module)
    is shown as code without a link; only a name that resolves to nothing — a renamed or removed
    object, a typo — stays a warning (an error under ``-W -n``)."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    if _resolve(target, node.get("py:module"), node.get("py:class")) is not None:
        return contnode
    return None


def _section_headings(app, what, name, obj, options, lines):
    """A docstring's heading underlined by dashes (``Attributes`` / ``----------``) becomes a rubric
    (a section title is not allowed inside a docstring), and its ``name: text`` lines a list."""
    for i in range(len(lines) - 1, 0, -1):
        if re.fullmatch(r"\s*-{3,}\s*", lines[i]) and lines[i - 1].strip():
            indent = lines[i - 1][: len(lines[i - 1]) - len(lines[i - 1].lstrip())]
            body = []
            for line in lines[i + 1 :]:
                if not line.strip():
                    break
                if line.startswith(indent) and not line[len(indent)].isspace():
                    body.append(f"{indent}- {line[len(indent) :]}")
                else:
                    body.append(f"{indent}  {line.strip()}")
            lines[i - 1 : i + 1 + len(body)] = [f"{indent}.. rubric:: {lines[i - 1].strip()}", "", *body]


def setup(app):
    app.connect("autodoc-process-docstring", _section_headings)
    app.connect("autodoc-process-docstring", _plain_bars)
    app.connect("missing-reference", _code_reference)


# -n (nitpicky): a broken reference fails the build. Types of other projects are not documented
# here (the build stays offline: no intersphinx), so references to them are let through by name.
nitpick_ignore_regex = [
    (r"py:.*", r"(np|numpy|pd|pandas|xr|xarray|dask|distributed|zarr|pydantic|os|pathlib|collections|typing)\b.*"),
    (r"py:class", r"(.*\.)?Annotated|(ge|gt|le|lt)=.*"),  # pydantic's constrained types in signatures
    (
        r"py:.*",
        r"(Any|Path|Mapping|Sequence|Iterator|Iterable|Callable|PathLike|NDArray|ndarray|DataFrame|Dataset|DataArray)",
    ),
]

html_theme = "pydata_sphinx_theme"
html_title = "geosweep"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path: list[str] = []
