"""The lease file of a store (``<store>.lease``, :mod:`geosweep.sweeps.lease`) read as bytes and parsed,
its ``flock`` on a local file system, and the errors of a store that one run cannot write: busy
(another run's lease), lost (taken over), a lease path that is no lease file, a write no retry fixes."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import stat
import time
from collections.abc import Iterator
from typing import Any

from geosweep.sweeps.store.checks import StoreMismatchError
from geosweep.sweeps.store.location import StoreRef

#: seconds a takeover (or a fenced write) waits for the lease's lock
LOCK_WAIT = 5.0
#: largest lease file read (a lease is ~150 bytes)
MAX_BYTES = 65536
#: errors of a store write that no retry can fix: no space, quota, read-only, permission
STORE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


class StoreBusyError(StoreMismatchError):
    """Another run holds the store's lease (the CLI exits 3, as for a store it cannot use)."""


class LeaseLost(StoreBusyError):
    """This run no longer holds the store's lease (another run took it over): it writes nothing more (exit 3)."""


class LeaseFileError(ValueError):
    """``<store>.lease`` is not a lease file (a directory, a FIFO …): refused, untouched (exit 2)."""


class StoreWriteError(ValueError):
    """A write to the store failed for a reason no retry fixes (disk full, read-only): exit 2."""


def store_write_error(url: str, exc: OSError) -> StoreWriteError | None:
    """The one-line :class:`StoreWriteError` for ``exc`` if its errno is in :data:`STORE_ERRNOS`."""
    if exc.errno not in STORE_ERRNOS:
        return None
    where = f" ({exc.filename})" if exc.filename else ""
    return StoreWriteError(
        f"store {url}: cannot write{where}: {os.strerror(exc.errno)}; finished cells are kept — "
        "free space or fix the permissions, then rerun the same command to resume"
    )


def lease_path(ref: StoreRef) -> tuple[Any, str]:
    import fsspec

    if ref.is_local:
        return fsspec.filesystem("file"), ref.url.rstrip("/") + ".lease"
    fs, root = fsspec.core.url_to_fs(ref.url, **(ref.storage_options or {}))
    return fs, root.rstrip("/") + ".lease"


@contextlib.contextmanager
def locked(ref: StoreRef, path: str, exclusive: bool, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold ``<lease>.lock`` shared or exclusive (local stores; nothing on object stores)."""
    if not ref.is_local:
        yield
        return
    try:
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise IsADirectoryError(errno.EISDIR, "not a regular file")
    except OSError as e:
        if (err := store_write_error(ref.url, e)) is not None:
            raise err from None
        raise LeaseFileError(f"{path}.lock cannot be used as the lease's lock ({e.strerror}); remove it") from None
    try:
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, mode)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreBusyError(
                        f"store {ref.url}: its lease is locked by a process in the middle of a write "
                        f"(stopped, or very slow: {path}.lock); wait for it, or stop it, and retry"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


def read_raw(ref: StoreRef, fs, path: str) -> bytes | None:
    """The lease's bytes (None: no lease). Raises :class:`LeaseFileError` for a non-regular file."""
    if ref.is_local:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise LeaseFileError(
                f"{path} is not a lease file (a {file_kind(st.st_mode)}); geosweep will not read or replace it — "
                "remove it if no run is writing the store"
            )
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            return f.read(MAX_BYTES + 1)
    try:
        if fs.isdir(path):
            raise LeaseFileError(f"{path} is not a lease object (a directory); remove it if no run writes the store")
        return fs.cat_file(path)
    except FileNotFoundError:
        return None


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISLNK, "symbolic link"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device")):  # fmt: skip
        if test(mode):
            return name
    return "special file"


def parse_record(data: bytes) -> dict | None:
    """The lease record, or None if ``data`` is not one (garbage: no live run wrote it)."""
    if len(data) > MAX_BYTES:
        return None
    try:
        rec = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("owner"), str) or not rec["owner"]:
        return None
    return rec


def heartbeat_of(rec: dict) -> float | None:
    """The record's heartbeat (unix time) if it is a finite number, else None."""
    hb = rec.get("heartbeat")
    if isinstance(hb, bool) or not isinstance(hb, (int, float)) or not math.isfinite(hb):
        return None
    return float(hb)
