"""The generated reference pages of the documentation: written from the code at every build.

Each page is a function returning Markdown (MyST): the CLI from ``geosweep``'s argument parser and
exit-code table, the spec schema from :class:`geosweep.sweeps.spec.SweepSpec` and its limits, the
systems and integrators from the registry, the store format from each family's declared
diagnostics and the store's flag layout. As a Sphinx extension it writes them under
``docs/reference/generated/`` when a build starts (a file is rewritten only when its text changes),
so a new command, option, field, system, method or stored variable appears without editing the docs.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "reference" / "generated"


def _cell(text: Any) -> str:
    """One Markdown table cell: pipes escaped, newlines folded."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    head = list(header)
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _code(text: Any) -> str:
    """Inline code that survives backticks in ``text``."""
    s = str(text)
    return f"`` {s} ``" if "`" in s else f"`{s}`"


# --------------------------------------------------------------------------------------------
# the CLI
# --------------------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> tuple[dict[str, argparse.ArgumentParser], dict[str, str]]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    return dict(sub.choices), helps


def _option_row(action: argparse.Action) -> list[str]:
    if action.option_strings:
        name = ", ".join(action.option_strings)
        if action.nargs != 0:
            name += " " + (action.metavar or action.dest.upper())
    else:
        name = action.metavar or action.dest
    default = "" if action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else action.default
    choices = f" (one of: {', '.join(map(str, action.choices))})" if action.choices else ""
    return [_code(name), (action.help or "") % {"default": default} + choices, _code(default) if default != "" else ""]


def cli_markdown() -> str:
    """Every ``geosweep`` command with its usage and options, and the exit codes."""
    from geosweep.flows.cli import exits
    from geosweep.flows.cli.parser import build_parser

    parser = build_parser()
    commands, helps = _subcommands(parser)
    lines = [
        "# Command line: `geosweep`",
        "",
        "Generated from the CLI's argument parser (`geosweep.flows.cli.parser.build_parser`) and its exit-code",
        "table (`geosweep.flows.cli.exits.EXIT_CODES`) when the documentation is built.",
        "",
        parser.description or "",
        "",
        "Options of every command: `-q/--quiet`, `--log-level`, `--import MODULE` (listed with each command).",
        "",
    ]
    for name, p in commands.items():
        lines += [f"## `geosweep {name}`", "", helps.get(name, "").capitalize() + ".", "", "```text"]
        lines += [p.format_usage().strip(), "```", ""]
        rows = [_option_row(a) for a in p._actions if not isinstance(a, argparse._HelpAction)]
        lines += _table(["argument", "what", "default"], rows) + [""]
    lines += ["## Exit codes", "", " ".join((exits.__doc__ or "").split("\n\n")[0].split()), ""]
    names = {exits.OK: "0", exits.TASK_FAILED: "1", exits.REFUSED: "2", exits.MISMATCH: "3"}
    rows = [[_code(path.replace(":", ".")), names.get(code, str(code))] for path, code in exits.EXIT_CODES]
    lines += ["Which exception gives which code (the first match wins):", ""]
    lines += _table(["raised", "exit code"], rows) + [""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# the spec
# --------------------------------------------------------------------------------------------


def _field_docs(doc: str) -> dict[str, str]:
    """``name → text`` from the model's docstring: ``name`` (text), ... ."""
    doc = " ".join(doc.split())
    found: dict[str, str] = {}
    for m in re.finditer(r"``(\w+)`` \(", doc):
        depth, i = 1, m.end()
        while i < len(doc) and depth:
            depth += {"(": 1, ")": -1}.get(doc[i], 0)
            i += 1
        found.setdefault(m.group(1), doc[m.end() : i - 1])
    return found


def _annotation(ann: Any) -> str:
    text = ann.__name__ if isinstance(ann, type) else str(ann)
    return re.sub(r"\b(typing|builtins)\.", "", text)


def spec_markdown() -> str:
    """Every field of a sweep spec, with its type and default, and the size limits."""
    from pydantic_core import PydanticUndefined

    from geosweep.sweeps.spec import SweepSpec
    from geosweep.sweeps.spec_limits import LIMITS, PLAN_LIMITS

    docs = _field_docs(SweepSpec.__doc__ or "")
    docs.setdefault("limits", "raised size limits, by name (below)")
    rows = []
    for name, f in SweepSpec.model_fields.items():
        if f.default is PydanticUndefined and f.default_factory is None:
            default = "required"
        else:
            value = f.default_factory() if f.default_factory else f.default
            default = _code(repr(value) if isinstance(value, str) else value)
        rows.append([_code(name), _code(_annotation(f.annotation)), default, docs.get(name, "")])
    lines = [
        "# Sweep spec schema",
        "",
        "Generated from `geosweep.sweeps.spec.SweepSpec` (the pydantic model every spec file, dict and",
        "`geosweep.integrate` call is validated by) and `geosweep.sweeps.spec_limits.LIMITS`. A spec is a TOML",
        "or YAML file, or a dict, with these top-level keys; any other key is refused naming it.",
        "",
        *_table(["field", "type", "default", "what"], rows),
        "",
        "`params` are the system's parameters ([systems](systems.md)); `integrator_options` the options of",
        "each integrator named in `integrators` ([integrators](integrators.md)).",
        "",
        "## Limits",
        "",
        "Checked before any work; a spec raises one in its `[limits]` table (a positive finite number).",
        "",
    ]
    rows = [
        [_code(k), f"{v:g}", "once the models are built" if k in PLAN_LIMITS else "from the spec alone"]
        for k, v in LIMITS.items()
    ]
    lines += _table(["limit", "default", "checked"], rows) + [""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# systems and integrators
# --------------------------------------------------------------------------------------------


def _bounds(p: Any) -> str:
    parts = [f"{op} {v:g}" for op, v in (("> ", p.gt), ("≥ ", p.ge), ("≤ ", p.le)) if v is not None]
    if p.choices:
        parts.append("one of " + ", ".join(map(repr, p.choices)))
    return "; ".join(s.replace("  ", " ") for s in parts)


def systems_markdown() -> str:
    """Every registered system: family, units, parameters (default, units, bounds) and integrators."""
    import geosweep
    from geosweep.kernels.registry import SYSTEMS

    table = geosweep.systems()
    lines = [
        "# Systems",
        "",
        "Generated from the registry (`geosweep.systems()`, `geosweep.kernels.registry.SYSTEMS`): every",
        "system a spec's `system` may name, with the parameters its `[params]` table takes. A parameter",
        "given as a list becomes a sweep axis. Units: `1` is dimensionless; `time` and `energy` are the",
        "system's own units (below).",
        "",
    ]
    for name, row in table.iterrows():
        sysdef = SYSTEMS[name]
        lines += [f"## `{name}`", "", row["doc"], ""]
        lines += [
            f"Family `{row['family']}`; time in `{row['time_units']}`, energy in `{row['energy_units']}`.",
            "Integrators: " + ", ".join(_code(i) for i in row["integrators"]) + ".",
            "",
        ]
        rows = [[_code(p.name), p.kind.__name__, _code(p.default), p.units, _bounds(p), p.doc] for p in sysdef.params]
        if rows:
            lines += _table(["parameter", "type", "default", "units", "allowed", "what"], rows) + [""]
    return "\n".join(lines)


def integrators_markdown() -> str:
    """Every registered integrator: family, order, adaptivity, options and what it preserves."""
    import geosweep

    table = geosweep.integrators()
    lines = [
        "# Integrators",
        "",
        "Generated from the registry (`geosweep.integrators()`): every method a spec's `integrators` may",
        "name, its nominal order, whether it is adaptive (swept over `tol` instead of `h`), its options",
        "(a spec's `[integrator_options.NAME]` table, with defaults) and what it preserves.",
        "",
    ]
    for family, group in table.groupby("family", sort=False):
        lines += [f"## Family `{family}`", ""]
        rows = [
            [
                _code(name),
                r["order"],
                "yes" if r["adaptive"] else "",
                ", ".join(r["preserves"]) or "—",
                ", ".join(_code(o) for o in r["options"]),
                r["doc"] + (f" Also runs on: {', '.join(r['also'])}." if r["also"] else ""),
            ]
            for name, r in group.iterrows()
        ]
        lines += _table(["integrator", "order", "adaptive", "preserves", "options", "what"], rows) + [""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# the store
# --------------------------------------------------------------------------------------------


def _family_models() -> dict[str, tuple[str, Any]]:
    """One system per family (the first registered) and its model at the declared defaults."""
    from geosweep.kernels.registry import SYSTEMS, load_builtins

    load_builtins()  # every built-in family and system, not only those imported so far

    out: dict[str, tuple[str, Any]] = {}
    for name, sysdef in SYSTEMS.items():
        if sysdef.family not in out:
            out[sysdef.family] = (name, sysdef.build(**{p.name: p.default for p in sysdef.params}))
    return out


def store_markdown() -> str:
    """Every stored variable of every family (dims, units, meaning) and the per-cell flags."""
    from geosweep.kernels.registry import FAMILIES
    from geosweep.sweeps.store.schema import FLAG_LAYOUT, METHOD_AXES

    lines = [
        "# Store format",
        "",
        "Generated from the declarations the store is written from: each family's diagnostics",
        "(`FamilyDef.diagnostics`, listed here for the family's first system at its defaults; a system",
        "may add or drop a few) and the per-cell flags (`geosweep.sweeps.store.schema.FLAG_LAYOUT`).",
        "Every variable has the sweep dimensions first — " + ", ".join(_code(a) for a in METHOD_AXES),
        "(as the spec has them), then each swept parameter in spec order — then the per-cell dimensions",
        "listed. `units` are the system's (`time`, `energy` as in [systems](systems.md)).",
        "",
        "## Per-cell flags (every family)",
        "",
    ]
    rows = [
        [_code(n), dtype, _code(fill), a.get("units", ""), a.get("long_name", "")]
        for n, (dtype, fill, a) in FLAG_LAYOUT.items()
    ]
    lines += _table(["variable", "dtype", "fill", "units", "what"], rows) + [""]
    status = FLAG_LAYOUT["status"][2]
    meanings = dict(zip(status["flag_values"], status["flag_meanings"].split(), strict=True))
    lines += ["`status` values: " + ", ".join(f"{k} `{v}`" for k, v in meanings.items()) + ".", ""]
    for family, (system, model) in _family_models().items():
        famdef = FAMILIES[family]
        lines += [f"## Family `{family}` (as stored for `{system}`)", ""]
        rows = [
            [
                _code(d.name),
                ", ".join(d.dims) or "—",
                d.units,
                d.long_name + (f". {d.description}" if d.description else ""),
                d.computed_over,
            ]
            for d in famdef.diagnostics(model)
        ]
        lines += _table(["variable", "per-cell dims", "units", "what", "computed over"], rows) + [""]
        if famdef.state_labels:
            lines += ["`state` labels: " + " ".join(_code(s) for s in famdef.state_labels) + ".", ""]
    lines += _coordinates_and_attrs()
    lines += [
        "## Objects beside the arrays",
        "",
        "`_checkpoints/<cell>.npz`: the state of a partial cell after its last segment (removed once the",
        "cell's shard is written); `_carries/<shard>.npz`: each finished cell's final carry, from which",
        "`geosweep extend` continues it; `<store>.lease` (beside the store): the lease of the run writing",
        "it. See [how a store stays correct](../../explanation/store.md).",
        "",
    ]
    return "\n".join(lines)


#: a small sweep whose store template shows every kind of coordinate: both method axes (a mixed
#: fixed-step/adaptive grid), a swept parameter that changes the body count, fixed parameters
SAMPLE_SPEC = {
    "name": "sample",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "rkmk45"],
    "h": [0.01],
    "tol": [1e-6],
    "T": 0.1,
    "dt_out": 0.05,
    "params": {"N": [2, 3]},
}


def _coordinates_and_attrs() -> list[str]:
    """The coordinates and group attributes of a store, from the template of :data:`SAMPLE_SPEC`."""
    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.store.template_dataset import template

    ds, _encoding = template(make_plan(SAMPLE_SPEC))
    lines = [
        "## Coordinates",
        "",
        "As the store template writes them (`geosweep.sweeps.store.template_dataset.template`), here for a",
        f"sample sweep of `{SAMPLE_SPEC['system']}` over both method axes and `N`; a store has one",
        "coordinate per sweep axis and per fixed parameter of its own system.",
        "",
    ]
    rows = []
    for name, c in ds.coords.items():
        kind = "fixed parameter" if c.attrs.get("fixed_parameter") else ("scalar" if not c.dims else "")
        rows.append(
            [
                _code(name),
                ", ".join(map(str, c.dims)) or "—",
                c.attrs.get("units", ""),
                c.attrs.get("long_name", ""),
                kind,
            ]
        )
    lines += _table(["coordinate", "dims", "units", "what", ""], rows) + [""]
    lines += [
        "## Group attributes",
        "",
        "Written with the template: " + ", ".join(_code(k) for k in ds.attrs) + ".",
        "Each run then adds its record to `runs` (cells run, and per grow or extension what changed).",
        f"The store format is `geosweep_format = {ds.attrs['geosweep_format']}`; a store of another",
        "format is refused, not misread.",
        "",
    ]
    return lines


#: page name → its generator
PAGES: dict[str, Callable[[], str]] = {
    "cli": cli_markdown,
    "spec": spec_markdown,
    "systems": systems_markdown,
    "integrators": integrators_markdown,
    "store": store_markdown,
}


def write_pages(out: Path = OUT) -> list[Path]:
    """Write every page under ``out``; a file is rewritten only when its text changed (its mtime
    then tells Sphinx nothing changed). Returns the pages written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in PAGES.items():
        path = out / f"{name}.md"
        text = make()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


def _on_builder_inited(app: Any) -> None:
    write_pages()


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
