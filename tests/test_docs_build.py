"""The documentation site (docs/) builds with warnings and broken references as errors, and its
reference pages are generated from the code: every command and option of the parser, every spec
field, every registered system, integrator and stored variable appears without editing a page.

The build executes the one tutorial notebook (docs/tutorials/heavy_top.ipynb, a store of six
small cells made in a temporary folder) and checks what it printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

needs_sphinx = pytest.mark.skipif(
    importlib.util.find_spec("sphinx") is None or importlib.util.find_spec("myst_nb") is None,
    reason="the docs tools are not installed (pip install -c constraints.txt -e '.[test]')",
)


def _reference():
    """docs/_ext/geosweep_reference.py, imported by path (it is a Sphinx extension, not a package)."""
    spec = importlib.util.spec_from_file_location("geosweep_reference", DOCS / "_ext" / "geosweep_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_page_lists_every_command_option_and_exit_code():
    from geosweep.flows.cli import exits
    from geosweep.flows.cli.parser import build_parser

    page = _reference().cli_markdown()
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name, parser in sub.choices.items():
        assert f"## `geosweep {name}`" in page, name
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert option in page, (name, option)
    for path, code in exits.EXIT_CODES:
        assert f"| `{path.replace(':', '.')}` | {code} |" in page, path


def test_spec_page_lists_every_field_and_limit():
    from geosweep.sweeps.spec import SweepSpec
    from geosweep.sweeps.spec_limits import LIMITS

    page = _reference().spec_markdown()
    for name in SweepSpec.model_fields:
        assert f"| `{name}` |" in page, name
    for name in LIMITS:
        assert f"| `{name}` |" in page, name
    assert "| `T` | `float` | required | final time |" in page  # the field's text from the model's docstring


def test_systems_and_integrators_pages_list_every_registered_one():
    import geosweep
    from geosweep.kernels.registry import SYSTEMS

    ref = _reference()
    systems, integrators = ref.systems_markdown(), ref.integrators_markdown()
    for name, sysdef in SYSTEMS.items():
        assert f"## `{name}`" in systems, name
        for p in sysdef.params:
            assert f"| `{p.name}` |" in systems, (name, p.name)
    table = geosweep.integrators()
    for name, row in table.iterrows():
        line = next((x for x in integrators.splitlines() if x.startswith(f"| `{name}` |")), None)
        assert line is not None, name
        assert f"| {row['order']} |" in line, (name, row["order"])


def test_store_page_lists_every_family_variable_and_flag():
    from geosweep.kernels.registry import FAMILIES
    from geosweep.sweeps.store.schema import FLAG_LAYOUT

    ref = _reference()
    page = ref.store_markdown()
    for name in FLAG_LAYOUT:
        assert f"| `{name}` |" in page, name
    models = ref._family_models()
    assert set(models) == set(FAMILIES)
    for family, (_system, model) in models.items():
        section = page.split(f"## Family `{family}`", 1)[1].split("\n## ", 1)[0]
        for d in FAMILIES[family].diagnostics(model):
            assert f"| `{d.name}` |" in section, (family, d.name)
    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.store.template_dataset import template

    ds, _ = template(make_plan(ref.SAMPLE_SPEC))
    coords = page.split("## Coordinates", 1)[1].split("\n## ", 1)[0]
    for name in ds.coords:
        assert f"| `{name}` |" in coords, name
    for name in ds.attrs:
        assert f"`{name}`" in page, name


def test_every_page_is_in_a_toctree():
    """A page left out of every toctree is a warning of the build; listed here so that it names the page."""
    import re

    pages = {p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.md")} | {
        p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.ipynb")
    }
    pages = {p for p in pages if not p.startswith(("_build", "reference/generated", "jupyter_execute"))}
    listed = {"index"}
    for path in DOCS.rglob("*.md"):
        for tree in re.findall(r"```\{toctree\}\n(.*?)```", path.read_text(), flags=re.S):
            for entry in tree.splitlines():
                entry = entry.strip()
                if entry and not entry.startswith(":"):
                    here = PurePosixPath(path.parent.relative_to(DOCS).as_posix())
                    listed.add(entry.lstrip("/") if entry.startswith("/") else (here / entry).as_posix())
    assert pages - listed == set(), pages - listed


@needs_sphinx
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    """``sphinx-build -W --keep-going -n -b html``: every warning (a bad docstring, a broken
    reference or link, a page outside the toctree) fails it; the tutorial runs and its checks pass."""
    out = tmp_path / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html", str(DOCS), str(out)]
    cmd += ["-d", str(tmp_path / "doctrees")]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"sphinx-build exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
    assert (out / "searchindex.js").stat().st_size > 10_000  # the built-in search has an index
    tutorial = (out / "tutorials" / "heavy_top.html").read_text()
    assert "slgi_half energy error ratio h/(h/2): " in tutorial  # the notebook ran at build time
    assert "Traceback" not in tutorial
    api = (out / "reference" / "api.html").read_text()
    for name in ("geosweep.api.integrate", "geosweep.api.run", "geosweep.api.open", "geosweep.solution.Solution"):
        assert f'id="{name}"' in api, name
    assert not list(DOCS.rglob("*.zarr")), "the tutorial wrote its store into docs/"
    shutil.rmtree(out)


def test_citation_file_matches_the_project_and_the_bibliography():
    """CITATION.cff names this version and license, and cites the bibliography's papers (same titles)."""
    import re
    import tomllib

    import yaml

    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == project["version"] and cff["license"] == project["license"]
    rows = [r for r in (DOCS / "bibliography.md").read_text().splitlines() if re.match(r"\| 00\d \|", r)]
    titles = [r.split(" | ")[2] for r in rows]
    assert len(titles) == 5 and titles == [ref["title"] for ref in cff["references"]]


def test_readme_is_a_front_page():
    """At most ~150 lines, one figure, every relative link to a file that exists, and no history:
    no session or issue numbers, no timings of the demo (they live, dated, in benchmarks/README.md)."""
    import re

    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert len(re.findall(r"!\[[^\]]*\]\(", text)) == 1
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (ROOT / target).exists(), target
    for stale in (r"\bsessions?\b", r"\bissue \d+", r"\d+ s (warm|cold)", r"\d+(\.\d+)? MB in \d+ objects"):
        assert not re.search(stale, text, flags=re.I), stale


def test_a_reference_to_code_resolves_only_when_the_object_exists():
    """docs/conf.py lets a docstring's reference to undocumented code through as plain code, but only
    when it names a real object: a renamed or removed one stays a warning, so -n fails the build."""
    spec = importlib.util.spec_from_file_location("geosweep_docs_conf", DOCS / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    assert conf._resolve("geosweep.sweeps.plan.make_plan", None, None) is not None
    assert conf._resolve("make_plan", "geosweep.sweeps.plan", None) is not None  # relative to its module
    assert conf._resolve("ok", "geosweep.api", "Verification") is not None  # relative to its class
    assert conf._resolve("geosweep.sweeps.plan.no_such_function", None, None) is None
    assert conf._resolve("no_such_function", "geosweep.sweeps.plan", None) is None
    assert conf._resolve("geosweep.no_such_module.thing", None, None) is None
    lines = ["max |E − E0| over the window", "| a | b |"]
    conf._plain_bars(None, "function", "f", None, {}, lines)
    assert lines == ["max \\|E − E0\\| over the window", "| a | b |"]  # prose bars escaped, a table row kept
