"""Cheap typed views into the flat state and work arrays.

``a[o:o + n0*n1].reshape((n0, n1))`` costs about 25 ns in Numba (a call into its reshape
helper), which adds up to microseconds per step when a stepper carves a dozen arrays out of
``S`` and ``work``. These helpers build the C-contiguous view directly from the data pointer
(bounds checked) at essentially no cost. The view does not own memory: use it only while the
parent array is alive (always true inside a step).
"""

from __future__ import annotations

from numba import carray, types
from numba.extending import intrinsic

from geosweep.kernels._jit import kjit


@intrinsic
def _ptr(typingctx, arr, off):
    """Pointer to ``arr.data + off`` (elements)."""
    sig = types.CPointer(arr.dtype)(arr, off)

    def codegen(context, builder, signature, args):
        a = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.gep(a.data, [args[1]])

    return sig, codegen


@kjit
def view2(a, o, n0, n1):
    """``a[o : o + n0*n1]`` as a C-contiguous (n0, n1) array (``a`` 1-D contiguous)."""
    if o < 0 or o + n0 * n1 > a.shape[0]:
        raise IndexError("view2 out of bounds")
    return carray(_ptr(a, o), (n0, n1))


@kjit
def view3(a, o, n0, n1, n2):
    """``a[o : o + n0*n1*n2]`` as a C-contiguous (n0, n1, n2) array (``a`` 1-D contiguous)."""
    if o < 0 or o + n0 * n1 * n2 > a.shape[0]:
        raise IndexError("view3 out of bounds")
    return carray(_ptr(a, o), (n0, n1, n2))
