"""Calling the compiled driver without Numba's per-call typing of first-class functions.

Passing Numba dispatchers (``step``/``observe``/``dense`` and the callbacks in ``cb``) to the
driver's dispatcher costs 0.6–1.5 ms per call on this machine: each call types every
dispatcher, converts the tuple to the signature's function types and, while unboxing, looks up
every function's compile result twice. A run is one call per :meth:`Trajectory.advance`, so
short runs and segmented runs paid it every time.

:func:`binding` does that work once per stepper: every function value becomes a
:class:`TypedFunction` (Numba's wrapper-address protocol: typed as its ``FunctionType`` at
once, its address looked up once per process and function), and the driver's compiled entry
point for the family's signature is called directly — or, where the driver has one, its
addressed entry (:mod:`geosweep.kernels.core.addressed`), which takes every function as an
address looked up here once (:func:`_addresses`) and so skips even the typed values' unboxing.
The arrays are checked once per trajectory against the signature (:meth:`Binding.accepts`);
anything unexpected falls back to the ordinary dispatcher call. The compiled driver and the
callees are the same machine code either way, so results are bitwise identical; only the call
of a callee (and, on the addressed entry, of the driver) goes through its C wrapper.

One difference: a Python exception raised inside a callee (in this code base only the bounds
checks of :mod:`geosweep.kernels.core.views`, i.e. a bug) cannot cross the C wrapper: Numba prints it
("Exception ignored in …") instead of raising it from ``advance``. Set
``GEOSWEEP_CHECKED_CALLS=1`` to use the dispatcher call (exceptions propagate) when debugging.
"""

from __future__ import annotations

import weakref
from typing import Any, cast

import numpy as np
from numba import types
from numba.core.ccallback import CFunc
from numba.core.dispatcher import Dispatcher
from numba.core.types.function_type import WrapperAddressProtocol
from numba.experimental.function_type import _get_wrapper_address
from numba.np.numpy_support import as_dtype

from geosweep import config

CHECKED_ENV = config.CHECKED_CALLS.name


class TypedFunction(WrapperAddressProtocol):
    """A compiled function with one fixed signature: typed and addressed without a lookup."""

    __slots__ = ("func", "_sig", "_addr")

    def __init__(self, func: Any, sig: Any) -> None:
        self.func = func  # keeps the compiled code alive
        self._sig = sig
        self._addr = _get_wrapper_address(func, sig)  # compiles/loads the overload if needed

    def __wrapper_address__(self) -> int:
        return self._addr

    def signature(self) -> Any:
        return self._sig

    def __reduce__(self):  # an address is only valid in this process: rebuild from the function
        return (TypedFunction, (self.func, self._sig))


def _typed_value(value: Any, ty: Any) -> Any:
    """``value`` with every function of type ``ty`` wrapped; raises TypeError if it does not fit."""
    if isinstance(ty, types.FunctionType):
        if isinstance(value, (TypedFunction, CFunc)) or (
            isinstance(value, WrapperAddressProtocol) and value.signature() == ty.signature
        ):
            return value
        if isinstance(value, Dispatcher):
            key = (id(value), id(ty))  # both kept alive by the cache entry and the registered driver
            tf = _TYPED.get(key)
            if tf is None:
                tf = _TYPED[key] = TypedFunction(value, ty.signature)
            return tf
        raise TypeError(f"{type(value).__name__} is not a compiled function of type {ty}")
    if isinstance(ty, types.BaseTuple):
        members = ty.types  # type: ignore[attr-defined]  # every concrete BaseTuple has them
        if not isinstance(value, tuple) or len(value) != len(members):
            raise TypeError(f"expected a tuple of {len(members)}")
        return tuple(_typed_value(v, t) for v, t in zip(value, members))
    if isinstance(ty, types.Array):
        if not _array_fits(value, ty):
            raise TypeError(f"array does not fit {ty}")
        return value
    raise TypeError(f"unsupported callback type {ty}")


def _array_spec(ty: Any) -> tuple:
    return (as_dtype(ty.dtype), ty.ndim, ty.layout, ty.mutable) if isinstance(ty, types.Array) else (None,)


def _array_fits(a: Any, ty: Any, spec: tuple | None = None) -> bool:
    """``a`` is an ndarray the driver's entry point unboxes as ``ty`` (what typeof would say)."""
    dtype, ndim, layout, mutable = spec or _array_spec(ty)
    return (
        type(a) is np.ndarray
        and a.ndim == ndim
        and a.dtype == dtype
        and (layout != "C" or a.flags.c_contiguous)
        and (layout != "F" or a.flags.f_contiguous)
        and (not mutable or a.flags.writeable)
    )


class Binding:
    """The driver of one stepper with its functions typed once (see the module docstring)."""

    def __init__(self, spec: Any, entry: Any, sig_args: tuple, specs: tuple, at: Any = None) -> None:
        self.entry = entry
        funcs = (spec.step, spec.observe, spec.dense, spec.cb)
        last = (id(entry), id(spec.step), id(spec.observe), id(spec.dense))
        seen = _LAST.get(last)
        if seen is not None and seen[0][3] is spec.cb:  # the same callbacks as last time (the key holds the rest)
            typed, addrs = seen[1], seen[2]
        else:
            key = _function_ids(funcs)
            found = _FUNCS.get((id(entry), key)) if key is not None else None
            if found is None:
                typed = tuple(_typed_value(v, t) for v, t in zip(funcs, sig_args[:4]))
                addrs = _addresses(at, typed)
                if key is not None:  # the typed wrappers keep every function (hence its id) alive
                    _FUNCS[(id(entry), key)] = (typed, addrs)
            else:
                typed, addrs = found
            if key is not None:
                _LAST[last] = (funcs, typed, addrs)
        self.step, self.observe, self.dense, self.cb = typed
        #: the addressed call (:mod:`geosweep.kernels.core.addressed`): its entry point and the arguments
        #: before ``meth``, or None
        self.at: tuple | None = None
        if addrs is not None:
            self.at = (at.call, (addrs, at.tref, self.cb) if at.cb_by_value else (addrs, at.tref))
        arr_types = sig_args[4:]  # meth, ictl, fctl, k_stop, t_stop, S, … (positions 4.. of drive)
        pos = (1, 2, 5, 6, 7, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19)  # the trajectory's arrays
        self._traj_specs = tuple(specs[i] for i in pos)
        for name, i in (("meth", 0), ("p", 8), ("red", 11)):
            if not _array_fits(getattr(spec, name), arr_types[i], specs[i]):
                raise TypeError(f"stepper.{name} does not fit {arr_types[i]}")

    def accepts(self, arrays: tuple) -> bool:
        """The trajectory's arrays in driver order (ictl, fctl, S, Sn, Sd, work, iwork, acc, info,
        sio, obs, obs2, out, env, snaps) have exactly the compiled signature's types."""
        return all(_array_fits(a, None, sp) for a, sp in zip(arrays, self._traj_specs, strict=True))


def _address(value: Any) -> int:
    """The C wrapper address of a typed function value (:func:`_typed_value`'s result)."""
    addr = value.address if isinstance(value, CFunc) else value.__wrapper_address__()
    return int(cast(int, addr))


def _flat(value: Any) -> list:
    return [x for v in value for x in _flat(v)] if isinstance(value, tuple) else [value]


def _addresses(at: Any, typed: tuple) -> np.ndarray | None:
    """The int64 (C wrapper, owner) pairs of the driver and of every function in ``typed`` (step,
    observe, dense, then the callbacks' unless the entry takes them by value), in the order
    :func:`geosweep.kernels.core.addressed.drive_at` reads them; None without an addressed entry. The
    owners (kept alive by the caches that keep ``typed``) are passed as their ids, which the compiled
    code never dereferences on this path."""
    if at is None:
        return None
    funcs = [at.drive, *typed[:3], *([] if at.cb_by_value else _flat(typed[3]))]
    return np.array([x for f in funcs for x in (_address(f), id(f))], dtype=np.int64)


def _function_ids(value: Any) -> tuple | int | None:
    """The ids of the compiled functions in ``value`` (nested tuples), or None if it holds anything else."""
    if isinstance(value, tuple):
        ids = tuple(_function_ids(v) for v in value)
        return None if any(i is None for i in ids) else ids
    return id(value) if isinstance(value, (Dispatcher, TypedFunction, CFunc)) else None


#: process-wide state (this module's compiled-call caches, below): id(driver dispatcher) -> (the dispatcher, its
#: signature's argument types)
_DRIVERS: dict[int, Any] = {}
#: process-wide state: (id(entry point), function ids) -> the typed (step, observe, dense, cb): a stepper built again
#: from the same functions (every ``integrate`` call builds one) skips typing them
_FUNCS: dict[tuple, tuple] = {}
#: process-wide state: id(driver dispatcher) -> (its compiled entry point, the array specs of its arguments 4..): found
#: once (hashing the signature's Numba types costs more than a short run)
_ENTRIES: dict[int, tuple] = {}
#: process-wide state: (id(entry point), ids of step, observe, dense) -> the functions (step, observe, dense, cb) last
#: bound and their typed values: a stepper built from the same objects (a family that reuses its callback tuple) skips
#: walking ``cb`` for its ids; one entry per kind of stepper
_LAST: dict[tuple, tuple] = {}
#: process-wide state: (id(function), id(its FunctionType)) -> its typed wrapper
_TYPED: dict[tuple[int, int], TypedFunction] = {}
#: process-wide state: stepper spec -> its fast call (:func:`binding`), dropped with the spec
_BINDINGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_UNBOUND = object()


def register_driver(driver: Any, cb_type: Any) -> None:
    """The callback type a compiled driver was built for (:func:`~geosweep.kernels.core.driver.compile_driver`),
    and its addressed entry (:mod:`geosweep.kernels.core.addressed`; compiled or loaded here, once per
    callback type; None if it cannot be built for ``cb_type``, and the typed call is used)."""
    from geosweep.kernels.core.addressed import compile_entry
    from geosweep.kernels.core.signatures import contract_types

    drive_sig = contract_types(cb_type)[3]
    try:
        at = compile_entry(cb_type)
        at.drive = TypedFunction(driver, drive_sig)
    except Exception:  # pragma: no cover - a callback type the entry cannot take: the typed call serves
        at = None
    _DRIVERS[id(driver)] = (driver, tuple(drive_sig.args), at)


def binding(spec: Any) -> Binding | None:
    """The fast call of ``spec``'s driver (built once per stepper), or None: the stepper's
    functions or arrays do not have the compiled signature's types, the driver is not one of
    :func:`geosweep.kernels.core.driver.compile_driver`'s, or ``GEOSWEEP_CHECKED_CALLS`` is set."""
    if config.CHECKED_CALLS.get():
        return None
    b = _BINDINGS.get(spec, None)
    if b is None:
        b = _UNBOUND
        reg = _DRIVERS.get(id(spec.drive))
        if reg is not None and reg[0] is spec.drive:
            sig_args = reg[1]
            found = _ENTRIES.get(id(spec.drive))
            if found is None:
                entry = getattr(spec.drive.overloads.get(sig_args), "entry_point", None)
                if entry is not None:
                    found = _ENTRIES[id(spec.drive)] = (entry, tuple(_array_spec(t) for t in sig_args[4:]))
            if found is not None:
                try:
                    b = Binding(spec, found[0], sig_args, found[1], reg[2])
                except Exception:  # e.g. no such overload: the dispatcher call reports it as before
                    b = _UNBOUND
        _BINDINGS[spec] = b
    return None if b is _UNBOUND else cast(Binding, b)
