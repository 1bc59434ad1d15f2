"""The checks of a parsed spec against the registry that build no model (:func:`check_spec`).

Each check is a small function of the spec and its system's declaration (None for an unknown
system) that appends ``(field, reason)`` problems, the field a dotted path (``params.omega[1]``,
``h[0]``, ``integrator_options.rk45.atol``); :data:`CHECKS` runs them in order and every problem
found is reported at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from geosweep.kernels.registry import INTEGRATORS, SYSTEMS, Param, SystemDef, load_for
from geosweep.sweeps.spec_error import SpecError, short
from geosweep.sweeps.spec_limits import check_limits

if TYPE_CHECKING:
    from geosweep.sweeps.spec import SweepSpec

#: Relative tolerance for "T/h is an integer" and "dt_out is a multiple of h".
INTEGRALITY_RTOL = 1e-9

#: Integers a spec may hold: the range of the stored ``int64`` coordinates.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Names of the store's dimensions: no system parameter may take one.
STORE_DIMENSIONS = ("integrator", "h", "tol", "time", "component", "body", "snapshot")

Problems = list[tuple[str, str]]
#: one check: ``(spec, its system's declaration or None, the problems found so far)``, appending to the last
Check = Callable[["SweepSpec", "SystemDef | None", Problems], None]


def check_spec(spec: SweepSpec) -> SweepSpec:
    """Every check against the registry that builds no model; raises :class:`SpecError` listing all problems."""
    load_for(spec.system, spec.integrators)  # only the spec's family is imported (and compiled)
    problems: Problems = check_limits(spec)
    if problems:  # refuse before anything is enumerated (a 10¹⁰-cell grid must not be listed)
        raise SpecError(problems, spec.name)
    sysdef = SYSTEMS.get(spec.system)
    for check in CHECKS:
        check(spec, sysdef, problems)
    if problems:
        raise SpecError(problems, spec.name)
    return spec


# ---------------------------------------------------------------------------------------
# the system and the integrators
# ---------------------------------------------------------------------------------------
def _system(spec: SweepSpec, sysdef: SystemDef | None, problems: Problems) -> None:
    if sysdef is None:
        problems.append(("system", f"unknown system {short(spec.system)}; known: {sorted(SYSTEMS)}"))


def _integrators(spec: SweepSpec, sysdef: SystemDef | None, problems: Problems) -> None:
    """Unique, registered names, each integrating the system's family."""
    if len(set(spec.integrators)) != len(spec.integrators):
        problems.append(("integrators", "names must be unique"))
    for i, name in enumerate(spec.integrators):
        idef = INTEGRATORS.get(name)
        if idef is None:
            problems.append((f"integrators[{i}]", f"unknown integrator {short(name)}; known: {sorted(INTEGRATORS)}"))
        elif sysdef is not None and not idef.serves(sysdef.family):
            problems.append(
                (f"integrators[{i}]", f"{name!r} integrates the {idef.family!r} family, not {spec.system!r}")
            )


def _integrator_options(spec: SweepSpec, sysdef: SystemDef | None, problems: Problems) -> None:
    """Options only of the spec's integrators, each declared by it and a valid value."""
    for name, opts in spec.integrator_options.items():
        idef = INTEGRATORS.get(name)
        if idef is None or name not in spec.integrators:
            problems.append((f"integrator_options.{name}", "not one of this spec's integrators"))
            continue
        declared = {p.name: p for p in idef.params}
        for key, value in opts.items():
            field = f"integrator_options.{name}.{key}"
            if key not in declared:
                problems.append((field, f"unknown option; {name} takes {sorted(declared) or 'none'}"))
            elif (reason := _value_problem(declared[key], value)) is not None:
                problems.append((field, reason))


# ---------------------------------------------------------------------------------------
# step sizes and tolerances: h for fixed-step integrators, tol for adaptive ones
# ---------------------------------------------------------------------------------------
def _h_or_tol(spec: SweepSpec, sysdef: SystemDef | None, problems: Problems) -> None:
    """An ``h`` list exactly when a fixed-step integrator needs it, a ``tol`` list when an adaptive one does."""
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


def _tolerances(spec: SweepSpec, sysdef: SystemDef | None, problems: Problems) -> None:
    """Unique positive tolerances, set by the spec's ``tol`` list (never an integrator option)."""
    if len(set(spec.tol)) != len(spec.tol):
        problems.append(("tol", "tolerances must be unique"))
    for i, tol in enumerate(spec.tol):
        if not (math.isfinite(tol) and tol > 0):
            problems.append((f"tol[{i}]", f"must be > 0, got {tol}"))
    for name in spec.integrators:
        if name in INTEGRATORS and INTEGRATORS[name].adaptive and "tol" in spec.integrator_options.get(name, {}):
            problems.append((f"integrator_options.{name}.tol", "tol is a sweep axis: set the spec's tol list"))


# ---------------------------------------------------------------------------------------
# times: T, dt_out, the step sizes, checkpoints and snapshots on one grid
# ---------------------------------------------------------------------------------------
def _times(spec: SweepSpec, sysdef: SystemDef | None, problems: Problems) -> None:
    """A positive finite ``T`` and ``dt_out``, unique positive step sizes, and (when T and dt_out are
    good) every step size, ``dt_out``, ``checkpoint_every`` and ``snapshot_dt`` on the grid of T."""
    if not (math.isfinite(spec.T) and spec.T > 0):
        problems.append(("T", f"must be a positive finite time, got {spec.T}"))
    if not (math.isfinite(spec.dt_out) and spec.dt_out > 0):
        problems.append(("dt_out", f"must be a positive finite interval, got {spec.dt_out}"))
    if len(set(spec.h)) != len(spec.h):
        problems.append(("h", "step sizes must be unique"))
    times_ok = all(not f.startswith(("T", "dt_out")) for f, _ in problems)
    for i, h in enumerate(spec.h):
        if not (math.isfinite(h) and h > 0):
            problems.append((f"h[{i}]", f"must be > 0, got {h}"))
        elif times_ok:
            problems.extend(_step_on_grid(spec, i, h))
    if times_ok:
        for check in (_dt_out_divides_T, _checkpoint_every, _snapshot_dt):
            problems.extend(check(spec))


def _step_on_grid(spec: SweepSpec, i: int, h: float) -> Problems:
    out = []
    if not _is_multiple(spec.T, h):
        out.append((f"h[{i}]", f"T/h = {spec.T / h:.12g} is not an integer (T = {spec.T}, h = {h})"))
    if not _is_multiple(spec.dt_out, h):
        out.append(
            (f"h[{i}]", f"dt_out = {spec.dt_out} is not a multiple of h = {h} (dt_out/h = {spec.dt_out / h:.12g})")
        )
    return out


def _dt_out_divides_T(spec: SweepSpec) -> Problems:
    if spec.dt_out > spec.T:
        return [("dt_out", f"must be <= T = {spec.T}")]
    if not _is_multiple(spec.T, spec.dt_out):
        return [("dt_out", f"T/dt_out = {spec.T / spec.dt_out:.12g} is not an integer")]
    return []


def _checkpoint_every(spec: SweepSpec) -> Problems:
    ce = spec.checkpoint_every
    if ce is None:
        return []
    if not (math.isfinite(ce) and ce > 0):
        return [("checkpoint_every", f"must be > 0, got {ce}")]
    if not _is_multiple(ce, spec.dt_out):
        return [("checkpoint_every", f"must be a multiple of dt_out = {spec.dt_out}")]
    return []


def _snapshot_dt(spec: SweepSpec) -> Problems:
    sd = spec.snapshot_dt
    if sd is None:
        return []
    if not (math.isfinite(sd) and sd > 0):
        return [("snapshot_dt", f"must be > 0, got {sd}")]
    if not _is_multiple(sd, spec.dt_out):
        return [("snapshot_dt", f"must be a multiple of dt_out = {spec.dt_out}")]
    if sd > spec.T or not _is_multiple(spec.T, sd):
        return [("snapshot_dt", f"T/snapshot_dt = {spec.T / sd:.12g} must be a whole number >= 1")]
    return []


# ---------------------------------------------------------------------------------------
# system parameters
# ---------------------------------------------------------------------------------------
def _params(spec: SweepSpec, sysdef: SystemDef | None, problems: Problems) -> None:
    """Each parameter declared by the system (not renamed, no store dimension's name), an axis of
    unique values, each value valid."""
    if sysdef is None:
        return
    declared = {p.name: p for p in sysdef.params}
    for key, axis in spec.params.items():
        field = f"params.{key}"
        if key in sysdef.renamed:
            problems.append((field, f"renamed to {sysdef.renamed[key]!r} (parameter of {spec.system})"))
        elif key not in declared:
            problems.append((field, f"unknown parameter of {spec.system}; known: {sorted(declared)}"))
        else:
            problems.extend(_param_problems(field, declared[key], axis))


def _param_problems(field: str, param: Param, axis: Any) -> Problems:
    out = []
    if param.name in STORE_DIMENSIONS:
        out.append((field, "name clashes with a store dimension"))
    if not isinstance(axis, list):
        reason = _value_problem(param, axis)
        return out if reason is None else [*out, (field, reason)]
    if not axis:
        out.append((field, "an axis needs at least one value"))
    if len({_value_key(v) for v in axis}) != len(axis):
        out.append((field, "axis values must be unique (by value: 10 == 10.0, -0.0 == 0.0)"))
    for j, v in enumerate(axis):
        if (reason := _value_problem(param, v)) is not None:
            out.append((f"{field}[{j}]", reason))
    return out


#: the checks of :func:`check_spec`, in the order their problems are listed
CHECKS: tuple[Check, ...] = (_system, _integrators, _integrator_options, _h_or_tol, _tolerances, _times, _params)


# ---------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------
def _value_problem(param: Param, value: Any) -> str | None:
    """Why ``value`` cannot be ``param``'s (outside int64, or refused by the declaration), or None."""
    if reason := _int64_problem(value):
        return reason
    try:
        param.check(value)
    except ValueError as e:
        return str(e)
    return None


def _value_key(v: Any) -> tuple[str, Any]:
    """Equal keys for equal axis values: numbers by value (``10 == 10.0``, ``-0.0 == 0.0``, as the
    store's coordinate index compares them), never a number equal to true/false or a string."""
    return ("bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "number", v)


def _int64_problem(v: Any) -> str | None:
    """Why an integer cannot be a spec value (outside int64, the stored coordinates' type), or None."""
    if isinstance(v, int) and not isinstance(v, bool) and not INT64_MIN <= v <= INT64_MAX:
        return f"integer {short(v)} is outside the 64-bit range [-2**63, 2**63 - 1]"
    return None


def _is_multiple(a: float, b: float) -> bool:
    r = a / b
    return abs(r - round(r)) <= INTEGRALITY_RTOL * max(1.0, abs(r)) and round(r) >= 1
