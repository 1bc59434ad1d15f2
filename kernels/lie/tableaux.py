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

RKMK and AMBIENT: stages ``≥ s_main`` feed only the dense output (DOP853's 14–16, evaluated
only in steps that contain a sample); ``bhat3`` is a second, 3rd-order estimator combined with
``bhat`` as in Hairer–Wanner's DOP853 (see :func:`dop853_exact`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction as Fr
from typing import Any

import numpy as np

from geosweep.kernels.lie.se3 import DEXPINV_EXACT

RKMK, CF, RKMK4_2COMM, AMBIENT = 0, 1, 2, 3
_JMAX = 2


def _a(rows) -> np.ndarray:
    return np.array([[float(Fr(x)) for x in r] for r in rows], dtype=np.float64)


def _v(vals) -> np.ndarray:
    return np.array([float(Fr(x)) for x in vals], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Method:
    """Coefficients of one method (see module docstring). ``order``/``emb_order`` are the
    classical orders of the main and embedded formulas (``emb_order = 0``: no estimate).

    The record also says how the families offer it (:mod:`geosweep.kernels.lie.methods`): ``doc`` (one
    family-neutral sentence), ``adaptive`` (a variable-step integrator swept over ``tol``; else
    fixed step, an embedded formula unused) and ``controller`` (default controller exponent and
    its reason, when the estimate's order calls for another than the shared 1/4)."""

    name: str
    kind: int
    order: int
    A: np.ndarray
    b: np.ndarray
    doc: str = ""
    adaptive: bool = False
    controller: tuple[float, str] | None = None
    bhat: np.ndarray | None = None
    emb_order: int = 0
    dexp_mode: int = DEXPINV_EXACT
    fsal: bool = False
    P: np.ndarray | None = None  # dense output: weight_i(θ) = Σ_m P[i, m] θ^{m+1}
    bhat3: np.ndarray | None = None  # second (3rd-order) estimator: DOP853's combined error
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

    @property
    def evals_per_step(self) -> int:
        """f-evaluations per step as offered: the main stages at fixed step, every stage when
        adaptive (embedded and dense-output ones included), one fewer if first-same-as-last."""
        return (self.stages if self.adaptive else self.s_main) - int(self.fsal)

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


def _cf(name, order, stages, main, emb=None, s_main=None, emb_order=0, doc="") -> Method:
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
        doc=doc,
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
    def mul(p, q):
        out = [Fr(0)] * (len(p) + len(q) - 1)
        for i, x in enumerate(p):
            for k, y in enumerate(q):
                out[i + k] += x * y
        return out

    th, th1 = [Fr(0), Fr(1)], [Fr(1), Fr(-1)]
    basis, g = [], [Fr(1)]
    for m in range(7):  # θ, θθ', θ²θ', θ²θ'², θ³θ'², θ³θ'³, θ⁴θ'³
        g = mul(g, th if m % 2 == 0 else th1)
        basis.append(g)
    D = [_sparse(r, s) for r in _D8_D]
    P = []
    for j in range(s):
        d1 = Fr(int(j == 0))
        d13 = Fr(int(j == 12))
        r3 = d1 - b[j]
        coef = [b[j], r3, b[j] - d13 - r3] + [D[m][j] for m in range(4)]
        w = [Fr(0)] * 8
        for c, poly in zip(coef, basis):
            for i, x in enumerate(poly):
                w[i] += c * x
        assert w[0] == 0
        P.append(w[1:])
    return {"A": A, "b": b, "bhat5": bhat5, "bhat3": bhat3, "P": P}


def _f64(x) -> np.ndarray:
    return np.array([[float(v) for v in r] for r in x] if isinstance(x[0], list) else [float(v) for v in x])


_EXPONENT8 = (0.125, "controller exponent α (DOP853's estimate is O(h⁸): 1/8)")


def _dop853(name: str, kind: int, adaptive: bool, doc: str) -> Method:
    """DOP853 as a method of ``kind``: 13 stages first-same-as-last (12 f-evaluations per step)
    and, with ``adaptive``, the 5th/3rd-order estimators and 3 dense-output stages (computed
    only for steps that contain a sample)."""
    d = dop853_exact()
    s = 16 if adaptive else 13
    A = _f64([r[:s] for r in d["A"][:s]])
    kw: dict[str, Any] = {}
    if adaptive:
        kw = dict(bhat=_f64(d["bhat5"]), bhat3=_f64(d["bhat3"]), emb_order=5, P=_f64(d["P"]), controller=_EXPONENT8)
    return Method(
        name=name, kind=kind, order=8, A=A, b=_f64(d["b"][:s]), fsal=True, s_main=13, doc=doc, adaptive=adaptive, **kw
    )


_RK4_A = [[0, 0, 0, 0], ["1/2", 0, 0, 0], [0, "1/2", 0, 0], [0, 0, 1, 0]]
_RK4_B = ["1/6", "1/3", "1/3", "1/6"]

#: every method, in the order the families list them; each family offers each one its action
#: supports (geosweep.kernels.lie.methods): adding a method here adds it to every such family
METHODS: dict[str, Method] = {
    "lie_euler": _rk("lie_euler", RKMK, 1, [[0]], [1], doc="Lie–Euler: y₁ = exp(h f(y₀))·y₀."),
    "lie_euler_heun": _rk(
        "lie_euler_heun", RKMK, 2, [[0, 0], [1, 0]], ["1/2", "1/2"],
        doc="Lie–Euler–Heun (RKMK, Heun tableau, exact dexp⁻¹).",
    ),
    "rkmk3": _rk(
        "rkmk3", RKMK, 3, [[0, 0, 0], ["1/2", 0, 0], [-1, 2, 0]], ["1/6", "2/3", "1/6"],
        doc="RKMK with Kutta's third-order tableau and exact dexp⁻¹.",
    ),
    "rkmk4": _rk("rkmk4", RKMK, 4, _RK4_A, _RK4_B, doc="RKMK with the classical RK4 tableau and exact dexp⁻¹."),
    "rkmk4_2comm": _rk(
        "rkmk4_2comm", RKMK4_2COMM, 4, _RK4_A, _RK4_B,
        doc="Fourth-order RKMK with two commutators (Casas–Owren), no dexp⁻¹.",
    ),
    "cf4": _cf(
        "cf4",
        4,
        [(-1, []), (-1, [["1/2"]]), (-1, [[0, "1/2"]]), (1, [["-1/2", 0, 1]])],
        (-1, [["1/4", "1/6", "1/6", "-1/12"], ["-1/12", "1/6", "1/6", "1/4"]]),
        doc="Commutator-free CF4 (Celledoni–Marthinsen–Owren), 4 f-evaluations, 5 exponentials.",
    ),
    "cf3": _cf(
        "cf3",
        3,
        [(-1, []), (-1, [["1/3"]]), (-1, [[0, "2/3"]])],
        (1, [["-1/12", 0, "3/4"]]),
        emb=(-1, [[0, "1/2", "1/2"]]),
        emb_order=2,
        doc="Commutator-free CF(3,2) variant a, main third-order method at fixed step.",
    ),
    "cf3b": _cf(
        "cf3b",
        3,
        [(-1, []), (-1, [["2/3"]]), (-1, [["5/12", "1/4"]])],
        (2, [["-1/6", "-1/2", 1]]),
        emb=(-1, [["1/4", 0, "3/4"]]),
        emb_order=2,
        doc="Commutator-free CF(3,2) variant b (reuses Y₃), main third-order method at fixed step.",
    ),
    "cf43": _cf(
        "cf43",
        4,
        [(-1, []), (-1, [["1/2"]]), (-1, [[0, "1/2"]]), (1, [["-1/2", 0, 1]]), (-1, [[0, "3/4"]])],
        (-1, [["1/4", "1/6", "1/6", "-1/12"], ["-1/12", "1/6", "1/6", "1/4"]]),
        emb=(-1, [["1/3"], ["-1/9", "1/3", 0, 0, "4/9"]]),
        s_main=4,
        emb_order=3,
        doc="CF(4,3): CF4 main method at fixed step (embedded pair available for adaptivity).",
    ),
    "rkmk5": _rk(
        "rkmk5", RKMK, 5, _DP_A, _DP_B, fsal=True,
        doc="RKMK with the DOPRI5 main tableau at constant step (001 §5.3 comparison).",
    ),
    "rkmk45": _rk(
        "rkmk45", RKMK, 5, _DP_A, _DP_B, bhat=_v(_DP_BHAT), emb_order=4, fsal=True, P=_DP_P, adaptive=True,
        doc="Variable-step RKMK(5,4) on DOPRI5(4) with the controller of 001 eq. (33); sweep axis tol; "
        "dense output onto the shared time grid.",
    ),
    "rkmk8": _dop853(
        "rkmk8", RKMK, False,
        "RKMK with the Dormand–Prince 8(5,3) main tableau at constant step (12 f-evaluations/step).",
    ),
    "rkmk853": _dop853(
        "rkmk853", RKMK, True,
        "Variable-step RKMK of order 8 on DOP853: Hairer–Wanner's combined 5th/3rd-order error "
        "estimate (controller exponent 1/8), 7th-order dense output onto the shared time grid; sweep axis tol.",
    ),
    "rk4_ambient": _rk("rk4_ambient", AMBIENT, 4, _RK4_A, _RK4_B, doc="Classical RK4 on the ambient ODE (baseline)."),
    "dopri5_ambient": _rk(
        "dopri5_ambient", AMBIENT, 5, _DP_A, _DP_B, bhat=_v(_DP_BHAT), emb_order=4, fsal=True, P=_DP_P, adaptive=True,
        doc="Variable-step DOPRI5(4) on the ambient ODE (ODE45-like baseline), same controller.",
    ),
    "dop853_ambient": _dop853(
        "dop853_ambient", AMBIENT, True,
        "Variable-step DOP853 on the ambient ODE (the classical baseline on the same driver and controller "
        "as rkmk853).",
    ),
}  # fmt: skip


def get(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(METHODS)}") from None
