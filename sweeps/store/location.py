"""Where a store lives (:class:`StoreRef`: a local path or an fsspec URL with its options), and
what acts on a store as a whole: opening it for reading (:func:`open_results`, refusing another
format), consolidating its metadata, deleting it, and the provenance attributes of a new store."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from geosweep.sweeps.store.checks import check_format

#: the suffix of an object zarr was writing when its process died (written under it, then renamed)
PARTIAL_SUFFIX = ".partial"


@dataclass(frozen=True)
class StoreRef:
    """Where a store lives: a local path or an fsspec URL (``s3://…``) with options.

    ``storage_options`` may be given as a reference (``env:NAME``, ``@file.json``,
    ``profile:NAME``; :mod:`geosweep.sweeps.credentials`), resolved here; they are left out of the repr.
    ``lease`` is the token of the run writing the store (:class:`geosweep.sweeps.lease.Lease`): writes
    through a ref with a token are fenced by that lease (:func:`geosweep.sweeps.lease.fence`).
    """

    url: str
    storage_options: dict | None = field(default=None, repr=False)
    lease: str | None = field(default=None, repr=False, compare=False)
    carries: bool = field(default=True, repr=False, compare=False)  # keep final carries (geosweep.sweeps.extension)

    @classmethod
    def of(cls, store: str | os.PathLike | StoreRef, storage_options: Any = None) -> StoreRef:
        if isinstance(store, StoreRef):
            return store
        if storage_options is not None and not isinstance(storage_options, dict):
            from geosweep.sweeps.credentials import resolve

            storage_options = resolve(storage_options)
        s = os.fspath(store)
        if "://" not in s:
            s = str(Path(s).expanduser().absolute())
        return cls(s, storage_options)

    @property
    def is_local(self) -> bool:
        return "://" not in self.url

    def open_group(self, mode: Literal["r", "r+", "a", "w", "w-"] = "r+"):
        import zarr

        if self.is_local:
            return zarr.open_group(self.url, mode=mode)
        return zarr.open_group(self.url, mode=mode, storage_options=self.storage_options or {})

    def problem(self, write: bool = True) -> str | None:
        """Why this local store cannot be used (one line), or None: a path that is a file, lies
        under a file, is a non-empty directory that is not a zarr store, has unreadable root
        metadata, or (``write``) is read-only. URL stores: see ``geosweep.flows.output.store_problem``."""
        if not self.is_local:
            return None
        path = Path(self.url)
        if path.exists() or path.is_symlink():
            return _existing_problem(path, write)
        parent = path.parent
        while not (parent.exists() or parent.is_symlink()) and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return f"cannot create the store {path}: {parent} is a file, not a directory"
        if write and not os.access(parent, os.W_OK | os.X_OK):
            return f"cannot create the store {path}: {parent} is read-only"
        return None

    def exists(self) -> bool:
        if self.is_local:
            return (Path(self.url) / "zarr.json").exists()
        try:
            self.open_group("r")
            return True
        except Exception:  # noqa: BLE001 - any failure to open means "no store here"
            return False


#: folders a store keeps beside its zarr arrays (geosweep.sweeps.checkpoints, geosweep.sweeps.extension)
_SIDE_FOLDERS = ("_checkpoints", "_carries")


def _side_folder_problem(path: Path) -> str | None:
    """A file where the store keeps a folder of its own (a run would fail at its first checkpoint)."""
    for name in _SIDE_FOLDERS:
        side = path / name
        if (side.exists() or side.is_symlink()) and not side.is_dir():
            return f"store {path} is damaged: {side} is a file, not the folder of its {name[1:]}; move it away"
    return None


def _existing_problem(path: Path, write: bool) -> str | None:
    """:meth:`StoreRef.problem` of a local path that exists."""
    if not path.is_dir():
        return f"store path {path} is a file, not a zarr store (a directory); choose another --store"
    root = path / "zarr.json"
    if not root.exists():
        # zarr writes an object under a temporary ``*.partial`` name, then renames it: a run killed while
        # writing the root metadata leaves one behind (the next creation removes it)
        if any(not p.name.endswith(PARTIAL_SUFFIX) for p in path.iterdir()):
            return f"{path} is a non-empty directory that is not a zarr store; choose another --store"
    else:
        try:
            with open(root, "rb") as f:
                meta = json.loads(f.read(64 * 2**20))
            if not isinstance(meta, dict) or meta.get("node_type") != "group":
                raise ValueError("not the metadata of a zarr group")
        except (OSError, ValueError) as e:
            return f"store {path} is damaged: its zarr.json cannot be read ({type(e).__name__}: {e})"[:300]
    if problem := _side_folder_problem(path):
        return problem
    if write and not os.access(path, os.W_OK | os.X_OK):
        return f"store {path} is read-only (no write permission, or a read-only file system)"
    if write and not os.access(path.parent, os.W_OK | os.X_OK):
        return f"store {path}: its folder {path.parent} is read-only (the run's lease lives beside the store)"
    return None


def _git_revision() -> str:
    root = Path(__file__).resolve().parents[2]  # the checkout (sweeps/store/location.py)
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        rev = out.stdout.strip()
        if out.returncode == 0 and rev:
            dirty = subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance() -> dict[str, str]:
    """Versions, revision and machine that produced a store (stored as attrs)."""
    import importlib.metadata as md

    def ver(pkg: str) -> str:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return "not installed"

    return {
        "geosweep_version": ver("geosweep"),
        "git_revision": _git_revision(),
        "numba_version": ver("numba"),
        "numpy_version": ver("numpy"),
        "xarray_version": ver("xarray"),
        "zarr_version": ver("zarr"),
        "dask_version": ver("dask"),
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": str(os.cpu_count()),
        "host": socket.gethostname(),
    }


def remove_store(ref: StoreRef) -> None:
    """Delete a whole store (used only on a store this run was creating and did not finish,
    :mod:`geosweep.sweeps.store.lifecycle`)."""
    if ref.is_local:
        import shutil

        shutil.rmtree(ref.url, ignore_errors=True)
        return
    import fsspec

    fs, root = fsspec.core.url_to_fs(ref.url, **(ref.storage_options or {}))
    try:
        fs.rm(root, recursive=True)
    except FileNotFoundError:
        pass


def open_unconsolidated(ref: StoreRef, mode: Literal["r", "r+"] = "r"):
    """The store's zarr group read from each array's own metadata, not the consolidated copy (which
    a repair or a grow makes stale until it consolidates again)."""
    import zarr

    opts: dict[str, Any] = {} if ref.is_local else {"storage_options": ref.storage_options or {}}
    return zarr.open_group(ref.url, mode=mode, use_consolidated=False, **opts)


def consolidate(ref: StoreRef) -> None:
    """Write the store's consolidated metadata (one object listing every array's metadata) again;
    a failure is ignored: readers then read each array's own metadata."""
    import zarr

    opts: dict[str, Any] = {} if ref.is_local else {"storage_options": ref.storage_options or {}}
    try:
        with warnings.catch_warnings():  # the checkpoint objects beside the arrays are not zarr nodes
            warnings.filterwarnings("ignore", message="Object at .* is not recognized as a component")
            zarr.consolidate_metadata(ref.url, **opts)
    except Exception:  # noqa: BLE001 - consolidation is an optimisation only
        pass


def open_results(store: str | os.PathLike | StoreRef, storage_options: dict | None = None):
    """Open a store as a lazily loaded xarray Dataset (``xr.open_zarr``).

    Raises :class:`~geosweep.sweeps.store.checks.StoreFormatError` for a store of another format
    (e.g. written before format 2).
    """
    import xarray as xr

    ref = StoreRef.of(store, storage_options)
    kwargs: dict[str, Any] = {}
    if not ref.is_local:
        kwargs["storage_options"] = ref.storage_options or {}
    ds = xr.open_zarr(ref.url, **kwargs)
    check_format(ref.url, dict(ds.attrs))
    return ds
