"""Lie group integrators generated from the tableaux: one place turns every method record of
:data:`geosweep.kernels.lie.tableaux.METHODS` into a registry entry of every family with a group action.

A family supplies a :class:`LieAction`: the integrator name prefix, how its group acts (for the
docs), its options, its cost per step as a function of the method (the record gives the
evaluations per step) and, once with the reason, any method its action cannot run. Name, order,
adaptivity, the controller defaults and the evaluations per step come from the method record
(:class:`geosweep.kernels.lie.tableaux.Method`), so a method added to the tableaux appears in every family.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from geosweep.kernels.lie import tableaux
from geosweep.kernels.lie.tableaux import AMBIENT, Method
from geosweep.kernels.registry import IntegratorDef, Param


@dataclass(frozen=True)
class LieAction:
    """What a family with a Lie group action supplies to offer the methods of the tableaux.

    ``prefix`` + method name is the integrator name; ``group`` and ``ambient`` describe the
    action and the ambient space of the ``*_ambient`` baselines (appended to the method's doc);
    ``params`` are every integrator's options, ``adaptive_params`` the controller's (prepended
    for variable-step methods), ``ambient_params`` extra options of the ambient baselines;
    ``step_cost(model, method)`` is single-core seconds per step (``method.evals_per_step``
    f-evaluations); ``unsupported`` maps a method this action cannot run to the reason; ``preserves``
    what its group methods keep (:attr:`IntegratorDef.preserves`).
    """

    family: str
    prefix: str
    group: str
    ambient: str
    params: tuple[Param, ...]
    adaptive_params: tuple[Param, ...]
    step_cost: Callable[[Any, Method], float]
    ambient_params: tuple[Param, ...] = ()
    unsupported: Mapping[str, str] = field(default_factory=dict)
    #: what every method of the action keeps to round-off (the manifold it moves on); the ambient baselines keep none
    preserves: tuple[str, ...] = ()

    def methods(self, table: Mapping[str, Method] | None = None) -> dict[str, Method]:
        """Integrator name → method record, for every method this action supports."""
        table = tableaux.METHODS if table is None else table
        return {self.prefix + name: m for name, m in table.items() if name not in self.unsupported}

    def integrator(self, m: Method) -> IntegratorDef:
        """The registry entry of method ``m`` in this family."""
        ambient = m.kind == AMBIENT
        params = (controller_params(self.adaptive_params, m) if m.adaptive else ()) + self.params
        doc = f"{m.doc} [{self.ambient if ambient else self.group}]"
        return IntegratorDef(
            self.prefix + m.name,
            self.family,
            m.order,
            doc,
            params=params + (self.ambient_params if ambient else ()),
            adaptive=m.adaptive,
            preserves=() if ambient else self.preserves,
        )

    def integrators(self, table: Mapping[str, Method] | None = None) -> tuple[IntegratorDef, ...]:
        """The registry entries of every supported method, in the tableaux' order."""
        return tuple(self.integrator(m) for m in self.methods(table).values())

    def find(self, integrator: str) -> Method | None:
        """The method record of ``integrator`` if it is one of this family's (read at call time, so a
        method :func:`register` added is found), else ``None``."""
        name = integrator.removeprefix(self.prefix)
        if not integrator.startswith(self.prefix) or name in self.unsupported:
            return None
        return tableaux.METHODS.get(name)

    def method(self, integrator: str) -> Method:
        """The method record of one of this family's integrators (ValueError if unknown)."""
        name = integrator.removeprefix(self.prefix) if integrator.startswith(self.prefix) else None
        if name is None or name not in tableaux.METHODS or name in self.unsupported:
            raise ValueError(
                f"unknown {self.family} Lie group integrator {integrator!r}; choose from {sorted(self.methods())}"
            )
        return tableaux.METHODS[name]

    def options(self, integrator: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` over the controller defaults of a variable-step method (e.g. DOP853's
        exponent 1/8), so that a run outside a sweep uses the declared defaults too."""
        m = self.method(integrator)
        if not m.adaptive:
            return dict(options)
        return {**{p.name: p.default for p in controller_params(self.adaptive_params, m)}, **options}

    def cost_per_step(self, model: Any, integrator: str) -> float:
        return self.step_cost(model, self.method(integrator))


def controller_params(params: tuple[Param, ...], m: Method) -> tuple[Param, ...]:
    """The controller options with the method's own default exponent, if it has one."""
    if m.controller is None:
        return params
    alpha, doc = m.controller
    return tuple(dataclasses.replace(p, default=alpha, doc=doc) if p.name == "exponent" else p for p in params)


#: process-wide state: the families that offer the tableaux' methods, by family name (:func:`offer`)
ACTIONS: dict[str, LieAction] = {}


def offer(action: LieAction) -> tuple[IntegratorDef, ...]:
    """A family's registry entries of every method its action supports; the action is kept so that
    :func:`register` adds a method to it later (a family declares ``INTEGRATORS = offer(LIE)``)."""
    ACTIONS[action.family] = action
    return action.integrators()


def register(m: Method) -> tuple[IntegratorDef, ...]:
    """Add method ``m`` (a :class:`~geosweep.kernels.lie.tableaux.Method`, e.g. from
    :func:`~geosweep.kernels.lie.tableaux.from_tableau`) to the tableaux and register it in every
    family with a group action (loading the built-in families): the entries it got."""
    from geosweep.kernels import registry

    registry.load_builtins()
    if m.name in tableaux.METHODS:
        raise ValueError(f"method {m.name!r} exists already")
    tableaux.METHODS[m.name] = m
    return tuple(registry.register_integrator(a.integrator(m)) for a in ACTIONS.values() if m.name not in a.unsupported)


def unregister(name: str) -> None:
    """Remove a method added by :func:`register` from the tableaux and from every family."""
    from geosweep.kernels import registry

    tableaux.METHODS.pop(name, None)
    for a in ACTIONS.values():
        registry.INTEGRATORS.pop(a.prefix + name, None)
