"""Numba signatures of the family contract, parametrised by a family's callback type.

A family's functions receive ``cb`` first: the family's compiled callbacks (a potential, a
vector field, a group action …), one Numba type per family (a first-class function type or a
tuple of them). All arrays are C-contiguous float64 (``F1``/``F2``) or int64 (``I1``)::

    status = step(cb, meth, h, S, Sn, p, work, iwork, info, sio)
        one step of size h from state S into Sn (S is not modified except for caches that are a
        pure function of S); adds its cost to info[I_EVALS/I_ITERS/…]; on failure returns a
        non-zero Status code with the offending body and value in sio; adaptive methods write
        their error estimate to sio[S_ERR]. A stepper declaring ``StepperSpec.start_order`` also
        answers ``sio[S_MODE]`` (layout ``MODE_RATE``: the vector field at S into Sn, ``MODE_EULER``:
        one explicit Euler step): the driver's starting-step rule, before the first step only.
    observe(cb, meth, S, p, work, full, obs)
        the observation vector of state S (column 0: total energy when the family has one).
        Columns with a reduction must be computed identically whether ``full`` is True or not;
        sample-only columns may be skipped when ``full`` is False.
    dense(cb, meth, theta, h, S, Sn, work, Sd)
        the state at t + θh inside the step just taken from S (to Sn), into Sd.

Compiling the driver once per family signature keeps one cached binary per family that
serves every system and method of it (no recompilation per system).
"""

from __future__ import annotations

from numba import types

F1 = types.float64[::1]
F2 = types.float64[:, ::1]
I1 = types.int64[::1]


def contract_types(cb_type):
    """(step, observe, dense) signatures and function types, and the driver signature, for ``cb_type``."""
    step_sig = types.int64(cb_type, F1, types.float64, F1, F1, F1, F1, I1, I1, F1)
    observe_sig = types.void(cb_type, F1, F1, F1, F1, types.boolean, F1)
    dense_sig = types.void(cb_type, F1, types.float64, types.float64, F1, F1, F1, F1)
    step_t = types.FunctionType(step_sig)
    observe_t = types.FunctionType(observe_sig)
    dense_t = types.FunctionType(dense_sig)
    drive_sig = types.int64(
        step_t, observe_t, dense_t, cb_type,
        F1, I1, F1, types.int64, types.float64,  # meth, ictl, fctl, k_stop, t_stop
        F1, F1, F1, F1, F1, I1,  # S, Sn, Sd, p, work, iwork
        I1, F1, I1, F1, F1, F1, F2, F2, F2,  # red, acc, info, sio, obs, obs2, out, env, snaps
    )  # fmt: skip
    return step_sig, observe_sig, dense_sig, drive_sig
