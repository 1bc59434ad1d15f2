"""One writer at a time: a lease object beside the store (``<store>.lease``).

A run holds the lease while it creates or writes the store: ``{"owner": host:pid:id, "heartbeat":
unix time, …}``, refreshed every ``HEARTBEAT`` seconds by a background thread. A second run on
the same store refuses at once with a message naming the holder (:class:`StoreBusyError`,
before any work); a lease whose heartbeat is older than ``STALE_AFTER`` (its run was killed) is
taken over, and so is one held by a process of this host that no longer exists (a killed run
is resumed at once). On a local file system the lease is created with ``O_EXCL`` (two runs started
together cannot both get it); on an object store the last writer wins and each run re-reads
the lease after a short pause to check it is the holder.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Any

from sweeps.store import StoreMismatchError

HEARTBEAT = 10.0
STALE_AFTER = 60.0


class StoreBusyError(StoreMismatchError):
    """Another run holds the store's lease (the CLI exits 3, as for a store it cannot use)."""


def _fs(ref) -> tuple[Any, str]:
    import fsspec

    if ref.is_local:
        return fsspec.filesystem("file"), ref.url.rstrip("/") + ".lease"
    fs, root = fsspec.core.url_to_fs(ref.url, **(ref.storage_options or {}))
    return fs, root.rstrip("/") + ".lease"


#: owners of the leases this process holds right now
_ACTIVE: set[str] = set()


def _dead_here(owner: str) -> bool:
    """True if the lease holder ran on this host and is gone: its process no longer exists (a
    killed run), or it is this process and no longer holds it (a run that failed while the store
    was unreachable and so could not remove its lease). Such a lease is taken over at once."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return owner not in _ACTIVE
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Lease:
    """Acquire with :meth:`acquire` (or as a context manager); :meth:`release` stops the heartbeat."""

    def __init__(self, ref, stale_after: float = STALE_AFTER, heartbeat: float = HEARTBEAT):
        self.ref = ref
        self.fs, self.path = _fs(ref)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stale_after = stale_after
        self.heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- io -------------------------------------------------------------------------------
    def _record(self) -> bytes:
        return json.dumps({"owner": self.owner, "heartbeat": time.time(), "store": self.ref.url}).encode()

    def _read(self) -> dict | None:
        try:
            return json.loads(self.fs.cat_file(self.path))
        except FileNotFoundError:
            return None
        except (ValueError, OSError):
            return {}  # half-written or unreadable: treat as stale

    def _write(self) -> None:
        if self.ref.is_local:
            tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(self._record())
            os.replace(tmp, self.path)
        else:
            self.fs.pipe_file(self.path, self._record())

    # ---- protocol -------------------------------------------------------------------------
    def acquire(self) -> Lease:
        held = self._read()
        if held is None and self.ref.is_local:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                held = self._read()
            else:
                with os.fdopen(fd, "wb") as f:
                    f.write(self._record())
                self._start()
                return self
        if held and held.get("owner") != self.owner:
            age = time.time() - float(held.get("heartbeat", 0.0))
            if age < self.stale_after and not _dead_here(str(held.get("owner", ""))):
                raise StoreBusyError(
                    f"store {self.ref.url} is being written by another run ({held.get('owner')}, "
                    f"heartbeat {age:.0f} s ago); wait for it to finish, or stop it — a lease older than "
                    f"{self.stale_after:.0f} s is taken over"
                )
        self._write()
        if not self.ref.is_local:  # last writer wins: check it is us
            time.sleep(0.5)
            now = self._read() or {}
            if now.get("owner") != self.owner:
                raise StoreBusyError(f"store {self.ref.url} was just taken by another run ({now.get('owner')})")
        self._start()
        return self

    def _start(self) -> None:
        _ACTIVE.add(self.owner)

        def beat() -> None:
            while not self._stop.wait(self.heartbeat):
                try:
                    self._write()
                except Exception:  # noqa: BLE001 - a missed heartbeat only ages the lease
                    pass

        self._thread = threading.Thread(target=beat, name="geosweep-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        _ACTIVE.discard(self.owner)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            held = self._read()
            if held is not None and held.get("owner") == self.owner:
                self.fs.rm_file(self.path)
        except Exception:  # noqa: BLE001 - an unreleased lease goes stale by itself
            pass

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
