"""Method coefficients for the compiled driver (spec lie_group_integrators §3–4).

Every method is a :class:`Method`: a kind code plus arrays, so one compiled driver serves all
of them. Kinds: ``RKMK`` (Butcher tableau applied to the dexp⁻¹ equation), ``CF``
(commutator-free: each stage/output is a product of exponentials of linear combinations of
the f_k, applied to a base state), ``RKMK4_2COMM`` (Casas–Owren, hard-coded), ``AMBIENT``
(classical explicit RK on the ambient ODE in R^{6N}).

CF encoding: stage ``r`` starts from ``y`` (``sbase[r] = -1``) or from stage state
``Y_{sbase[r]}``, then applies ``snexp[r]`` exponentials in order ``j = 0, 1, …``, the j-th
being ``exp(h Σ_k salpha[r, j, k] f_k)``. Outputs ``o = 0`` (main) and ``o = 1`` (embedded)
use ``obase``, ``onexp``, ``obeta`` likewise. Stages ``≥ s_main`` feed only the embedded
output and are skipped in fixed-step runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction as Fr

import numpy as np

from kernels.lie.se3 import DEXPINV_EXACT

RKMK, CF, RKMK4_2COMM, AMBIENT = 0, 1, 2, 3
_JMAX = 2


def _a(rows) -> np.ndarray:
    return np.array([[float(Fr(x)) for x in r] for r in rows], dtype=np.float64)


def _v(vals) -> np.ndarray:
    return np.array([float(Fr(x)) for x in vals], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Method:
    """Coefficients of one method (see module docstring). ``order``/``emb_order`` are the
    classical orders of the main and embedded formulas (``emb_order = 0``: no estimate)."""

    name: str
    kind: int
    order: int
    A: np.ndarray
    b: np.ndarray
    bhat: np.ndarray | None = None
    emb_order: int = 0
    dexp_mode: int = DEXPINV_EXACT
    fsal: bool = False
    P: np.ndarray | None = None  # dense output: weight_i(θ) = Σ_m P[i, m] θ^{m+1}
    sbase: np.ndarray | None = None
    snexp: np.ndarray | None = None
    salpha: np.ndarray | None = None
    obase: np.ndarray | None = None
    onexp: np.ndarray | None = None
    obeta: np.ndarray | None = None
    s_main: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def stages(self) -> int:
        return self.A.shape[0]

    def with_dexp_mode(self, mode: int, name: str | None = None) -> Method:
        """Same tableau with a truncated (``mode`` ad-terms) or exact (−1) dexp⁻¹."""
        d = dict(self.__dict__)
        d["dexp_mode"] = mode
        d["name"] = name or f"{self.name}_q{mode}"
        return Method(**d)

    def arrays(self) -> tuple:
        """Contiguous arrays in the driver's argument order (dummies where unused)."""
        s = self.stages
        bhat = self.bhat if self.bhat is not None else np.zeros(s)
        P = self.P if self.P is not None else np.zeros((s, 4))
        if self.kind == CF:
            cf = (self.sbase, self.snexp, self.salpha, self.obase, self.onexp, self.obeta)
        else:
            cf = (
                np.full(s, -1, np.int64),
                np.zeros(s, np.int64),
                np.zeros((s, _JMAX, s)),
                np.full(2, -1, np.int64),
                np.zeros(2, np.int64),
                np.zeros((2, _JMAX, s)),
            )
        out = [self.A, self.b, bhat, P, *cf]
        return tuple(np.ascontiguousarray(x) for x in out)


def _rk(name, kind, order, A, b, **kw) -> Method:
    A = _a(A)
    return Method(name=name, kind=kind, order=order, A=A, b=_v(b), s_main=A.shape[0], **kw)


def _cf(name, order, stages, main, emb=None, s_main=None, emb_order=0) -> Method:
    """``stages``/``main``/``emb``: lists of (base, [coeff rows]) with coeff rows over f_k."""
    s = len(stages)
    sbase = np.array([st[0] for st in stages], np.int64)
    snexp = np.array([len(st[1]) for st in stages], np.int64)
    salpha = np.zeros((s, _JMAX, s))
    for r, (_, rows) in enumerate(stages):
        for j, row in enumerate(rows):
            salpha[r, j, : len(row)] = _v(row)
    outs = [main, emb if emb is not None else (-1, [])]
    obase = np.array([o[0] for o in outs], np.int64)
    onexp = np.array([len(o[1]) for o in outs], np.int64)
    obeta = np.zeros((2, _JMAX, s))
    for o, (_, rows) in enumerate(outs):
        for j, row in enumerate(rows):
            obeta[o, j, : len(row)] = _v(row)
    # underlying classical tableau (for documentation / order checks): a_r^k = Σ_j α, b = Σ_j β
    A = np.zeros((s, s))
    for r in range(s):
        base = sbase[r]
        A[r] = salpha[r].sum(axis=0) + (A[base] if base >= 0 else 0.0)
    b = obeta[0].sum(axis=0) + (A[obase[0]] if obase[0] >= 0 else 0.0)
    bhat = obeta[1].sum(axis=0) + (A[obase[1]] if obase[1] >= 0 else 0.0) if emb is not None else None
    return Method(
        name=name,
        kind=CF,
        order=order,
        A=A,
        b=b,
        bhat=bhat,
        emb_order=emb_order,
        sbase=sbase,
        snexp=snexp,
        salpha=salpha,
        obase=obase,
        onexp=onexp,
        obeta=obeta,
        s_main=s if s_main is None else s_main,
    )


_DP_A = [
    [0] * 7,
    ["1/5"] + [0] * 6,
    ["3/40", "9/40"] + [0] * 5,
    ["44/45", "-56/15", "32/9"] + [0] * 4,
    ["19372/6561", "-25360/2187", "64448/6561", "-212/729"] + [0] * 3,
    ["9017/3168", "-355/33", "46732/5247", "49/176", "-5103/18656"] + [0] * 2,
    ["35/384", 0, "500/1113", "125/192", "-2187/6784", "11/84", 0],
]
_DP_B = ["35/384", 0, "500/1113", "125/192", "-2187/6784", "11/84", 0]
_DP_BHAT = ["5179/57600", 0, "7571/16695", "393/640", "-92097/339200", "187/2100", "1/40"]
# Dormand–Prince continuous extension (order 4), the same polynomial as scipy's RK45.
_DP_P = _a(
    [
        [1, "-8048581381/2820520608", "8663915743/2820520608", "-12715105075/11282082432"],
        [0, 0, 0, 0],
        [0, "131558114200/32700410799", "-68118460800/10900136933", "87487479700/32700410799"],
        [0, "-1754552775/470086768", "14199869525/1410260304", "-10690763975/1880347072"],
        [0, "127303824393/49829197408", "-318862633887/49829197408", "701980252875/199316789632"],
        [0, "-282668133/205662961", "2019193451/616988883", "-1453857185/822651844"],
        [0, "40617522/29380423", "-110615467/29380423", "69997945/29380423"],
    ]
)
_RK4_A = [[0, 0, 0, 0], ["1/2", 0, 0, 0], [0, "1/2", 0, 0], [0, 0, 1, 0]]
_RK4_B = ["1/6", "1/3", "1/3", "1/6"]

METHODS: dict[str, Method] = {
    "lie_euler": _rk("lie_euler", RKMK, 1, [[0]], [1]),
    "lie_euler_heun": _rk("lie_euler_heun", RKMK, 2, [[0, 0], [1, 0]], ["1/2", "1/2"]),
    "rkmk3": _rk("rkmk3", RKMK, 3, [[0, 0, 0], ["1/2", 0, 0], [-1, 2, 0]], ["1/6", "2/3", "1/6"]),
    "rkmk4": _rk("rkmk4", RKMK, 4, _RK4_A, _RK4_B),
    "rkmk4_2comm": _rk("rkmk4_2comm", RKMK4_2COMM, 4, _RK4_A, _RK4_B),
    "rkmk5": _rk("rkmk5", RKMK, 5, _DP_A, _DP_B, fsal=True),
    "rkmk45": _rk("rkmk45", RKMK, 5, _DP_A, _DP_B, bhat=_v(_DP_BHAT), emb_order=4, fsal=True, P=_DP_P),
    "cf4": _cf(
        "cf4",
        4,
        [(-1, []), (-1, [["1/2"]]), (-1, [[0, "1/2"]]), (1, [["-1/2", 0, 1]])],
        (-1, [["1/4", "1/6", "1/6", "-1/12"], ["-1/12", "1/6", "1/6", "1/4"]]),
    ),
    "cf43": _cf(
        "cf43",
        4,
        [(-1, []), (-1, [["1/2"]]), (-1, [[0, "1/2"]]), (1, [["-1/2", 0, 1]]), (-1, [[0, "3/4"]])],
        (-1, [["1/4", "1/6", "1/6", "-1/12"], ["-1/12", "1/6", "1/6", "1/4"]]),
        emb=(-1, [["1/3"], ["-1/9", "1/3", 0, 0, "4/9"]]),
        s_main=4,
        emb_order=3,
    ),
    "cf3": _cf(
        "cf3",
        3,
        [(-1, []), (-1, [["1/3"]]), (-1, [[0, "2/3"]])],
        (1, [["-1/12", 0, "3/4"]]),
        emb=(-1, [[0, "1/2", "1/2"]]),
        emb_order=2,
    ),
    "cf3b": _cf(
        "cf3b",
        3,
        [(-1, []), (-1, [["2/3"]]), (-1, [["5/12", "1/4"]])],
        (2, [["-1/6", "-1/2", 1]]),
        emb=(-1, [["1/4", 0, "3/4"]]),
        emb_order=2,
    ),
    "rk4_ambient": _rk("rk4_ambient", AMBIENT, 4, _RK4_A, _RK4_B),
    "dopri5_ambient": _rk(
        "dopri5_ambient", AMBIENT, 5, _DP_A, _DP_B, bhat=_v(_DP_BHAT), emb_order=4, fsal=True, P=_DP_P
    ),
}


def get(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(METHODS)}") from None
