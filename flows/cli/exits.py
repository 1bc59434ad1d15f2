"""The one table from exceptions to the ``geosweep`` exit codes.

0 success (cells whose integration failed are results, not errors); 1 some slices raised or no
Dask worker answered (:mod:`geosweep.sweeps.liveness`) or connected (:mod:`geosweep.sweeps.first_worker`);
2 the spec, cluster file, options, a plugin, the scheduler address or the store location were
refused, a worker does not see the store (:mod:`geosweep.sweeps.visibility`), the store is damaged,
cannot be written (disk full, read-only) or its ``<store>.lease`` is not a lease file; 3 the store
belongs to another spec or has another store format, or another run holds its lease (a run that
lost its lease to another stops with exit 3, writing nothing more); 130/143 interrupted by
SIGINT/SIGTERM (:class:`geosweep.flows.output.Interrupts`). Every refusal is one line, no traceback.

A command raises; :func:`exit_code` chooses the code. The classes are named by path, and
:func:`exit_code` looks only in the modules already imported (an exception is an instance of a loaded
class): choosing a code imports nothing, so it works when an import is what failed (a bad
``NUMBA_NUM_THREADS`` makes every import of Numba raise).
"""

from __future__ import annotations

import importlib
import sys

OK = 0
TASK_FAILED = 1
REFUSED = 2
MISMATCH = 3


class OptionsError(ValueError):
    """A command-line option (or its environment, e.g. no Prefect server) was refused before any work."""


#: (exception class path, exit code), first match wins: a subclass before its base (``StoreNotVisible``
#: is a ``StoreWriteError``, ``LeaseLost`` a ``StoreMismatchError``, ``NoWorkerConnected`` a
#: ``WorkersUnresponsive``)
EXIT_CODES: tuple[tuple[str, int], ...] = (
    ("geosweep.flows.plugins:PluginError", REFUSED),
    ("geosweep.sweeps.spec:SpecError", REFUSED),
    ("geosweep.sweeps.extension:ExtendError", REFUSED),
    ("geosweep.sweeps.store:StoreMismatchError", MISMATCH),  # also StoreFormatError, StoreBusyError, LeaseLost
    ("geosweep.sweeps.liveness:WorkersUnresponsive", TASK_FAILED),  # also NoWorkerConnected
    ("geosweep.flows.cli.exits:OptionsError", REFUSED),
    ("geosweep.config:ConfigError", REFUSED),
    ("geosweep.sweeps.execution:ClusterFileError", REFUSED),
    ("geosweep.flows.cli.common:StoreProblem", REFUSED),
    ("geosweep.sweeps.execution:SchedulerUnreachable", REFUSED),
    ("geosweep.sweeps.credentials:StorageOptionsError", REFUSED),
    ("geosweep.sweeps.repair:StoreDamagedError", REFUSED),
    ("geosweep.sweeps.lease:LeaseFileError", REFUSED),
    ("geosweep.sweeps.lease:StoreWriteError", REFUSED),  # also StoreNotVisible
)


def _class(path: str) -> type[BaseException]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _loaded_class(path: str) -> type[BaseException] | None:
    """The class of ``path`` if its module is imported already, else None (nothing is imported)."""
    module, _, name = path.partition(":")
    loaded = sys.modules.get(module)
    return None if loaded is None else getattr(loaded, name, None)


def exit_code(exc: BaseException) -> int | None:
    """The exit code of a command that raised ``exc`` (its message is the one line to print);
    ``None``: not a refusal, a bug (the traceback is shown)."""
    for path, code in EXIT_CODES:
        cls = _loaded_class(path)
        if cls is not None and isinstance(exc, cls):
            return code
    return None


def refusal_names() -> tuple[str, ...]:
    """The class names of every refusal (a row's class and its subclasses, those loaded): a flow run that
    raises one is reported in its one line only (``geosweep.flows.output.RunFailureFilter``)."""
    names: list[str] = []
    todo = [_class(path) for path, _ in EXIT_CODES]
    while todo:
        cls = todo.pop()
        if cls.__name__ not in names:
            names.append(cls.__name__)
            todo.extend(cls.__subclasses__())
    return tuple(sorted(names))
