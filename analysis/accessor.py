"""The ``ds.geosweep`` xarray accessor: selections, drift fits, classification, orders, cost.

Conventions (see README "Store layout", store format 2): the *sweep dims* are the dims of
``status`` (``integrator``, ``h`` and/or ``tol``, swept parameters); everything else (``time``,
``component``, ``body``, ``state``, ``snapshot`` …) is per cell. ``status`` 0 is ok, > 0 failed,
−1 not run, −2 not applicable; the label of every code is read from the data (the CF attrs
``flag_values``/``flag_meanings`` of ``status``), and each integrator's family, order and
adaptivity from the coordinates ``integrator_family``, ``integrator_order`` and
``integrator_adaptive``; only the default error variable of orders and the default report slice
are looked up in the kernel registry (what the family and system declare). Every method that
leaves cells out says how many and why through a :class:`CellsDroppedWarning` (always
shown, never de-duplicated) and records the same text in ``attrs["geosweep_selection"]``
of its result.

Laziness: on a dask-backed Dataset (``xr.open_zarr``) only ``status`` (one int8 per cell) is
loaded to count cells; fits are built with ``xr.apply_ufunc(dask="parallelized")`` and stay
lazy until ``.compute()``/``.values``. :meth:`work_precision` returns a pandas table and
therefore computes its two scalar variables.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from geosweep.analysis.fits import linear_fit, loglog_fit

METHOD_DIMS = ("integrator", "h", "tol")
#: Per-cell dims of an error variable that are reduced by taking one label (``block`` 0: the whole state).
ERROR_BLOCK = {"block": 0}
#: The cost variable counting potential/force/vector-field evaluations (every family).
EVAL_VAR = "f_evals"
#: Coordinates along ``integrator`` that describe each method.
INTEGRATOR_COORDS = ("integrator_family", "integrator_order", "integrator_adaptive")
#: Machine epsilon of the stored float64 values.
EPS = float(np.finfo(np.float64).eps)
#: Round-off floor of an energy error, in units of ε·scale·steps: a rounding error of a few ε of the
#: energy per step, accumulating at worst linearly over the cell's accepted steps (measured: the
#: discrete gradients on the gearbox reach ≈ 2.5·ε·steps, on the chain and Lotka–Volterra ≈ ε).
ROUNDOFF_ULPS = 10.0
#: A relative error at least this large at every point is O(1): the step sizes are pre-asymptotic.
PRE_ASYMPTOTIC_ERROR = 1e-2


class CellsDroppedWarning(UserWarning):
    """Cells were left out of a result (failed, not run or not applicable)."""


warnings.simplefilter("always", CellsDroppedWarning)


def _say(msg: str) -> None:
    warnings.warn(msg, CellsDroppedWarning, stacklevel=3)


def _fillers(labels: dict[int, str]) -> list[int]:
    """Status codes that mark filler cells (``not_applicable``): never computed, never a lost result."""
    return [c for c, lab in labels.items() if lab == "not_applicable"]


def _lost(status: np.ndarray, keep: np.ndarray, labels: dict[int, str]) -> bool:
    """True if a left-out cell is a real loss (failed or not run), not only not-applicable filler."""
    return bool((~keep & ~np.isin(status, _fillers(labels))).any())


def per_unit(units: str, per: str) -> str:
    """UDUNITS-parsable ``units / per`` (``"J s-1"``, ``"s-1"``; ``"1"`` stays dimensionless)."""
    if per in ("", "1"):
        return units or "1"
    inv = f"({per})-1" if " " in per or "/" in per else f"{per}-1"
    return inv if units in ("", "1") else f"{units} {inv}"


def parse_selection(ds: xr.Dataset, select: dict[str, Any] | None) -> dict[str, Any]:
    """Validate ``{axis: label}`` against the swept parameters of ``ds``; labels given as text
    (``--sel omega=3.25``) are converted to the axis's type and matched to the nearest float label.
    Raises ``ValueError`` naming the offending field."""
    out: dict[str, Any] = {}
    extra = [str(d) for d in sweep_dims(ds) if d not in METHOD_DIMS]
    for name, value in (select or {}).items():
        if name not in extra:
            fixed = name in ds.coords and ds[name].ndim == 0
            what = f"fixed at {ds[name].values.item()!r}" if fixed else "not an axis"
            raise ValueError(
                f"sel.{name}: not a swept parameter of this store ({what}; swept: {', '.join(extra) or 'none'})"
            )
        labels = ds[name].values
        if np.issubdtype(labels.dtype, np.number):
            try:
                v = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"sel.{name}: {value!r} is not a number") from None
            k = int(np.argmin(np.abs(labels.astype(np.float64) - v)))
            if not np.isclose(float(labels[k]), v, rtol=1e-9, atol=0.0):
                raise ValueError(f"sel.{name}: {value} is not one of the swept values {labels.tolist()}")
            out[name] = labels[k].item()
        else:
            if str(value) not in [str(x) for x in labels]:
                raise ValueError(f"sel.{name}: {value!r} is not one of the swept values {labels.tolist()}")
            out[name] = str(value)
    return out


def declared_selection(system: str) -> dict[str, Any]:
    """The default report slice a system declares: its ``SystemDef.report_sel`` over the declared
    parameter defaults (the papers' values); {} for an unknown (e.g. plugin) system."""
    try:
        from geosweep.kernels.registry import SYSTEMS, load_for

        if system not in SYSTEMS:
            load_for(system)
        sysdef = SYSTEMS[system]
    except Exception:  # noqa: BLE001 - an unknown system simply declares no slice
        return {}
    out = {p.name: p.default for p in sysdef.params if p.default is not None}
    out.update(getattr(sysdef, "report_sel", None) or {})
    return out


def declared_order_error_vars(system: str, family: str) -> tuple[str, ...]:
    """The error variables ``family`` declares for convergence orders (``FamilyDef.order_error_vars``);
    () for a family no loaded module declares."""
    from geosweep.kernels.registry import declared

    fam = declared(system, family)[1]
    return fam.order_error_vars if fam is not None else ()


def sweep_dims(ds: xr.Dataset) -> tuple[Hashable, ...]:
    """The sweep axes of a geosweep Dataset (the dims of ``status``)."""
    if "status" in ds:
        return tuple(ds["status"].dims)
    return tuple(d for d in ds.dims if d in METHOD_DIMS)


def status_labels(status: xr.DataArray) -> dict[int, str]:
    """Code → label from the CF attrs ``flag_values``/``flag_meanings`` of ``status`` ({} if absent)."""
    values, meanings = status.attrs.get("flag_values"), status.attrs.get("flag_meanings")
    if values is None or meanings is None:
        return {}
    names = meanings.split() if isinstance(meanings, str) else [str(m) for m in meanings]
    codes = [int(v) for v in np.atleast_1d(values)]
    if len(codes) != len(names):
        raise ValueError(f"status: {len(codes)} flag_values but {len(names)} flag_meanings")
    return dict(zip(codes, names))


def status_label(code: int, labels: dict[int, str]) -> str:
    """Label of one status code; ``unlabelled_<code>`` only if the data carries no label for it."""
    return labels.get(int(code), f"unlabelled_{int(code)}")


def describe_status(status: np.ndarray, labels: dict[int, str]) -> dict[str, int]:
    """Counts of each status label (``{"ok": 10, "energy_blowup": 2, …}``) in an int array."""
    values, counts = np.unique(np.asarray(status).astype(np.int64), return_counts=True)
    return {status_label(v, labels): int(c) for v, c in zip(values, counts)}


def state_part(da: xr.DataArray, part: str) -> xr.DataArray:
    """The 3-vector ``part`` (``q``, ``w``, ``x``, ``v``, ``alpha``, ``Omega``) of a variable on the
    labelled ``state`` dim (``final_state``, ``snapshot_state``), on a ``component`` dim (x, y, z)."""
    labels = [f"{part}_{c}" for c in "xyz"]
    have = [str(s) for s in da["state"].values] if "state" in da.coords else []
    missing = [lab for lab in labels if lab not in have]
    if missing:
        raise KeyError(f"{da.name}: no state labels {missing} (state = {have})")
    return da.sel(state=labels).rename(state="component").assign_coords(component=["x", "y", "z"])


@xr.register_dataset_accessor("geosweep")
class GeosweepAccessor:
    """Analysis of one geosweep results Dataset (``import geosweep`` registers it; times in the
    system's time units, energies in its energy units). The examples of its methods read ``ds``, this
    store (about a second to run): four spring-coupled spherical pendula (times in s, energies in J)
    with the explicit variational integrator (order 2) and classical RK4 on the ambient ODE, at two
    step sizes h (s) to T = 2 s:

    >>> import geosweep, os, tempfile
    >>> spec = {"name": "accessor-demo", "system": "spring_pendula", "integrators": ["explicit_vi", "rk4"],
    ...         "h": [0.02, 0.01], "T": 2.0, "dt_out": 0.1}
    >>> store = os.path.join(tempfile.mkdtemp(), "demo.zarr")
    >>> geosweep.run(spec, store, serial=True).complete
    True
    >>> ds = geosweep.open(store)
    >>> ds.geosweep.sweep_dims
    ('integrator', 'h')
    """

    def __init__(self, ds: xr.Dataset):
        self._ds = ds
        self._status_cache: xr.DataArray | None = None

    # ------------------------------------------------------------------ basics
    @property
    def sweep_dims(self) -> tuple[Hashable, ...]:
        """Sweep axes (dims of ``status``), e.g. ``("integrator", "h", "omega")``.

        >>> ds.geosweep.sweep_dims
        ('integrator', 'h')
        """
        return sweep_dims(self._ds)

    @property
    def family(self) -> str:
        """Kernel family of the store's system: ``s2``, ``se3`` or ``ts2`` (attr ``system_family``,
        else the coordinate ``integrator_family``).

        >>> ds.geosweep.family
        's2'
        """
        if "system_family" in self._ds.attrs:
            return str(self._ds.attrs["system_family"])
        if "integrator_family" in self._ds.coords:
            fams = {str(f) for f in np.atleast_1d(self._ds["integrator_family"].values)}
            if len(fams) == 1:
                return fams.pop()
        return "unknown"

    @property
    def system(self) -> str:
        """The store's system name (attr ``system``; ``"unknown"`` if absent).

        >>> ds.geosweep.system
        'spring_pendula'
        """
        return str(self._ds.attrs.get("system", "unknown"))

    @property
    def step_dim(self) -> str | None:
        """``"h"`` if the store has step sizes, else ``"tol"``, else None.

        >>> ds.geosweep.step_dim
        'h'
        """
        for d in ("h", "tol"):
            if d in self.sweep_dims:
                return d
        return None

    def status(self) -> xr.DataArray:
        """``status`` loaded into memory (one int8 per cell); the only thing selections compute.

        >>> ds.geosweep.status().values.tolist()
        [[0, 0], [0, 0]]
        """
        if self._status_cache is None:
            if "status" not in self._ds:
                raise KeyError("not a geosweep Dataset: no 'status' variable")
            self._status_cache = self._ds["status"].load()
        return self._status_cache

    def status_labels(self) -> dict[int, str]:
        """Status code → label, from the ``flag_values``/``flag_meanings`` attrs of ``status``.

        >>> ds.geosweep.status_labels()[5]
        'energy_blowup'
        """
        return status_labels(self._ds["status"])

    def status_counts(self) -> dict[str, int]:
        """Counts per status label over all cells.

        >>> ds.geosweep.status_counts()
        {'ok': 4}
        """
        return describe_status(self.status().values, self.status_labels())

    def integrators(self) -> pd.DataFrame:
        """One row per integrator: ``family``, ``order``, ``adaptive`` from the ``integrator_*`` coords.

        A coordinate the store lacks gives a column of None.

        >>> ds.geosweep.integrators()
                   family  order  adaptive
        integrator
        explicit_vi     s2      2     False
        rk4             s2      4     False
        """
        names = [str(n) for n in np.atleast_1d(self._ds["integrator"].values)]
        cols = {}
        for c in INTEGRATOR_COORDS:
            vals = np.atleast_1d(self._ds[c].values).tolist() if c in self._ds.coords else [None] * len(names)
            cols[c.removeprefix("integrator_")] = vals
        return pd.DataFrame(cols, index=pd.Index(names, name="integrator"))

    def is_adaptive(self, name: str) -> bool | None:
        """Whether integrator ``name`` is adaptive (coord ``integrator_adaptive``); None if not stored.

        >>> ds.geosweep.is_adaptive("rk4")
        False
        """
        if "integrator_adaptive" not in self._ds.coords:
            return None
        return bool(self._ds["integrator_adaptive"].sel(integrator=name))

    def expected_orders(self) -> xr.DataArray:
        """Nominal order per integrator (coord ``integrator_order``, as float; NaN if not stored).

        >>> ds.geosweep.expected_orders().values.tolist()
        [2.0, 4.0]
        """
        if "integrator_order" in self._ds.coords:
            return self._ds["integrator_order"].astype(np.float64).reset_coords(drop=True)
        return xr.full_like(self._ds["integrator"], np.nan, dtype=np.float64).reset_coords(drop=True)

    def state(self, part: str, snapshots: bool = False) -> xr.DataArray:
        """The 3-vector ``part`` (e.g. ``"q"``, ``"w"``, ``"x"``) of ``final_state`` (or of
        ``snapshot_state`` with ``snapshots``), selected by the ``state`` labels, on ``component``.

        >>> ds.geosweep.state("q").dims
        ('integrator', 'h', 'body', 'component')
        """
        return state_part(self._ds["snapshot_state" if snapshots else "final_state"], part)

    def default_selection(self) -> dict[str, Any]:
        """The slice figures show by default: store attr ``report_sel`` (a dict), else the system's
        declared ``report_sel`` (e.g. the sphere's vortex case ``omega = 3.25``) and parameter
        defaults, where swept; every other swept parameter at its first label.

        >>> ds.geosweep.default_selection()  # nothing but the method axes is swept here
        {}
        """
        declared = self._ds.attrs.get("report_sel") or declared_selection(self.system)
        extra = [str(d) for d in self.sweep_dims if d not in METHOD_DIMS]
        picks = {d: self._ds[d].values[0].item() for d in extra}
        for name, value in dict(declared).items():
            if name in extra:
                try:
                    picks.update(parse_selection(self._ds, {name: value}))
                except ValueError:
                    pass  # the declared value was not swept here: keep the first label
        return picks

    def slice(self, select: dict[str, Any] | None = None, **labels: Any) -> tuple[xr.Dataset, str]:
        """The Dataset at one label of every swept parameter (integrator, h, tol stay), and its
        description (``"omega = 3.25"``). Unspecified axes take :meth:`default_selection`;
        ``select``/``labels`` may be text (CLI ``--sel omega=3.25``). Bad names or values raise
        ``ValueError`` naming the field.

        >>> sub, description = ds.geosweep.slice()
        >>> dict(sub.sizes)["integrator"], description
        (2, '')
        """
        picks = self.default_selection()
        picks.update(parse_selection(self._ds, {**(select or {}), **labels}))
        sub = self._ds.sel(picks) if picks else self._ds
        return sub, ", ".join(f"{d} = {v:g}" if isinstance(v, float) else f"{d} = {v}" for d, v in picks.items())

    def _selection_message(self, keep: xr.DataArray, what: str) -> str:
        st = self.status().values
        kept = int(keep.values.sum())
        counts = describe_status(st[~keep.values], self.status_labels())
        detail = ", ".join(f"{k}: {v}" for k, v in counts.items()) or "none"
        return f"geosweep: {what}: kept {kept} of {st.size} cells; left out {st.size - kept} ({detail})"

    def _mask(self, keep: xr.DataArray, what: str, drop_empty: bool, report: bool = True) -> xr.Dataset:
        ds = self._ds
        msg = self._selection_message(keep, what)
        out = ds.where(keep)
        for name in ("status", "done"):
            if name in ds:
                out[name] = ds[name]
        if drop_empty:
            dropped = []
            for d in self.sweep_dims:
                others = [o for o in self.sweep_dims if o != d]
                any_kept = keep.any(dim=others) if others else keep
                if not bool(any_kept.all()):
                    labels = ds[d].values[~any_kept.values]
                    dropped.append(f"{d}={list(np.atleast_1d(labels))}")
                    out = out.isel({d: np.flatnonzero(any_kept.values)})
            if dropped:
                msg += "; dropped labels with no kept cell: " + ", ".join(dropped)
        out.attrs["geosweep_selection"] = msg
        if report and _lost(self.status().values, keep.values, self.status_labels()):
            _say(msg)
        return out

    def ok(self, drop_empty: bool = True) -> xr.Dataset:
        """Cells with status 0; every other cell's values are masked to NaN.

        Failed (> 0), not-run (−1) and not-applicable (−2) cells are masked, and with
        ``drop_empty`` the labels of a sweep axis with no ok cell at all are removed (e.g.
        the filler ``tol`` values of fixed-step integrators). How many cells were left out,
        by status, is reported (:class:`CellsDroppedWarning`) and stored in
        ``attrs["geosweep_selection"]``. ``status`` and ``done`` are kept unmasked.

        >>> ds.geosweep.ok().attrs["geosweep_selection"]
        'geosweep: ok cells: kept 4 of 4 cells; left out 0 (none)'
        """
        return self._mask(self.status() == 0, "ok cells", drop_empty)

    def failed(self, drop_empty: bool = True) -> xr.Dataset:
        """Cells whose integration failed (status > 0), others masked (reported as :meth:`ok`).

        >>> ds.geosweep.failed(drop_empty=False).attrs["geosweep_selection"]
        'geosweep: failed cells: kept 0 of 4 cells; left out 4 (ok: 4)'
        """
        return self._mask(self.status() > 0, "failed cells", drop_empty)

    def failures(self) -> pd.DataFrame:
        """One row per failed cell: its sweep coordinates, status label and ``fail_*`` values.

        >>> len(ds.geosweep.failures())  # every cell of the demo reached T
        0
        """
        st = self.status()
        labels = self.status_labels()
        cols = [c for c in ("fail_step", "fail_time", "fail_index", "fail_value") if c in self._ds]
        sub = self._ds[cols].assign(status=st) if cols else st.to_dataset(name="status")
        df = sub.where(st > 0).to_dataframe().reset_index()
        df = df.loc[df["status"] > 0, [*map(str, self.sweep_dims), "status", *cols]].copy()
        df["status"] = df["status"].astype(int)
        df.insert(len(self.sweep_dims), "status_label", df["status"].map(lambda s: status_label(s, labels)))
        return df.reset_index(drop=True)

    # ------------------------------------------------------------------ energy
    def relative_energy_error(self) -> xr.DataArray:
        """(E(t) − E0)/|E0| over time: the stored ``rel_energy_error``, else ``energy_error``
        (absolute E − E0 in every family) divided by ``|E0|``.

        >>> rel = ds.geosweep.relative_energy_error()
        >>> rel.dims, rel.attrs["units"]
        (('integrator', 'h', 'time'), '1')
        """
        ds = self._ds
        out = ds["rel_energy_error"] if "rel_energy_error" in ds else ds["energy_error"] / abs(ds["E0"])
        return out.rename("relative_energy_error").assign_attrs(units="1", long_name="(E − E0)/|E0|")

    def _series(self, var: str | xr.DataArray, relative: bool) -> xr.DataArray:
        if isinstance(var, xr.DataArray):
            return var
        if relative and var == "energy_error":
            return self.relative_energy_error()
        return self._ds[var]

    def energy_scale(self, da: xr.DataArray) -> xr.DataArray | float | None:
        """The energy scale of an energy-error variable: 1 for a relative one (dimensionless, e.g.
        ``max_rel_energy_error``, ``rel_energy_error``, ``energy_error_38``), ``|E0|`` for an absolute
        one (the units of ``E0``, e.g. ``energy_error``, ``mean_abs_energy_error``); None for any
        other variable (no round-off floor is known for it).

        >>> ds.geosweep.energy_scale(ds.max_rel_energy_error)
        1.0
        """
        if "energy" not in str(da.name) or "slope" in str(da.name):
            return None
        units = str(da.attrs.get("units", "") or "1").replace(" ", "")
        if units == "1":
            return 1.0
        if "E0" in self._ds and units == str(self._ds["E0"].attrs.get("units", "")).replace(" ", ""):
            return abs(self._ds["E0"])
        return None

    def roundoff_floor(self, da: xr.DataArray) -> xr.DataArray | None:
        """Per cell, the level below which an energy error is round-off, in ``da``'s units:
        ``ROUNDOFF_ULPS · ε · scale · steps`` (ε machine epsilon, scale from :meth:`energy_scale`,
        steps the cell's accepted steps, 1 if not stored). None if ``da`` is not an energy error.

        >>> floor = ds.geosweep.roundoff_floor(ds.max_rel_energy_error)
        >>> bool((floor < 1e-10).all())  # 10·ε per step, over 100 or 200 steps
        True
        """
        scale = self.energy_scale(da)
        if scale is None:
            return None
        steps = np.maximum(self._ds["steps"].astype(np.float64), 1.0) if "steps" in self._ds else 1.0
        floor = ROUNDOFF_ULPS * EPS * scale * steps
        if not isinstance(floor, xr.DataArray):
            floor = xr.DataArray(floor)
        return floor.rename("roundoff_floor").assign_attrs(
            units=str(da.attrs.get("units", "") or "1"),
            long_name=f"round-off floor {ROUNDOFF_ULPS:g}·ε·scale·steps",
        )

    def _ok_only(self, da: xr.DataArray, only_ok: bool, what: str) -> xr.DataArray:
        if not only_ok or "status" not in self._ds:
            return da
        keep = self.status() == 0
        if _lost(self.status().values, keep.values, self.status_labels()):
            _say(self._selection_message(keep, what))
        return da.where(keep)

    def drift(
        self,
        var: str | xr.DataArray = "energy_error",
        window: tuple[float, float] | None = None,
        *,
        dim: str = "time",
        relative: bool = False,
        only_ok: bool = True,
    ) -> xr.Dataset:
        """Least-squares line ``var ≈ a + b·t`` per cell over ``window = (t0, t1)`` (inclusive).

        Non-finite samples (after a failure) are skipped. Returns a Dataset over the sweep
        dims (and any other non-``dim`` dims of ``var``) with ``slope`` b [var units / time],
        ``slope_stderr`` (ordinary least squares, i.i.d. residuals assumed: read it as a scale,
        not a p-value, for oscillating errors), ``intercept`` a, ``rms_residual`` (RMS about the
        line), ``n_points`` and scalar ``t0``, ``t1`` (the window actually used). ``relative``
        uses ``rel_energy_error`` for ``energy_error``; ``only_ok`` masks cells with status ≠ 0 (reported).
        Lazy on dask-backed data.

        >>> fit = ds.geosweep.drift(relative=True)
        >>> fit.slope.dims, fit.slope.attrs["units"]
        (('integrator', 'h'), 's-1')
        """
        da = self._series(var, relative)
        da = self._ok_only(da, only_ok, f"drift of {getattr(da, 'name', var)}")
        if window is not None:
            da = da.sel({dim: slice(window[0], window[1])})
        t = da[dim].astype(np.float64)
        if da.chunks is not None:
            da = da.chunk({dim: -1})
        b, se, a, rms, n = xr.apply_ufunc(
            linear_fit,
            t,
            da,
            input_core_dims=[[dim], [dim]],
            output_core_dims=[[], [], [], [], []],
            dask="parallelized",
            output_dtypes=[np.float64, np.float64, np.float64, np.float64, np.int64],
        )
        units = str(da.attrs.get("units", "") or "1")
        rate = per_unit(units, str(da[dim].attrs.get("units", "") or "1"))
        out = xr.Dataset(
            {
                "slope": b.assign_attrs(units=rate, long_name=f"least-squares slope of {da.name}"),
                "slope_stderr": se.assign_attrs(units=rate, long_name="standard error of the slope"),
                "intercept": a.assign_attrs(units=units, long_name="intercept at t = 0"),
                "rms_residual": rms.assign_attrs(units=units, long_name="RMS of residuals about the line"),
                "n_points": n.assign_attrs(long_name="finite samples in the window", units="1"),
            }
        )
        tv = t.values
        out = out.assign_coords(t0=float(tv.min()) if tv.size else np.nan, t1=float(tv.max()) if tv.size else np.nan)
        out.attrs.update(variable=str(da.name), dim=dim)
        return out

    def classify(
        self,
        var: str | xr.DataArray = "energy_error",
        window: tuple[float, float] | None = None,
        *,
        threshold: float = 2.0,
        atol: float = 0.0,
        roundoff: float | xr.DataArray | None = None,
        relative: bool = False,
        only_ok: bool = True,
    ) -> xr.Dataset:
        """Round-off, bounded or drifting, per cell, from the drift fit over ``window``.

        A cell is **round-off** iff every |value| in the window [t0, t1] is at most the round-off
        floor (``roundoff`` in the variable's units; default :meth:`roundoff_floor` for an energy
        error, ``ROUNDOFF_ULPS·ε·scale·steps``; 0 turns the class off): its error is rounding,
        exact to machine precision, whatever its trend. Otherwise, with b the least-squares slope
        and σ_r the RMS of the residuals about the fitted line, it is **drifting** iff

            |b|·(t1 − t0) > threshold·σ_r + atol

        i.e. the trend accumulated over the window exceeds ``threshold`` times the size of
        the fluctuation about it (plus an absolute floor ``atol`` in the variable's units);
        otherwise it is **bounded**. A bounded oscillation over many periods has a small fitted
        trend compared with its amplitude (σ_r ≈ amplitude/√2 for a sine); a secular drift has
        |b|·(t1 − t0) ≫ σ_r. Windows shorter than a few oscillation periods can misclassify.
        Cells with fewer than 3 finite samples are ``undetermined``.

        Returns the :meth:`drift` Dataset plus ``change`` = |b|·(t1 − t0), ``ratio`` =
        change/σ_r, ``level`` (max |value| in the window), ``roundoff_floor``, boolean
        ``drifting`` and ``classification`` (``"round-off"``, ``"bounded"``, ``"drifting"``,
        ``"undetermined"``).

        >>> cls = ds.geosweep.classify(relative=True)
        >>> cls.classification.sel(h=0.01).values.tolist()  # the VI's error stays bounded, RK4's drifts
        ['bounded', 'drifting']
        """
        fit = self.drift(var, window, relative=relative, only_ok=only_ok)
        da = self._series(var, relative)
        if window is not None:
            da = da.sel(time=slice(window[0], window[1]))
        level = abs(da).max("time") if "time" in da.dims else abs(da)
        floor = self.roundoff_floor(da) if roundoff is None else roundoff
        floor = xr.zeros_like(level) if floor is None else floor + xr.zeros_like(level)
        span = float(fit.t1 - fit.t0)
        change = abs(fit.slope) * span
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = change / fit.rms_residual
        determined = (fit.n_points >= 3) & np.isfinite(fit.slope)
        at_roundoff = determined & (level <= floor)
        drifting = (change > threshold * fit.rms_residual + atol) & determined & ~at_roundoff
        label = xr.where(
            ~determined, "undetermined", xr.where(at_roundoff, "round-off", xr.where(drifting, "drifting", "bounded"))
        )
        units = fit.intercept.attrs.get("units", "")
        out = fit.assign(
            change=change.assign_attrs(long_name="|slope|·(t1 − t0)", units=units),
            ratio=ratio.assign_attrs(long_name="|slope|·(t1 − t0) / rms_residual", units="1"),
            level=level.assign_attrs(long_name="max |value| in the window", units=units),
            roundoff_floor=floor.assign_attrs(long_name="round-off floor", units=units),
            drifting=drifting,
            classification=label,
        )
        out.attrs.update(
            criterion=(
                f"round-off iff max|value| <= {ROUNDOFF_ULPS:g}*eps*scale*steps, else "
                f"drifting iff |slope|*(t1-t0) > {threshold}*rms_residual + {atol}"
                if roundoff is None
                else f"round-off iff max|value| <= the given floor, else drifting iff |slope|*(t1-t0) > "
                f"{threshold}*rms_residual + {atol}"
            ),
            threshold=threshold,
            atol=atol,
        )
        return out

    # ------------------------------------------------------------------ convergence and cost
    def default_error_var(self) -> str:
        """The summary error used by default for orders and work–precision: the first present of the
        family's declared ``order_error_vars`` (:class:`geosweep.kernels.registry.FamilyDef`).

        >>> ds.geosweep.default_error_var()
        'mean_abs_energy_error'
        """
        for name in declared_order_error_vars(str(self._ds.attrs.get("system", "")), self.family):
            if name in self._ds:
                if name == "global_error" and not bool(np.isfinite(self._ds[name].values).any()):
                    continue
                return name
        return "max_rel_energy_error"

    def order(self, error_var: str | xr.DataArray | None = None, dim: str | None = None) -> xr.Dataset:
        """Observed convergence order: least-squares slope of log10(error) vs log10(``dim``).

        One fit per integrator (and per value of every other sweep axis), over ``dim``
        (default ``h``, else ``tol``). Only ok cells with a finite, positive error above the
        round-off floor (:meth:`roundoff_floor`, energy errors only) enter: an error at round-off
        carries no order. ``error_var`` must be a per-cell scalar (default
        :meth:`default_error_var`; reduce a time series first, e.g.
        ``abs(ds.energy_error).max("time")``). Returns ``order`` p (error ≈ C·dim^p),
        ``order_stderr``, ``log10_C``, ``n_points``, ``used`` (bool over ``dim``: the points that
        entered), ``error`` (the values, NaN where not used), ``roundoff`` (bool over ``dim``: ok
        points at round-off, left out) and their values ``roundoff_error``, ``n_roundoff`` and ``regime``: ``"fitted"``,
        ``"round-off"`` (no point above the floor), ``"pre-asymptotic"`` (a dimensionless error
        ≥ ``PRE_ASYMPTOTIC_ERROR`` at every point with a slope more than ½ below the nominal order,
        or below ½ without one: O(1) errors that barely fall — the slope is not an order) or
        ``"too few points"``; ``expected_order`` per integrator from the coord
        ``integrator_order`` (NaN if not stored).

        >>> fit = ds.geosweep.order()
        >>> fit.regime.values.tolist(), fit.expected_order.values.tolist()
        (['fitted', 'fitted'], [2.0, 4.0])
        >>> bool(abs(fit.order.sel(integrator="explicit_vi") - 2.0) < 0.2)
        True
        """
        dim = dim or self.step_dim
        if dim is None:
            raise ValueError("no h or tol axis in this Dataset")
        name = error_var if error_var is not None else self.default_error_var()
        da = name if isinstance(name, xr.DataArray) else self._ds[name]
        da = da.isel({d: i for d, i in ERROR_BLOCK.items() if d in da.dims}, drop=True)
        extra = [d for d in da.dims if d not in self.sweep_dims]
        if extra:
            raise ValueError(f"{da.name} has per-cell dims {extra}; reduce them first (e.g. .max({extra[0]!r}))")
        da = self._ok_only(da, True, f"order of {da.name}")
        floor = self.roundoff_floor(da)
        roundoff = (da <= floor) & (da > 0) if floor is not None else xr.zeros_like(da, dtype=bool)
        above = da.where(~roundoff)
        if above.chunks is not None:
            above = above.chunk({dim: -1})
        x = above[dim].astype(np.float64)
        p, se, c, n, used = xr.apply_ufunc(
            loglog_fit,
            x,
            above,
            input_core_dims=[[dim], [dim]],
            output_core_dims=[[], [], [], [], [dim]],
            dask="parallelized",
            output_dtypes=[np.float64, np.float64, np.float64, np.int64, bool],
        )
        used = used.transpose(*da.dims)
        n_round = roundoff.sum(dim)
        expected: xr.DataArray | float = np.nan
        if "integrator" in da.dims:
            expected = xr.DataArray(self.expected_orders().sel(integrator=da["integrator"].values).values,
                                    dims="integrator", coords={"integrator": da["integrator"]})  # fmt: skip
        nominal = expected if dim == "h" else np.nan
        dimensionless = str(da.attrs.get("units", "") or "1").replace(" ", "") == "1"
        o1 = da.where(used).min(dim) >= PRE_ASYMPTOTIC_ERROR
        slow = xr.where(np.isfinite(nominal), p < nominal - 0.5, p < 0.5) if "integrator" in da.dims else p < 0.5
        pre = o1 & slow & dimensionless
        regime = xr.where(
            n >= 2, xr.where(pre, "pre-asymptotic", "fitted"), xr.where(n_round > 0, "round-off", "too few points")
        )
        out = xr.Dataset(
            {
                "order": p.assign_attrs(long_name=f"observed order d log({da.name}) / d log {dim}", units="1"),
                "order_stderr": se.assign_attrs(long_name="standard error of the order", units="1"),
                "log10_C": c.assign_attrs(long_name="log10 of the constant C in error ≈ C·x^p", units="1"),
                "n_points": n,
                "used": used,
                "error": da.where(used),
                "roundoff": roundoff.transpose(*da.dims),
                "roundoff_error": da.where(roundoff).transpose(*da.dims),
                "n_roundoff": n_round.assign_attrs(long_name="ok points at round-off (left out of the fit)"),
                "regime": regime,
            }
        )
        if isinstance(expected, xr.DataArray) and "integrator" in out.dims:
            out = out.assign_coords(expected_order=("integrator", np.asarray(expected.values, dtype=np.float64)))
        out.attrs.update(error_var=str(da.name), dim=dim)
        return out

    def work_precision(self, error_var: str | None = None, cost_var: str = "wall_time") -> pd.DataFrame:
        """Tidy table, one row per ok cell: sweep coordinates, ``error_var`` and ``cost_var``.

        ``cost_var`` is ``"wall_time"`` [s], ``"f_evals"`` (potential/force/vector-field
        evaluations, every family; ``"evals"`` is an alias) or any other per-cell scalar.
        Cells with status ≠ 0 or a non-finite error/cost are left out, with the count reported.
        Computes the two scalar variables.

        >>> wp = ds.geosweep.work_precision(cost_var="f_evals")
        >>> list(wp.columns), len(wp)
        (['integrator', 'h', 'mean_abs_energy_error', 'f_evals'], 4)
        """
        ds = self._ds
        error_var = error_var or self.default_error_var()
        if cost_var == "evals":
            cost_var = EVAL_VAR
        sub = ds[[error_var, cost_var]].assign(status=self.status())
        sub = sub.isel({d: i for d, i in ERROR_BLOCK.items() if d in sub.dims}, drop=True).compute()
        df = sub.to_dataframe().reset_index()
        df = df[[*map(str, self.sweep_dims), error_var, cost_var, "status"]]
        good = (df["status"] == 0) & np.isfinite(df[error_var].astype(float)) & np.isfinite(df[cost_var].astype(float))
        lost = ~good & ~df["status"].isin(_fillers(self.status_labels()))
        if lost.any():
            counts = describe_status(df.loc[~good, "status"].to_numpy(), self.status_labels())
            if "ok" in counts:
                counts["ok_with_nonfinite_value"] = counts.pop("ok")
            detail = ", ".join(f"{k}: {v}" for k, v in counts.items())
            _say(
                f"geosweep: work_precision: kept {int(good.sum())} of {len(df)} cells; "
                f"left out {int((~good).sum())} ({detail})"
            )
        out = df[good].drop(columns="status").reset_index(drop=True)
        out.attrs.update(error_var=error_var, cost_var=cost_var)
        return out
