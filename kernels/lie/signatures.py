"""Signatures of the system callbacks the driver receives as first-class functions.

A system supplies ``status = field(y, p, work, out)`` (algebra map f or ambient field F;
``y``/``out`` (N, 6), ``p`` its parameter vector, ``work`` flat scratch; 0 means success)
and ``E = diag(y, p, work, out)`` writing its sample diagnostics into ``out`` (1-D).
The driver is compiled against these types, so one cached binary serves every system.
"""

from __future__ import annotations

from numba import types

_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
FIELD_SIG = types.int64(_F2, _F1, _F1, _F2)
FieldType = types.FunctionType(FIELD_SIG)
DIAG_SIG = types.float64(_F2, _F1, _F1, _F1)
DiagType = types.FunctionType(DIAG_SIG)
