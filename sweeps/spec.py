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

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from geosweep.kernels.registry import INTEGRATORS, SYSTEMS, IntegratorDef, SystemDef
from geosweep.sweeps.spec_checks import INTEGRALITY_RTOL, check_spec
from geosweep.sweeps.spec_error import SpecError
from geosweep.sweeps.spec_file import read_spec_file
from geosweep.sweeps.spec_limits import LIMITS, PLAN_LIMITS, check_limits, check_size_limits

#: what the checks' and the file's modules give through this one too
__all__ = ["INTEGRALITY_RTOL", "LIMITS", "PLAN_LIMITS", "SpecError", "SweepSpec", "check_limits", "check_size_limits"]
__all__ += ["build_models", "check_spec", "load_spec", "parse_spec", "read_spec_file"]

Scalar = bool | int | float | str


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
# validation
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
