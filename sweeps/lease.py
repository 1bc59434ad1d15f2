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
import errno
import fcntl
import json
import math
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from geosweep import config
from geosweep.sweeps.store.checks import StoreMismatchError
from geosweep.sweeps.store.location import StoreRef

#: environment variable: lease timeout in seconds (heartbeat every sixth of it; geosweep.config)
TIMEOUT_ENV = config.LEASE_TIMEOUT.name
HEARTBEAT = 10.0
STALE_AFTER: float = config.LEASE_TIMEOUT.default
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


def _fs(ref: StoreRef) -> tuple[Any, str]:
    import fsspec

    if ref.is_local:
        return fsspec.filesystem("file"), ref.url.rstrip("/") + ".lease"
    fs, root = fsspec.core.url_to_fs(ref.url, **(ref.storage_options or {}))
    return fs, root.rstrip("/") + ".lease"


@contextlib.contextmanager
def _locked(ref: StoreRef, path: str, exclusive: bool, wait: float = LOCK_WAIT) -> Iterator[None]:
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


def _raw(ref: StoreRef, fs, path: str) -> bytes | None:
    """The lease's bytes (None: no lease). Raises :class:`LeaseFileError` for a non-regular file."""
    if ref.is_local:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise LeaseFileError(
                f"{path} is not a lease file (a {_kind(st.st_mode)}); geosweep will not read or replace it — "
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


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISLNK, "symbolic link"),
                       (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device")):  # fmt: skip
        if test(mode):
            return name
    return "special file"


def _parse(data: bytes) -> dict | None:
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


def _heartbeat(rec: dict) -> float | None:
    """The record's heartbeat (unix time) if it is a finite number, else None."""
    hb = rec.get("heartbeat")
    if isinstance(hb, bool) or not isinstance(hb, (int, float)) or not math.isfinite(hb):
        return None
    return float(hb)


def check(ref: StoreRef) -> None:
    """Raise :class:`LeaseLost` unless ``ref``'s lease names ``ref.lease`` (call holding the lock)."""
    fs, path = _fs(ref)
    try:
        data = _raw(ref, fs, path)
    except LeaseFileError as e:
        raise LeaseLost(f"store {ref.url}: this run's lease was replaced ({e}); it stops writing") from None
    rec = _parse(data) if data is not None else None
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
    _fs_, path = _fs(ref)
    with _locked(ref, path, exclusive=False):
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
        self.fs, self.path = _fs(self.ref)
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
        return _raw(self.ref, self.fs, self.path)

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
        rec = _parse(data)
        hb = _heartbeat(rec) if rec is not None else None
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
        rec = _parse(data) or {}
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
            with _locked(self.ref, self.path, exclusive=True):
                if self._read() != data:
                    continue  # changed since judged (another run took it, or beat): judge again
                rec = _parse(data) if data is not None else None
                epoch = rec.get("epoch") if rec else None
                self.epoch = (epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0) + 1
                self._write()
            break
        else:
            raise StoreBusyError(f"store {self.ref.url}: its lease keeps changing (another run is starting); retry")
        if not self.ref.is_local:  # last writer wins: check it is us
            time.sleep(0.5)
            now = _parse(self._read() or b"") or {}
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
        with _locked(self.ref, self.path, exclusive=False):
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
            with _locked(self.ref, self.path, exclusive=False, wait=1.0):
                rec = _parse(self._read() or b"")
                if rec is not None and rec["owner"] == self.owner:
                    self.fs.rm_file(self.path)
        except Exception:  # noqa: BLE001 - an unreleased lease goes stale by itself
            pass

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
