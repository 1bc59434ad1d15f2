"""The front door: one call per job, importable from ``geosweep`` (loaded on first use).

* :func:`system` builds a registered system (built-in or plugin) as a spec's ``params`` would;
* :func:`systems` and :func:`integrators` list the registry's declarations as pandas tables;
* :func:`integrate` runs one cell of any family in this process and returns a
  :class:`~geosweep.solution.Solution` — bitwise what a sweep cell of the same spec stores;
* :func:`run`, :func:`extend`, :func:`open` and :func:`verify` act on a sweep's zarr store.

Times are in the system's time units (``SystemDef.time_units``, "1" for nondimensional
systems), energies in its energy units. Nothing here is computed at import: the sweep machinery,
pandas and xarray are imported by the call that needs them.

>>> import geosweep
>>> sol = geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
>>> sol.status.name, sol["steps"]
('OK', np.int64(10))
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from geosweep.kernels.registry import INTEGRATORS, SYSTEMS, IntegratorDef, Param, SystemDef, integrators_for, load_for
from geosweep.solution import Solution

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

    import geosweep.methods
    from geosweep.sweeps.engine import SweepResult
    from geosweep.sweeps.plan import Plan
    from geosweep.sweeps.spec import SweepSpec

__all__ = ["System", "Verification", "extend", "integrate", "integrators", "open", "run", "system", "systems", "verify"]

#: what a spec's system fields are called in a one-line error of :func:`system`
_HEAD = "invalid sweep spec:"


def _spec_error(problems: list[tuple[str, str]], what: str) -> Exception:
    """The spec's one-line :class:`~geosweep.sweeps.spec.SpecError` for ``problems``, headed by ``what``."""
    from geosweep.sweeps.spec import SpecError

    err = SpecError(problems)
    err.args = (str(err).replace(_HEAD, f"{what}:", 1),)
    return err


@dataclass(frozen=True)
class System:
    """A built system: its registered ``name``, the ``params`` given (the rest take their declared
    defaults), its family's ``model`` and its declaration ``sysdef``.

    ``kwargs`` are every builder argument (declared defaults overridden by ``params``), exactly as
    a sweep spec with these ``params`` builds its model.

    >>> import geosweep
    >>> top = geosweep.system("heavy_top", M=10.0)
    >>> top.family, top.kwargs["M"], top.kwargs["ell"]
    ('top', 10.0, 2.0)
    """

    name: str
    params: dict[str, Any]
    model: Any = field(repr=False)
    sysdef: SystemDef = field(repr=False)

    @property
    def family(self) -> str:
        """The family whose integrators run this system (``"s2"``, ``"se3"``, ``"ts2"`` …)."""
        return self.sysdef.family

    @property
    def kwargs(self) -> dict[str, Any]:
        """Every builder argument: the declared ``Param`` defaults overridden by :attr:`params`."""
        return {**{p.name: p.default for p in self.sysdef.params}, **self.params}


def _probe_spec(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A one-cell spec of ``name`` with ``params``, run by the first integrator that serves the system:
    the spec's own validation then checks ``params`` (the integrator is never run)."""
    sysdef = SYSTEMS.get(name)
    spec: dict[str, Any] = {"name": "system", "system": name, "T": 1.0, "dt_out": 1.0, "params": dict(params)}
    served = integrators_for(sysdef) if sysdef is not None else list(INTEGRATORS.values())[:1]
    if served:
        spec["integrators"] = [served[0].name]
        spec["tol" if served[0].adaptive else "h"] = [1.0e-6 if served[0].adaptive else 1.0]
    return spec


def system(name: str, **params: Any) -> System:
    """Build the registered system ``name`` with ``params`` (each one value, in the units that
    :func:`systems` lists), validated as a spec's ``[params]`` table is: an unknown or bad
    parameter raises :class:`~geosweep.sweeps.spec.SpecError` with the spec's one line naming it.

    >>> import geosweep
    >>> geosweep.system("pendulum_chain", N=3).model.n
    3
    >>> geosweep.system("pendulum_chain", links=3)
    Traceback (most recent call last):
    ...
    geosweep.sweeps.spec_error.SpecError: invalid system 'pendulum_chain': params.links: unknown parameter ...
    """
    from geosweep.sweeps.spec import SpecError, parse_spec

    load_for(name)
    what = f"invalid system {name!r}"
    swept = sorted(k for k, v in params.items() if isinstance(v, list | tuple))
    if swept:
        raise _spec_error([(f"params.{swept[0]}", "one value per parameter (sweep a list with geosweep.run)")], what)
    try:
        parse_spec(_probe_spec(name, params))
    except SpecError as e:  # the probe's own fields are valid: every problem is the system's or a parameter's
        raise _spec_error(
            [p for p in e.problems if p[0].startswith(("system", "params"))] or e.problems, what
        ) from None
    sysdef = SYSTEMS[name]
    kwargs = {**{p.name: p.default for p in sysdef.params}, **params}
    try:
        model = sysdef.build(**kwargs)
    except (ValueError, TypeError) as e:  # the builder's refusal, as a spec's (geosweep.sweeps.spec.build_models)
        raise _spec_error([("params", f"{e} (at {params or 'defaults'})")], what) from None
    return System(name, dict(params), model, sysdef)


# ---------------------------------------------------------------------------------------
# the catalogue
# ---------------------------------------------------------------------------------------
def _param_text(p: Param) -> str:
    """One parameter as the tables show it: ``name = default [units]``."""
    units = f" [{p.units}]" if p.units and p.units != "1" else ""
    return f"{p.name} = {p.default!r}{units}"


def _loaded() -> None:
    from geosweep.kernels.registry import load_builtins

    load_builtins()


def systems() -> pd.DataFrame:
    """Every registered system, one row each (index ``name``): ``family``, ``parameters`` (each
    ``name = default [units]``; units in the system's time/energy units), ``time_units``,
    ``energy_units``, the ``integrators`` that run it and ``doc``. Reads declarations only:
    nothing is built or compiled.

    >>> import geosweep
    >>> table = geosweep.systems()
    >>> table.loc["heavy_top", "family"]
    'top'
    >>> "lp_rkmk4" in table.loc["heavy_top", "integrators"]
    True
    """
    import pandas as pd

    _loaded()
    rows = [
        {
            "name": s.name,
            "family": s.family,
            "parameters": tuple(_param_text(p) for p in s.params),
            "time_units": s.time_units,
            "energy_units": s.energy_units,
            "integrators": tuple(i.name for i in integrators_for(s)),
            "doc": s.doc,
        }
        for s in SYSTEMS.values()
    ]
    return pd.DataFrame(rows).set_index("name")


def integrators(system: str | System | None = None) -> pd.DataFrame:
    """Every registered integrator (of ``system``'s family when given: a name or a :class:`System`),
    one row each (index ``name``): ``family`` (and ``also``, further families it runs), ``order``
    (declared; some methods declare another order on some models), ``adaptive`` (swept over
    ``tol``, else over ``h``), ``options`` (each ``name = default [units]``), ``preserves`` (what the
    method keeps exactly, as declared), ``method`` (a Runge–Kutta-type integrator's object form of
    :mod:`geosweep.methods`, e.g. ``RKMK(tableau='rk4', adaptive=False)``; ``None`` for the others) and
    ``doc``. Nothing is built or compiled.

    >>> import geosweep
    >>> table = geosweep.integrators("heavy_top")
    >>> int(table.loc["lp_rkmk4", "order"]), bool(table.loc["lp_rkmk45", "adaptive"])
    (4, True)
    """
    import pandas as pd

    _loaded()
    if system is None:
        defs: list[IntegratorDef] = list(INTEGRATORS.values())
    else:
        name = system.name if isinstance(system, System) else system
        if name not in SYSTEMS:
            raise _spec_error([("system", f"unknown system {name!r}; known: {sorted(SYSTEMS)}")], "integrators")
        defs = integrators_for(SYSTEMS[name])
    from geosweep.methods import entries

    objects = {e.name: e.method for e in entries()}
    rows = [
        {
            "name": i.name,
            "family": i.family,
            "also": i.also,
            "order": i.order,
            "adaptive": i.adaptive,
            "options": tuple(_param_text(p) for p in i.params),
            "preserves": getattr(i, "preserves", ()),
            "method": objects.get(i.name),
            "doc": i.doc,
        }
        for i in defs
    ]
    return pd.DataFrame(rows).set_index("name")


# ---------------------------------------------------------------------------------------
# one cell
# ---------------------------------------------------------------------------------------
def cell_spec(
    system: str | System,
    integrator: str,
    *,
    T: float,
    dt_out: float,
    h: float | None = None,
    tol: float | None = None,
    snapshot_dt: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The one-cell sweep spec (a dict) of :func:`integrate`'s arguments: a sweep of it stores exactly
    the values :func:`integrate` returns.

    >>> import geosweep.api
    >>> geosweep.api.cell_spec("heavy_top", "lp_rkmk4", T=1.0, dt_out=0.1, h=0.01)["h"]
    [0.01]
    """
    name, params = (system.name, dict(system.params)) if isinstance(system, System) else (system, {})
    spec: dict[str, Any] = {
        "name": f"{name}-{integrator}"[:100],
        "system": name,
        "integrators": [integrator],
        "T": T,
        "dt_out": dt_out,
        "params": params,
    }
    if h is not None:
        spec["h"] = [h]
    if tol is not None:
        spec["tol"] = [tol]
    if snapshot_dt is not None:
        spec["snapshot_dt"] = snapshot_dt
    if options:
        spec["integrator_options"] = {integrator: dict(options)}
    return spec


def cell_plan(spec: dict[str, Any] | SweepSpec, model: Any = None) -> Plan:
    """The plan of a one-cell spec (validated as a sweep's); ``model``: its already built model."""
    from geosweep.sweeps.plan import make_plan

    plan = make_plan(spec)
    if plan.grid.size != 1:
        raise _spec_error([("spec", f"{plan.grid.size} cells; integrate runs one (use geosweep.run)")], "integrate")
    if model is not None:
        plan = plan.model_copy(update={"models": {plan.grid.combination(plan.grid.first_cell): model}})
    return plan


def integrate(
    system: str | System,
    integrator: str | geosweep.methods.Method,
    *,
    T: float,
    dt_out: float,
    h: float | None = None,
    tol: float | None = None,
    snapshot_dt: float | None = None,
    **options: Any,
) -> Solution:
    """Integrate one cell in this process: ``system`` (a name, built with its declared defaults, or a
    :func:`system`) with ``integrator`` to the final time ``T``, sampled every ``dt_out`` (both in the
    system's time units), fixed step ``h`` (a divisor of ``dt_out``) or, for an adaptive method, error
    tolerance ``tol``; ``snapshot_dt``: time between stored full states (default: t = 0 and T only);
    ``options``: the integrator's options (:func:`integrators`; e.g. ``blowup``, default 0.5 for every
    family: stop once ``|E − E0| > blowup·|E0|``); for a fixed-step method with a solver option
    ``tol`` (``implicit_vi``, ``slgi*``), ``tol`` sets that option. ``integrator`` is a name or a method object of
    :mod:`geosweep.methods` (``RKMK(tableau="dop853")``), which runs the system's family's integrator of
    that method, bitwise as by its name.

    The arguments are a one-cell sweep spec (:func:`cell_spec`), validated as a spec is (one line
    naming a bad field, :class:`~geosweep.sweeps.spec.SpecError`), and the cell runs through the sweep
    engine's own cell computation: every returned value is bitwise what ``geosweep run`` of that spec
    stores. Failures are the :class:`~geosweep.solution.Solution`'s ``status``, never raised.

    >>> import geosweep
    >>> sol = geosweep.integrate("pendulum_chain", "rkmk45", T=0.5, dt_out=0.1, tol=1e-8)
    >>> sol.status.name, sol.samples["energy"].dims
    ('OK', ('time',))
    >>> bool(sol["max_rel_energy_error"] < 1e-6)
    True
    """
    from geosweep.methods import Method

    model = system.model if isinstance(system, System) else None
    if isinstance(integrator, Method):
        try:
            integrator = integrator.integrator_for(system)
        except ValueError as exc:
            raise _spec_error([("integrator", str(exc).removeprefix("integrator: "))], "integrate") from None
    tol, options = _solver_tol(system, integrator, tol, options)
    spec = cell_spec(system, integrator, T=T, dt_out=dt_out, h=h, tol=tol, snapshot_dt=snapshot_dt, options=options)
    return Solution.compute(cell_plan(spec, model))


def _solver_tol(
    system: str | System, integrator: str, tol: float | None, options: dict[str, Any]
) -> tuple[float | None, dict[str, Any]]:
    """``(tol, options)`` with ``tol`` moved into the options when ``integrator`` is a fixed-step method
    that declares a solver option of that name (``implicit_vi``'s fixed point, ``slgi*``'s Newton stop):
    a fixed-step cell has no error tolerance, so ``tol`` can mean only the option."""
    if tol is None or "tol" in options:
        return tol, options
    name = system.name if isinstance(system, System) else system
    if not isinstance(name, str) or not isinstance(integrator, str):
        return tol, options
    load_for(name, [integrator])
    defn = INTEGRATORS.get(integrator)
    if defn is None or defn.adaptive or all(p.name != "tol" for p in defn.params):
        return tol, options
    return None, {**options, "tol": tol}


# ---------------------------------------------------------------------------------------
# stores
# ---------------------------------------------------------------------------------------
def run(spec: Any, store: str | os.PathLike | None = None, execution: Any = None, **kwargs: Any) -> SweepResult:
    """Run (or resume) the sweep ``spec`` — a path to a ``.toml``/``.yaml`` file, a dict, a
    :class:`~geosweep.sweeps.spec.SweepSpec` or a :class:`~geosweep.sweeps.plan.Plan` — into the zarr
    ``store`` (default ``results/<name>.zarr``); ``execution``: how cells run
    (:class:`~geosweep.sweeps.execution.Execution`; default a local Dask cluster on every core,
    ``Execution(serial=True)`` in this process). ``kwargs`` go to
    :func:`geosweep.sweeps.engine.run_sweep` (``progress``, ``log``, ``keep_carries`` …). Returns its
    :class:`~geosweep.sweeps.engine.SweepResult`; cells that fail are recorded, not raised.

    >>> import geosweep, tempfile, os
    >>> from geosweep.sweeps import Execution
    >>> spec = geosweep.api.cell_spec("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
    >>> store = os.path.join(tempfile.mkdtemp(), "top.zarr")
    >>> geosweep.run(spec, store, execution=Execution(serial=True)).complete
    True
    """
    from geosweep.sweeps.engine import run_sweep

    if execution is not None:
        kwargs["execution"] = execution
    return run_sweep(spec, store, **kwargs)


def extend(store: str | os.PathLike, T: float, **kwargs: Any) -> SweepResult:
    """Continue every finished cell of ``store`` to the later final time ``T`` (system time units):
    bitwise the store a sweep to ``T`` from the start writes (:func:`geosweep.sweeps.extend`;
    ``kwargs``: ``execution``, ``serial``, ``recompute`` …).

    >>> import geosweep, tempfile, os
    >>> spec = geosweep.api.cell_spec("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
    >>> store = os.path.join(tempfile.mkdtemp(), "top.zarr")
    >>> _ = geosweep.run(spec, store, serial=True)
    >>> geosweep.extend(store, T=0.2, serial=True).complete
    True
    >>> float(geosweep.open(store).time[-1])
    0.2
    """
    from geosweep.sweeps.extension import extend as extend_store

    return extend_store(store, T, **kwargs)


def open(store: str | os.PathLike, storage_options: dict | None = None) -> xr.Dataset:  # noqa: A001 - xarray's name
    """The store as a lazily loaded :class:`xarray.Dataset` with the ``ds.geosweep`` accessor; a store
    of another format, or a folder that is not a geosweep store, is refused with one line
    (:class:`~geosweep.sweeps.store.StoreFormatError`). ``storage_options``: fsspec options of a URL.

    >>> import geosweep, tempfile, os
    >>> spec = geosweep.api.cell_spec("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
    >>> store = os.path.join(tempfile.mkdtemp(), "top.zarr")
    >>> _ = geosweep.run(spec, store, serial=True)
    >>> ds = geosweep.open(store)
    >>> ds.sizes["time"], ds.attrs["system"]
    (3, 'heavy_top')
    """
    from geosweep.analysis import accessor  # noqa: F401 - registers ds.geosweep
    from geosweep.sweeps.store import StoreFormatError, StoreRef, check_format, open_results

    ref = StoreRef.of(store, storage_options)
    if not ref.exists():
        raise StoreFormatError(f"no geosweep store at {ref.url}")
    if ref.is_local:  # the group's attributes first: a store of another format is refused before xarray reads it
        import zarr

        check_format(ref.url, dict(zarr.open_group(ref.url, mode="r").attrs))
    return open_results(ref)


@dataclass(frozen=True)
class Verification:
    """What :func:`verify` found: ``damaged`` cells (values or checksum unreadable or not matching),
    cells whose ``flags`` could not be read and finished cells whose kept ``carries`` are foreign,
    stale or damaged (``extend`` recomputes those from t = 0), each as a dict of its coordinates.

    >>> import geosweep
    >>> found = geosweep.api.Verification("s.zarr", damaged=[{"integrator": "rk4", "h": 0.01}], flags=[], carries=[])
    >>> found.ok
    False
    """

    store: str
    damaged: list[dict[str, Any]]
    flags: list[dict[str, Any]]
    carries: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        """True when every finished cell matches its checksum and every kept carry is usable."""
        return not (self.damaged or self.flags or self.carries)


def verify(store: str | os.PathLike, storage_options: dict | None = None) -> Verification:
    """Check every finished cell of ``store`` against its checksum and every kept carry (what
    ``geosweep verify`` checks; nothing is changed — repair with the command's ``--repair``).

    >>> import geosweep, tempfile, os
    >>> spec = geosweep.api.cell_spec("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
    >>> store = os.path.join(tempfile.mkdtemp(), "top.zarr")
    >>> _ = geosweep.run(spec, store, serial=True)
    >>> geosweep.verify(store).ok
    True
    """
    from geosweep.sweeps.carry_identity import unusable_carries
    from geosweep.sweeps.store import StoreFormatError, StoreRef
    from geosweep.sweeps.store import verify as verify_cells

    ref = StoreRef.of(store, storage_options)
    if not ref.exists():
        raise StoreFormatError(f"no geosweep store at {ref.url}")
    ds = open(ref.url, storage_options)
    found = verify_cells(ref)
    dims = [str(d) for d in ds["status"].dims]

    def labels(cells: list[tuple[int, ...]]) -> list[dict[str, Any]]:
        return [{d: ds[d].values[i].item() for d, i in zip(dims, cell)} for cell in cells]

    return Verification(ref.url, labels(found["damaged"]), labels(found["flags"]), labels(unusable_carries(ref)))
