"""The first run on a machine: a cold Numba cache and Prefect's temporary server.

A cold Numba cache means compiling what a spec runs: for the demo (the (S²)ⁿ family, its
Lennard-Jones potential, the explicit VI and RK step kinds) about 10 s on one core, a third of it
the shared driver. The family compiles lazily — only the potentials and method kinds of the
spec (:func:`geosweep.sweeps.engine.warm_plan`), not every built-in system's potential or the implicit
VI's LU solve. A spec's kernels compile in this process (one :class:`FirstRun` per command: its
``prepare``, ``finish``, ``warm``) while Prefect's temporary server boots in its own (:func:`start_prefect_server`:
started at once, before this process imports Prefect); "compiling kernels" is said once, only
after the spec was found valid and only when Numba really compiles, not when it loads its cache.
Without a spec (``serve``) every built-in family is imported and compiled (:func:`load_families`),
in parallel helper processes when cold; ``systems`` imports the families only (their kernels compile on
first use, :class:`geosweep.kernels._jit.DeclaredDispatcher`). A stamp per (family, system, integrators) in
``~/.cache/geosweep`` records that this kernel source was compiled.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from geosweep import config
from geosweep.flows.child_process import DETACHED, SAFE_PATH
from geosweep.flows.output import LOG
from geosweep.flows.prefect_server import start_prefect_server

__all__ = ["DETACHED", "SAFE_PATH", "FirstRun", "is_cold", "load_families", "mark_warm", "start_prefect_server"]

if TYPE_CHECKING:
    from geosweep.sweeps.plan import Plan

#: cold compile on 2 cores (AMD EPYC, 2026-11-24): one spec's kernels (the demo's helper: 9.4 s; 11.5 s
#: on the slower VM of 2026-11-23, the driver 4.4 s of it), and every built-in family with the helpers
#: of :func:`compile_families` (32.5 s: 66 CPU-s over six families)
COLD_SECONDS = {"family": 10, "all": 35}


def _stamp(key: str = "all") -> Path:
    import numba

    from geosweep import kernels

    root = Path(kernels.__file__).resolve().parent
    h = hashlib.sha256()
    h.update(f"{numba.__version__} {sys.version} {config.environ('NUMBA_CACHE_DIR')}".encode())
    for src in sorted(root.rglob("*.py")):
        st = src.stat()
        h.update(f"{src.relative_to(root)} {st.st_mtime_ns} {st.st_size}".encode())
    cache = Path(config.environ("XDG_CACHE_HOME") or Path.home() / ".cache") / "geosweep"
    name = key if key == "all" else hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache / f"kernels-compiled-{h.hexdigest()[:16]}-{name}"


def is_cold(key: str = "all") -> bool:
    """True if geosweep has not compiled ``key`` (a family module, or ``all``) from this kernel source yet."""
    try:
        return not (_stamp(key).exists() or _stamp("all").exists())
    except OSError:
        return True


def mark_warm(key: str) -> None:
    """Record ``key`` (a family key of :class:`FirstRun`, or ``all``) as compiled."""
    try:
        stamp = _stamp(key)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    except OSError:
        pass


#: the line a compile helper prints when the first kernel really compiles
_COMPILING = "geosweep-compiling"


def report_compiles() -> None:
    """In a compile helper: print :data:`_COMPILING` on stdout when the first kernel really compiles."""
    from numba.core import event

    class _Report(event.Listener):
        said = False

        def on_start(self, ev: event.Event) -> None:
            if not self.said:
                self.said = True
                print(_COMPILING, flush=True)

        def on_end(self, ev: event.Event) -> None:
            pass

    event.register("numba:compile", _Report())


def _watch(helper: subprocess.Popen, announce: Callable[[], None]) -> threading.Thread:
    """Read a helper's notices: announce the compile once it has started."""

    def read() -> None:
        for line in helper.stdout or ():
            if line.strip() == _COMPILING:
                announce()

    thread = threading.Thread(target=read, name="geosweep-compile-notice", daemon=True)
    thread.start()
    return thread


def _helper(code: str, *args: str, announce: Callable[[], None]) -> tuple[subprocess.Popen, threading.Thread]:
    env = {**os.environ, **config.values("NUMBA_NUM_THREADS")}
    code = f"from geosweep.flows.firstrun import report_compiles; report_compiles(); {code}"
    proc = subprocess.Popen(
        [sys.executable, *SAFE_PATH, "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        **DETACHED,
    )
    return proc, _watch(proc, announce)


#: a helper's code: import a family and compile its kernels of declared signatures (which importing leaves to first use)
_COMPILE_FAMILY = "import {}; from geosweep.kernels._jit import compile_declared; compile_declared()"


def compile_families(modules: list[str] | None = None) -> None:
    """Compile built-in families (default: every one) into the on-disk cache in parallel helpers."""
    from geosweep.kernels.registry import BUILTIN_FAMILIES

    first_run = FirstRun()
    helpers = [_helper(_COMPILE_FAMILY.format(m), announce=first_run.announce_all) for m in modules or BUILTIN_FAMILIES]
    for proc, reader in helpers:
        proc.wait()
        reader.join()


def load_families(first_run: FirstRun | None = None) -> None:
    """Import every built-in family and compile its fixed-signature kernels (``serve``; importing alone
    leaves them to first use). Where the Numba cache is cold: once the first family starts compiling,
    the others compile in parallel helpers; "compiling kernels" is said (by ``first_run``, default a
    new one) only if something compiles."""
    from geosweep.kernels._jit import compile_declared, watch_compiles
    from geosweep.kernels.registry import BUILTIN_FAMILIES, load_builtins

    announce = (first_run or FirstRun()).announce_all
    first, *rest = BUILTIN_FAMILIES
    helpers: list[tuple[subprocess.Popen, threading.Thread]] = []

    def cold() -> None:  # the first family compiles: the others compile meanwhile, in helpers
        announce()
        helpers.extend(_helper(_COMPILE_FAMILY.format(m), announce=announce) for m in rest)

    try:
        with watch_compiles(on_first=cold):
            __import__(first)
            compile_declared()
    finally:
        for proc, reader in helpers:
            proc.wait()
            reader.join()
    with watch_compiles(on_first=announce):
        load_builtins()
        compile_declared()


def _spec_names(spec_path: str | os.PathLike | dict) -> tuple[str, list[str]] | None:
    """(system, integrators) of a spec file (or of its contents, already read), without validation (None if it
    names none)."""
    from geosweep.sweeps.spec import SpecError, read_spec_file

    try:
        data = spec_path if isinstance(spec_path, dict) else read_spec_file(spec_path)
    except SpecError:
        return None  # make_plan reports it
    system, integrators = data.get("system"), data.get("integrators", [])
    if not isinstance(system, str) or not isinstance(integrators, list):
        return None
    return system, [i for i in integrators if isinstance(i, str)]


def _family_key(system: str, integrators: list[str]) -> str:
    from geosweep.kernels.registry import BUILTIN_SYSTEMS

    return "-".join([BUILTIN_SYSTEMS.get(system, "plugin"), system, *sorted(integrators)])


@dataclass
class FirstRun:
    """One command's first run on a cold cache (``validate``, ``run``, ``serve``): :meth:`prepare`
    loads what the spec needs (every built-in family without one) and tells whether geosweep's stamp
    says the cache is cold; the caller validates the spec (and may start Prefect's server in between,
    ``prepare(wait=False)`` then :meth:`finish`), calls :meth:`warm` with the plan and :meth:`mark_warm`.
    "compiling kernels" is said once per object, only when Numba really compiles."""

    spec_path: str | os.PathLike | dict | None = None
    #: the stamp key :meth:`prepare` loaded for (a family, system and integrators; ``all``), "" before
    key: str = ""
    #: geosweep's stamp said the cache was cold for :attr:`key`
    cold: bool = False
    #: this command (or its compile helpers) said "compiling kernels"
    compiled: bool = False
    #: (system, integrators) whose family :meth:`finish` loads
    _names: tuple[str, list[str]] | None = None
    #: kernels that compiled while the family loaded, before the spec was found valid (said by :meth:`warm`)
    _unsaid: int = 0

    def announce(self, what: str = "family") -> None:
        """Say "compiling kernels" once (only when a compile has really started)."""
        if not self.compiled:
            self.compiled = True
            LOG.info(f"compiling kernels (first run only, ~{COLD_SECONDS[what]} s)")

    def announce_all(self) -> None:
        self.announce("all")

    def prepare(self, families: bool = True, wait: bool = True) -> bool:
        """Load what the spec needs (``families=False``: nothing); returns :attr:`cold`.
        ``wait=False``: return at once; :meth:`finish` loads the spec's family."""
        self.key, self.cold, self._names = "", False, None
        if not families:
            return False
        names = _spec_names(self.spec_path) if self.spec_path is not None else None
        # a family compiles lazily (only the potentials and method kinds a spec runs): one stamp per
        # family, system and set of integrators
        self.key = "all" if names is None else _family_key(*names)
        self.cold = is_cold(self.key)
        if names is None:
            load_families(self)  # says "compiling kernels" itself, once a compile starts
        else:
            self._names = names
        if wait:
            self.finish()
        return self.cold

    def finish(self) -> None:
        """Load the family of :meth:`prepare`'s spec. Whatever compiles meanwhile is said by :meth:`warm`,
        once the spec is valid (a built-in family compiles nothing when imported; a plugin's may)."""
        from geosweep.kernels._jit import watch_compiles
        from geosweep.kernels.registry import load_for

        names, self._names = self._names, None
        if names is not None:
            with watch_compiles() as count:
                load_for(*names)
            self._unsaid += count[0]

    def warm(self, plan: Plan) -> None:
        """For a valid spec's ``plan``: say "compiling kernels" if loading its family compiled, and (cold
        cache) compile the driver's specialisations its cells run, saying so when Numba really compiles
        (:func:`geosweep.sweeps.engine.warm_plan`)."""
        from geosweep.kernels._jit import watch_compiles
        from geosweep.sweeps.engine import warm_plan

        if self._unsaid:
            self._unsaid = 0
            self.announce()
        if self.cold:
            with watch_compiles(on_first=self.announce):
                warm_plan(plan)

    def mark_warm(self) -> None:
        """Record what :meth:`prepare` loaded as compiled (nothing before it)."""
        if self.key:
            mark_warm(self.key)
