"""Runge–Kutta-type integrators as objects, read from the one table of method records.

Every Runge–Kutta-type integrator of every family is a tableau of
:data:`geosweep.kernels.tableaux.TABLEAUX` used one way: :class:`RKMK` (Runge–Kutta–Munthe-Kaas on
the family's Lie group action), :class:`CommutatorFree` (products of exponentials; their own
coefficients) or :class:`Ambient` (the classical method on the ambient ODE: the baselines). An object
names the method independently of the family; :func:`geosweep.integrate` accepts it beside the
integrator's name and runs the family's integrator of that method (``RKMK(tableau="dop853")`` is
``rkmk853`` on the pendulum chain, ``lp_rkmk853`` on the heavy top, ``quad_rkmk853`` on the
quadrotors), bitwise the same as by name.

    >>> from geosweep.methods import RKMK, Ambient
    >>> m = RKMK(tableau="dop853")
    >>> m.order, m.stages, m.adaptive, m.dense_output
    (8, 16, True, True)
    >>> m
    RKMK(tableau='dop853', adaptive=True)
    >>> m.integrator_for("heavy_top")
    'lp_rkmk853'
    >>> Ambient(tableau="rk4", project=True).integrator_for("lj_sphere")
    'rk4_proj'

Adding a tableau is one record: :func:`register` (or a :class:`~geosweep.kernels.tableaux.Tableau`
in ``TABLEAUX`` plus its method in :data:`geosweep.kernels.lie.tableaux.METHODS`) offers it in every
family with a group action, in :func:`geosweep.integrators`, ``geosweep systems`` and
:func:`markdown_table`. This module imports no xarray, pandas, Prefect, Dask or Numba; the families
are loaded on first use.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from geosweep.kernels import tableaux as rk_tableaux
from geosweep.kernels.tableaux import Tableau

if TYPE_CHECKING:
    from geosweep.kernels.lie.tableaux import Method as LieMethod


def _lie() -> ModuleType:
    """The Lie methods' records (imported on use: they import Numba)."""
    from geosweep.kernels.lie import tableaux

    return tableaux


__all__ = [
    "Ambient",
    "CommutatorFree",
    "Method",
    "RKMK",
    "docs_text",
    "entries",
    "markdown_table",
    "method_of",
    "register",
    "unregister",
    "write_docs",
]

_LIE_KEEPS = ("the manifold of the group action (to round-off)",)


@dataclass(frozen=True, repr=False)
class Method:
    """A Runge–Kutta-type method independent of the family (base class: :class:`RKMK`,
    :class:`CommutatorFree`, :class:`Ambient`). ``tableau`` names a record of
    :data:`geosweep.kernels.tableaux.TABLEAUX`; ``adaptive`` (default: whether the tableau has an
    embedded formula) selects the variable-step use, swept over ``tol``."""

    tableau: str
    adaptive: bool | None = None

    kind: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if self.adaptive is None:
            object.__setattr__(self, "adaptive", self._tableau().embedded)

    def _tableau(self) -> Tableau:
        return rk_tableaux.get(self.tableau)

    @property
    def order(self) -> int:
        """Classical order of the main formula."""
        return self._tableau().order

    @property
    def stages(self) -> int:
        """Stages a step evaluates: the main ones at a fixed step, every one (embedded and
        dense-output stages included) when adaptive."""
        t = self._tableau()
        return t.stages if self.adaptive else t.s_main

    @property
    def dense_output(self) -> bool:
        """Samples inside a step come from the tableau's continuous extension (adaptive only)."""
        return bool(self.adaptive) and self._tableau().dense_output

    @property
    def preserves(self) -> tuple[str, ...]:
        """What the method keeps whatever the family (each family's own words: :func:`geosweep.integrators`)."""
        return ()

    def _args(self) -> str:
        return f"tableau={self.tableau!r}, adaptive={self.adaptive!r}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._args()})"

    def integrator_for(self, system: Any) -> str:
        """The name of this method's integrator in the family of ``system`` (a system name, a
        :class:`geosweep.api.System` or a model's family name); ValueError naming the field if the
        family has none."""
        family = _family_of(system)
        for e in entries():
            if e.family == family and e.method == self:
                return e.name
        offered = sorted({e.family for e in entries() if e.method == self})
        raise ValueError(f"integrator: {self!r} has no integrator in family {family!r} (offered in {offered})")


@dataclass(frozen=True, repr=False)
class RKMK(Method):
    """Runge–Kutta–Munthe-Kaas on the family's group action: the tableau applied to the dexp⁻¹
    equation, exact dexp⁻¹ (``two_commutators=True``: Casas–Owren's 4th-order form with two
    commutators, on the RK4 tableau only). Offered by ts2, top (``lp_*``) and quad (``quad_*``)."""

    two_commutators: bool = False
    kind: ClassVar[str] = "RKMK"

    @property
    def preserves(self) -> tuple[str, ...]:
        return _LIE_KEEPS

    def _args(self) -> str:
        return super()._args() + (", two_commutators=True" if self.two_commutators else "")


@dataclass(frozen=True, repr=False)
class CommutatorFree(Method):
    """A commutator-free Lie group method (``tableau`` names the scheme of
    :data:`geosweep.kernels.lie.tableaux.METHODS`: ``cf4``, ``cf3``, ``cf3b``, ``cf43``; its
    coefficients are its own, its underlying classical tableau is the record's ``A``, ``b``)."""

    kind: ClassVar[str] = "CF"

    def __post_init__(self) -> None:
        if self.adaptive is None:
            object.__setattr__(self, "adaptive", self._record().adaptive)

    def _record(self) -> LieMethod:
        lie_tableaux = _lie()
        m = lie_tableaux.METHODS.get(self.tableau)
        if m is None or m.kind != lie_tableaux.CF:
            cf = sorted(n for n, r in lie_tableaux.METHODS.items() if r.kind == lie_tableaux.CF)
            raise ValueError(f"tableau: unknown commutator-free scheme {self.tableau!r}; choose from {cf}")
        return m

    @property
    def order(self) -> int:
        return self._record().order

    @property
    def stages(self) -> int:
        m = self._record()
        return m.stages if self.adaptive else m.s_main

    @property
    def dense_output(self) -> bool:
        return bool(self.adaptive) and self._record().P is not None

    @property
    def preserves(self) -> tuple[str, ...]:
        return _LIE_KEEPS


@dataclass(frozen=True, repr=False)
class Ambient(Method):
    """The classical explicit Runge–Kutta method on the ambient ODE (a baseline: keeps no
    constraint), in every family that offers it: s2 (``rk2``, ``rk4``; ``project=True``: then
    q_i ← q_i/|q_i| each step, ``*_proj``), ts2/top/quad (``*_ambient``) and dg (``*_skew``)."""

    project: bool = False
    kind: ClassVar[str] = "ambient"

    @property
    def preserves(self) -> tuple[str, ...]:
        return ("|q_i| = 1 (by projection)",) if self.project else ()

    def _args(self) -> str:
        return super()._args() + (", project=True" if self.project else "")


@dataclass(frozen=True)
class Entry:
    """One family's integrator of a method: its ``name``, ``family`` and :class:`Method`."""

    name: str
    family: str
    method: Method


def method_of(record: LieMethod) -> Method:
    """The object form of a Lie method record of :data:`geosweep.kernels.lie.tableaux.METHODS`."""
    lie_tableaux = _lie()
    if record.kind == lie_tableaux.CF:
        return CommutatorFree(record.name, record.adaptive)
    if record.kind == lie_tableaux.AMBIENT:
        return Ambient(record.tableau, record.adaptive)
    return RKMK(record.tableau, record.adaptive, two_commutators=record.kind == lie_tableaux.RKMK4_2COMM)


def _lie_entries() -> Iterator[Entry]:
    from geosweep.kernels.lie.methods import ACTIONS

    for action in ACTIONS.values():
        for name, record in action.methods().items():
            yield Entry(name, action.family, method_of(record))


def entries() -> list[Entry]:
    """Every Runge–Kutta-type integrator of every loaded family, with its method (loads the built-in
    families): the Lie families' methods in the tableaux' order, then the (S²)ⁿ and dg baselines."""
    from geosweep.kernels.dg.steppers import RK_TABLEAUX
    from geosweep.kernels.registry import INTEGRATORS, load_builtins
    from geosweep.kernels.s2.stepper import RK_BASELINES

    load_builtins()
    out = list(_lie_entries())
    out += [Entry(n, "s2", Ambient(t, False, project=p)) for n, (t, p) in RK_BASELINES.items()]
    out += [Entry(n, "dg", Ambient(t)) for n, t in RK_TABLEAUX.items()]
    return [e for e in out if e.name in INTEGRATORS]


def _family_of(system: Any) -> str:
    from geosweep.kernels.registry import FAMILIES, SYSTEMS, load_for

    name = getattr(system, "name", system)
    if isinstance(name, str) and name in FAMILIES and name not in SYSTEMS:
        return name
    load_for(str(name))
    if name not in SYSTEMS:
        raise ValueError(f"system: unknown system {name!r}; known: {sorted(SYSTEMS)}")
    return SYSTEMS[name].family


def resolve(system: Any, integrator: str | Method) -> str:
    """The integrator name ``integrator`` stands for on ``system`` (a name stays itself)."""
    return integrator.integrator_for(system) if isinstance(integrator, Method) else integrator


# ---- adding a tableau -------------------------------------------------------------------------
def register(t: Tableau, kinds: tuple[str, ...] = ("RKMK",)) -> tuple[Any, ...]:
    """Add tableau ``t`` to the table and offer it as the ``kinds`` given: in every family with a group
    action, ``"RKMK"`` (integrator ``rkmk_<name>``) and ``"ambient"`` (``<name>_ambient``),
    variable-step when it has an embedded formula; in the (S²)ⁿ family, ``"s2"`` (the fixed-step
    baselines ``<name>`` and ``<name>_proj``, explicit tableaux only). Returns the registry entries it got."""
    from geosweep.kernels.lie import methods as lie_methods

    lie_tableaux = _lie()
    if t.name in rk_tableaux.TABLEAUX:
        raise ValueError(f"tableau {t.name!r} exists already")
    unknown = set(kinds) - {"RKMK", "ambient", "s2"}
    if unknown:
        raise ValueError(f"kinds: unknown {sorted(unknown)}; choose from 'RKMK', 'ambient', 's2'")
    builders = {"RKMK": (f"rkmk_{t.name}", lie_tableaux.RKMK), "ambient": (f"{t.name}_ambient", lie_tableaux.AMBIENT)}
    rk_tableaux.TABLEAUX[t.name] = t
    out: tuple[Any, ...] = ()
    for kind in kinds:
        if kind == "s2":
            out += _register_s2(t.name)
            continue
        name, code = builders[kind]
        doc = f"{kind} on the {t.name} tableau: {t.doc}"
        out += lie_methods.register(lie_tableaux.from_tableau(name, code, t, doc, adaptive=t.embedded))
    return out


def _register_s2(tableau: str) -> tuple[Any, ...]:
    """The (S²)ⁿ baselines ``<tableau>`` and ``<tableau>_proj`` of a registered tableau."""
    from geosweep.kernels.registry import load_builtins
    from geosweep.kernels.s2.family import add_rk_baseline

    load_builtins()
    return (add_rk_baseline(tableau, tableau, False), add_rk_baseline(f"{tableau}_proj", tableau, True))


def unregister(name: str) -> None:
    """Remove tableau ``name`` and every method :func:`register` made of it."""
    from geosweep.kernels.lie import methods as lie_methods

    rk_tableaux.TABLEAUX.pop(name, None)
    for method in (f"rkmk_{name}", f"{name}_ambient"):
        lie_methods.unregister(method)
    from geosweep.kernels.s2.stepper import RK_BASELINES

    if RK_BASELINES.get(name, ("",))[0] == name:
        from geosweep.kernels.s2.family import remove_rk_baseline

        for s2_name in (name, f"{name}_proj"):
            remove_rk_baseline(s2_name)


# ---- the docs' table ---------------------------------------------------------------------------
def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


_FAMILY_ORDER = {f: i for i, f in enumerate(("s2", "ts2", "top", "quad", "dg"))}


def markdown_table() -> str:
    """The Markdown table of every Runge–Kutta-type method, one row per method object, read from the
    records: the object, its tableau, order, stages per step, adaptivity, dense output, what it keeps
    and each family's integrator name (the README's and the docs' methods table)."""
    rows: dict[Method, list[Entry]] = {}
    for e in entries():
        rows.setdefault(e.method, []).append(e)
    head = "| method | order | stages | adaptive | dense output | preserves | integrators (family) |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for m, es in rows.items():
        es.sort(key=lambda e: _FAMILY_ORDER.get(e.family, len(_FAMILY_ORDER)))
        names = ", ".join(f"`{e.name}` ({e.family})" for e in es)
        keeps = "; ".join(m.preserves).replace("|", "\\|") or "nothing (baseline)"
        flags = f"{_yes(bool(m.adaptive))} | {_yes(m.dense_output)}"
        lines.append(f"| `{m!r}` | {m.order} | {m.stages} | {flags} | {keeps} | {names} |")
    return "\n".join(lines) + "\n"


def docs_text() -> str:
    """``docs/methods.md``: the generated table with its header."""
    return (
        "# Runge–Kutta-type methods\n\n"
        "Generated from the method records (`kernels/tableaux.py`, `kernels/lie/tableaux.py`) by\n"
        "`python -c 'from geosweep import methods; methods.write_docs()'` (`tests/test_methods.py` checks it).\n"
        "Each row is one method object of `geosweep.methods`, which `geosweep.integrate` accepts beside the\n"
        "integrator's name; stages are those a step evaluates (every one when adaptive).\n\n" + markdown_table()
    )


def write_docs(path: str | None = None) -> None:
    """Write :func:`docs_text` to ``docs/methods.md`` of the checkout (or ``path``)."""
    from pathlib import Path

    target = Path(path) if path else Path(__file__).resolve().parent.parent / "docs" / "methods.md"
    target.write_text(docs_text())
