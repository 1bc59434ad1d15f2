"""The front door (issue 51 item 1): ``geosweep.system``/``systems``/``integrators``/``integrate``/``run``/
``extend``/``open``/``verify`` and the one ``Solution`` type.

The key check: every value ``geosweep.integrate`` returns — and every variable of its ``to_dataset()`` —
is bitwise what a real sweep store (``run_sweep(..., serial=True)``) of the same spec holds, for every
built-in system × every integrator that runs on it (tiny runs: two output intervals)."""

from __future__ import annotations

import doctest
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr
import zarr

import geosweep
from geosweep.kernels.registry import SYSTEMS, integrators_for, load_builtins
from geosweep.kernels.status import Status
from geosweep.kernels.vocabulary import RUN_DEPENDENT
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.spec import SpecError, parse_spec

load_builtins()

#: every built-in system's time grid here: two output intervals of two steps (adaptive: tol)
T, DT_OUT, H, TOL = 0.02, 0.01, 0.005, 1e-6
PAIRS = [(s.name, i.name) for s in SYSTEMS.values() for i in integrators_for(s)]
_STORES: dict[str, tuple[xr.Dataset, set[str]]] = {}


def _sweep_of(system: str, tmp_path_factory) -> tuple[xr.Dataset, set[str]]:
    """A real store of ``system`` × every integrator that runs on its default model (made once per system,
    read back whole), and the names of those integrators."""
    if system not in _STORES:
        model = geosweep.system(system).model
        names = [i.name for i in integrators_for(SYSTEMS[system]) if not i.applicable(model)]
        adaptive = [n for n in names if geosweep.integrators().loc[n, "adaptive"]]
        spec: dict = {"name": f"fd-{system}", "system": system, "integrators": names, "T": T, "dt_out": DT_OUT}
        spec["snapshot_dt"] = DT_OUT
        if len(adaptive) < len(names):
            spec["h"] = [H]
        if adaptive:
            spec["tol"] = [TOL]
        store = str(tmp_path_factory.mktemp("fd") / f"{system}.zarr")
        assert run_sweep(spec, store, serial=True).complete
        _STORES[system] = xr.open_zarr(store).load(), set(names)
    return _STORES[system]


def _bitwise(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return a.tobytes() == b.tobytes()


@pytest.mark.parametrize(("system", "integrator"), PAIRS)
def test_integrate_is_bitwise_a_sweep_cell(system, integrator, tmp_path_factory):
    ds, runnable = _sweep_of(system, tmp_path_factory)
    step = {"tol": TOL} if geosweep.integrators().loc[integrator, "adaptive"] else {"h": H}
    if integrator not in runnable:  # refused as the spec refuses it, naming the field
        with pytest.raises(SpecError, match=r"integrators\[0\]"):
            geosweep.integrate(system, integrator, T=T, dt_out=DT_OUT, snapshot_dt=DT_OUT, **step)
        return
    sol = geosweep.integrate(system, integrator, T=T, dt_out=DT_OUT, snapshot_dt=DT_OUT, **step)
    at = {"integrator": integrator, **{k: v for k, v in step.items()}}
    cell = ds.sel(at).isel({d: 0 for d in ("h", "tol") if d in ds.dims and d not in at})
    assert isinstance(sol.status, Status) and int(sol.status) == int(cell.status)
    for name, value in sol.values.items():  # the values themselves, by store name
        if name in RUN_DEPENDENT:
            continue
        assert _bitwise(np.asarray(value, dtype=cell[name].dtype), cell[name].values), name
    mine = sol.to_dataset()
    assert set(mine.data_vars) == set(cell.data_vars)
    for name in mine.data_vars:  # the layout: dtype, dims, padding, checksum and flags
        if name in RUN_DEPENDENT:
            continue
        assert mine[name].dims == cell[name].dims, name
        assert _bitwise(mine[name].values, cell[name].values), name
    for name in set(mine.coords) & set(cell.coords):
        assert np.array_equal(mine[name].values, cell[name].values), name


def test_integrate_refuses_as_a_spec_does():
    with pytest.raises(SpecError, match=r"^invalid sweep spec .*: h: needs at least one step size"):
        geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05)
    with pytest.raises(SpecError, match=r"integrator_options\.lp_rkmk4\.blowup: must be >= 0"):
        geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01, blowup=-1.0)
    with pytest.raises(SpecError, match=r"h\[0\]: dt_out = 0.05 is not a multiple of h = 0.03"):
        geosweep.integrate("heavy_top", "lp_rkmk4", T=0.15, dt_out=0.05, h=0.03)


def test_one_blowup_default_for_every_family():
    """The spec's energy guard (blowup = 0.5) in every family: a step far too long stops the run with
    energy_blowup in the (S²)ⁿ, heavy top, (TS²)ᴺ and SE(3) families alike (the kernels' own s2 ``integrate``
    defaulted to no guard), and ``blowup=0`` (guard off) lets each run on to another end."""
    cases = [("double_pendulum", "rk4", 0.5, 50.0), ("heavy_top", "lp_rk4_ambient", 0.05, 5.0)]
    cases += [("pendulum_chain", "rk4_ambient", 0.5, 50.0), ("so3_pendulum", "v1", 0.5, 50.0)]
    for system, integrator, h, T_end in cases:
        sol = geosweep.integrate(system, integrator, T=T_end, dt_out=h, h=h)
        assert sol.status == Status.ENERGY_BLOWUP, (system, integrator, sol.status)

        off = geosweep.integrate(system, integrator, T=T_end, dt_out=h, h=h, blowup=0.0)
        assert off.status != Status.ENERGY_BLOWUP, (system, integrator)
    # a failed run continues as `geosweep extend` continues a failed cell: nothing more is integrated, and its
    # values take the longer layout exactly as a direct run to the later T stores them
    failed = geosweep.integrate("double_pendulum", "rk4", T=25.0, dt_out=0.5, h=0.5)
    assert failed.status == Status.ENERGY_BLOWUP
    direct = geosweep.integrate("double_pendulum", "rk4", T=50.0, dt_out=0.5, h=0.5)
    longer = failed.continue_to(50.0)
    assert all(_bitwise(longer[n], v) for n, v in direct.values.items() if n not in RUN_DEPENDENT)


def test_system_validates_as_a_spec():
    top = geosweep.system("heavy_top", M=10.0)
    assert top.family == "top" and top.model is not None and top.kwargs["M"] == 10.0
    spec = {"name": "x", "system": "heavy_top", "integrators": ["lp_rkmk4"], "h": [0.01], "T": 0.1, "dt_out": 0.05}
    for params, field in (
        ({"mass": 1.0}, "params.mass"),
        ({"M": "heavy"}, "params.M"),
        ({"M": [1.0, 2.0]}, "params.M"),
    ):
        with pytest.raises(SpecError) as got:
            geosweep.system("heavy_top", **params)
        line = str(got.value)
        assert "\n" not in line and line.startswith(f"invalid system 'heavy_top': {field}: "), line
        if not isinstance(params.get("M"), list):  # the spec's own reason, word for word
            with pytest.raises(SpecError) as as_spec:
                parse_spec({**spec, "params": params})
            assert line.split(f"{field}: ", 1)[1] == str(as_spec.value).split(f"{field}: ", 1)[1]
    with pytest.raises(SpecError, match=r"^invalid system 'no_such': system: unknown system 'no_such'"):
        geosweep.system("no_such")
    # a System carries its parameters into the cell: the same values as a spec with those params
    sol = geosweep.integrate(top, "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
    assert float(sol.to_dataset()["M"]) == 10.0 and sol.spec.params == {"M": 10.0}


def _dispatchers() -> dict[int, int]:
    """Every Numba dispatcher of the loaded geosweep modules → its number of compiled signatures (0 for a
    kernel whose declared signatures wait for their first use: reading its overloads would compile them)."""
    from numba.core.dispatcher import Dispatcher

    from geosweep.kernels._jit import DeclaredDispatcher

    out = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("geosweep.") or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, DeclaredDispatcher) and value._declared is not None:
                out[id(value)] = 0
            elif isinstance(value, Dispatcher):
                out[id(value)] = len(value.overloads)
    return out


def test_listing_compiles_nothing():
    before = _dispatchers()
    assert before  # the families' kernels are loaded
    table = geosweep.systems()
    assert set(table.index) == set(SYSTEMS) and {"family", "parameters", "integrators"} <= set(table.columns)
    assert "M = 15.0 [kg]" in table.loc["heavy_top", "parameters"]
    every = geosweep.integrators()
    assert {"order", "adaptive", "options", "preserves", "family"} <= set(every.columns)
    top = geosweep.integrators("heavy_top")
    assert set(top.index) == {i.name for i in integrators_for(SYSTEMS["heavy_top"])}
    assert top.loc["lp_rkmk45", "adaptive"] and not top.loc["lp_rkmk4", "adaptive"]
    assert top.loc["lp_rkmk4", "order"] == 4 and "blowup = 0.5" in top.loc["lp_rkmk4", "options"]
    assert _dispatchers() == before


@pytest.mark.parametrize(("system", "integrator", "step"), [
    ("heavy_top", "lp_rkmk4", {"h": 0.01}),  # fixed step
    ("pendulum_chain", "rkmk45", {"tol": 1e-8}),  # adaptive with dense output: the carry before the last step
    ("nh_quartic", "dg_itoh_abe", {"h": 0.01}),
    ("rigid_body_lp", "dopri5_skew", {"tol": 1e-8}),  # adaptive, discrete-gradient family
])  # fmt: skip
def test_continue_to_is_a_direct_run(system, integrator, step, tmp_path):
    sol = geosweep.integrate(system, integrator, T=0.3, dt_out=0.1, **step)
    direct = geosweep.integrate(system, integrator, T=0.7, dt_out=0.1, **step)
    longer = sol.continue_to(0.5).continue_to(0.7)
    # resumable in another process: the checkpoint saved to a file, loaded, continued
    path = tmp_path / "sol.npz"
    np.savez(path, **sol.checkpoint())
    with np.load(path) as saved:
        again = geosweep.Solution.from_checkpoint(dict(saved)).continue_to(0.7)
    for other in (longer, again):
        assert set(other.values) == set(direct.values)
        for name, value in direct.values.items():
            if name not in RUN_DEPENDENT:
                assert _bitwise(other[name], value), name
    assert sol.T == 0.3 and sol.samples.sizes["time"] == 4  # unchanged
    with pytest.raises(ValueError, match="before this run's T"):
        sol.continue_to(0.2)


def test_samples_and_snapshots_are_labelled():
    sol = geosweep.integrate("pendulum_chain", "rkmk4", T=0.2, dt_out=0.1, h=0.01, snapshot_dt=0.1)
    assert sol.samples["energy"].dims == ("time",)
    assert np.allclose(sol.samples["time"].values, [0.0, 0.1, 0.2])
    snaps = sol.snapshots
    assert snaps.dims == ("snapshot", "body", "state") and np.allclose(snaps.snapshot_time, [0.0, 0.1, 0.2])
    assert _bitwise(snaps.values, sol["snapshot_state"])
    # the constraints of (TS²)ᴺ at round-off in every snapshot: |x_k| = 1, x_k·v_k = 0
    x, v = snaps.values[..., :3], snaps.values[..., 3:6]
    assert np.abs(np.linalg.norm(x, axis=-1) - 1).max() < 1e-13 and np.abs((x * v).sum(-1)).max() < 1e-12
    with pytest.raises(KeyError, match="'nope' is not a stored name of this run"):
        sol["nope"]


def test_run_extend_open_verify(tmp_path):
    from geosweep.sweeps import Execution
    from geosweep.sweeps.store import StoreFormatError

    spec = {"name": "fd-run", "system": "heavy_top", "integrators": ["lp_rkmk4"], "h": [0.01], "T": 0.1,
            "dt_out": 0.05, "params": {"M": [10.0, 15.0]}}  # fmt: skip
    store = str(tmp_path / "run.zarr")
    assert geosweep.run(spec, store, execution=Execution(serial=True)).complete
    assert geosweep.extend(store, T=0.2, serial=True).complete
    ds = geosweep.open(store)
    assert hasattr(ds, "geosweep") and ds.sizes["time"] == 5
    # the extended store holds what integrate gives for a cell of the longer spec
    sol = geosweep.integrate(geosweep.system("heavy_top", M=10.0), "lp_rkmk4", T=0.2, dt_out=0.05, h=0.01)
    assert _bitwise(ds.energy.sel(M=10.0, integrator="lp_rkmk4", h=0.01).values, sol["energy"])
    assert geosweep.verify(store).ok
    # a damaged value: the one cell is named by its coordinates
    arr = zarr.open_group(store, mode="r+")["E0"]
    values = arr[...]
    values[0, 0, 1] += 1.0
    arr[...] = values
    found = geosweep.verify(store)
    assert not found.ok and found.damaged == [{"integrator": "lp_rkmk4", "h": 0.01, "M": 15.0}]
    # a store of another format, or not a geosweep store, refused in one line
    zarr.open_group(store, mode="r+").attrs["geosweep_format"] = 1
    with pytest.raises(StoreFormatError, match="has store format 1") as got:
        geosweep.open(store)
    assert "\n" not in str(got.value)
    other = str(tmp_path / "other.zarr")
    zarr.open_group(other, mode="w").attrs["title"] = "not ours"
    with pytest.raises(StoreFormatError, match="is not a geosweep store"):
        geosweep.open(other)


def test_front_door_loads_on_first_use():
    code = (
        "import sys, geosweep\n"
        "assert 'geosweep.api' not in sys.modules and 'geosweep.sweeps.engine' not in sys.modules\n"
        "assert callable(geosweep.integrate) and 'geosweep.api' in sys.modules\n"
        "assert 'geosweep.sweeps.engine' not in sys.modules and 'distributed' not in sys.modules\n"
        "assert geosweep.Solution.__module__ == 'geosweep.solution' and 'integrate' in dir(geosweep)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("module", ["geosweep.api", "geosweep.solution"])
def test_docstring_examples_run(module):
    import importlib

    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
    public = [getattr(mod, n) for n in mod.__all__]
    for obj in public:  # every public name documented with an example
        assert obj.__doc__ and ">>>" in obj.__doc__, obj


#: the system each family's declared invariants are measured on (its invariants hold there: J conserved,
#: a quadratic Casimir, Lie–Poisson Casimirs)
_ON = {"s2": "sphere_three_body", "ts2": "pendulum_chain", "top": "heavy_top", "quad": "two_quadrotors"}
_ON |= {"dg": "rigid_body_lp", "se3": "so3_pendulum"}
#: claims a cell's stored values cannot show (the symplectic form; momenta of potentials these systems lack)
_STRUCTURAL = {"symplectic", "P and L (invariant potentials)"}


def _orthogonal(sol, prefix: str) -> float:
    """max |RᵀR − I| of the rotation stored as ``{prefix}_ij`` in the final state."""
    ds = sol.to_dataset()
    R = ds.final_state.sel(state=[f"{prefix}_{i}{j}" for i in (1, 2, 3) for j in (1, 2, 3)]).values.reshape(-1, 3, 3)
    return float(np.abs(np.einsum("bki,bkj->bij", R, R) - np.eye(3)).max())


def _quad_check(sol, claim: str) -> float:
    ds = sol.to_dataset()
    state = ds.final_state.isel(body=0)
    if claim == "R_i ∈ SO(3)":
        return max(_orthogonal(sol, "R1"), _orthogonal(sol, "R2"))
    q = [state.sel(state=[f"q{k}_{c}" for c in "xyz"]).values for k in (1, 2)]
    if claim == "|q_i| = 1":
        return max(abs(float(np.sqrt((x * x).sum())) - 1.0) for x in q)
    w = [state.sel(state=[f"w{k}_{c}" for c in "xyz"]).values for k in (1, 2)]
    return max(abs(float((x * y).sum())) for x, y in zip(q, w))


_CHECKS = {
    "|q_i| = 1": lambda sol: sol["max_unit_error"],
    "|x_k| = 1": lambda sol: sol["max_unit_error"],
    "x_k·v_k = 0": lambda sol: sol["max_tangency_error"],
    "momentum map J (symmetric V)": lambda sol: sol["max_momentum_error"] / 10.0,  # |J| ~ 10 here
    "energy": lambda sol: sol["max_rel_energy_error"],
    "energy (up to quadrature)": lambda sol: sol["max_rel_energy_error"],  # quartic H: the quadrature is exact
    "quadratic invariants": lambda sol: sol["max_casimir_error"],  # the Casimir ½|m|²
    "Casimirs |Γ|², Γ·Π (coadjoint orbit)": lambda sol: max(sol["max_cas_gamma"], sol["max_dJ3"] / 100.0),
    "R ∈ SO(3)": lambda sol: sol["max_orth"],
}
#: the quadrotors store no constraint errors: measured on the final state
_QUAD_CHECKS = {
    c: (lambda claim: lambda sol: _quad_check(sol, claim))(c) for c in ("R_i ∈ SO(3)", "|q_i| = 1", "q_i·ω_i = 0")
}


@pytest.mark.parametrize("integrator", sorted(n for n, i in geosweep.integrators().iterrows() if i["preserves"]))
def test_declared_invariants_hold(integrator):
    """What ``geosweep.integrators()`` says a method preserves holds to round-off on a 50-step run (relative
    to the invariant's size; Newton-type solvers at their default tolerance 1e-14)."""
    row = geosweep.integrators().loc[integrator]
    system = _ON[row["family"]]
    h = 0.001 if system == "heavy_top" else 0.01
    step = {"tol": 1e-8} if row["adaptive"] else {"h": h}
    sol = geosweep.integrate(system, integrator, T=50 * h, dt_out=10 * h, **step)
    assert sol.status == Status.OK
    checks = _QUAD_CHECKS if row["family"] == "quad" else _CHECKS
    for claim in row["preserves"]:
        if claim not in _STRUCTURAL:
            assert float(checks[claim](sol)) < 1e-12, (integrator, claim, float(checks[claim](sol)))


def test_a_plugin_family_through_the_front_door(tmp_path):
    """A family registered from outside geosweep (tests/toy_family.py) is built, listed, integrated and
    extended through the same calls, bitwise its sweep cells."""
    from geosweep.kernels.registry import FAMILIES, INTEGRATORS, register_module
    from tests import toy_family

    register_module(toy_family)
    try:
        osc = geosweep.system("oscillators", n=2, omega=2.0)
        assert "n = 3" in geosweep.systems().loc["oscillators", "parameters"]
        assert set(geosweep.integrators(osc).index) == {"symplectic_euler", "verlet"}
        with pytest.raises(SpecError, match=r"params\.n: must be >= 1"):
            geosweep.system("oscillators", n=0)
        spec = {"name": "fd-osc", "system": "oscillators", "integrators": ["verlet"], "h": [0.01], "T": 0.5,
                "dt_out": 0.1, "params": {"n": 2, "omega": [2.0, 3.0]}}  # fmt: skip
        store = str(tmp_path / "osc.zarr")
        assert geosweep.run(spec, store, serial=True).complete
        sol = geosweep.integrate(osc, "verlet", T=0.2, dt_out=0.1, h=0.01).continue_to(0.5)
        ds = geosweep.open(store).sel(omega=2.0, integrator="verlet", h=0.01).load()
        for name, value in sol.values.items():
            if name not in RUN_DEPENDENT:
                assert _bitwise(np.asarray(value, dtype=ds[name].dtype), ds[name].values), name
    finally:  # the registry is process-wide: leave it as the other tests expect it
        FAMILIES.pop("osc", None)
        SYSTEMS.pop("oscillators", None)
        for name in ("symplectic_euler", "verlet"):
            INTEGRATORS.pop(name, None)


def test_continue_to_is_what_extend_stores(tmp_path):
    """``Solution.continue_to`` and ``geosweep extend`` continue a cell alike: a store run to T₁ and extended
    to T₂ holds, value for value, what ``integrate(T₁).continue_to(T₂)`` returns — for a fixed-step method and
    an adaptive one with dense output (whose carry is the state before its last, clipped step)."""
    spec = {"name": "fd-ext", "system": "pendulum_chain", "integrators": ["rkmk4", "rkmk45"], "h": [0.01],
            "tol": [1e-8], "T": 0.3, "dt_out": 0.1, "params": {"N": 3}}  # fmt: skip
    store = str(tmp_path / "ext.zarr")
    assert geosweep.run(spec, store, serial=True).complete
    assert geosweep.extend(store, T=0.6, serial=True).complete
    ds = geosweep.open(store).load()
    chain = geosweep.system("pendulum_chain", N=3)
    for integrator, step in (("rkmk4", {"h": 0.01}), ("rkmk45", {"tol": 1e-8})):
        sol = geosweep.integrate(chain, integrator, T=0.3, dt_out=0.1, **step).continue_to(0.6)
        cell = ds.sel(integrator=integrator, **step).isel({k: 0 for k in ("h", "tol") if k not in step})
        for name, value in sol.values.items():
            if name not in RUN_DEPENDENT:
                assert _bitwise(np.asarray(value, dtype=cell[name].dtype), cell[name].values), (integrator, name)
