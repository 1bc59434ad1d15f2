"""Bounded text about sweep axes: what every command prints stays a few lines per axis however
many values it has (``validate``, ``status``, ``run``, ``report``, ``verify``, error messages).

An axis of at most :data:`MAX_LISTED` values is listed in full (``h: 0.01, 0.005``); a larger one
is described by its count, first and last values and, when numeric and unsorted, its range
(``seed: 2500 values, 0 … 2499``). Lists of items (damaged cells, differences) are cut at
:data:`MAX_ITEMS` with a closing ``… and N more``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from typing import Any

import numpy as np

#: an axis with at most this many values is listed in full
MAX_LISTED = 10
#: items (cells, differences) listed at most before "… and N more"
MAX_ITEMS = 20
#: characters of one error message echoed in a line (a task's exception, a stored value)
MAX_ERROR_CHARS = 300


def value_text(v: Any) -> str:
    """One axis value: floats in ``%.6g``, numpy scalars as their Python value, others as ``str``."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v.item() if isinstance(v, np.generic) else v, int | float) for v in values) and not any(
        isinstance(v.item() if isinstance(v, np.generic) else v, bool) for v in values
    )


def is_large(values: Sized, most: int = MAX_LISTED) -> bool:
    """Whether an axis has too many values to list (more than ``most``)."""
    return len(values) > most


def axis_values_text(values: Sequence[Any], most: int = MAX_LISTED) -> str:
    """``0.01, 0.005`` (every value, up to ``most``) or ``2500 values, 0 … 2499`` (+ ``, range [a, b]``
    when numeric and the first and last are not the extremes)."""
    values = list(values)
    if not is_large(values, most):
        return ", ".join(value_text(v) for v in values)
    text = f"{len(values)} values, {value_text(values[0])} … {value_text(values[-1])}"
    if _numeric(values):
        lo, hi = min(values), max(values)
        if {lo, hi} != {values[0], values[-1]}:
            text += f", range [{value_text(lo)}, {value_text(hi)}]"
    return text


def axis_text(name: str, values: Sequence[Any], most: int = MAX_LISTED) -> str:
    """``name: <axis_values_text>``."""
    return f"{name}: {axis_values_text(values, most)}"


def capped(items: Iterable[str], most: int = MAX_ITEMS, indent: str = "", total: int | None = None) -> list[str]:
    """The first ``most`` of ``items`` and, if there are more, a line ``… and N more`` (``total``: how
    many there are in all when ``items`` holds only the first ones)."""
    items = list(items)
    out = [f"{indent}{i}" for i in items[:most]]
    total = len(items) if total is None else total
    if total > len(out):
        out.append(f"{indent}… and {total - len(out)} more")
    return out


def joined(items: Iterable[str], most: int = MAX_LISTED, sep: str = ", ") -> str:
    """``a, b, c`` or ``a, b, … (N more)``: a list on one line, cut at ``most`` items."""
    items = list(items)
    if len(items) <= most:
        return sep.join(items)
    return sep.join(items[:most]) + f"{sep}… ({len(items) - most} more)"


def per_value_text(
    name: str, per: Mapping[Any, float], fmt: Callable[[float], str] = "{:.2g}".format, most: int = MAX_LISTED
) -> str:
    """A number per axis value on one line: ``name: v1: x1, v2: x2`` up to ``most`` values, else
    ``name (2500 values, 0 … 2499): total …, min … (at v), median …, max … (at v)``."""
    if not is_large(per, most):
        return f"{name}: " + ", ".join(f"{value_text(v)}: {fmt(x)}" for v, x in per.items())
    keys, xs = list(per), np.asarray(list(per.values()), dtype=float)
    lo, hi = int(np.argmin(xs)), int(np.argmax(xs))
    return (
        f"{name} ({axis_values_text(keys, most)}): total {fmt(float(xs.sum()))}, "
        f"min {fmt(float(xs[lo]))} (at {value_text(keys[lo])}), median {fmt(float(np.median(xs)))}, "
        f"max {fmt(float(xs[hi]))} (at {value_text(keys[hi])})"
    )


def spread(values: Sequence[Any], most: int = MAX_LISTED) -> list[int]:
    """Indices of at most ``most`` values spread evenly over ``values``, the first and the last included."""
    n = len(values)
    if n <= most:
        return list(range(n))
    return sorted({int(round(i)) for i in np.linspace(0, n - 1, most)})
