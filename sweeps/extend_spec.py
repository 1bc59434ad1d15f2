"""The spec of an extended store: the store's own spec with a later ``T`` (first steps pinned for a
store older than the T-independent starting-step rule), and :class:`ExtendError`, the refusal of an
extension."""

from __future__ import annotations

import json
from typing import Any

from geosweep.sweeps.store import FIRST_STEP_ATTR


class ExtendError(ValueError):
    """A store cannot be extended as asked (exit 2, one line naming the problem)."""


def stored_spec(ref) -> dict[str, Any]:
    """The spec a store was written for (its ``spec`` attribute, as a dict)."""
    attrs = dict(ref.open_group("r").attrs)
    text = attrs.get("spec")
    if not isinstance(text, str):
        raise ExtendError(f"store {ref.url}: no geosweep spec in its attributes; nothing to extend")
    return json.loads(text)


def legacy_first_steps(ref) -> bool:
    """True for a store written before the T-independent starting-step rule: its adaptive cells
    without an explicit ``h0`` started from T/100 (:data:`geosweep.sweeps.store.FIRST_STEP_ATTR` absent)."""
    return FIRST_STEP_ATTR not in ref.open_group("r").attrs


def _effective_h0(spec: dict[str, Any], name: str) -> float:
    h0 = float(spec.get("integrator_options", {}).get(name, {}).get("h0", 0.0))
    return h0 if h0 > 0 else float(spec["T"]) / 100.0


def pin_first_steps(old: dict[str, Any], new: dict[str, Any], legacy: bool = True) -> dict[str, Any]:
    """``new`` (a copy) with, when ``legacy`` (a store whose default first step was T/100: a longer
    T would change it), ``h0`` set for each adaptive integrator that takes it to the first step the
    store used, unless ``new`` sets one. Not ``legacy``: ``new`` as it is (the default first step
    does not depend on T)."""
    from geosweep.kernels.registry import INTEGRATORS

    new = json.loads(json.dumps(new))
    if not legacy:
        return new
    for name in new.get("integrators", []):
        idef = INTEGRATORS.get(name)
        if idef is None or not idef.adaptive or not any(p.name == "h0" for p in idef.params):
            continue
        opts = new.setdefault("integrator_options", {}).setdefault(name, {})
        if float(opts.get("h0", 0.0)) <= 0:
            opts["h0"] = _effective_h0(old, name)
    return new


def stored_first_steps(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``new`` with the ``h0`` the store's spec ``old`` pinned (an earlier extension) for each
    integrator of ``new`` that does not set one: the spec a user wrote for the first run still
    names the store's sweep after it was extended."""
    new = json.loads(json.dumps(new))
    for name, opts in old.get("integrator_options", {}).items():
        if name in new.get("integrators", []) and "h0" in opts:
            mine = new.setdefault("integrator_options", {}).setdefault(name, {})
            mine.setdefault("h0", opts["h0"])
    return new


def grown_spec(ref, T: float) -> dict[str, Any]:
    """The store's spec with final time ``T`` (a store older than the starting-step rule: its first
    steps pinned, :func:`pin_first_steps`)."""
    old = stored_spec(ref)
    return typed(pin_first_steps(old, {**old, "T": float(T)}, legacy_first_steps(ref)))


def typed(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec from its canonical JSON (integers written as floats) with integer-kind parameters
    and integrator options as integers again, so that it validates as the original did."""
    from geosweep.kernels.registry import INTEGRATORS, SYSTEMS, load_for

    load_for(spec.get("system", ""))

    def as_kind(kind: type, v: Any) -> Any:
        if isinstance(v, list):
            return [as_kind(kind, x) for x in v]
        return int(v) if kind is int and isinstance(v, float) and v.is_integer() else v

    out = json.loads(json.dumps(spec))
    sysdef = SYSTEMS.get(out.get("system", ""))
    if sysdef is not None:
        kinds = {p.name: p.kind for p in sysdef.params}
        out["params"] = {k: as_kind(kinds.get(k, object), v) for k, v in out.get("params", {}).items()}
    for name, opts in out.get("integrator_options", {}).items():
        idef = INTEGRATORS.get(name)
        kinds = {p.name: p.kind for p in idef.params} if idef is not None else {}
        out["integrator_options"][name] = {k: as_kind(kinds.get(k, object), v) for k, v in opts.items()}
    return out


#: spec fields that are not part of a sweep's identity (kept from the asked spec when growing)
NOT_IDENTITY = ("checkpoint_every", "limits", "description")


def only_T_differs(old: dict[str, Any], new: dict[str, Any]) -> bool:
    a = {k: v for k, v in old.items() if k != "T"}
    b = {k: v for k, v in new.items() if k != "T"}
    return a == b
