"""Every worker sees *this* store before it runs a slice: no results on workers' private disks.

A store given as a local path must be the same directory on every Dask worker (a shared file
system, at the same path); an object store must be readable with the credentials the workers
have. Otherwise workers write elsewhere (a path missing there: every slice fails; a same-path copy
left on a node's scratch disk by an earlier attempt: the results land there, and the driver's
store stays empty) or not at all (no credentials in the workers' environment).

The proof is the run's token: the lease the driver holds while it writes the store
(``<store>.lease``, :class:`geosweep.sweeps.lease.Lease`) names a token unique to the run, and each worker
reads it back through the same path or URL (:func:`probe`, read-only: nothing is created). The
driver asks every worker before it submits any slice (:func:`check_workers`), and every slice
asks again on a worker that joined later (:func:`ensure_visible`, once per worker process and
run). A worker that cannot prove it stops the run with one line naming the problem (exit 2).
"""

from __future__ import annotations

import threading
from typing import Any

from geosweep.sweeps.lease_file import StoreWriteError, lease_path, parse_record, read_raw
from geosweep.sweeps.store import StoreRef

#: where the rules for a store that every worker must see are explained
README = "deploy/README.md, 'The store'"
#: process-wide state: the lease tokens whose store this process has proven it sees (one probe per
#: worker process and run)
_PROVEN: set[str] = set()
_LOCK = threading.Lock()


class StoreNotVisible(StoreWriteError):
    """A worker does not see the driver's store (or has no credentials for it): the run stops before
    any slice runs, writing nothing (exit 2, like a store that cannot be written)."""


def _credentials_problem(exc: BaseException) -> bool:
    """Whether ``exc`` is an object store's refusal for want of (valid) credentials."""
    names = {c.__name__ for c in type(exc).__mro__}
    text = str(exc)
    return bool(
        names & {"NoCredentialsError", "PartialCredentialsError", "PermissionError", "ClientAuthenticationError"}
        or any(w in text for w in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden"))
    )


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


def probe(ref: StoreRef, taken_over_ok: bool = False) -> str | None:
    """On a worker: None if it reads this run's token (``ref.lease``) from the store's lease, else the
    problem in a few words. Reads only; a ref without a token (no lease) is not checked.

    ``taken_over_ok``: a lease naming another run is left to the fenced writes (None): in a task
    that may be an orphan of a run whose lease a newer run took over (:class:`geosweep.sweeps.lease.LeaseLost`)."""
    if ref.lease is None:
        return None
    try:
        fs, path = lease_path(ref)
        data = read_raw(ref, fs, path)
        root = fs.exists(ref.url) if data is None else True
    except Exception as exc:  # noqa: BLE001 - any failure to read the store is the problem named
        if not ref.is_local and _credentials_problem(exc):
            return (
                f"cannot read the store {ref.url} with its credentials ({_short(exc)}): credentials in the driver's "
                "environment do not reach the workers — pass them with --storage-options env:NAME or @FILE, "
                "or set them in the workers' environment"
            )
        return f"cannot read the store {ref.url} ({_short(exc)})"
    if data is None and not root:
        if ref.is_local:
            return (
                f"the store's path {ref.url} does not exist there: a local store must be on a file system every "
                "worker shares, at the same path (or use an object store)"
            )
        return f"the store {ref.url} does not exist for it (another endpoint or bucket?)"
    rec = parse_record(data) if data is not None else None
    if rec is not None and rec.get("owner") == ref.lease:
        _PROVEN.add(ref.lease)
        return None
    if rec is not None and taken_over_ok:
        return None
    return (
        f"{ref.url} there is not the driver's store (another copy at the same path, e.g. node-local scratch left "
        "by an earlier attempt): a local store must be on a file system every worker shares, at the same path"
    )


def check_workers(client: Any, ref: StoreRef, log=None) -> None:
    """Ask every worker of ``client`` to :func:`probe` the store; raise :class:`StoreNotVisible`
    (one line naming a worker, its problem and how many workers have one) unless all of them see it."""
    if ref.lease is None:
        return
    answers = client.run(probe, ref, on_error="return")
    bad = {addr: a for addr, a in answers.items() if a is not None}
    if not bad:
        return
    addr, answer = sorted(bad.items())[0]
    problem = answer if isinstance(answer, str) else f"the check failed ({_short(answer)})"
    others = f" ({len(bad)} of {len(answers)} workers)" if len(answers) > 1 else ""
    raise StoreNotVisible(f"worker {addr}{others}: {problem}; nothing was run — see {README}")


def prove_local(ref: StoreRef) -> None:
    """The driver's own process sees the store of its run: its worker threads (``inproc://``) need no probe."""
    if ref.lease is not None:
        with _LOCK:
            _PROVEN.add(ref.lease)


def ensure_visible(ref: StoreRef) -> None:
    """In a worker's task: raise :class:`StoreNotVisible` unless this process has proven (or now
    proves) that it sees the store of this run."""
    if ref.lease is None or ref.lease in _PROVEN:
        return
    with _LOCK:
        if ref.lease in _PROVEN:
            return
        problem = probe(ref, taken_over_ok=True)
        if problem is not None:
            raise StoreNotVisible(f"a worker that joined the run: {problem}; it ran nothing — see {README}")
        _PROVEN.add(ref.lease)
