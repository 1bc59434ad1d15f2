"""One integrated cell, whatever its family: :class:`Solution` (what :func:`geosweep.integrate` returns).

A solution holds the cell's stored values by their store names (``sol["max_rel_energy_error"]``),
its ``status`` (a :class:`~geosweep.kernels.status.Status`), its samples and snapshots as labelled
arrays and, as :meth:`Solution.to_dataset`, exactly the variables, coordinates and attributes the
cell has in a sweep's store. It keeps the cell's final carry (the state and every running summary,
:mod:`geosweep.sweeps.extension`): :meth:`Solution.continue_to` extends the run to a later final time,
bitwise a direct run to it (as ``geosweep extend`` grows a store), and :meth:`Solution.checkpoint` /
:meth:`Solution.from_checkpoint` carry a solution to another process (``np.savez``-able arrays).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from geosweep.kernels.status import Status

__all__ = ["Solution"]

if TYPE_CHECKING:
    import xarray as xr

    from geosweep.sweeps.plan import Plan

#: keys of :meth:`Solution.checkpoint` besides the carry's own arrays
_SPEC_KEY, _STATUS_KEY, _WALL_KEY, _VALUE_PREFIX = "geosweep.spec", "geosweep.status", "geosweep.wall_time", "value."


def _store_ref() -> Any:
    """The store reference a cell computed outside any store runs with: final carries kept, nothing written
    (the cell is computed with ``keep=False`` and no checkpoints listed, so the store is never opened)."""
    from geosweep.sweeps.store import StoreRef

    return StoreRef("memory://geosweep-integrate", carries=True)


def _own(carry: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return dict(carry) if carry is not None else None


class Solution:
    """One cell's result: ``values`` (every stored value by store name, also ``sol[name]``),
    ``status`` (:class:`~geosweep.kernels.status.Status`; ``Status.OK`` when the run reached T),
    ``wall_time`` (s) and the one-cell ``plan`` it ran (``spec``, ``model``). Times are in the
    system's time units, energies in its energy units (:func:`geosweep.systems`).

    >>> import geosweep
    >>> sol = geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
    >>> sol
    Solution(heavy_top, lp_rkmk4, h=0.01, T=0.1: OK, 10 steps)
    >>> sol.times.tolist(), sol.samples["energy"].shape
    ([0.0, 0.05, 0.1], (3,))
    """

    def __init__(
        self, plan: Plan, values: Mapping[str, Any], status: int, wall_time: float, carry: Mapping[str, Any] | None
    ) -> None:
        self.plan = plan
        self.values: dict[str, Any] = dict(values)
        self.status = Status(int(status))
        self.wall_time = float(wall_time)
        self._carry = dict(carry) if carry is not None else None
        self._dataset: xr.Dataset | None = None  # to_dataset(), built once

    @classmethod
    def compute(cls, plan: Plan, carry: Mapping[str, Any] | None = None) -> Solution:
        """Run the one cell of ``plan`` through the sweep engine's cell computation
        (:func:`geosweep.sweeps.engine.compute_cell`), from t = 0 or continuing ``carry`` (the final
        carry of a shorter run of the same cell).

        >>> import geosweep
        >>> plan = geosweep.api.cell_plan(geosweep.api.cell_spec("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01))
        >>> geosweep.Solution.compute(plan).status.name
        'OK'
        """
        from geosweep.sweeps.engine import compute_cell

        r = compute_cell(
            plan, plan.grid.first_cell, _store_ref(), None, done=False, saved_keys=set(), carry=_own(carry), keep=False
        )
        return cls(plan, r[6], r[1], r[2], r[7])

    # ---- what ran ------------------------------------------------------------------------
    @property
    def spec(self) -> Any:
        """The one-cell :class:`~geosweep.sweeps.spec.SweepSpec` this solution is a sweep of.

        >>> import geosweep
        >>> sol = geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
        >>> sol.spec.system, sol.spec.h, sol.spec.T
        ('heavy_top', [0.01], 0.1)
        """
        return self.plan.spec

    @property
    def model(self) -> Any:
        """The family model the cell ran on.

        >>> import geosweep
        >>> sol = geosweep.integrate(geosweep.system("heavy_top", M=10.0), "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
        >>> type(sol.model).__name__, sol.model is not None
        ('TopModel', True)
        """
        return self.plan.first_model

    @property
    def system(self) -> str:
        """The registered name of the system the cell ran.

        >>> import geosweep
        >>> geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01).system
        'heavy_top'
        """
        return str(self.spec.system)

    @property
    def integrator(self) -> str:
        """The integrator's registered name.

        >>> import geosweep
        >>> geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01).integrator
        'lp_rkmk4'
        """
        return str(self.spec.integrators[0])

    @property
    def T(self) -> float:
        """Final time (system time units).

        >>> import geosweep
        >>> geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01).T  # s
        0.1
        """
        return float(self.spec.T)

    @property
    def times(self) -> np.ndarray:
        """Sample times ``k·dt_out``, k = 0..n (system time units).

        >>> import geosweep
        >>> geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01).times.tolist()  # s
        [0.0, 0.05, 0.1]
        """
        return np.arange(self.plan.sizes["time"]) * float(self.spec.dt_out)

    # ---- stored values -------------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise KeyError(
                f"{name!r} is not a stored name of this run; stored: {', '.join(sorted(self.values))}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self.values

    def keys(self) -> Iterator[str]:
        """The stored names (as a store's variables).

        >>> import geosweep
        >>> sol = geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
        >>> {"energy", "max_rel_energy_error", "steps", "final_state"} <= set(sol.keys())
        True
        """
        return iter(self.values)

    def __repr__(self) -> str:
        step = f"h={self.spec.h[0]:g}" if self.spec.h else f"tol={self.spec.tol[0]:g}"
        steps = int(self.values["steps"]) if "steps" in self.values else -1
        return f"Solution({self.system}, {self.integrator}, {step}, T={self.T:g}: {self.status.name}, {steps} steps)"

    def to_dataset(self) -> xr.Dataset:
        """The cell as a store holds it: every stored variable (values padded with the store's fill
        value to the store's per-cell shape, in its dtype), the run flags (``status``, ``wall_time``,
        ``completed_at``, ``progress``, ``checksum``, ``done``), the coordinates (``integrator``,
        ``h``/``tol`` and the system parameters as scalars; ``time``, ``snapshot_time``, labels) and the
        store's attributes — ``geosweep.open(store).isel(integrator=0, h=0)`` of a sweep of
        :attr:`spec`, value for value (the run-dependent stamps aside).

        >>> import geosweep
        >>> ds = geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01).to_dataset()
        >>> int(ds.status), str(ds.integrator.values), ds.energy.dims
        (0, 'lp_rkmk4', ('time',))
        """
        if self._dataset is None:
            self._dataset = self._cell_dataset()
        return self._dataset.copy()

    def _cell_dataset(self) -> xr.Dataset:
        """:meth:`to_dataset`, computed: the store's template of the one-cell plan, holding the cell."""
        from geosweep.sweeps.store import cell_checksum, stored_value, template

        ds, encoding = template(self.plan)
        sweep = self.plan.grid.dims
        stored: dict[str, np.ndarray] = {}
        for d in self.plan.famdef.diagnostics(self.model):
            var = ds[d.name]
            fill = encoding[d.name]["fill_value"]
            arr = SimpleNamespace(dtype=np.dtype(d.dtype), shape=var.shape, fill_value=fill)
            if d.name in self.values:
                stored[d.name] = stored_value(arr, self.values[d.name])
            else:  # a value the cell does not write keeps the store's fill
                stored[d.name] = np.full(var.shape[len(sweep) :], fill, dtype=arr.dtype)
        flags = {
            "status": np.int8(int(self.status)),
            "wall_time": np.float64(self.wall_time),
            "completed_at": np.float64(time.time()),
            "progress": np.float64(1.0),
            "checksum": np.int64(cell_checksum(stored, int(self.status))),
            "done": np.int8(1),
        }
        import xarray as xr

        filled = {**stored, **flags}
        data_vars = {}
        for name, var in ds.data_vars.items():  # the template's variables, in its order, holding the cell
            data_vars[name] = var.variable.copy(data=np.asarray(filled[name], dtype=var.dtype).reshape(var.shape))
        cell = xr.Dataset(data_vars, coords=ds.coords, attrs=ds.attrs)
        return cell.isel(dict.fromkeys(sweep, 0))

    @property
    def samples(self) -> xr.Dataset:
        """Every stored time series (dims ``time``, …), labelled by ``time`` (system time units).

        >>> import geosweep
        >>> sol = geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
        >>> sol.samples["energy"].dims, sol.samples["energy"].attrs["units"]
        (('time',), 'J')
        """
        ds = self.to_dataset()
        return ds[[name for name in ds.data_vars if "time" in ds[name].dims]]

    @property
    def snapshots(self) -> xr.DataArray:
        """The stored full states (dims ``snapshot``, ``body``, ``state``), labelled by ``snapshot_time``.

        >>> import geosweep
        >>> snaps = geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01).snapshots
        >>> snaps.dims, snaps.snapshot_time.values.tolist()  # t = 0 and T by default (snapshot_dt)
        (('snapshot', 'body', 'state'), [0.0, 0.1])
        """
        return self.to_dataset()["snapshot_state"]

    # ---- resuming and extending ----------------------------------------------------------
    def continue_to(self, T: float) -> Solution:
        """This run continued to the later final time ``T`` (a multiple of ``dt_out``, system time
        units) from its final carry: bitwise ``geosweep.integrate`` of the same cell to ``T`` (and what
        ``geosweep extend`` stores). ``self`` is left as it is.

        >>> import geosweep
        >>> sol = geosweep.integrate("pendulum_chain", "rkmk45", T=0.5, dt_out=0.1, tol=1e-8)
        >>> longer = sol.continue_to(1.0)
        >>> direct = geosweep.integrate("pendulum_chain", "rkmk45", T=1.0, dt_out=0.1, tol=1e-8)
        >>> bool((longer["energy"] == direct["energy"]).all())
        True
        """
        from geosweep.api import cell_plan

        if not float(T) >= self.T:
            raise ValueError(f"T = {T} is before this run's T = {self.T}: a run continues to a later time only")
        if self._carry is None:
            raise ValueError("this solution kept no final carry to continue from")
        spec = self.spec.model_dump()
        spec["T"] = float(T)
        return Solution.compute(cell_plan(spec, self.model), self._carry)

    def checkpoint(self) -> dict[str, np.ndarray]:
        """Everything :meth:`from_checkpoint` needs, as plain arrays (``np.savez(path, **sol.checkpoint())``):
        the spec, the stored values, the status and the final carry :meth:`continue_to` continues.

        >>> import geosweep
        >>> sol = geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
        >>> again = geosweep.Solution.from_checkpoint(sol.checkpoint())
        >>> again.continue_to(0.2)["steps"]
        np.int64(20)
        """
        out: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in (self._carry or {}).items()}
        out[_SPEC_KEY] = np.array(self.spec.model_dump_json())
        out[_STATUS_KEY] = np.array(int(self.status), dtype=np.int64)
        out[_WALL_KEY] = np.array(self.wall_time)
        out.update({_VALUE_PREFIX + k: np.asarray(v) for k, v in self.values.items()})
        return out

    @classmethod
    def from_checkpoint(cls, saved: Mapping[str, Any], model: Any = None) -> Solution:
        """The solution :meth:`checkpoint` saved (e.g. ``np.load(path)``), its model built again from the
        spec unless ``model`` (the built model of a system not registered in this process) is given.

        >>> import geosweep, numpy as np, os, tempfile
        >>> sol = geosweep.integrate("heavy_top", "lp_rkmk4", T=0.1, dt_out=0.05, h=0.01)
        >>> path = os.path.join(tempfile.mkdtemp(), "sol.npz")
        >>> np.savez(path, **sol.checkpoint())
        >>> with np.load(path) as saved:
        ...     again = geosweep.Solution.from_checkpoint(dict(saved))
        >>> again.continue_to(0.2)["steps"]
        np.int64(20)
        """
        from geosweep.api import cell_plan
        from geosweep.sweeps.spec import SweepSpec

        plan = cell_plan(SweepSpec.model_validate_json(str(np.asarray(saved[_SPEC_KEY]))), model)
        values = {k[len(_VALUE_PREFIX) :]: np.asarray(saved[k]) for k in saved if k.startswith(_VALUE_PREFIX)}
        values = {k: (v[()] if v.ndim == 0 else v) for k, v in values.items()}
        own = (_SPEC_KEY, _STATUS_KEY, _WALL_KEY)
        carry = {k: np.asarray(saved[k]) for k in saved if k not in own and not k.startswith(_VALUE_PREFIX)}
        return cls(
            plan, values, int(np.asarray(saved[_STATUS_KEY])), float(np.asarray(saved[_WALL_KEY])), carry or None
        )
