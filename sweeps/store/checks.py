"""Whether a store is ours: its format number, and the one-line refusals of a store of another
format (:class:`StoreFormatError`) or of another sweep spec (:class:`StoreMismatchError`, each
differing field named however long its axes). Both exit with code 3 in the CLI; the store is never
modified when refused."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from geosweep.sweeps.compact import MAX_ITEMS, is_large, joined

if TYPE_CHECKING:
    from geosweep.sweeps.spec import SweepSpec

#: Store format written by this geosweep. 2: the family contract's stored names
#: (``final_state``/``snapshot_state``, absolute ``energy_error`` …), integrator coords, shards of
#: one-cell inner chunks; 3: the same names and values, one chunk per shard
#: (:func:`geosweep.sweeps.store.layout.shard_shape`).
FORMAT_VERSION = 3
#: Store formats this geosweep reads, resumes, verifies and repairs (each in its own layout).
READ_FORMATS = (2, 3)


#: store attribute naming the rule of the adaptive methods' default first trial step (``h0`` ≤ 0):
#: absent in a store written before that rule (its default was T/100, so extending it pins ``h0``)
FIRST_STEP_ATTR = "geosweep_first_step"
#: :data:`FIRST_STEP_ATTR` of a store whose default first step is the driver's starting-step rule
#: (:func:`geosweep.kernels.core.driver.starting_step`), independent of T
FIRST_STEP_RULE = "starting_step"


def integrator_options_attr(plan: Any) -> str:
    """The store's ``integrator_options`` attribute: every integrator's options as its cells run them."""
    return json.dumps({name: plan.grid.options(name) for name in plan.spec.integrators}, sort_keys=True)


class StoreMismatchError(ValueError):
    """The store exists but was created for a different spec."""


class StoreFormatError(StoreMismatchError):
    """The store was written in another store format (older geosweep): refused, never misread."""


def readable_format(found: Any) -> bool:
    """True for a format number this geosweep reads (:data:`READ_FORMATS`; not ``True``, ``"2"`` or ``2.0``)."""
    return isinstance(found, int) and not isinstance(found, bool) and found in READ_FORMATS


def check_format(url: str, attrs: dict) -> None:
    """Refuse a store written in another format (raises :class:`StoreFormatError`, store untouched)."""
    found = attrs.get("geosweep_format")
    if readable_format(found):
        return
    if "spec" not in attrs and found is None:
        raise StoreFormatError(f"{url} exists but is not a geosweep store (no spec in its attributes)")
    if found is None:
        has = "an unversioned store format (before format 2)"
    elif isinstance(found, int) and not isinstance(found, bool):
        has = f"store format {found}"
    else:  # "2" is not format 2: a hand-edited or foreign attribute
        has = f"an unrecognised store format (geosweep_format = {_echo(found)}, not a format number)"
    by = attrs.get("geosweep_version")
    raise StoreFormatError(
        f"store {url} has {has}{f', written by geosweep {by}' if by else ''}; this geosweep reads "
        f"store formats {' and '.join(map(str, READ_FORMATS))} only (stored names changed), so it refuses the store "
        f"rather than misread it. "
        f"Write a new store (another --store path) to run or resume this sweep, or open the old store with the "
        f"geosweep version that wrote it."
    )


def _echo(value: Any, limit: int = 100) -> str:
    """``repr(value)`` cut to about ``limit`` characters (a stored attribute as echoed in a message)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def spec_attr_intact(attrs: dict) -> bool:
    """True if the stored ``spec`` text is the one its ``spec_hash`` was computed from (not edited)."""
    text = attrs.get("spec")
    return isinstance(text, str) and hashlib.sha256(text.encode()).hexdigest() == attrs.get("spec_hash")


def mismatch_message(url: str, attrs: dict, spec: SweepSpec, hint: Callable[[dict, str], str] | None = None) -> str:
    """Why the store at ``url`` (attributes ``attrs``) is refused for ``spec``, in one line: each
    differing field (:func:`differences`), then, when both are specs, ``hint(attrs, spec JSON)`` —
    what to do instead (:func:`geosweep.sweeps.grow.grow_hint`)."""
    old_text = attrs.get("spec")
    if not old_text:
        return f"{url} exists but is not a geosweep store (no spec in its attributes); choose another --store"
    if attrs.get("spec_hash") == spec.spec_hash and not spec_attr_intact(attrs):
        return (
            f"store {url}: its spec attribute was changed after the store was written (it no longer matches "
            f"its spec_hash); refusing to resume a store whose sweep cannot be told. Use a new --store path."
        )
    try:
        old = json.loads(old_text) if isinstance(old_text, str) else None
    except ValueError:
        old = None
    if not isinstance(old, dict):  # e.g. edited by hand: the hashes differ, the text says nothing
        return (
            f"store {url} was created by a different sweep spec (its spec attribute is not a spec: "
            f"{_echo(old_text)}); refusing to mix results. Use a new --store path (or delete the old store)."
        )
    new = json.loads(spec.canonical_json())
    details = joined(differences("", old, new), most=MAX_ITEMS, sep="; ")
    advice = hint(attrs, spec.canonical_json()) if hint else ""
    return (
        f"store {url} was created by a different sweep spec ({_echo(old.get('name'))}); refusing to mix results. "
        f"Differences: {details}. Use a new --store path (or delete the old store).{advice}"
    )


def differences(key: str, old: Any, new: Any) -> list[str]:
    """``field: store has …, spec has …`` per differing field of two spec dicts (nested tables by
    dotted name, ``params.seed``), each bounded however long its axes (:func:`spec_value`)."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return [line for k in keys for line in differences(f"{key}.{k}" if key else k, old.get(k), new.get(k))]
    text = f"{key}: store has {spec_value(old)}, spec has {spec_value(new)}"
    if isinstance(old, list) and isinstance(new, list):
        try:
            only_old, only_new = len(set(old) - set(new)), len(set(new) - set(old))
        except TypeError:  # unhashable entries (a hand-edited spec): the values say enough
            return [text]
        text += f" ({only_old} only in the store, {only_new} only in the spec)"
    return [text]


def spec_value(value: Any) -> str:
    """A spec value in a message: a short list in full, a long one by its count and first and last
    values (exact, as ``repr``), anything else as :func:`_echo`."""
    if isinstance(value, list) and is_large(value):
        return f"{len(value)} values, {_echo(value[0], 40)} … {_echo(value[-1], 40)}"
    return _echo(value)
