"""The families' old kernels-alone ``integrate`` functions, kept one release as deprecated aliases.

Each family's ``integrate`` (``geosweep.kernels.s2.integrate`` …) is :func:`deprecated_alias` of
the family's own implementation (``_integrate``, unchanged: the alias returns bitwise what it
returned before): it emits one :class:`DeprecationWarning` naming the front-door call that runs the
same cell, :func:`geosweep.integrate`, with the caller's own values filled in. The project's code
and tests call the implementation, never the alias (pyproject's ``filterwarnings`` turns this
warning into an error in the suite). Imports only the standard library: the kernels stay usable
alone.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: the front door's energy-guard default (spec ``blowup``), which the old functions of s2, ts2, top and
#: quad did not share (their default 0.0: no guard)
FRONT_DOOR_BLOWUP = 0.5


def _number(x: Any) -> str:
    """A float as a user would type it (12 significant digits: ``0.30000000000000004`` → ``0.3``)."""
    return repr(float(f"{x:.12g}")) if isinstance(x, float) else repr(x)


def front_door_call(
    system: str, integrator: str, *, T: float, dt_out: float, step: Mapping[str, Any], options: Mapping[str, Any]
) -> str:
    """The ``geosweep.integrate(...)`` call (as text) of one cell: ``T``/``dt_out`` in the system's time
    units, ``step`` ``{"h": …}`` or ``{"tol": …}``, ``options`` the integrator's options to spell out.

    >>> front_door_call("lj_sphere", "explicit_vi", T=1000 * 0.005, dt_out=0.05, step={"h": 0.005},
    ...                 options={"blowup": 0.0})
    'geosweep.integrate("lj_sphere", "explicit_vi", T=5.0, dt_out=0.05, h=0.005, blowup=0.0)'
    """
    args = [f'"{system}"', f'"{integrator}"', f"T={_number(T)}", f"dt_out={_number(dt_out)}"]
    args += [f"{k}={_number(v)}" for k, v in {**step, **options}.items()]
    return f"geosweep.integrate({', '.join(args)})"


def changed_options(arguments: Mapping[str, Any], system: str, integrator: str, names: tuple[str, ...]) -> dict:
    """The options among ``names`` (and ``blowup``) whose value in an old call's ``arguments`` differs
    from the front door's default for ``integrator`` (its declared ``IntegratorDef`` option; the old
    functions' guard was off by default, the front door's is on)."""
    from geosweep.kernels.registry import INTEGRATORS, load_for

    try:
        load_for(system, [integrator])
    except (ImportError, KeyError, ValueError):  # a plugin's system or a method record not registered
        pass
    idef = INTEGRATORS.get(integrator)
    declared = {p.name: p.default for p in idef.params} if idef is not None else {"blowup": FRONT_DOOR_BLOWUP}
    names = (*names, "blowup")
    return {k: arguments[k] for k in names if k in arguments and k in declared and arguments[k] != declared[k]}


def deprecated_alias(
    old: str, new_call: Callable[[dict[str, Any]], str], states: tuple[str, ...] = ()
) -> Callable[[F], F]:
    """Decorator: ``impl`` → a function of the same signature that warns (``DeprecationWarning``,
    attributed to its caller) with ``new_call(arguments)`` — the call's bound arguments, defaults
    applied — and then returns ``impl(...)`` unchanged. ``states``: the initial-state arguments the
    new call has no form of (named in the warning when given)."""

    def wrap(impl: F) -> F:
        signature = inspect.signature(impl)

        @functools.wraps(impl)
        def alias(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            message = f"{old} is deprecated and will be removed in the next release; call {new_call(bound.arguments)}"
            message += " (it returns a geosweep.Solution, read by the same stored names; a system with other"
            message += " parameters: geosweep.system(name, **params))"
            given = [k for k in states if bound.arguments.get(k) is not None]
            if given:
                message += f"; {'/'.join(given)}: the front door starts from the system's own initial state"
            warnings.warn(message, DeprecationWarning, stacklevel=2)
            return impl(*args, **kwargs)

        alias.__name__ = alias.__qualname__ = old.rsplit(".", 1)[-1]
        alias.__doc__ = f"Deprecated (one release): use :func:`geosweep.integrate`.\n\n{impl.__doc__ or ''}"
        return alias  # type: ignore[return-value]

    return wrap
