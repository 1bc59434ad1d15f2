"""Every environment variable geosweep reads or sets, declared once (stdlib only: any layer imports it).

* :data:`SETTINGS` — the ``GEOSWEEP_*`` variables geosweep reads: each a :class:`Setting` with its
  kind, default and one-line doc, parsed by :meth:`Setting.get` (one parser per kind). Unset or blank
  is the default; a bad value raises :class:`ConfigError`, one line naming the variable and what is
  wrong. The command checks every one before any work (:func:`check`, exit 2).
* :data:`FOREIGN` — other programs' variables geosweep reads (Numba's, Prefect's, XDG's), each with
  why; read through :func:`environ`, which refuses an undeclared name.
* :data:`EXPORTED` — the variables geosweep sets for others (its own process, its helpers, its
  workers), each with its value and why; set through :func:`put` and :func:`values`.

:func:`write_docs` writes the tables of ``docs/environment.md`` (``tests/test_config.py``
checks that file against this module, and that no other module reads a ``GEOSWEEP_*`` variable).
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A ``GEOSWEEP_*`` variable has a value geosweep cannot use (the CLI exits 2 with this one line)."""


#: the kinds of value a setting takes (one parser each, :data:`_PARSERS`)
SECONDS, FLAG, PROGRAM, PATH, CHOICE, CHOICES = "seconds", "flag", "program", "path", "choice", "choices"
#: what a flag accepts, lower case
_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Setting:
    """A ``GEOSWEEP_*`` variable geosweep reads.

    ``kind``: ``seconds`` (a float; ``positive``: > 0, else >= 0), ``flag`` (1/true/yes/on or
    0/false/no/off), ``program`` (a program on ``PATH`` or an existing file: its path), ``path`` (any
    path), ``choice`` (one of ``choices``), ``choices`` (comma-separated, each one of ``choices``: a tuple).
    ``hint`` ends the message of a bad value; ``reader`` names who reads it (the docs' table)."""

    name: str
    kind: str
    default: Any
    doc: str
    reader: str
    positive: bool = False
    choices: tuple[str, ...] = ()
    hint: str = ""

    def raw(self) -> str:
        """The variable's text in this process's environment, stripped ("" when unset)."""
        return os.environ.get(self.name, "").strip()

    def get(self) -> Any:
        """The variable's value (the default when unset or blank); :class:`ConfigError` when it is bad.
        Unset costs one lookup (read per trajectory for ``GEOSWEEP_CHECKED_CALLS``)."""
        raw = os.environ.get(self.name)
        if not raw or not (raw := raw.strip()):
            return self.default
        return _PARSERS[self.kind](self, raw)

    def bad(self, raw: str, what: str) -> ConfigError:
        return ConfigError(f"{self.name}={raw!r}: {what}{self.hint}")


def _seconds(s: Setting, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 if s.positive else value >= 0):  # NaN fails both
        raise s.bad(raw, f"must be a number of seconds {'>' if s.positive else '>='} 0")
    return value


def _flag(s: Setting, raw: str) -> bool:
    if raw.lower() in _ON + _OFF:
        return raw.lower() in _ON
    raise s.bad(raw, f"must be one of {', '.join(_ON + _OFF)}")


def _program(s: Setting, raw: str) -> str:
    found = shutil.which(raw) or (raw if os.path.isfile(raw) else None)
    if found is None:
        raise s.bad(raw, "no such program on PATH and no such file")
    return found


def _path(s: Setting, raw: str) -> str:
    return raw


def _choice(s: Setting, raw: str) -> str:
    if raw not in s.choices:
        raise s.bad(raw, f"must be one of {', '.join(s.choices)}")
    return raw


def _choices(s: Setting, raw: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    unknown = [n for n in names if n not in s.choices]
    if unknown:
        raise s.bad(raw, f"{', '.join(unknown)} not among {', '.join(s.choices)}")
    return names


_PARSERS = {SECONDS: _seconds, FLAG: _flag, PROGRAM: _program, PATH: _path, CHOICE: _choice, CHOICES: _choices}

#: the points where ``GEOSWEEP_TEST_PAUSE`` may pause the command (``geosweep.flows.entry.pause``)
PAUSE_POINTS = ("import", "prefect-start", "flow-start", "tail")
#: the points where ``GEOSWEEP_TEST_EXIT_AT`` may end the process (``geosweep.sweeps.crashpoint.reached``)
EXIT_POINTS = tuple(
    [f"grow.{p}" for p in ("marked", "resizing", "resized", "coords", "fillers", "switched")]
    + [f"extend.{p}" for p in ("marked", "dropped", "checked", "resizing", "resized", "cleared", "switched")]
    + ["extend.consolidated"]
)

IN_DRIVER_BELOW = Setting(
    "GEOSWEEP_IN_DRIVER_BELOW", SECONDS, 0.025,
    "a run of short cells estimated under this many single-core seconds in all runs in the driver's "
    "process, without Dask (0: every run goes to the workers)",
    "sweeps/execution.py",
)  # fmt: skip
LEASE_TIMEOUT = Setting(
    "GEOSWEEP_LEASE_TIMEOUT", SECONDS, 60.0,
    "a store's lease not renewed for this long is stale (another run may take it over); heartbeat every sixth",
    "sweeps/lease.py", positive=True,
)  # fmt: skip
WORKER_TIMEOUT = Setting(
    "GEOSWEEP_WORKER_TIMEOUT", SECONDS, 120.0,
    "a Dask worker silent this long is unresponsive: its cells are resubmitted elsewhere",
    "sweeps/liveness.py", positive=True,
)  # fmt: skip
FIRST_WORKER_TIMEOUT = Setting(
    "GEOSWEEP_FIRST_WORKER_TIMEOUT", SECONDS, 1800.0,
    "a batch cluster that brings up no worker in this long ends the run, exit 1 (0: wait as long as it takes)",
    "sweeps/first_worker.py", hint=" (0: wait as long as it takes)",
)  # fmt: skip
CHECKED_CALLS = Setting(
    "GEOSWEEP_CHECKED_CALLS", FLAG, False,
    "kernels called through Numba's dispatcher (exceptions propagate), not the fast call: for debugging",
    "kernels/core/fastcall.py",
)  # fmt: skip
BROWSER = Setting(
    "GEOSWEEP_BROWSER", PROGRAM, None,
    "the Chromium-family browser that screenshots a report (default: the first of chromium, chrome … on PATH)",
    "analysis/render.py",
)  # fmt: skip
TEST_EXIT_AT = Setting(
    "GEOSWEEP_TEST_EXIT_AT", CHOICE, None,
    "tests only: the process ends at once (exit 86) at this point of extend / run --grow",
    "sweeps/crashpoint.py", choices=EXIT_POINTS,
)  # fmt: skip
TEST_PAUSE = Setting(
    "GEOSWEEP_TEST_PAUSE", CHOICES, (),
    "tests only: the command says 'geosweep-test: paused at POINT' on stderr and waits at these points",
    "flows/entry.py", choices=PAUSE_POINTS,
)  # fmt: skip
TEST_PAUSE_SECONDS = Setting(
    "GEOSWEEP_TEST_PAUSE_SECONDS", SECONDS, 60.0,
    "tests only: how long GEOSWEEP_TEST_PAUSE waits",
    "flows/entry.py", positive=True,
)  # fmt: skip
TEST_SLURM = Setting(
    "GEOSWEEP_TEST_SLURM", FLAG, False,
    "tests only: the real Slurm's tests may apt-get install Slurm and munge (as root), start their daemons "
    "and add a user geosweep-test; unset, they are skipped (.ci/run sets it)",
    "tests/slurm_cluster.py",
)  # fmt: skip
PEERS_DIR = Setting(
    "GEOSWEEP_PEERS_DIR", PATH, "/tmp",
    "benchmarks only: where the peer comparisons' virtual environments live",
    "benchmarks/peers/harness.py",
)  # fmt: skip
STORE = Setting(
    "GEOSWEEP_STORE", PATH, "results/analysis-demo.zarr",
    "the example notebook: the store it analyses", "examples/analysis.ipynb",
)  # fmt: skip
REPORT_DIR = Setting(
    "GEOSWEEP_REPORT_DIR", PATH, "report",
    "the example notebook: where it writes its report", "examples/analysis.ipynb",
)  # fmt: skip

#: every ``GEOSWEEP_*`` variable geosweep reads, by name
SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        IN_DRIVER_BELOW,
        LEASE_TIMEOUT,
        WORKER_TIMEOUT,
        FIRST_WORKER_TIMEOUT,
        CHECKED_CALLS,
        BROWSER,
        TEST_EXIT_AT,
        TEST_PAUSE,
        TEST_PAUSE_SECONDS,
        TEST_SLURM,
        PEERS_DIR,
        STORE,
        REPORT_DIR,
    )
}


def check() -> None:
    """Parse every setting; the first bad one raises its :class:`ConfigError` (the CLI: before any work)."""
    for setting in SETTINGS.values():
        setting.get()


#: other programs' variables geosweep reads, and why (through :func:`environ`)
FOREIGN: dict[str, str] = {
    "NUMBA_NUM_THREADS": "checked before any work: a bad count fails Numba's import (sweeps/numba_env.py)",
    "NUMBA_THREADING_LAYER": "checked before any work: an unloadable layer fails mid-run (sweeps/numba_env.py)",
    "NUMBA_CACHE_DIR": "part of the key of the first-run stamp: another cache is cold (flows/firstrun.py)",
    "XDG_CACHE_HOME": "where the first-run stamps live, ~/.cache by default (flows/firstrun.py)",
    "PREFECT_API_URL": "whether a Prefect server is configured, read without importing Prefect (flows/firstrun.py, "
    "sweeps/estimate.py)",
    "PREFECT_HOME": "where Prefect's profiles live, for the same question (flows/firstrun.py)",
    "PREFECT_PROFILES_PATH": "Prefect's profiles file, for the same question (flows/firstrun.py)",
    "PREFECT_PROFILE": "Prefect's active profile, for the same question (flows/firstrun.py)",
}


def environ(name: str) -> str:
    """The text of :data:`FOREIGN` variable ``name`` in this process's environment ("" when unset);
    ``KeyError`` for a name not declared there."""
    if name not in FOREIGN:
        raise KeyError(f"{name} is not declared in geosweep.config.FOREIGN")
    return os.environ.get(name, "")


def named(name: str) -> str | None:
    """The variable ``name`` that the user named (``--storage-options env:NAME``: credentials as JSON,
    read in the process that opens the store), None when unset."""
    return os.environ.get(name)


@dataclass(frozen=True)
class Exported:
    """A variable geosweep sets for others: ``value`` (None: computed where it is set, or removed),
    ``where`` (whose environment: this process, a helper's, the workers'), ``why``."""

    name: str
    value: str | None
    where: str
    why: str
    removed: bool = False


_SINGLE_THREAD = "every worker's kernels and BLAS single-threaded: cells run side by side, not their threads"
#: every variable geosweep sets for other programs, by name
EXPORTED: dict[str, Exported] = {
    e.name: e
    for e in (
        Exported(
            "PYTHONSAFEPATH",
            "1",
            "the command's process (every Python it spawns inherits it), batch workers",
            "the working directory is not on sys.path: a yaml.py or multiprocessing.py there never runs",
        ),
        Exported(
            "OMP_WAIT_POLICY",
            "passive",
            "this process, before Numba's threading layer starts (unless set)",
            "OpenMP threads sleep while they wait: spinning costs a time slice per step on a shared machine",
        ),
        Exported(
            "MALLOC_TRIM_THRESHOLD_",
            None,
            "removed from local Dask worker processes (Dask sets 65536)",
            "glibc keeps adapting its thresholds: shards' temporary arrays reuse memory (fewer page faults)",
            removed=True,
        ),
        Exported(
            "PREFECT_SERVER_ANALYTICS_ENABLED",
            "false",
            "the command's process (unless set)",
            "an offline machine cannot send Prefect's telemetry: no error logged for it",
        ),
        Exported(
            "PREFECT_API_URL",
            None,
            "the command's process, when it starts Prefect's temporary server",
            "the flow talks to the server started early (it boots while the kernels compile)",
        ),
        Exported(
            "PREFECT_UI_URL",
            "",
            "the command's process, with its temporary server (unless set)",
            "the temporary server has no UI: no 'View at' link to nowhere",
        ),
        Exported("PREFECT_UI_ENABLED", "0", "Prefect's temporary server", "no UI to serve"),
        Exported(
            "PREFECT__SERVER_EPHEMERAL",
            "1",
            "Prefect's temporary server",
            "what Prefect sets for a temporary server it starts itself",
        ),
        Exported(
            "PREFECT__SERVER_FINAL",
            "1",
            "Prefect's temporary server",
            "what Prefect sets for a temporary server it starts itself",
        ),
        Exported(
            "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL",
            None,
            "the command's process (--log-level, --quiet)",
            "Prefect's console shows geosweep's level; its API still gets every flow-run log",
        ),
        Exported(
            "PREFECT_LOGGING_LEVEL",
            "DEBUG",
            "the command's process, with --log-level DEBUG",
            "Prefect's own debug logs with geosweep's",
        ),
        Exported(
            "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED",
            None,
            "the command's process (workers inherit it)",
            "distributed logs warnings only (its import would set INFO)",
        ),
        Exported("NUMBA_NUM_THREADS", "1", "compile helpers, batch workers", _SINGLE_THREAD),
        Exported("OMP_NUM_THREADS", "1", "batch workers", _SINGLE_THREAD),
        Exported("OPENBLAS_NUM_THREADS", "1", "batch workers", _SINGLE_THREAD),
        Exported("MKL_NUM_THREADS", "1", "batch workers", _SINGLE_THREAD),
        Exported(
            "NUMBA_CACHE_DIR",
            None,
            "batch workers (the cluster file's numba_cache_dir)",
            "one compiled cache shared by every job (home directories are shared on most HPC systems)",
        ),
    )
}


def put(name: str, value: str | None = None, *, replace: bool = False) -> None:
    """Set :data:`EXPORTED` variable ``name`` in this process's environment (its children inherit it)
    to ``value`` (default: the declared one); only when unset unless ``replace``."""
    declared = EXPORTED[name]  # KeyError: declare it first
    value = declared.value if value is None else value
    if value is None:
        raise ValueError(f"{name} has no declared value: pass one")
    if replace:
        os.environ[name] = value
    else:
        os.environ.setdefault(name, value)


def values(*names: str) -> dict[str, str]:
    """The declared values of :data:`EXPORTED` variables ``names`` (for a child process's environment)."""
    out = {name: EXPORTED[name].value for name in names}
    missing = [n for n, v in out.items() if v is None]
    if missing:
        raise ValueError(f"{', '.join(missing)}: no declared value")
    return {n: v for n, v in out.items() if v is not None}


@contextmanager
def without(names: tuple[str, ...] | None = None) -> Iterator[None]:
    """:data:`EXPORTED` variables ``names`` (default: every one declared ``removed``) out of this process's
    environment meanwhile (processes spawned meanwhile start without them), then back as they were."""
    names = tuple(n for n, e in EXPORTED.items() if e.removed) if names is None else names
    for name in names:
        EXPORTED[name]  # noqa: B018 - KeyError: declare it first
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        for name in names:
            os.environ.pop(name, None)  # a copy another library put there meanwhile, if any
        os.environ.update(saved)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")


def markdown() -> str:
    """The tables of ``docs/environment.md``: what geosweep reads, then what it sets."""
    lines = [
        "# Environment variables",
        "",
        "Generated from `geosweep/config.py` by `python -c 'from geosweep import config; config.write_docs()'`",
        "(`tests/test_config.py` checks it). Unset or blank means the default; a bad value is refused in one",
        "line naming the variable, and the command exits 2 before any work.",
        "",
        "## Read by geosweep",
        "",
        "| variable | kind | default | what | read in |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in SETTINGS.values():
        kind = s.kind + (" > 0" if s.positive else " >= 0" if s.kind == SECONDS else "")
        default = "unset" if s.default in (None, ()) else f"`{s.default}`"
        what = s.doc + (f" (one of: {', '.join(s.choices)})" if s.choices else "")
        lines.append(f"| `{s.name}` | {kind} | {default} | {_cell(what)} | `{s.reader}` |")
    lines += ["", "## Other programs' variables geosweep reads", "", "| variable | why |", "| --- | --- |"]
    lines += [f"| `{name}` | {_cell(why)} |" for name, why in FOREIGN.items()]
    lines += ["", "## Set by geosweep", "", "| variable | value | where | why |", "| --- | --- | --- | --- |"]
    for e in EXPORTED.values():
        value = "(removed)" if e.removed else "(computed)" if e.value is None else f"`{e.value}`" if e.value else '`""`'
        lines.append(f"| `{e.name}` | {value} | {_cell(e.where)} | {_cell(e.why)} |")
    return "\n".join(lines) + "\n"


def write_docs() -> None:
    """Write :func:`markdown` to ``docs/environment.md`` of this checkout."""
    from pathlib import Path

    (Path(__file__).resolve().parent.parent / "docs" / "environment.md").write_text(markdown())
