"""Kernels of explicit signatures compile on first use (issue 53 item 1): ``kjit(sig)`` makes a
:class:`~geosweep.kernels._jit.DeclaredDispatcher`, which compiles nothing when it is made and, once used,
is what ``numba.njit(sig)`` makes: the declared overloads only, compilation disabled, the same argument
conversions. The listing's own check (nothing compiled on a cold cache) is in tests/test_light_imports.py.
"""

from __future__ import annotations

import pickle
import threading

import numpy as np
from numba import njit, types

from geosweep.kernels._jit import JIT_OPTIONS, DeclaredDispatcher, compile_declared, kjit, watch_compiles

SIG = types.float64(types.float64, types.float64[::1])
NO_CACHE = {"cache": False}  # test functions: nothing written next to the tests


def _weighted(x, a):
    s = 0.0
    for v in a:
        s += x * v
    return s


def _made() -> DeclaredDispatcher:
    return kjit(SIG, **NO_CACHE)(_weighted)


def test_making_compiles_nothing_and_a_call_compiles_the_declared_signature_only():
    with watch_compiles() as count:
        f = _made()
    assert isinstance(f, DeclaredDispatcher) and count[0] == 0 and f._declared is not None
    a = np.arange(4.0)
    with watch_compiles() as count:
        assert f(2.0, a) == 12.0
        assert f(2, a) == 12.0  # an int converts to the declared float64, as with njit(sig): no new overload
    assert count[0] == 1 and f._declared is None and not f._can_compile
    assert [tuple(s) for s in f.signatures] == [tuple(SIG.args)]


def test_it_is_the_eager_dispatcher_once_used():
    lazy, eager = _made(), njit(SIG, **{**JIT_OPTIONS, **NO_CACHE})(_weighted)
    assert lazy.targetoptions == eager.targetoptions and lazy.locals == eager.locals
    assert lazy.signatures == eager.signatures and lazy._can_compile == eager._can_compile
    a = np.linspace(0.1, 1.0, 7)
    assert lazy(np.float64(1.0) / 3.0, a) == eager(np.float64(1.0) / 3.0, a)  # bitwise


def test_a_kernel_calling_it_or_taking_it_as_a_first_class_function_compiles_it():
    g = _made()

    @njit(cache=False)
    def caller(a):
        return g(1.5, a)

    assert caller(np.ones(3)) == 4.5 and g._declared is None

    h = _made()
    fty = types.FunctionType(SIG)

    @njit(types.float64(fty, types.float64[::1]), cache=False)
    def apply(fn, a):
        return fn(2.0, a)

    assert apply(h, np.ones(3)) == 6.0 and h._declared is None


def test_pickling_and_compile_declared():
    f = _made()
    g = pickle.loads(pickle.dumps(f))
    assert g is f and f._declared is None  # the same process: Numba's memo by uuid; compiled first
    pending = [_made() for _ in range(2)]
    assert compile_declared() >= 2 and all(d._declared is None for d in pending)
    assert compile_declared() == 0


def test_threads_calling_at_once_get_one_compile():
    f = _made()
    a, out = np.ones(5), []
    with watch_compiles() as count:
        threads = [threading.Thread(target=lambda: out.append(f(1.0, a))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert out == [5.0] * 4 and count[0] == 1
