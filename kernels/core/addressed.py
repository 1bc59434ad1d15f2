"""The driver called with its functions as addresses: no per-call unboxing of function values.

Calling a compiled function with first-class function arguments makes Numba unbox every one of
them on every call: two Python-level lookups per function (its wrapper and its native address,
each importing a module, unpickling the signature and calling a helper). With the driver's nine
functions (the stepper's ``step``/``observe``/``dense`` and a Lie family's six callbacks) that is
~26 µs per :meth:`~geosweep.kernels.core.trajectory.Trajectory.advance` on the machine we
measured (AMD EPYC, 2026-11-28), all of it holding the GIL, against ~1 µs for the fifteen
arrays — about half the ~50 µs a 0.1 ms chain cell spends in its kernel.

Here the addresses are looked up once per stepper (:mod:`geosweep.kernels.core.fastcall`) and
passed as one int64 array, two entries per function (its C wrapper and the Python object that
owns it); a small compiled entry (:func:`drive_at`) rebuilds the function values from them and
calls the family's compiled driver through its C wrapper. The driver and every callee are the
same machine code as on the other paths, called the same way (through their C wrappers), so the
results are bitwise the same.

The function types (the driver's, the step's, … and the callbacks') reach the entry as one
:class:`numba.types.TypeRef` argument: the Numba tuple type itself, passed from Python, which
costs nothing to unbox. A callback type holding anything but functions (the torus's arrays) is
passed as it is (:func:`drive_at_cb`).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from geosweep.kernels._jit import kjit


def function_members(ty: Any) -> list | None:
    """The first-class function types in ``ty`` (a function type or nested tuples of them), in
    order; None when ``ty`` holds anything else."""
    if isinstance(ty, types.FunctionType):
        return [ty]
    if isinstance(ty, types.BaseTuple):
        out: list = []
        for member in ty.types:  # type: ignore[attr-defined]  # every concrete BaseTuple has them
            sub = function_members(member)
            if sub is None:
                return None
            out.extend(sub)
        return out
    return None


def _function_value(context: Any, builder: Any, fnty: Any, data: Any, i: int) -> Any:
    """The value of function type ``fnty`` whose C wrapper and owner are ``data[i]``, ``data[i+1]``
    (no native address: calls go through the C wrapper, as for a value unboxed from a typed
    wrapper object)."""
    i64 = ir.IntType(64)
    vp = context.get_value_type(types.voidptr)
    value = cgutils.create_struct_proxy(fnty)(context, builder)
    value.c_addr = builder.inttoptr(builder.load(builder.gep(data, [ir.Constant(i64, i)])), vp)
    value.py_addr = builder.inttoptr(builder.load(builder.gep(data, [ir.Constant(i64, i + 1)])), vp)
    value.jit_addr = cgutils.get_null_value(vp)
    return value._getvalue()


def _build(context: Any, builder: Any, ty: Any, data: Any, pos: list[int]) -> Any:
    """``ty`` (a function type or nested tuples of them) built from the addresses at ``pos[0]``…"""
    if isinstance(ty, types.FunctionType):
        value = _function_value(context, builder, ty, data, pos[0])
        pos[0] += 2
        return value
    members = [_build(context, builder, m, data, pos) for m in ty.types]
    return context.make_tuple(builder, ty, members)


@intrinsic
def _functions(typingctx, addrs, tref):
    """The functions of ``tref``'s tuple type, built from ``addrs`` (two int64 entries each, in the
    order of :func:`function_members` over the tuple)."""
    tup = tref.instance_type
    if function_members(tup) is None or not isinstance(addrs, types.Array) or addrs.dtype != types.int64:
        return None
    sig = tup(addrs, tref)

    def codegen(context, builder, signature, args):
        data = context.make_array(addrs)(context, builder, args[0]).data
        return _build(context, builder, tup, data, [0])

    return sig, codegen


def drive_at(addrs, tref, meth, ictl, fctl, k_stop, t_stop,
             S, Sn, Sd, p, work, iwork, red, acc, info, sio, obs, obs2, out, env, snaps):  # fmt: skip
    """The driver ``tref`` names, called with the (step, observe, dense, callbacks) ``tref`` names,
    all built from ``addrs`` (:func:`geosweep.kernels.core.fastcall._addresses`); the other
    arguments are the driver's."""
    drive, step, observe, dense, cb = _functions(addrs, tref)
    return drive(step, observe, dense, cb, meth, ictl, fctl, k_stop, t_stop,
                 S, Sn, Sd, p, work, iwork, red, acc, info, sio, obs, obs2, out, env, snaps)  # fmt: skip


def drive_at_cb(addrs, tref, cb, meth, ictl, fctl, k_stop, t_stop,
                S, Sn, Sd, p, work, iwork, red, acc, info, sio, obs, obs2, out, env, snaps):  # fmt: skip
    """:func:`drive_at` for a callback value that is not made of functions (passed as it is)."""
    drive, step, observe, dense = _functions(addrs, tref)
    return drive(step, observe, dense, cb, meth, ictl, fctl, k_stop, t_stop,
                 S, Sn, Sd, p, work, iwork, red, acc, info, sio, obs, obs2, out, env, snaps)  # fmt: skip


class Entry:
    """The addressed entry for one callback type: ``call(addrs, tref, [cb,] meth, …)``."""

    __slots__ = ("call", "tref", "cb_by_value", "drive")

    def __init__(self, call: Any, tref: Any, cb_by_value: bool) -> None:
        self.call = call
        self.tref = tref
        self.cb_by_value = cb_by_value
        self.drive: Any = None  # the driver as a typed function (set by fastcall.register_driver)


#: process-wide state: each callback type's addressed entry, compiled (or loaded) once per process
_ENTRIES: dict[str, Entry] = {}


def compile_entry(cb_type: Any) -> Entry:
    """The addressed entry of the driver for ``cb_type`` (compiled once, or loaded from the cache)."""
    from geosweep.kernels.core.signatures import contract_types

    key = str(cb_type)
    found = _ENTRIES.get(key)
    if found is not None:
        return found
    step_sig, observe_sig, dense_sig, drive_sig = contract_types(cb_type)
    fn = [types.FunctionType(s) for s in (drive_sig, step_sig, observe_sig, dense_sig)]
    by_value = function_members(cb_type) is None
    tup = types.Tuple(fn if by_value else [*fn, cb_type])
    tref = types.TypeRef(tup)
    rest = drive_sig.args[4:]  # meth … snaps
    if by_value:
        dispatcher = kjit(types.int64(types.int64[::1], tref, cb_type, *rest))(drive_at_cb)
    else:
        dispatcher = kjit(types.int64(types.int64[::1], tref, *rest))(drive_at)
    entry = dispatcher.overloads[dispatcher.signatures[0]].entry_point
    found = _ENTRIES[key] = Entry(entry, tup, by_value)
    return found
