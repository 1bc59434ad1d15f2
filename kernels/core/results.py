"""Kernels-alone results read by the stored names (issue 24: one vocabulary from kernel to store).

Each family's ``integrate`` returns its own result class (arrays under short names, and the
older ``summary``/``info`` dicts); :class:`StoredResult` adds the store's vocabulary to it:
``tr["mean_abs_energy_error"]`` is exactly the value a sweep cell of the same run stores under
that name (the family's ``collect``), ``tr.values`` all of them, ``tr.status`` a
:class:`~geosweep.kernels.status.Status`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


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
