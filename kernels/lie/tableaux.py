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

from geosweep.kernels import tableaux as rk_tableaux
from geosweep.kernels.lie.se3 import DEXPINV_EXACT
from geosweep.kernels.tableaux import dop853_exact  # noqa: F401 - re-exported: the DOP853 data live there

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
    #: the tableau of :data:`geosweep.kernels.tableaux.TABLEAUX` the coefficients come from ("" for the
    #: commutator-free methods, whose coefficients are their own)
    tableau: str = ""

    @property
    def dense_output(self) -> bool:
        """Samples inside a step come from a continuous extension (adaptive methods with ``P``)."""
        return self.adaptive and self.P is not None

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


def from_tableau(name: str, kind: int, tab: str | rk_tableaux.Tableau, doc: str, adaptive: bool = False) -> Method:
    """The method of ``kind`` (RKMK or AMBIENT) on the tableau ``tab`` (a record, or the name of one of
    :data:`geosweep.kernels.tableaux.TABLEAUX`): at a
    fixed step its main stages (``s_main``), with ``adaptive`` every stage, the embedded estimate(s),
    the dense output and the tableau's controller exponent (DOP853: 13 stages first-same-as-last at a
    fixed step, 16 with its estimators and dense-output stages, computed only in steps that contain a
    sample)."""
    t = rk_tableaux.get(tab) if isinstance(tab, str) else tab
    if kind not in (RKMK, RKMK4_2COMM, AMBIENT):
        raise ValueError(f"method {name!r}: a tableau makes an RKMK or ambient method, not kind {kind}")
    s = t.stages if adaptive else t.s_main
    kw: dict[str, Any] = {}
    if adaptive:
        if not t.embedded:
            raise ValueError(f"method {name!r}: tableau {t.name!r} has no embedded formula for a variable step")
        kw = dict(bhat=t.bhat_f64(), bhat3=t.bhat3_f64(), emb_order=t.emb_order, P=t.P_f64(), controller=t.controller)
    return Method(
        name=name, kind=kind, order=t.order, A=t.A_f64(s), b=t.b_f64(s), fsal=t.fsal, s_main=t.s_main, doc=doc,
        adaptive=adaptive, tableau=t.name, **kw,
    )  # fmt: skip


#: process-wide state: every method, in the order the families list them; each family offers each one
#: its action supports (geosweep.kernels.lie.methods): adding a method here adds it to every such family,
#: and :func:`geosweep.kernels.lie.methods.register` adds one at run time
METHODS: dict[str, Method] = {
    "lie_euler": from_tableau("lie_euler", RKMK, "euler", "Lie–Euler: y₁ = exp(h f(y₀))·y₀."),
    "lie_euler_heun": from_tableau(
        "lie_euler_heun", RKMK, "heun", "Lie–Euler–Heun (RKMK, Heun tableau, exact dexp⁻¹)."
    ),
    "rkmk3": from_tableau("rkmk3", RKMK, "kutta3", "RKMK with Kutta's third-order tableau and exact dexp⁻¹."),
    "rkmk4": from_tableau("rkmk4", RKMK, "rk4", "RKMK with the classical RK4 tableau and exact dexp⁻¹."),
    "rkmk4_2comm": from_tableau(
        "rkmk4_2comm", RKMK4_2COMM, "rk4", "Fourth-order RKMK with two commutators (Casas–Owren), no dexp⁻¹."
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
    "rkmk5": from_tableau(
        "rkmk5", RKMK, "dopri5", "RKMK with the DOPRI5 main tableau at constant step (001 §5.3 comparison)."
    ),
    "rkmk45": from_tableau(
        "rkmk45", RKMK, "dopri5",
        "Variable-step RKMK(5,4) on DOPRI5(4) with the controller of 001 eq. (33); sweep axis tol; "
        "dense output onto the shared time grid.",
        adaptive=True,
    ),
    "rkmk8": from_tableau(
        "rkmk8", RKMK, "dop853",
        "RKMK with the Dormand–Prince 8(5,3) main tableau at constant step (12 f-evaluations/step).",
    ),
    "rkmk853": from_tableau(
        "rkmk853", RKMK, "dop853",
        "Variable-step RKMK of order 8 on DOP853: Hairer–Wanner's combined 5th/3rd-order error "
        "estimate (controller exponent 1/8), 7th-order dense output onto the shared time grid; sweep axis tol.",
        adaptive=True,
    ),
    "rk4_ambient": from_tableau("rk4_ambient", AMBIENT, "rk4", "Classical RK4 on the ambient ODE (baseline)."),
    "dopri5_ambient": from_tableau(
        "dopri5_ambient", AMBIENT, "dopri5",
        "Variable-step DOPRI5(4) on the ambient ODE (ODE45-like baseline), same controller.",
        adaptive=True,
    ),
    "dop853_ambient": from_tableau(
        "dop853_ambient", AMBIENT, "dop853",
        "Variable-step DOP853 on the ambient ODE (the classical baseline on the same driver and controller "
        "as rkmk853).",
        adaptive=True,
    ),
}  # fmt: skip


def get(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(METHODS)}") from None
