"""The sweep specification: a pydantic model, loaded from TOML/YAML or built in Python.

A spec declares one system and the grid to run it on::

    name = "sphere-demo"
    system = "lj_sphere"
    integrators = ["explicit_vi", "rk4"]
    h = [0.01, 0.005]          # step sizes (time units of the system)
    T = 5.0                    # final time
    dt_out = 0.05              # output sampling interval, a multiple of every h
    [params]                   # system parameters; a list makes a sweep axis
    omega = [0.0, 3.25]
    sense = "co"
    [integrator_options.implicit_vi]
    tol = 1e-14

Validation happens before any work: every problem is reported with the dotted path of the
offending field (``params.omega[1]``, ``h[0]``, ``integrators[2]`` …) and the reason.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from geosweep.kernels.registry import INTEGRATORS, SYSTEMS, IntegratorDef, SystemDef, load_for

Scalar = bool | int | float | str

#: Relative tolerance for "T/h is an integer" and "dt_out is a multiple of h".
INTEGRALITY_RTOL = 1e-9

#: Largest spec file read (bytes); a larger one is refused after this many (a device or FIFO before opening).
MAX_SPEC_BYTES = 4 * 2**20

#: Integers a spec may hold: the range of the stored ``int64`` coordinates.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Characters of a bad value (or name) echoed in a message.
MAX_ECHO = 100

#: Size limits checked before any work (a spec may raise them in its ``[limits]`` table).
LIMITS: dict[str, float] = {
    "cells": 1_000_000,  # grid size
    "steps_per_cell": 1e9,  # T / smallest h
    "samples_per_cell": 10_000_000,  # T / dt_out + 1
    "snapshots_per_cell": 100_000,
    "samples_total": 2e9,  # cells × samples per cell (≈ 16 GB per stored float series)
    "store_bytes": 1e11,  # estimated size of the finished store (uncompressed), bytes
    "task_memory_bytes": 2e9,  # estimated memory of one Dask task (a cell, or a shard's write), bytes
}
#: Limits checked once the models are built (they depend on body counts): see :func:`check_size_limits`.
PLAN_LIMITS = ("store_bytes", "task_memory_bytes")


class SpecError(ValueError):
    """A sweep spec was refused. ``problems`` lists ``(field, reason)`` pairs."""

    #: Problems listed at most (the rest are counted), and characters of a field name or reason.
    MAX_LISTED, MAX_FIELD, MAX_REASON = 20, 200, 2000

    def __init__(self, problems: list[tuple[str, str]], name: str | None = None):
        self.problems = problems
        head = f"invalid sweep spec{f' {_cut(name)!r}' if name else ''}:"
        lines = [(_cut(f, self.MAX_FIELD), _cut(r, self.MAX_REASON)) for f, r in problems[: self.MAX_LISTED]]
        if len(problems) == 1:  # one problem, one line
            super().__init__(f"{head} {lines[0][0]}: {lines[0][1]}")
        else:
            more = [f"  … and {len(problems) - self.MAX_LISTED} more"] if len(problems) > self.MAX_LISTED else []
            super().__init__("\n".join([head] + [f"  - {f}: {r}" for f, r in lines] + more))


class SweepSpec(BaseModel):
    """A validated sweep: system × integrators × h × parameter axes, one final time.

    Fields: ``name`` (used for the store and the flow run), ``system`` (a registered
    system), ``params`` (scalars or lists; lists are sweep axes in the order given),
    ``integrators`` (names), ``h`` (step sizes of fixed-step integrators), ``tol`` (error
    tolerances of adaptive integrators), ``T`` (final time), ``dt_out`` (output interval
    shared by every run), ``snapshot_dt`` (time between stored full states, a multiple of
    dt_out; default: states at t = 0 and t = T only), ``checkpoint_every`` (time between cell
    checkpoints, a multiple of dt_out; default: about two minutes of work per segment; it does
    not change any result, so it is not part of the sweep's identity), ``integrator_options``
    (per-integrator settings), ``description`` (free text).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    system: str
    integrators: list[str] = Field(min_length=1)
    h: list[float] = Field(default_factory=list)
    tol: list[float] = Field(default_factory=list)
    T: float
    dt_out: float
    snapshot_dt: float | None = None
    checkpoint_every: float | None = None
    params: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    integrator_options: dict[str, dict[str, Scalar]] = Field(default_factory=dict)
    limits: dict[str, float] = Field(default_factory=dict)
    description: str = ""

    @field_validator("h", "tol", "integrators", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return list(v) if isinstance(v, list | tuple) else [v]

    @field_validator("h", "tol", "T", "dt_out", "snapshot_dt", "checkpoint_every", mode="before")
    @classmethod
    def _numbers(cls, v: Any) -> Any:
        """Numbers are numbers: no bool, no string (strict); an int is taken as a float."""

        def one(x: Any) -> Any:
            if isinstance(x, int) and not isinstance(x, bool):
                try:
                    return float(x)
                except OverflowError:  # beyond any float: left to the strict check ("a valid number")
                    return x
            return x

        return [one(x) for x in v] if isinstance(v, list) else one(v)

    # ---- derived quantities --------------------------------------------------------
    def canonical_json(self) -> str:
        """Canonical JSON text (sorted keys) that identifies the sweep's results.

        Values, not spellings, identify a sweep: numbers compare by value (10 == 10.0; an integer
        is written as a float when one equals it exactly, as always, and as an integer otherwise, so
        2**53 + 1 and 2**53 differ), and ``checkpoint_every`` (segments are bitwise identical to one
        run), ``limits`` and the free text ``description`` are left out, so a sweep may resume with
        another checkpoint interval or description."""
        data = self.model_dump(mode="json", exclude={"checkpoint_every", "description", "limits"})
        return json.dumps(_canonical_numbers(data), sort_keys=True, separators=(",", ":"))

    @property
    def spec_hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def n_steps(self, h: float) -> int:
        return int(round(self.T / h))

    @property
    def n_time(self) -> int:
        return int(round(self.T / self.dt_out)) + 1

    @property
    def snapshot_interval(self) -> float:
        return self.snapshot_dt if self.snapshot_dt is not None else self.T

    @property
    def n_snapshots(self) -> int:
        return int(round(self.T / self.snapshot_interval)) + 1

    def swept_params(self) -> dict[str, list[Scalar]]:
        return {k: list(v) for k, v in self.params.items() if isinstance(v, list)}

    def fixed_params(self) -> dict[str, Scalar]:
        return {k: v for k, v in self.params.items() if not isinstance(v, list)}

    def param_combinations(self) -> list[dict[str, Scalar]]:
        """Every combination of system parameters (fixed + one value per swept axis)."""
        swept = self.swept_params()
        fixed = self.fixed_params()
        combos = []
        for values in itertools.product(*swept.values()):
            combos.append({**fixed, **dict(zip(swept, values))})
        return combos

    def combination_indices(self) -> list[tuple[int, ...]]:
        """Index of each :meth:`param_combinations` entry along the swept axes (same order)."""
        return list(itertools.product(*(range(len(v)) for v in self.swept_params().values())))

    def system_kwargs(self, combo: dict[str, Scalar], sysdef: SystemDef | None = None) -> dict[str, Any]:
        """Builder arguments: the declared ``Param`` defaults (the only defaults) overridden by ``combo``.

        ``sysdef`` defaults to the registered system of this spec (driver-side convenience).
        """
        sysdef = sysdef or SYSTEMS[self.system]
        kwargs = {p.name: p.default for p in sysdef.params}
        kwargs.update(combo)
        return kwargs

    def options_for(self, integrator: str, idef: IntegratorDef | None = None) -> dict[str, Any]:
        """Integrator options: the declared defaults overridden by ``integrator_options``."""
        idef = idef or INTEGRATORS[integrator]
        opts = {p.name: p.default for p in idef.params}
        opts.update(self.integrator_options.get(integrator, {}))
        return opts

    @property
    def snapshot_every(self) -> int:
        """Output intervals between stored states (0: only t = 0 and t = T), as in ``RunRequest``."""
        return int(round(self.snapshot_dt / self.dt_out)) if self.snapshot_dt is not None else 0


# ---------------------------------------------------------------------------------------
# loading and validation
# ---------------------------------------------------------------------------------------
_UNION_LABELS = frozenset({"bool", "int", "float", "str", "list[union[bool,int,float,str]]"})


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _UNION_LABELS or "[" in str(part):
            continue  # pydantic's union-branch labels
        else:
            out += f".{part}" if out else str(part)
    return out or "spec"


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """Parse a ``.toml`` or ``.yaml``/``.yml`` file into a plain dict (no validation)."""
    path = Path(path)
    if path.suffix not in (".toml", ".yaml", ".yml"):  # checked before anything is read
        raise SpecError([("file", f"{path.name}: use a .toml, .yaml or .yml file")])
    raw = _read_regular_file(path)
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError([("file", f"{path} is larger than {MAX_SPEC_BYTES // 2**20} MiB: not a sweep spec")])
    try:
        text = raw.decode("utf-8-sig")  # a leading byte-order mark is not part of the text
    except UnicodeDecodeError as e:
        where = f"byte 0x{raw[e.start]:02x} at offset {e.start}"
        raise SpecError([("file", f"{path.name} is not UTF-8 text ({where})")]) from None
    key = (path.suffix, hashlib.sha256(raw).digest())
    if key in _PARSED:  # the same text parsed before in this process (firstrun, then make_plan)
        return copy.deepcopy(_PARSED[key])
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        reason = _cut(_one_line_error(e), 300)
        raise SpecError([("file", f"{path.name} is not valid {path.suffix[1:].upper()}: {reason}")]) from None
    if not isinstance(data, dict):
        raise SpecError([("file", f"{path.name} must contain a table/mapping at top level")])
    _PARSED.clear()  # only the last text: a 10⁶-cell spec's seed list is parsed once, not per reader
    _PARSED[key] = copy.deepcopy(data)
    return data


#: process-wide state: the last spec text :func:`read_spec_file` parsed: (suffix, sha256 of its bytes) → its data
_PARSED: dict[tuple[str, bytes], dict[str, Any]] = {}


def _read_regular_file(path: Path) -> bytes:
    """At most ``MAX_SPEC_BYTES + 1`` bytes of a regular file. Opened without blocking and checked
    before reading: a FIFO (which would block), a device (``/dev/zero``) or a directory is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise SpecError([("file", f"cannot read {path}: {e.strerror or e}")]) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpecError([("file", f"{path} is not a regular file (a FIFO, device or directory): not a sweep spec")])
        try:
            return f.read(MAX_SPEC_BYTES + 1)
        except OSError as e:
            raise SpecError([("file", f"cannot read {path}: {e.strerror or e}")]) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader refusing a key given twice in one mapping (YAML itself keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {_short(key)}", key_node.start_mark
                )  # fmt: skip
        return super().construct_mapping(node, deep=deep)


def _one_line_error(e: Exception) -> str:
    """A parser's error on one line: YAML's problem and its position (not the quoted snippet)."""
    if isinstance(e, yaml.MarkedYAMLError) and e.problem:
        mark = e.problem_mark
        return f"{e.problem}" + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark else "")
    return " ".join(str(e).split())


def _cut(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` cut to about ``limit`` characters for a message."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _short(value: Any) -> str:
    """``repr(value)`` cut to about :data:`MAX_ECHO` characters: a bad value as echoed in a message."""
    return _cut(repr(value))


def _union_message(inputs: list[Any], allows_list: bool) -> str:
    """The reason for a value matching no branch of ``Scalar`` (or ``Scalar | list[Scalar]``)."""
    kinds = {dict: "a table", list: "a list", type(None): "null"}
    got = kinds.get(type(inputs[0]), type(inputs[0]).__name__)
    allowed = "a number, a string or true/false" + (", or a list of these" if allows_list else "")
    return f"must be {allowed}, not {got}"


def _problems(e: ValidationError) -> list[tuple[str, str]]:
    """``(field, reason)`` of pydantic's errors: one per field; a value matching no branch of the
    ``Scalar`` union gets one reason naming what is allowed (not the first branch's "valid boolean")."""
    problems: list[tuple[str, str]] = []
    union: dict[str, list[Any]] = {}
    lists: set[str] = set()  # fields whose list branch failed inside the list (its items are reported)
    for err in e.errors():
        loc = err["loc"]
        labels = [i for i, part in enumerate(loc) if isinstance(part, str) and part in _UNION_LABELS]
        if labels and labels[-1] + 1 == len(loc) and err["type"].endswith("_type"):
            field = _loc(loc[: labels[-1]])
            union.setdefault(field, []).append(err.get("input"))
            if str(loc[-1]).startswith("list["):
                lists.add(field)
            continue
        problems.append((_loc(loc), "unknown field" if err["type"] == "extra_forbidden" else err["msg"]))
    nested = {f.rsplit("[", 1)[0] for f in union if f.endswith("]")}
    for field, inputs in union.items():
        if field not in nested:
            problems.append((field, _union_message(inputs, field in lists)))
    seen: dict[str, str] = {}
    for f, m in problems:
        seen.setdefault(f, m)
    return list(seen.items())


def parse_spec(source: str | Path | dict | SweepSpec) -> SweepSpec:
    """Parse a spec (file path, dict or :class:`SweepSpec`) and run every check that builds no model."""
    if isinstance(source, SweepSpec):
        return check_spec(source)
    data = read_spec_file(source) if isinstance(source, str | Path) else dict(source)
    name = data.get("name") if isinstance(data.get("name"), str) else None
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(_problems(e), name) from None
    return check_spec(spec)


def load_spec(source: str | Path | dict | SweepSpec) -> SweepSpec:
    """Load and fully validate a spec (models are built to check them, then dropped).

    To run a sweep use :func:`geosweep.sweeps.plan.make_plan`, which validates once and keeps the models.
    """
    spec = parse_spec(source)
    build_models(spec, SYSTEMS[spec.system], {n: INTEGRATORS[n] for n in spec.integrators})
    return spec


def build_models(spec: SweepSpec, sysdef: SystemDef, idefs: dict[str, IntegratorDef]) -> dict[tuple[int, ...], Any]:
    """Build the model of every parameter combination once, keyed by its index along the swept axes.

    A builder error or an integrator not applicable to a model raises :class:`SpecError`.
    """
    models: dict[tuple[int, ...], Any] = {}
    shared: dict[tuple, Any] = {}
    for key, combo in zip(spec.combination_indices(), spec.param_combinations()):
        try:
            model = sysdef.build(**spec.system_kwargs(combo, sysdef))
        except (ValueError, TypeError) as e:
            raise SpecError([("params", f"{e} (at {combo or 'defaults'})")], spec.name) from None
        problems = []
        for i, name in enumerate(spec.integrators):
            reason = idefs[name].applicable(model)
            if reason:
                problems.append((f"integrators[{i}]", f"{reason} (system {spec.system}, {combo or 'defaults'})"))
        if problems:
            raise SpecError(problems, spec.name)
        models[key] = _share_large_arrays(model, shared)
    return models


#: Arrays from this many bytes up that are equal in several models are kept once (:func:`build_models`).
SHARE_BYTES = 65536


def _share_large_arrays(model: Any, seen: dict[tuple, Any]) -> Any:
    """``model`` with each large array attribute replaced by an equal one an earlier model holds.

    Models of one sweep often carry the same large array (e.g. the 642 × 642 mass matrix of every LJ
    sphere model): one object is built into the plan and pickled once per bundle instead of once per
    model. Values are unchanged (the same bytes, dtype and shape)."""
    attrs = getattr(model, "__dict__", None)
    if not attrs:
        return model
    for name, value in attrs.items():
        if isinstance(value, np.ndarray) and value.nbytes >= SHARE_BYTES and value.flags.c_contiguous:
            key = (value.shape, value.dtype.str, hashlib.blake2b(value.data).digest())
            other = seen.setdefault(key, value)
            if other is not value and np.array_equal(other, value):
                object.__setattr__(model, name, other)
    return model


def check_spec(spec: SweepSpec) -> SweepSpec:
    """Every check against the registry that builds no model; raises :class:`SpecError` listing all problems."""
    load_for(spec.system, spec.integrators)  # only the spec's family is imported (and compiled)
    problems: list[tuple[str, str]] = check_limits(spec)
    if problems:  # refuse before anything is enumerated (a 10¹⁰-cell grid must not be listed)
        raise SpecError(problems, spec.name)
    sysdef = SYSTEMS.get(spec.system)
    if sysdef is None:
        problems.append(("system", f"unknown system {_short(spec.system)}; known: {sorted(SYSTEMS)}"))

    # integrators
    if len(set(spec.integrators)) != len(spec.integrators):
        problems.append(("integrators", "names must be unique"))
    for i, name in enumerate(spec.integrators):
        idef = INTEGRATORS.get(name)
        if idef is None:
            problems.append((f"integrators[{i}]", f"unknown integrator {_short(name)}; known: {sorted(INTEGRATORS)}"))
        elif sysdef is not None and not idef.serves(sysdef.family):
            problems.append(
                (f"integrators[{i}]", f"{name!r} integrates the {idef.family!r} family, not {spec.system!r}")
            )
    for name, opts in spec.integrator_options.items():
        idef = INTEGRATORS.get(name)
        if idef is None or name not in spec.integrators:
            problems.append((f"integrator_options.{name}", "not one of this spec's integrators"))
            continue
        declared = {p.name: p for p in idef.params}
        for key, value in opts.items():
            if key not in declared:
                problems.append(
                    (f"integrator_options.{name}.{key}", f"unknown option; {name} takes {sorted(declared) or 'none'}")
                )
                continue
            if reason := _int64_problem(value):
                problems.append((f"integrator_options.{name}.{key}", reason))
                continue
            try:
                declared[key].check(value)
            except ValueError as e:
                problems.append((f"integrator_options.{name}.{key}", str(e)))

    # step sizes / tolerances: h for fixed-step integrators, tol for adaptive ones
    known = [n for n in spec.integrators if n in INTEGRATORS]
    adaptive = [n for n in known if INTEGRATORS[n].adaptive]
    fixed = [n for n in known if not INTEGRATORS[n].adaptive]
    if fixed and not spec.h:
        problems.append(("h", f"needs at least one step size for the fixed-step integrators {fixed}"))
    if spec.h and known and not fixed:
        problems.append(("h", "no fixed-step integrator in this spec uses h; sweep tol instead"))
    if adaptive and not spec.tol:
        problems.append(("tol", f"needs at least one tolerance for the adaptive integrators {adaptive}"))
    if spec.tol and known and not adaptive:
        problems.append(("tol", "no adaptive integrator in this spec uses tol; sweep h instead"))
    if len(set(spec.tol)) != len(spec.tol):
        problems.append(("tol", "tolerances must be unique"))
    for i, tol in enumerate(spec.tol):
        if not (math.isfinite(tol) and tol > 0):
            problems.append((f"tol[{i}]", f"must be > 0, got {tol}"))
    for name in adaptive:
        if "tol" in spec.integrator_options.get(name, {}):
            problems.append((f"integrator_options.{name}.tol", "tol is a sweep axis: set the spec's tol list"))

    # times
    if not (math.isfinite(spec.T) and spec.T > 0):
        problems.append(("T", f"must be a positive finite time, got {spec.T}"))
    if not (math.isfinite(spec.dt_out) and spec.dt_out > 0):
        problems.append(("dt_out", f"must be a positive finite interval, got {spec.dt_out}"))
    if len(set(spec.h)) != len(spec.h):
        problems.append(("h", "step sizes must be unique"))
    times_ok = not problems or all(not f.startswith(("T", "dt_out")) for f, _ in problems)
    for i, h in enumerate(spec.h):
        if not (math.isfinite(h) and h > 0):
            problems.append((f"h[{i}]", f"must be > 0, got {h}"))
            continue
        if not times_ok:
            continue
        if not _is_multiple(spec.T, h):
            problems.append((f"h[{i}]", f"T/h = {spec.T / h:.12g} is not an integer (T = {spec.T}, h = {h})"))
        if not _is_multiple(spec.dt_out, h):
            problems.append(
                (f"h[{i}]", f"dt_out = {spec.dt_out} is not a multiple of h = {h} (dt_out/h = {spec.dt_out / h:.12g})")
            )
    if times_ok and spec.dt_out > 0 and spec.T > 0:
        if spec.dt_out > spec.T:
            problems.append(("dt_out", f"must be <= T = {spec.T}"))
        elif not _is_multiple(spec.T, spec.dt_out):
            problems.append(("dt_out", f"T/dt_out = {spec.T / spec.dt_out:.12g} is not an integer"))

    if spec.checkpoint_every is not None and times_ok and spec.dt_out > 0 and spec.T > 0:
        ce = spec.checkpoint_every
        if not (math.isfinite(ce) and ce > 0):
            problems.append(("checkpoint_every", f"must be > 0, got {ce}"))
        elif not _is_multiple(ce, spec.dt_out):
            problems.append(("checkpoint_every", f"must be a multiple of dt_out = {spec.dt_out}"))

    if spec.snapshot_dt is not None and times_ok and spec.dt_out > 0 and spec.T > 0:
        sd = spec.snapshot_dt
        if not (math.isfinite(sd) and sd > 0):
            problems.append(("snapshot_dt", f"must be > 0, got {sd}"))
        elif not _is_multiple(sd, spec.dt_out):
            problems.append(("snapshot_dt", f"must be a multiple of dt_out = {spec.dt_out}"))
        elif sd > spec.T or not _is_multiple(spec.T, sd):
            problems.append(("snapshot_dt", f"T/snapshot_dt = {spec.T / sd:.12g} must be a whole number >= 1"))

    # system parameters
    if sysdef is not None:
        declared = {p.name: p for p in sysdef.params}
        for key, axis in spec.params.items():
            if key in sysdef.renamed:
                problems.append((f"params.{key}", f"renamed to {sysdef.renamed[key]!r} (parameter of {spec.system})"))
                continue
            if key not in declared:
                problems.append((f"params.{key}", f"unknown parameter of {spec.system}; known: {sorted(declared)}"))
                continue
            if key in ("integrator", "h", "tol", "time", "component", "body", "snapshot"):
                problems.append((f"params.{key}", "name clashes with a store dimension"))
            values = axis if isinstance(axis, list) else [axis]
            if isinstance(axis, list):
                if not axis:
                    problems.append((f"params.{key}", "an axis needs at least one value"))
                if len({_value_key(v) for v in axis}) != len(axis):
                    problems.append((f"params.{key}", "axis values must be unique (by value: 10 == 10.0, -0.0 == 0.0)"))
            for j, v in enumerate(values):
                field = f"params.{key}[{j}]" if isinstance(axis, list) else f"params.{key}"
                if reason := _int64_problem(v):
                    problems.append((field, reason))
                    continue
                try:
                    declared[key].check(v)
                except ValueError as e:
                    problems.append((field, str(e)))

    if problems:
        raise SpecError(problems, spec.name)
    return spec


def _canonical_numbers(x: Any) -> Any:
    """Numbers as the spec hash sees them: an integer as the float equal to it (how every spec has
    always been hashed: ``10`` and ``10.0`` are one sweep), or as itself when no float is (above 2**53:
    ``2**53 + 1`` must not be hashed as ``2**53``)."""
    if isinstance(x, dict):
        return {k: _canonical_numbers(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_canonical_numbers(v) for v in x]
    if isinstance(x, int) and not isinstance(x, bool):
        try:
            f = float(x)
        except OverflowError:
            return x
        return f if int(f) == x else x
    return x


def _value_key(v: Any) -> tuple[str, Any]:
    """Equal keys for equal axis values: numbers by value (``10 == 10.0``, ``-0.0 == 0.0``, as the
    store's coordinate index compares them), never a number equal to true/false or a string."""
    return ("bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "number", v)


def _int64_problem(v: Any) -> str | None:
    """Why an integer cannot be a spec value (outside int64, the stored coordinates' type), or None."""
    if isinstance(v, int) and not isinstance(v, bool) and not INT64_MIN <= v <= INT64_MAX:
        return f"integer {_short(v)} is outside the 64-bit range [-2**63, 2**63 - 1]"
    return None


def check_limits(spec: SweepSpec) -> list[tuple[str, str]]:
    """Sizes against :data:`LIMITS` (raised by the spec's ``limits`` table), before anything is built."""
    problems: list[tuple[str, str]] = []
    for key, value in spec.limits.items():
        if key not in LIMITS:
            problems.append((f"limits.{key}", f"unknown limit; known: {sorted(LIMITS)}"))
        elif not (math.isfinite(value) and value > 0):  # a NaN limit would compare False: no bound
            problems.append((f"limits.{key}", f"must be a positive finite number, got {value}"))
    lim = {**LIMITS, **{k: v for k, v in spec.limits.items() if k in LIMITS and math.isfinite(v) and v > 0}}
    if not (spec.T > 0 and spec.dt_out > 0 and math.isfinite(spec.T) and math.isfinite(spec.dt_out)):
        return problems
    n_steps_axes = max(len(spec.h), 1) * max(len(spec.tol), 1)
    cells = len(spec.integrators) * n_steps_axes
    for v in spec.params.values():
        if isinstance(v, list):
            cells *= max(len(v), 1)

    def over(field: str, key: str, value: float, what: str) -> None:
        if value > lim[key]:
            problems.append(
                (field, f"{what} = {value:.4g} exceeds the limit {lim[key]:.4g} ({key}); "
                        f"set [limits] {key} = … in the spec if you mean it")
            )  # fmt: skip

    over("params", "cells", cells, "grid cells")
    good_h = [h for h in spec.h if math.isfinite(h) and h > 0]
    if good_h:
        over("h", "steps_per_cell", spec.T / min(good_h), "steps per cell (T / smallest h)")
    samples = spec.T / spec.dt_out + 1
    over("dt_out", "samples_per_cell", samples, "samples per cell (T / dt_out + 1)")
    over("params", "samples_total", cells * samples, "stored samples (cells × samples per cell)")
    if spec.snapshot_dt is not None and spec.snapshot_dt > 0:
        over("snapshot_dt", "snapshots_per_cell", spec.T / spec.snapshot_dt + 1, "snapshots per cell")
    return problems


def _bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def check_size_limits(spec: SweepSpec, estimate: dict[str, float], cells: int) -> None:
    """The plan's estimates (``store_bytes``, ``task_memory_bytes``) against :data:`LIMITS` and the spec's
    ``[limits]``; raises :class:`SpecError` naming the limit, before the store or a cluster exists."""
    lim = {**LIMITS, **{k: v for k, v in spec.limits.items() if k in LIMITS}}
    per_cell = _bytes(float(estimate.get("cell_bytes", 0.0)))
    what = {
        "store_bytes": f"estimated store size {{}} ({cells} cells × {per_cell} per cell)",
        "task_memory_bytes": f"estimated memory per task {{}} ({per_cell} per cell)",
    }
    problems = []
    for key in PLAN_LIMITS:
        value = float(estimate.get(key, 0.0))
        if value > lim[key]:
            problems.append(
                (key, f"{what[key].format(_bytes(value))} exceeds the limit {_bytes(lim[key])} "
                                  f"({key}); set [limits] {key} = {value:.3g} in the spec if you mean it")
            )  # fmt: skip
    if problems:
        raise SpecError(problems, spec.name)


def _is_multiple(a: float, b: float) -> bool:
    r = a / b
    return abs(r - round(r)) <= INTEGRALITY_RTOL * max(1.0, abs(r)) and round(r) >= 1
