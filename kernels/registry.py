"""Declarations of systems, integrators and their diagnostics (one source of truth).

Every system and integrator declares its typed parameters (units, default, bounds, doc);
every *family* (a kind of state space: ``"s2"`` for (S²)ⁿ, later ``"se3"``, ``"ts2"`` …)
declares its diagnostics and how to run one cell. Spec validation, ``geosweep systems``,
the store's variables and reports are all generated from these declarations.

Pure Python metadata: no I/O, no Dask, no Prefect.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Param:
    """A typed parameter with units and bounds.

    ``kind`` is one of ``float``, ``int``, ``str``, ``bool``. ``choices`` restricts values;
    ``gt``/``ge``/``le`` are numeric bounds. ``default`` of ``None`` means optional.
    """

    name: str
    kind: type
    default: Any
    units: str = ""
    doc: str = ""
    choices: tuple | None = None
    gt: float | None = None
    ge: float | None = None
    le: float | None = None

    def check(self, value: Any) -> Any:
        """Return ``value`` coerced to ``kind``; raise ``ValueError`` with the reason."""
        if value is None:
            if self.default is None:
                return None
            raise ValueError("must not be null")
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"must be true or false, got {value!r}")
        elif self.kind is int:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"must be an integer, got {value!r}")
            value = int(value)
        elif self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise ValueError(f"must be a number, got {value!r}")
            value = float(value)
            if not np.isfinite(value):
                raise ValueError(f"must be finite, got {value!r}")
        elif self.kind is str:
            if not isinstance(value, str):
                raise ValueError(f"must be a string, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"must be one of {list(self.choices)}, got {value!r}")
        if self.gt is not None and not value > self.gt:
            raise ValueError(f"must be > {self.gt}, got {value!r}")
        if self.ge is not None and not value >= self.ge:
            raise ValueError(f"must be >= {self.ge}, got {value!r}")
        if self.le is not None and not value <= self.le:
            raise ValueError(f"must be <= {self.le}, got {value!r}")
        return value


@dataclass(frozen=True)
class Diagnostic:
    """A stored quantity per cell.

    ``dims`` are the per-cell dimensions (``()`` for a scalar summary, ``("time",)``,
    ``("time", "component")``, ``("body", "component")`` …); sweep dimensions are prepended
    by the store. ``sizes`` maps non-time dims to lengths (``body`` depends on the system).
    """

    name: str
    dims: tuple[str, ...]
    units: str
    long_name: str
    dtype: str = "float64"
    description: str = ""


@dataclass
class CellResult:
    """What running one cell returns: arrays keyed by diagnostic name, plus status."""

    values: dict[str, np.ndarray]
    status: int
    wall_time: float


@dataclass(frozen=True)
class SystemDef:
    """A sweepable system: parameters and a builder returning a family model object."""

    name: str
    family: str
    doc: str
    params: tuple[Param, ...]
    build: Callable[..., Any]
    time_units: str = "1"
    energy_units: str = "1"
    example: dict[str, Any] = field(default_factory=dict)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass(frozen=True)
class IntegratorDef:
    """A sweepable integrator of one family.

    ``applicable(model)`` returns ``None`` or a reason why the integrator cannot run on that
    model (e.g. explicit VI with coupled inertia). ``params`` are integrator options
    (tolerances, iteration limits) settable in a spec.
    """

    name: str
    family: str
    order: int
    doc: str
    params: tuple[Param, ...] = ()
    applicable: Callable[[Any], str | None] = lambda model: None
    adaptive: bool = False
    #: further families whose ``run`` also handles this integrator (e.g. the (S²)ⁿ implicit VI
    #: applied to the pendulum chain through its (S²)ⁿ form)
    also: tuple[str, ...] = ()

    def serves(self, family: str) -> bool:
        return family == self.family or family in self.also


@dataclass(frozen=True)
class FamilyDef:
    """How cells of one family run and what they store.

    ``diagnostics(model)`` lists the stored variables; ``sizes(model)`` gives non-time dim
    lengths (e.g. ``{"body": n, "component": 3}``); ``run(model, integrator, h, n_steps,
    stride, options)`` returns a :class:`CellResult`; ``warmup()`` compiles the kernels on a
    tiny model so workers never compile concurrently inside a sweep.
    """

    name: str
    diagnostics: Callable[[Any], Sequence[Diagnostic]]
    sizes: Callable[[Any], dict[str, int]]
    run: Callable[..., CellResult]
    warmup: Callable[[], None]
    cost_per_step: Callable[[Any, str], float]
    #: True if ``run`` accepts ``options["snapshot_stride"]`` (steps between stored states)
    #: and declares diagnostics on the ``snapshot`` dim, sized by the sweep's ``snapshot_dt``.
    snapshots: bool = False


SYSTEMS: dict[str, SystemDef] = {}
INTEGRATORS: dict[str, IntegratorDef] = {}
FAMILIES: dict[str, FamilyDef] = {}


def register_system(defn: SystemDef) -> SystemDef:
    SYSTEMS[defn.name] = defn
    return defn


def register_integrator(defn: IntegratorDef) -> IntegratorDef:
    INTEGRATORS[defn.name] = defn
    return defn


def register_family(defn: FamilyDef) -> FamilyDef:
    FAMILIES[defn.name] = defn
    return defn


def load_builtins() -> None:
    """Import the modules that register the built-in systems and integrators."""
    import kernels.catalog  # noqa: F401


def integrators_for(system: SystemDef) -> list[IntegratorDef]:
    return [i for i in INTEGRATORS.values() if i.serves(system.family)]
