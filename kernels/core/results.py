"""Kernels-alone results read by the stored names (issue 24: one vocabulary from kernel to store).

Each family's ``integrate`` returns its own result class (arrays under short names, and the
older ``summary``/``info`` dicts); :class:`StoredResult` adds the store's vocabulary to it:
``tr["mean_abs_energy_error"]`` is exactly the value a sweep cell of the same run stores under
that name (the family's ``collect``), ``tr.values`` all of them, ``tr.status`` a
:class:`~geosweep.kernels.status.Status`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from geosweep.kernels.status import Status


class StoredResult:
    """Mixin for a family's kernels-alone result: the stored values, keyed by the stored names."""

    def _stored_values(self) -> dict[str, Any]:
        """The family's stored values of this run (what its ``collect`` returns)."""
        raise NotImplementedError

    @property
    def values(self) -> Mapping[str, Any]:
        """Every stored value of the run, by stored name (computed once, on first use)."""
        cached = self.__dict__.get("_values")
        if cached is None:
            cached = self.__dict__["_values"] = self._stored_values()
        return cached

    def __getitem__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            known = ", ".join(sorted(self.values))
            raise KeyError(f"{name!r} is not a stored name of this run; stored: {known}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.values

    def keys(self) -> Iterator[str]:
        return iter(self.values)


@dataclass
class CellRun(StoredResult):
    """A kernels-alone run of one cell through its family's ``start`` and ``collect`` (the heavy
    top's and the quadrotors' ``integrate``): ``tr[name]`` and ``tr.values`` are what ``collect``
    stores, ``tr.status`` a :class:`~geosweep.kernels.status.Status`, ``tr.core`` the core
    trajectory (resumable: ``advance``, ``checkpoint``).

    Deprecated aliases: every other attribute is the core trajectory's (``tr.S``, ``tr.out``,
    ``tr.time``, ``tr.samples("J3")`` …) — ``integrate`` returned the core trajectory before.
    """

    core: Any
    collect: Callable[..., Any]
    model: Any
    integrator: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> Status:
        return Status(int(self.core.status))

    def _stored_values(self) -> dict[str, Any]:
        return self.collect(self.model, self.integrator, self.core, self.options).values

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "core":  # not an alias (copy, pickle, a half-built object)
            raise AttributeError(name)
        return getattr(self.core, name)
