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


def _echo(value: Any, limit: int = 100) -> str:
    """``repr(value)`` cut to about ``limit`` characters (a bad value as echoed in a message)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


@dataclass(frozen=True)
class Param:
    """A typed parameter with units and bounds.

    ``kind`` is one of ``float``, ``int``, ``str``, ``bool``. ``choices`` restricts values;
    ``gt``/``ge``/``le`` are numeric bounds. ``default`` of ``None`` means optional.

    >>> from geosweep.kernels.registry import Param
    >>> M = Param("M", float, 15.0, units="kg", doc="mass of the top", gt=0.0)
    >>> M.check(10)
    10.0
    >>> M.check(-1.0)
    Traceback (most recent call last):
    ...
    ValueError: must be > 0.0, got -1.0
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
                raise ValueError(f"must be true or false, got {_echo(value)}")
        elif self.kind is int:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"must be an integer, got {_echo(value)}")
            value = int(value)
        elif self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise ValueError(f"must be a number, got {_echo(value)}")
            value = float(value)
            if not np.isfinite(value):
                raise ValueError(f"must be finite, got {_echo(value)}")
        elif self.kind is str:
            if not isinstance(value, str):
                raise ValueError(f"must be a string, got {_echo(value)}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"must be one of {list(self.choices)}, got {_echo(value)}")
        if self.gt is not None and not value > self.gt:
            raise ValueError(f"must be > {self.gt}, got {_echo(value)}")
        if self.ge is not None and not value >= self.ge:
            raise ValueError(f"must be >= {self.ge}, got {_echo(value)}")
        if self.le is not None and not value <= self.le:
            raise ValueError(f"must be <= {self.le}, got {_echo(value)}")
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
    #: for summaries: ``"every step"`` (running over every accepted step) or ``"samples"``
    #: (computed from the stored samples); stored as the variable's ``computed_over`` attr
    computed_over: str = ""


@dataclass
class CellResult:
    """What running one cell returns: arrays keyed by stored name, plus status and wall time (s)."""

    values: dict[str, np.ndarray]
    status: int
    wall_time: float


@dataclass(frozen=True)
class RunRequest:
    """The time grid of one cell: what to integrate, independent of the method's internals.

    ``T`` final time and ``dt_out`` output interval (samples at ``t_k = k·dt_out``, ``k = 0..n_out``,
    with ``n_out = round(T/dt_out)``). Fixed-step cells set ``h`` (a divisor of ``dt_out``);
    adaptive cells set ``tol`` instead (``h`` is ``None``: the controller chooses the steps).
    ``snapshot_every``: output intervals between stored full states (0: only t = 0 and t = T).

    >>> from geosweep.kernels.registry import RunRequest
    >>> RunRequest(T=1.0, dt_out=0.1, h=0.01).adaptive  # 10 steps per output interval
    False
    >>> RunRequest(T=1.0, dt_out=0.1)
    Traceback (most recent call last):
    ...
    ValueError: a RunRequest needs exactly one of h (fixed step) or tol (adaptive)
    """

    T: float
    dt_out: float
    h: float | None = None
    tol: float | None = None
    snapshot_every: int = 0

    def __post_init__(self) -> None:
        if (self.h is None) == (self.tol is None):
            raise ValueError("a RunRequest needs exactly one of h (fixed step) or tol (adaptive)")

    @property
    def adaptive(self) -> bool:
        return self.h is None

    @property
    def n_out(self) -> int:
        """Number of output intervals (samples = n_out + 1)."""
        return int(round(self.T / self.dt_out))

    @property
    def n_steps(self) -> int:
        """Fixed step: number of steps of size h to reach T."""
        if self.h is None:
            raise ValueError("n_steps is defined for fixed-step requests only")
        return int(round(self.T / self.h))

    @property
    def stride(self) -> int:
        """Fixed step: steps per output interval."""
        if self.h is None:
            raise ValueError("stride is defined for fixed-step requests only")
        return int(round(self.dt_out / self.h))

    @property
    def n_snapshots(self) -> int:
        every = self.snapshot_every if self.snapshot_every > 0 else self.n_out
        return self.n_out // max(every, 1) + 1


@dataclass(frozen=True)
class Figure:
    """A report figure a family or system declares: ``name`` (the file stem) and ``maker``, the
    path ``"package.module:function"`` of ``function(ds, **options) -> (figure or None, caption,
    notes)`` called on the report's slice (a path, so that kernels never import matplotlib; a
    maker taking ``times`` gets the report's ``ke_times``)."""

    name: str
    maker: str


@dataclass(frozen=True)
class SystemDef:
    """A sweepable system: parameters and a builder returning a family model object.

    >>> import geosweep
    >>> top = geosweep.system("heavy_top").sysdef
    >>> top.family, top.param("M").units, top.time_units, top.energy_units
    ('top', 'kg', 's', 'J')
    >>> top.build(**{**{p.name: p.default for p in top.params}, "M": 10.0}).name
    'heavy_top'
    """

    name: str
    family: str
    doc: str
    params: tuple[Param, ...]
    build: Callable[..., Any]
    time_units: str = "1"
    energy_units: str = "1"
    example: dict[str, Any] = field(default_factory=dict)
    #: the physically meaningful slice ``geosweep report`` shows by default ({param: value}),
    #: e.g. the sphere's vortex case; parameters not named here take their declared default if
    #: swept, else their first swept value
    report_sel: dict[str, Any] = field(default_factory=dict)
    #: former parameter names → current ones, so that an old spec is refused naming the new name
    renamed: dict[str, str] = field(default_factory=dict)
    #: report figures specific to this system (before its family's :attr:`FamilyDef.figures`)
    figures: tuple[Figure, ...] = ()

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
    #: ``order_on(model) -> int``: the order on that model when it differs from ``order`` (e.g. a
    #: method that is order 2 on additively separable Hamiltonians and ``order`` otherwise)
    order_on: Callable[[Any], int] | None = None
    #: what the method keeps exactly (to round-off, or up to a stated approximation), in words:
    #: ``("symplectic", "|q_i| = 1")``; empty for a baseline that keeps nothing (``geosweep.integrators()``)
    preserves: tuple[str, ...] = ()

    def serves(self, family: str) -> bool:
        return family == self.family or family in self.also

    def order_for(self, model: Any) -> int:
        """The order of accuracy on ``model`` (the store's ``integrator_order``)."""
        return int(self.order_on(model)) if self.order_on is not None else self.order


@dataclass(frozen=True)
class FamilyDef:
    """How cells of one family run and what they store.

    ``diagnostics(model)`` lists the stored variables; ``sizes(model)`` gives per-cell dim
    lengths besides ``time``/``snapshot`` (``{"body": n, "component": 3, "state": 6}``);
    ``state_labels`` names the entries of the ``state`` dim (``final_state``,
    ``snapshot_state``); ``run(model, integrator, request, options)`` integrates one cell
    (:class:`RunRequest`) and returns a :class:`CellResult`; ``start`` (same arguments)
    returns a resumable :class:`geosweep.kernels.core.trajectory.Trajectory` instead and ``collect``
    turns a finished one into the :class:`CellResult`; ``warmup()``
    compiles the kernels on a tiny model so workers never compile concurrently inside a sweep;
    ``cost_per_step(model, integrator)`` estimates single-core seconds per step (slicing only).
    """

    name: str
    diagnostics: Callable[[Any], Sequence[Diagnostic]]
    sizes: Callable[[Any], dict[str, int]]
    run: Callable[..., CellResult]
    warmup: Callable[[], None]
    cost_per_step: Callable[[Any, str], float]
    state_labels: tuple[str, ...] = ()
    start: Callable[..., Any] | None = None
    #: ``collect(model, integrator, trajectory, options) -> CellResult``: the stored values of a
    #: finished trajectory from ``start`` (``run`` = start → advance → collect)
    collect: Callable[..., CellResult] | None = None
    #: ``warm_for(models, integrators)``: compile only what these models × integrators run (the
    #: sweep engine prefers it to ``warmup`` when a family has it; integrators of other families
    #: are ignored)
    warm_for: Callable[[Sequence[Any], Sequence[str]], None] | None = None
    #: the summary error variables convergence orders use by default, first one present wins
    #: (``ds.geosweep.order()``); none: ``max_rel_energy_error``
    order_error_vars: tuple[str, ...] = ()
    #: report figures of every system of this family
    figures: tuple[Figure, ...] = ()
    #: ``observables(model, integrator)``: the declared observables
    #: (:class:`geosweep.kernels.core.observables.Observable`) a cell of this model and integrator
    #: stores from; its stored names are the shared ones (``COMMON_DIAGNOSTICS``) plus theirs
    #: (``tests/test_observables.py`` checks every family's declarations against its ``collect``)
    observables: Callable[[Any, str], Sequence[Any]] | None = None
    #: ``batches(model, integrator, options) -> bool``: cells of this model, integrator and options may
    #: be advanced together and collected by ``collect_many`` (:mod:`geosweep.kernels.core.batch`)
    batches: Callable[[Any, str, dict[str, Any]], bool] | None = None
    #: ``start_many(models, integrator, request, options) -> [Stack]``: ``start`` of every model as fresh
    #: stacks (:func:`geosweep.kernels.core.batch.fresh_stack`; each stack's ``index`` names its models);
    #: without it, cells are started one by one and stacked (:func:`~geosweep.kernels.core.batch.advance_together`)
    start_many: Callable[..., list[Any]] | None = None
    #: ``collect_many(models, integrator, stack, options) -> {name: array}``: ``collect``'s values of
    #: every row of a :class:`~geosweep.kernels.core.batch.Stack`, with a leading row axis, bitwise
    #: each row's own
    collect_many: Callable[..., dict[str, Any]] | None = None
    #: ``thin_carries(model, integrator) -> bool``: ``collect`` stores row ``i`` of each value along
    #: ``time``/``snapshot`` from rows ``i`` and 0 of the trajectory's samples, envelopes and
    #: snapshots alone, and no other value from those rows: a store's kept carries of such cells
    #: leave them out but the first sample (the store holds them; an extension takes the rows the
    #: carry had taken from the store, :func:`geosweep.sweeps.carries.thin`). None: never
    thin_carries: Callable[[Any, str], bool] | None = None


#: process-wide state: the registry — every system, integrator and family loaded in this process, by name
SYSTEMS: dict[str, SystemDef] = {}
#: process-wide state: the registry's integrators (see SYSTEMS)
INTEGRATORS: dict[str, IntegratorDef] = {}
#: process-wide state: the registry's families (see SYSTEMS)
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


#: The built-in families: modules exporting ``FAMILY``, ``INTEGRATORS`` and ``SYSTEMS``. Adding a
#: family is one line here (the registry imports them by name, so it depends on none of them).
BUILTIN_FAMILIES: tuple[str, ...] = (
    "geosweep.kernels.s2.family",
    "geosweep.kernels.torus.family",
    "geosweep.kernels.chain.family",
    "geosweep.kernels.top.family",
    "geosweep.kernels.quad.family",
    "geosweep.kernels.dg.family",
)


def register_module(module: Any) -> None:
    """Register a family module's ``FAMILY``, ``INTEGRATORS`` and ``SYSTEMS``."""
    register_family(module.FAMILY)
    for integrator in module.INTEGRATORS:
        register_integrator(integrator)
    for system in getattr(module, "SYSTEMS", ()):
        register_system(system)


#: Where built-in systems are declared, so that a spec imports (and, on a cold Numba cache, compiles)
#: only its own family: :func:`load_for`. Only a shortcut: a system missing here is found by
#: importing the built-in families in order until it is registered.
BUILTIN_SYSTEMS: dict[str, str] = {
    **dict.fromkeys(
        ("lj_sphere", "double_pendulum", "spring_pendula", "elastic_rod", "sphere_three_body", "dipole_array"),
        "geosweep.kernels.s2.family",
    ),
    **dict.fromkeys(("torus", "so3_pendulum"), "geosweep.kernels.torus.family"),
    "pendulum_chain": "geosweep.kernels.chain.family",
    "heavy_top": "geosweep.kernels.top.family",
    "two_quadrotors": "geosweep.kernels.quad.family",
    **dict.fromkeys(
        ("nh_quartic", "chaplygin_sleigh", "suslov", "gearbox", "rolling_disk", "rigid_body_lp", "pendulum_chain_lp"),
        "geosweep.kernels.dg.family",
    ),
}


def _load_module(name: str) -> None:
    import importlib

    module = importlib.import_module(name)
    if FAMILIES.get(module.FAMILY.name) is not module.FAMILY:
        register_module(module)


def load_builtins() -> None:
    """Import and register the built-in families (idempotent; user registrations are kept)."""
    for name in BUILTIN_FAMILIES:
        _load_module(name)


def load_for(system: str, integrators: Sequence[str] = ()) -> None:
    """Register ``system``, its family and ``integrators``, importing as few built-in families as possible.

    First the family :data:`BUILTIN_SYSTEMS` names, then the other built-in families in order
    until every name is registered (all of them if a name is unknown, so that an error message
    can list every known name). Names registered already (plugins, earlier loads) cost nothing.
    """

    def missing() -> bool:
        if system not in SYSTEMS or SYSTEMS[system].family not in FAMILIES:
            return True
        return any(name not in INTEGRATORS for name in integrators)

    if system not in SYSTEMS and BUILTIN_SYSTEMS.get(system) in BUILTIN_FAMILIES:
        _load_module(BUILTIN_SYSTEMS[system])
    for name in BUILTIN_FAMILIES:
        if not missing():
            return
        _load_module(name)


def declared(system: str, family: str) -> tuple[SystemDef | None, FamilyDef | None]:
    """The registered declarations of ``system`` and ``family`` (a store's attrs), loading the
    built-in families when needed; ``None`` for a name no family declares (e.g. a plugin not loaded)."""
    try:
        if system and (system not in SYSTEMS or family not in FAMILIES):
            load_for(system)
        elif family and family not in FAMILIES:
            load_builtins()
    except ImportError:  # a broken plugin or optional dependency: nothing declared
        pass
    return SYSTEMS.get(system), FAMILIES.get(family)


def integrators_for(system: SystemDef) -> list[IntegratorDef]:
    return [i for i in INTEGRATORS.values() if i.serves(system.family)]
