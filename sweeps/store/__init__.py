"""The zarr (format 3) store of a sweep, one job per module:

* :mod:`~geosweep.sweeps.store.location` — where a store lives (:class:`StoreRef`), opening it for
  reading (:func:`open_results`), consolidating, deleting, provenance attributes;
* :mod:`~geosweep.sweeps.store.checks` — the store format and the refusals of a store of another
  format or another spec (:class:`StoreFormatError`, :class:`StoreMismatchError`: exit 3);
* :mod:`~geosweep.sweeps.store.layout` — shards and chunks: how the cells are cut into objects;
* :mod:`~geosweep.sweeps.store.schema` — the template: variables, coordinates, CF attributes,
  the name checks of a spec; :mod:`~geosweep.sweeps.store.template_write` writes it (zarr alone),
  :mod:`~geosweep.sweeps.store.template_dataset` gives it as an xarray Dataset;
* :mod:`~geosweep.sweeps.store.lifecycle` — creating or checking a store, reading its progress,
  recording runs;
* :mod:`~geosweep.sweeps.store.shards` — one writer per shard (:func:`write_shard`), block I/O;
* :mod:`~geosweep.sweeps.store.stored_rows` — a grown cell's leading rows taken from the store;
* :mod:`~geosweep.sweeps.store.checksums` — the per-cell checksums;
* :mod:`~geosweep.sweeps.store.integrity` — :func:`verify` and :func:`mark_for_rerun`.

Growing a store along its sweep axes is :mod:`geosweep.sweeps.grow`, to a later T
:mod:`geosweep.sweeps.extension`, rebuilding lost flag arrays :mod:`geosweep.sweeps.repair`, the
writer's lease :mod:`geosweep.sweeps.lease`; they use the modules above and none of those imports
the package's own ``__init__``.

Every public name is importable from here (``from geosweep.sweeps.store import StoreRef``): the
package is a plain module whose ``__getattr__`` (PEP 562) reads a name it does not hold from its
module (:data:`_HOMES`) on every use, so importing one module of the package does not import the
others, and the modules below it (lease, repair, grow) may import it without an import cycle. The
package holds none of these names itself: ``store.X is store.<module>.X``. A tunable is changed in the
module that owns it (``monkeypatch.setattr(geosweep.sweeps.store.layout, "SHARD_CELLS", 1)``), which
reads it at call time; setting it on the package would only shadow it here.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification.*")
warnings.filterwarnings("ignore", message=".*Consolidated metadata is currently not part.*")
# the per-cell checkpoint objects (geosweep.sweeps.checkpoints) live under _checkpoints/, outside the zarr hierarchy
warnings.filterwarnings("ignore", message=".*_checkpoints is not recognized as a component.*")

#: module (of this package) of each public name
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        ("FORMAT_VERSION", "READ_FORMATS", "StoreFormatError", "StoreMismatchError", "check_format")
        + ("differences", "mismatch_message", "readable_format", "spec_attr_intact", "spec_value")
        + ("FIRST_STEP_ATTR", "FIRST_STEP_RULE", "integrator_options_attr"),
        "checks",
    ),
    **dict.fromkeys(
        ("CHECKSUM_BATCH_BYTES", "CHECKSUM_SKIP", "ShardChecksums", "cell_checksum", "dtype_name", "shard_checksums"),
        "checksums",
    ),
    **dict.fromkeys(("checked_cells", "mark_for_rerun", "verify"), "integrity"),
    **dict.fromkeys(
        ("KEEP_SECONDS", "LAST_AT_T", "MAX_SHARD_CELLS", "MIN_SHARDS", "MIN_SHARD_SECONDS", "SHARD_BYTES")
        + ("SHARD_CELLS", "SHARD_SECONDS", "SWEEP_FLAGS", "TARGET_SHARDS", "cell_block", "cell_bytes", "cell_chunks")
        + ("group_by_shard", "objects_estimate", "shape_of", "shard_cells", "shard_of", "shard_region")
        + ("shard_shape", "short_cell_seconds", "sweep_shards"),
        "layout",
    ),
    **dict.fromkeys(("CREATED_ATTR", "done_mask", "ensure_store", "mark_fillers", "record_run"), "lifecycle"),
    **dict.fromkeys(
        (
            "PARTIAL_SUFFIX",
            "StoreRef",
            "consolidate",
            "open_results",
            "open_unconsolidated",
            "provenance",
            "remove_store",
        ),
        "location",
    ),
    **dict.fromkeys(
        ("FLAG_LAYOUT", "LAYOUT_COORDS", "METHOD_AXES", "cf_units", "fill_value", "name_clash", "state_layout_clash")
        + ("StoredArray", "StoreTemplate", "store_template", "stored_names"),
        "schema",
    ),
    "template": "template_dataset",
    "write_template": "template_write",
    **dict.fromkeys(("ArrayCache", "CellOutput", "read_blocks", "set_blocks", "stored_value", "write_shard"), "shards"),
    "with_stored_rows": "stored_rows",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """A public name, read from its module (PEP 562: called for a name this module does not hold)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


if TYPE_CHECKING:  # the names as mypy sees them (at run time: __getattr__ above)
    from geosweep.sweeps.store.checks import (
        FIRST_STEP_ATTR,
        FIRST_STEP_RULE,
        FORMAT_VERSION,
        READ_FORMATS,
        StoreFormatError,
        StoreMismatchError,
        check_format,
        differences,
        integrator_options_attr,
        mismatch_message,
        readable_format,
        spec_attr_intact,
        spec_value,
    )
    from geosweep.sweeps.store.checksums import (
        CHECKSUM_BATCH_BYTES,
        CHECKSUM_SKIP,
        ShardChecksums,
        cell_checksum,
        dtype_name,
        shard_checksums,
    )
    from geosweep.sweeps.store.integrity import checked_cells, mark_for_rerun, verify
    from geosweep.sweeps.store.layout import (
        KEEP_SECONDS,
        LAST_AT_T,
        MAX_SHARD_CELLS,
        MIN_SHARD_SECONDS,
        MIN_SHARDS,
        SHARD_BYTES,
        SHARD_CELLS,
        SHARD_SECONDS,
        SWEEP_FLAGS,
        TARGET_SHARDS,
        cell_block,
        cell_bytes,
        cell_chunks,
        group_by_shard,
        objects_estimate,
        shape_of,
        shard_cells,
        shard_of,
        shard_region,
        shard_shape,
        short_cell_seconds,
        sweep_shards,
    )
    from geosweep.sweeps.store.lifecycle import CREATED_ATTR, done_mask, ensure_store, mark_fillers, record_run
    from geosweep.sweeps.store.location import (
        PARTIAL_SUFFIX,
        StoreRef,
        consolidate,
        open_results,
        open_unconsolidated,
        provenance,
        remove_store,
    )
    from geosweep.sweeps.store.schema import (
        FLAG_LAYOUT,
        LAYOUT_COORDS,
        METHOD_AXES,
        StoredArray,
        StoreTemplate,
        cf_units,
        fill_value,
        name_clash,
        state_layout_clash,
        store_template,
        stored_names,
    )
    from geosweep.sweeps.store.shards import (
        ArrayCache,
        CellOutput,
        read_blocks,
        set_blocks,
        stored_value,
        write_shard,
    )
    from geosweep.sweeps.store.stored_rows import with_stored_rows
    from geosweep.sweeps.store.template_dataset import template
    from geosweep.sweeps.store.template_write import write_template
