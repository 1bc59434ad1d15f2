"""One writer at a time: a lease object beside the store (``<store>.lease``), and fenced writes.

A run holds the lease while it creates or writes the store: ``{"owner": host:pid:id, "epoch":
n, "heartbeat": unix time, "store": url}``; ``owner`` is the run's token (unique per run) and
``epoch`` counts the holders of the store's lease. A background thread refreshes the heartbeat
every ``HEARTBEAT`` seconds. A second run on the same store refuses at once with a message naming
the holder (:class:`StoreBusyError`, before any work); a lease whose heartbeat is older than
``STALE_AFTER`` (its run was killed or stopped) is taken over, and so is one held by a process of
this host that no longer exists (a killed run is resumed at once). Both default from the
environment variable ``GEOSWEEP_LEASE_TIMEOUT`` (seconds, e.g. for tests; heartbeat = 1/6 of it).

A store is identified by its real path (symbolic links resolved, :func:`real`), so every alias
of one store shares one lease.

**Fencing.** Every write to a store under a lease runs inside :func:`fence`, which checks that
the lease still names this run's token (``StoreRef.lease``) and raises :class:`LeaseLost`
otherwise; the run then stops with one line, writing nothing. On a local file system the lease
is changed only under an exclusive ``flock`` of ``<store>.lease.lock`` (taking it, taking it
over) while checks, heartbeats and the fenced writes hold it shared — so no takeover can
happen between a check and the write it guards (a run stopped in the middle of a write keeps the
lock, and a takeover waits for it, then refuses). The lock file stays beside the store (0 bytes).
On an object store there is no lock: the check reads the lease object right before the writes
it guards; the residual window is the duration of those writes (one shard), during which the
writer would have to be frozen for longer than ``STALE_AFTER``.

A lease whose content is not a lease (garbage, a heartbeat that is not a finite number) cannot
come from a live run and is taken over (one line). One whose heartbeat lies in the future (clock
skew) is watched for up to ``STALE_AFTER``: taken over if it does not change, refused if it does.
A ``<store>.lease`` that is not a regular file (a directory, a FIFO …) is refused
(:class:`LeaseFileError`, nothing read or removed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from geosweep import config
from geosweep.sweeps.lease_file import (
    LeaseFileError,
    LeaseLost,
    StoreBusyError,
    StoreWriteError,
    heartbeat_of,
    lease_path,
    locked,
    parse_record,
    read_raw,
    store_write_error,
)
from geosweep.sweeps.store.location import StoreRef

#: the lease file's errors given here too (what a run raises and the CLI maps to exit codes)
__all__ = ["Lease", "LeaseFileError", "LeaseLost", "StoreBusyError", "StoreWriteError", "check", "fence"]
__all__ += ["real", "store_write_error", "timeouts"]

#: environment variable: lease timeout in seconds (heartbeat every sixth of it; geosweep.config)
TIMEOUT_ENV = config.LEASE_TIMEOUT.name
HEARTBEAT = 10.0
STALE_AFTER: float = config.LEASE_TIMEOUT.default


def timeouts() -> tuple[float, float]:
    """(stale_after, heartbeat) in seconds: :data:`TIMEOUT_ENV` if set, else the defaults
    (:class:`geosweep.config.ConfigError` for a value that is not a number of seconds > 0)."""
    value = float(config.LEASE_TIMEOUT.get())
    return value, min(HEARTBEAT, value / 6)


def real(ref: StoreRef) -> StoreRef:
    """``ref`` with its identity: a local path with every symbolic link resolved (aliases share
    one store and one lease), a URL without trailing slashes."""
    url = os.path.realpath(ref.url) if ref.is_local else ref.url.rstrip("/")
    return dataclasses.replace(ref, url=url)


def check(ref: StoreRef) -> None:
    """Raise :class:`LeaseLost` unless ``ref``'s lease names ``ref.lease`` (call holding the lock)."""
    fs, path = lease_path(ref)
    try:
        data = read_raw(ref, fs, path)
    except LeaseFileError as e:
        raise LeaseLost(f"store {ref.url}: this run's lease was replaced ({e}); it stops writing") from None
    rec = parse_record(data) if data is not None else None
    if rec is not None and rec["owner"] == ref.lease:
        return
    now = f"{rec['owner']} holds it now" if rec is not None else "its lease is gone"
    raise LeaseLost(
        f"store {ref.url}: this run lost its lease ({now}; this run was stopped or cut off for longer than the "
        f"lease timeout) — it writes nothing more and stops; rerun once the other run is done"
    )


@contextlib.contextmanager
def fence(ref: StoreRef) -> Iterator[None]:
    """Guard writes to the store of ``ref``: raises :class:`LeaseLost` before any of them if this
    run (``ref.lease``, its token) no longer holds the lease. No-op for a ref without a token
    (a store written without a lease, e.g. in tests of single functions)."""
    if ref.lease is None:
        yield
        return
    _fs_, path = lease_path(ref)
    with locked(ref, path, exclusive=False):
        check(ref)
        yield


#: process-wide state: owners of the leases this process holds right now (a lease of this host whose
#: process exists but is not among them was left by a dead run of this process: :func:`_dead_here`)
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
    except (PermissionError, OverflowError):
        return False
    return False


class Lease:
    """Acquire with :meth:`acquire` (or as a context manager); :meth:`release` stops the heartbeat.

    :attr:`ref` is the store's real ref carrying this run's token: pass it to every writer so its
    writes are fenced. :attr:`lost` is set (one line) when the heartbeat finds the lease taken over;
    callbacks registered with :meth:`on_lost` are called then.
    """

    def __init__(self, ref: StoreRef, stale_after: float | None = None, heartbeat: float | None = None, log=None):
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.ref = dataclasses.replace(real(ref), lease=self.owner)
        self.fs, self.path = lease_path(self.ref)
        env_stale, env_beat = timeouts()
        self.stale_after = env_stale if stale_after is None else stale_after
        self.heartbeat = env_beat if heartbeat is None else heartbeat
        self.epoch = 0
        self.lost: str | None = None
        self._log = log or (lambda msg: None)
        self._callbacks: list[Callable[[str], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- io -------------------------------------------------------------------------------
    def _record(self) -> bytes:
        rec = {"owner": self.owner, "epoch": self.epoch, "heartbeat": time.time(), "store": self.ref.url}
        return json.dumps(rec).encode()

    def _read(self) -> bytes | None:
        return read_raw(self.ref, self.fs, self.path)

    def _write(self) -> None:
        if self.ref.is_local:
            tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
            try:
                with open(tmp, "wb") as f:
                    f.write(self._record())
                os.replace(tmp, self.path)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
                if (err := store_write_error(self.ref.url, e)) is not None:
                    raise err from None
                raise
        else:
            self.fs.pipe_file(self.path, self._record())

    # ---- protocol -------------------------------------------------------------------------
    def _judge(self, data: bytes | None) -> bool:
        """Whether the lease ``data`` may be taken over now (True), must be watched for signs of
        life first (False: heartbeat in the future or not a number); raises :class:`StoreBusyError`
        while its holder is alive."""
        if data is None:
            return True
        rec = parse_record(data)
        hb = heartbeat_of(rec) if rec is not None else None
        if rec is None or hb is None:  # no live run writes this
            self._log(f"store {self.ref.url}: its lease {self.path} holds no valid lease record; taken over")
            return True
        owner = rec["owner"]
        if _dead_here(owner):
            return True
        age = time.time() - hb
        if age < -self.heartbeat:  # from the future: the holder's clock is ahead
            return False
        if age < self.stale_after:
            raise StoreBusyError(
                f"store {self.ref.url} is being written by another run ({owner}, heartbeat {max(age, 0):.0f} s ago); "
                f"wait for it to finish, or stop it — a lease older than {self.stale_after:.0f} s is taken over"
            )
        return True

    def _watch(self, data: bytes) -> None:
        """Take over a lease with a heartbeat in the future only if it does not change for ``stale_after``
        seconds (a live holder rewrites it every heartbeat): raises :class:`StoreBusyError` if it does."""
        rec = parse_record(data) or {}
        ahead = float(rec.get("heartbeat", 0.0)) - time.time()
        self._log(
            f"store {self.ref.url}: the heartbeat of its lease ({rec.get('owner')}) is {ahead:.0f} s in the future "
            f"(clock skew?); watching the lease for {self.stale_after:.0f} s to see whether its run is alive"
        )
        deadline = time.monotonic() + self.stale_after
        while time.monotonic() < deadline:
            time.sleep(min(1.0, self.heartbeat / 2))
            if self._read() != data:
                raise StoreBusyError(
                    f"store {self.ref.url} is being written by another run ({rec.get('owner')}: its lease changed "
                    f"while watched; its heartbeat was {ahead:.0f} s in the future — check that host's clock)"
                )
        self._log(f"store {self.ref.url}: its lease did not change for {self.stale_after:.0f} s; taken over")

    def acquire(self) -> Lease:
        for _attempt in range(3):
            data = self._read()
            if not self._judge(data) and data is not None:  # _judge is True for no data
                self._watch(data)
            if self.ref.is_local:
                os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with locked(self.ref, self.path, exclusive=True):
                if self._read() != data:
                    continue  # changed since judged (another run took it, or beat): judge again
                rec = parse_record(data) if data is not None else None
                epoch = rec.get("epoch") if rec else None
                self.epoch = (epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0) + 1
                self._write()
            break
        else:
            raise StoreBusyError(f"store {self.ref.url}: its lease keeps changing (another run is starting); retry")
        if not self.ref.is_local:  # last writer wins: check it is us
            time.sleep(0.5)
            now = parse_record(self._read() or b"") or {}
            if now.get("owner") != self.owner:
                raise StoreBusyError(f"store {self.ref.url} was just taken by another run ({now.get('owner')})")
        self._start()
        return self

    def on_lost(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(message)`` (from the heartbeat thread) when the lease is found taken over."""
        self._callbacks.append(callback)

    def _lose(self, message: str) -> None:
        self.lost = message  # the run raises it (one line); not logged here
        _ACTIVE.discard(self.owner)
        for callback in self._callbacks:
            with contextlib.suppress(Exception):
                callback(message)

    def _beat(self) -> None:
        """One heartbeat: rewrite the lease if it still names this run, else mark it lost."""
        with locked(self.ref, self.path, exclusive=False):
            try:
                check(self.ref)
            except LeaseLost as e:
                self._lose(str(e))
                return
            self._write()

    def _start(self) -> None:
        _ACTIVE.add(self.owner)

        def beat() -> None:
            while self.lost is None and not self._stop.wait(self.heartbeat):
                try:
                    self._beat()
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
            with locked(self.ref, self.path, exclusive=False, wait=1.0):
                rec = parse_record(self._read() or b"")
                if rec is not None and rec["owner"] == self.owner:
                    self.fs.rm_file(self.path)
        except Exception:  # noqa: BLE001 - an unreleased lease goes stale by itself
            pass

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
