"""The Runge–Kutta tableaux every family's methods are built from: one record each.

A :class:`Tableau` holds a Butcher tableau as exact rationals (published decimals where a
coefficient is not rational) and what it offers: its order, its stages, an embedded formula
(``bhat``, of order ``emb_order``) for a variable step, a continuous extension (``P``) for dense
output. Every Runge–Kutta-type integrator takes its coefficients from here: the Lie group methods
(RKMK and the ambient baselines of :mod:`geosweep.kernels.lie.tableaux`, offered by ts2, top and
quad), the (S²)ⁿ RK baselines (:mod:`geosweep.kernels.s2.stepper`) and the skew-gradient RK4/DOPRI5
baselines (:mod:`geosweep.kernels.dg.steppers`). The kernels that hand-code a tableau's loop (the dg
RK4) check it against its record at import.

Conventions: stage ``i`` at ``t + c_i h`` with ``c_i = Σ_j A[i, j]``; stages ``≥ s_main`` feed only
the error estimate or the dense output (DOP853's 14–16); dense output
``y(t + θh) ≈ y + h Σ_i w_i(θ) k_i`` with ``w_i(θ) = Σ_m P[i, m] θ^{m+1}``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction as Fr
from typing import Any

import numpy as np

Rows = tuple[tuple[Fr, ...], ...]
#: a coefficient as written: an integer, a rational or decimal string ("1/6", "0.5e-1"), a Fraction
Number = int | str | Fr


def _fr(x: Number) -> Fr:
    return x if isinstance(x, Fr) else Fr(x)


def _rows(rows: Iterable[Iterable[Number]]) -> Rows:
    return tuple(tuple(_fr(x) for x in r) for r in rows)


def _vec(vals: Iterable[Number]) -> tuple[Fr, ...]:
    return tuple(_fr(x) for x in vals)


def _f64(x: Rows | tuple[Fr, ...]) -> np.ndarray:
    if x and isinstance(x[0], tuple):
        return np.array([[float(v) for v in r] for r in x], dtype=np.float64)
    return np.array([float(v) for v in x], dtype=np.float64)  # type: ignore[arg-type]


@dataclass(frozen=True, eq=False)
class Tableau:
    """One explicit Runge–Kutta tableau (see the module docstring). ``A``, ``b``, ``bhat``, ``bhat3``
    and ``P`` are exact (``fractions.Fraction``); the ``*_f64`` methods give the float64 arrays the
    kernels read. ``controller``: the default step-size controller exponent with its reason, when the
    error estimate's order calls for another than the shared 1/4."""

    name: str
    order: int
    A: Rows
    b: tuple[Fr, ...]
    doc: str
    bhat: tuple[Fr, ...] | None = None
    emb_order: int = 0
    bhat3: tuple[Fr, ...] | None = None  # a second (3rd-order) estimator, combined with bhat (DOP853)
    P: Rows | None = None
    fsal: bool = False
    s_main: int = 0  # stages that advance the solution (0: all)
    controller: tuple[float, str] | None = None

    @staticmethod
    def of(name: str, order: int, A: Iterable[Iterable[Number]], b: Iterable[Number], doc: str, **kw: Any) -> Tableau:
        """A record from rows of numbers or rational strings (``"1/6"``, ``"0.5e-1"``)."""
        for key in ("bhat", "bhat3"):
            if kw.get(key) is not None:
                kw[key] = _vec(kw[key])
        if kw.get("P") is not None:
            kw["P"] = _rows(kw["P"])
        return Tableau(name, order, _rows(A), _vec(b), doc, **kw)

    def __post_init__(self) -> None:
        s = len(self.b)
        if any(len(r) != s for r in self.A) or len(self.A) != s:
            raise ValueError(f"tableau {self.name!r}: A must be {s} × {s} like b")
        if any(self.A[i][j] != 0 for i in range(s) for j in range(i, s)):
            raise ValueError(f"tableau {self.name!r}: A must be strictly lower triangular (explicit)")
        if self.s_main == 0:
            object.__setattr__(self, "s_main", s)
        if not self.order_conditions_hold():
            raise ValueError(f"tableau {self.name!r}: its coefficients do not reach the declared order {self.order}")

    @property
    def stages(self) -> int:
        """Every stage, error-estimate and dense-output ones included."""
        return len(self.b)

    @property
    def embedded(self) -> bool:
        """An embedded formula exists: a variable step can be controlled."""
        return self.bhat is not None

    @property
    def dense_output(self) -> bool:
        return self.P is not None

    @property
    def c(self) -> tuple[Fr, ...]:
        return tuple(sum(r, Fr(0)) for r in self.A)

    def A_f64(self, s: int | None = None) -> np.ndarray:
        """The leading ``s`` × ``s`` block of A (all stages by default)."""
        s = self.stages if s is None else s
        return _f64(tuple(r[:s] for r in self.A[:s]))

    def b_f64(self, s: int | None = None) -> np.ndarray:
        return _f64(self.b[: self.stages if s is None else s])

    def bhat_f64(self) -> np.ndarray | None:
        return None if self.bhat is None else _f64(self.bhat)

    def bhat3_f64(self) -> np.ndarray | None:
        return None if self.bhat3 is None else _f64(self.bhat3)

    def P_f64(self) -> np.ndarray | None:
        return None if self.P is None else _f64(self.P)

    def scaled_weights(self) -> tuple[np.ndarray, float]:
        """``(b·d, d)`` with d the least common denominator of the weights (RK4: (1, 2, 2, 1), 6):
        a kernel that sums ``Σ (b_j d) k_j`` then multiplies by ``h/d`` keeps the textbook rounding."""
        d = math.lcm(*(x.denominator for x in self.b))
        return _f64(tuple(x * d for x in self.b)), float(d)

    def order_conditions_hold(self, upto: int | None = None) -> bool:
        """The rooted-tree conditions of the main formula up to order ``upto`` (default: its order),
        in rationals, for orders ≤ 4 (higher orders: ``tests/test_lie_order8.py``); to 10⁻²⁵ where the
        coefficients are published decimals (DOP853), exactly otherwise."""
        p = min(self.order if upto is None else upto, 4)
        A, b, c = self.A, self.b, self.c
        s = range(self.s_main)
        Ac = [sum((A[i][j] * c[j] for j in s), Fr(0)) for i in s]
        conds = [
            (1, sum((b[i] for i in s), Fr(0)), Fr(1)),
            (2, sum((b[i] * c[i] for i in s), Fr(0)), Fr(1, 2)),
            (3, sum((b[i] * c[i] ** 2 for i in s), Fr(0)), Fr(1, 3)),
            (3, sum((b[i] * Ac[i] for i in s), Fr(0)), Fr(1, 6)),
            (4, sum((b[i] * c[i] ** 3 for i in s), Fr(0)), Fr(1, 4)),
            (4, sum((b[i] * c[i] * Ac[i] for i in s), Fr(0)), Fr(1, 8)),
            (4, sum((b[i] * A[i][j] * c[j] ** 2 for i in s for j in s), Fr(0)), Fr(1, 12)),
            (4, sum((b[i] * A[i][j] * Ac[j] for i in s for j in s), Fr(0)), Fr(1, 24)),
        ]
        return all(abs(got - want) <= Fr(1, 10**25) for k, got, want in conds if k <= p)

    def __repr__(self) -> str:
        extra = f", embedded order {self.emb_order}" if self.embedded else ""
        extra += ", dense output" if self.dense_output else ""
        return f"Tableau({self.name!r}, order {self.order}, {self.stages} stages{extra})"


# ---- Dormand–Prince 8(5,3) (Hairer–Nørsett–Wanner, DOP853) -------------------------------
# Published coefficients (30 significant digits; exact rationals where they are rational),
# written here stage by stage as {earlier stage: a_ij} with stages numbered from 1 as in the
# literature. Stages 1–12 advance the solution, stage 13 is f(y₁) (its row is the weights b,
# first-same-as-last), stages 14–16 exist only for the 7th-order continuous extension.
# tests/test_lie_order8.py checks every order condition up to order 8 on these numbers.
_D8_STAGES: tuple[dict[int, str], ...] = (
    {},
    {1: "0.526001519587677318785587544488e-1"},
    {1: "0.197250569845378994544595329183e-1", 2: "0.591751709536136983633785987549e-1"},
    {1: "0.295875854768068491816892993775e-1", 3: "0.887627564304205475450678981324e-1"},
    {
        1: "0.241365134159266685502369798665",
        3: "-0.884549479328286085344864962717",
        4: "0.924834003261792003115737966543",
    },
    {1: "1/27", 4: "0.170828608729473871279604482173", 5: "0.125467687566822425016691814123"},
    {1: "19/512", 4: "0.170252211019544039314978060272", 5: "0.602165389804559606850219397283e-1", 6: "-9/512"},
    {
        1: "0.370920001185047927108779319836e-1",
        4: "0.170383925712239993810214054705",
        5: "0.107262030446373284651809199168",
        6: "-0.153194377486244017527936158236e-1",
        7: "0.827378916381402288758473766002e-2",
    },
    {
        1: "0.624110958716075717114429577812",
        4: "-3.36089262944694129406857109825",
        5: "-0.868219346841726006818189891453",
        6: "27.5920996994467083049415600797",
        7: "20.1540675504778934086186788979",
        8: "-43.4898841810699588477366255144",
    },
    {
        1: "0.477662536438264365890433908527",
        4: "-2.48811461997166764192642586468",
        5: "-0.590290826836842996371446475743",
        6: "21.2300514481811942347288949897",
        7: "15.2792336328824235832596922938",
        8: "-33.2882109689848629194453265587",
        9: "-0.203312017085086261358222928593e-1",
    },
    {
        1: "-0.93714243008598732571704021658",
        4: "5.18637242884406370830023853209",
        5: "1.09143734899672957818500254654",
        6: "-8.14978701074692612513997267357",
        7: "-18.5200656599969598641566180701",
        8: "22.7394870993505042818970056734",
        9: "2.49360555267965238987089396762",
        10: "-3.0467644718982195003823669022",
    },
    {
        1: "2.27331014751653820792359768449",
        4: "-10.5344954667372501984066689879",
        5: "-2.00087205822486249909675718444",
        6: "-17.9589318631187989172765950534",
        7: "27.9488845294199600508499808837",
        8: "-2.85899827713502369474065508674",
        9: "-8.87285693353062954433549289258",
        10: "12.3605671757943030647266201528",
        11: "0.643392746015763530355970484046",
    },
    {  # stage 13 = the weights b of the 8th-order solution
        1: "0.542937341165687622380535766363e-1",
        6: "4.45031289275240888144113950566",
        7: "1.89151789931450038304281599044",
        8: "-5.8012039600105847814672114227",
        9: "0.31116436695781989440891606237",
        10: "-0.152160949662516078556178806805",
        11: "0.201365400804030348374776537501",
        12: "0.447106157277725905176885569043e-1",
    },
    {
        1: "0.561675022830479523392909219681e-1",
        7: "0.253500210216624811088794765333",
        8: "-0.246239037470802489917441475441",
        9: "-0.124191423263816360469010140626",
        10: "0.15329179827876569731206322685",
        11: "0.820105229563468988491666602057e-2",
        12: "0.756789766054569976138603589584e-2",
        13: "-0.8298e-2",
    },
    {
        1: "0.318346481635021405060768473261e-1",
        6: "0.283009096723667755288322961402e-1",
        7: "0.535419883074385676223797384372e-1",
        8: "-0.549237485713909884646569340306e-1",
        11: "-0.108347328697249322858509316994e-3",
        12: "0.382571090835658412954920192323e-3",
        13: "-0.340465008687404560802977114492e-3",
        14: "0.141312443674632500278074618366",
    },
    {
        1: "-0.428896301583791923408573538692",
        6: "-4.69762141536116384314449447206",
        7: "7.68342119606259904184240953878",
        8: "4.06898981839711007970213554331",
        9: "0.356727187455281109270669543021",
        13: "-0.139902416515901462129418009734e-2",
        14: "2.9475147891527723389556272149",
        15: "-9.15095847217987001081870187138",
    },
)
# b − b̂₅: the 5th-order error estimator (on stages 1, 6–12)
_D8_E5 = {
    1: "0.1312004499419488073250102996e-1",
    6: "-1.225156446376204440720569753",
    7: "-0.4957589496572501915214079952",
    8: "1.664377182454986536961530415",
    9: "-0.3503288487499736816886487290",
    10: "0.3341791187130174790297318841",
    11: "0.8192320648511571246570742613e-1",
    12: "-0.2235530786388629525884427845e-1",
}
# b̂₃: the 3rd-order weights (stages 1, 9, 12)
_D8_B3 = {1: "31/127", 9: "12675/17272", 12: "3/136"}
# the continuous extension's free part: h Σ_j d_mj k_j for m = 5…8 (Hairer's rcont5…rcont8)
_D8_D = (
    {
        1: "-8.4289382761090128651353491142",
        6: "0.56671495351937776962531783590",
        7: "-3.0689499459498916912797304727",
        8: "2.3846676565120698287728149680",
        9: "2.1170345824450282767155149946",
        10: "-0.87139158377797299206789907490",
        11: "2.2404374302607882758541771650",
        12: "0.63157877876946881815570249290",
        13: "-0.88990336451333310820698117400e-1",
        14: "18.148505520854727256656404962",
        15: "-9.1946323924783554000451984436",
        16: "-4.4360363875948939664310572000",
    },
    {
        1: "10.427508642579134603413151009",
        6: "242.28349177525818288430175319",
        7: "165.20045171727028198505394887",
        8: "-374.54675472269020279518312152",
        9: "-22.113666853125306036270938578",
        10: "7.7334326684722638389603898808",
        11: "-30.674084731089398182061213626",
        12: "-9.3321305264302278729567221706",
        13: "15.697238121770843886131091075",
        14: "-31.139403219565177677282850411",
        15: "-9.3529243588444783865713862664",
        16: "35.816841486394083752465898540",
    },
    {
        1: "19.985053242002433820987653617",
        6: "-387.03730874935176555105901742",
        7: "-189.17813819516756882830838328",
        8: "527.80815920542364900561016686",
        9: "-11.573902539959630126141871134",
        10: "6.8812326946963000169666922661",
        11: "-1.0006050966910838403183860980",
        12: "0.77771377980534432092869265740",
        13: "-2.7782057523535084065932004339",
        14: "-60.196695231264120758267380846",
        15: "84.320405506677161018159903784",
        16: "11.992291136182789328035130030",
    },
    {
        1: "-25.693933462703749003312586129",
        6: "-154.18974869023643374053993627",
        7: "-231.52937917604549567536039109",
        8: "357.63911791061412378285349910",
        9: "93.405324183624310003907691704",
        10: "-37.458323136451633156875139351",
        11: "104.09964950896230045147246184",
        12: "29.840293426660503123344363579",
        13: "-43.533456590011143754432175058",
        14: "96.324553959188282948394950600",
        15: "-39.177261675615439165231486172",
        16: "-149.72683625798562581422125276",
    },
)


def _sparse(row: dict[int, str], s: int) -> list[Fr]:
    out = [Fr(0)] * s
    for j, x in row.items():
        out[j - 1] = Fr(x)
    return out


def _poly_mul(p: list[Fr], q: list[Fr]) -> list[Fr]:
    out = [Fr(0)] * (len(p) + len(q) - 1)
    for i, x in enumerate(p):
        for k, y in enumerate(q):
            out[i + k] += x * y
    return out


def dop853_exact() -> dict[str, list]:
    """The DOP853 data as exact rationals of the published decimals: ``A`` (16 × 16), ``b``,
    ``bhat5``, ``bhat3`` (16 each) and ``P`` (16 × 7): the continuous extension's weights
    ``w_j(θ) = Σ_m P[j][m] θ^{m+1}`` with ``y(t + θh) ≈ y + h Σ_j w_j(θ) k_j``."""
    s = len(_D8_STAGES)
    A = [_sparse(r, s) for r in _D8_STAGES]
    b = list(A[12])
    e5 = _sparse(_D8_E5, s)
    bhat5 = [bj - ej for bj, ej in zip(b, e5)]
    bhat3 = _sparse(_D8_B3, s)
    # Hairer's form: y + θ(Δ + θ'(r3 + θ(r4 + θ'(r5 + θ(r6 + θ'(r7 + θ r8)))))), θ' = 1 − θ,
    # Δ = hΣ b_j k_j, r3 = h k1 − Δ, r4 = Δ − h k13 − r3, r5…r8 = hΣ d_mj k_j. Expanded per
    # stage j into the power basis θ¹…θ⁷ (polynomials as coefficient lists, lowest first).
    th, th1 = [Fr(0), Fr(1)], [Fr(1), Fr(-1)]
    basis, g = [], [Fr(1)]
    for m in range(7):  # θ, θθ', θ²θ', θ²θ'², θ³θ'², θ³θ'³, θ⁴θ'³
        g = _poly_mul(g, th if m % 2 == 0 else th1)
        basis.append(g)
    D = [_sparse(r, s) for r in _D8_D]
    P = []
    for j in range(s):
        r3 = Fr(int(j == 0)) - b[j]
        coef = [b[j], r3, b[j] - Fr(int(j == 12)) - r3] + [D[m][j] for m in range(4)]
        w = [Fr(0)] * 8
        for c, poly in zip(coef, basis):
            for i, x in enumerate(poly):
                w[i] += c * x
        assert w[0] == 0
        P.append(w[1:])
    return {"A": A, "b": b, "bhat5": bhat5, "bhat3": bhat3, "P": P}


def _dop853() -> Tableau:
    d = dop853_exact()
    return Tableau.of(
        "dop853", 8, d["A"], d["b"],
        "Dormand–Prince 8(5,3) (Hairer–Nørsett–Wanner's DOP853): 12 stages first-same-as-last, "
        "combined 5th/3rd-order error estimate, 7th-order dense output from 3 more stages.",
        bhat=d["bhat5"], emb_order=5, bhat3=d["bhat3"], P=d["P"], fsal=True, s_main=13,
        controller=(0.125, "controller exponent α (DOP853's estimate is O(h⁸): 1/8)"),
    )  # fmt: skip


_DOPRI5 = Tableau.of(
    "dopri5", 5,
    [
        [0] * 7,
        ["1/5"] + [0] * 6,
        ["3/40", "9/40"] + [0] * 5,
        ["44/45", "-56/15", "32/9"] + [0] * 4,
        ["19372/6561", "-25360/2187", "64448/6561", "-212/729"] + [0] * 3,
        ["9017/3168", "-355/33", "46732/5247", "49/176", "-5103/18656"] + [0] * 2,
        ["35/384", 0, "500/1113", "125/192", "-2187/6784", "11/84", 0],
    ],
    ["35/384", 0, "500/1113", "125/192", "-2187/6784", "11/84", 0],
    "Dormand–Prince 5(4): 6 stages first-same-as-last, 4th-order embedded estimate, 4th-order dense "
    "output (the continuous extension of scipy's RK45).",
    bhat=["5179/57600", 0, "7571/16695", "393/640", "-92097/339200", "187/2100", "1/40"],
    emb_order=4,
    P=[
        [1, "-8048581381/2820520608", "8663915743/2820520608", "-12715105075/11282082432"],
        [0, 0, 0, 0],
        [0, "131558114200/32700410799", "-68118460800/10900136933", "87487479700/32700410799"],
        [0, "-1754552775/470086768", "14199869525/1410260304", "-10690763975/1880347072"],
        [0, "127303824393/49829197408", "-318862633887/49829197408", "701980252875/199316789632"],
        [0, "-282668133/205662961", "2019193451/616988883", "-1453857185/822651844"],
        [0, "40617522/29380423", "-110615467/29380423", "69997945/29380423"],
    ],
    fsal=True,
)  # fmt: skip

#: every tableau, by name: the one place a Runge–Kutta coefficient is written
TABLEAUX: dict[str, Tableau] = {
    t.name: t
    for t in (
        Tableau.of("euler", 1, [[0]], [1], "Explicit Euler."),
        Tableau.of("midpoint", 2, [[0, 0], ["1/2", 0]], [0, 1], "Explicit midpoint (Runge's second-order method)."),
        Tableau.of("heun", 2, [[0, 0], [1, 0]], ["1/2", "1/2"], "Heun's second-order method (explicit trapezoid)."),
        Tableau.of("kutta3", 3, [[0, 0, 0], ["1/2", 0, 0], [-1, 2, 0]], ["1/6", "2/3", "1/6"],
                   "Kutta's third-order method."),
        Tableau.of("rk4", 4, [[0, 0, 0, 0], ["1/2", 0, 0, 0], [0, "1/2", 0, 0], [0, 0, 1, 0]],
                   ["1/6", "1/3", "1/3", "1/6"], "The classical fourth-order Runge–Kutta method."),
        _DOPRI5,
        _dop853(),
    )
}  # fmt: skip


def get(name: str) -> Tableau:
    """The tableau ``name`` (ValueError naming the known ones)."""
    try:
        return TABLEAUX[name]
    except KeyError:
        raise ValueError(f"unknown tableau {name!r}; choose from {sorted(TABLEAUX)}") from None
