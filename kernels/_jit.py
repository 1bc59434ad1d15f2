"""Shared Numba decorator settings for every kernel.

``cache=True`` keeps compiled code on disk, ``nogil=True`` lets Dask threads run kernels
in parallel, and ``error_model="numpy"`` makes a division by zero produce inf/NaN (which
the integrators detect and report as a status) instead of raising inside compiled code.
No ``fastmath``: reassociation would break reversibility and bitwise reproducibility.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import os
import re
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from numba import extending, njit
from numba.core import config, sigutils
from numba.core.errors import NumbaExperimentalFeatureWarning
from numba.core.registry import CPUDispatcher

# first-class function types carry the family contract (geosweep.kernels.core.signatures); they work
# and are cached, so the "experimental" notice is noise for users
warnings.filterwarnings("ignore", category=NumbaExperimentalFeatureWarning)

JIT_OPTIONS = {"cache": True, "nogil": True, "error_model": "numpy"}

#: the file, in the first cache directory of the kernels, naming for each source module the sources its
#: cache entries were compiled from (JSON: module path → fingerprint of its dependency closure)
SOURCE_MARK = "geosweep-kernels-source.sha1"
#: the import prefix of the modules under the kernels' root (``geosweep.kernels.s2.stepper`` is ``s2/stepper.py``)
PACKAGE = "geosweep.kernels"


def _file_digests(root: Path) -> dict[str, str]:
    """Relative path of every ``*.py`` under ``root`` → SHA-1 of its contents."""
    return {p.relative_to(root).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest() for p in root.rglob("*.py")}


def _digest(files: dict[str, str], rels: Iterable[str]) -> str:
    """SHA-1 over the relative paths and content digests of ``rels`` (sorted)."""
    return hashlib.sha1("".join(f"{rel}\0{files[rel]}\0" for rel in sorted(rels)).encode()).hexdigest()


def source_fingerprint(root: Path) -> str:
    """SHA-1 of every ``*.py`` under ``root`` (relative paths and contents, sorted)."""
    files = _file_digests(root)
    return _digest(files, files)


def _module_names(root: Path) -> dict[str, str]:
    """Dotted name relative to ``root`` (``s2.stepper``, ``s2`` for its ``__init__``) → relative path."""
    out = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        parts = rel.parts[:-1] if rel.name == "__init__.py" else (*rel.parts[:-1], rel.stem)
        out[".".join(parts)] = rel.as_posix()
    return out


_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+\S+[ \t]+import\b|import[ \t])")


def _import_statements(text: str) -> ast.Module:
    """The import statements of a module's source (at any depth), parsed without the rest: parsing and
    walking whole modules costs ~10× more."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if _IMPORT_LINE.match(lines[i]):
            stmt = lines[i].strip()
            while (stmt.count("(") > stmt.count(")") or stmt.endswith("\\")) and i + 1 < len(lines):
                i += 1
                stmt = stmt.rstrip("\\") + " " + lines[i].strip()
            out.append(stmt.split("#", 1)[0] if "(" not in stmt else stmt)
        i += 1
    try:
        return ast.parse("\n".join(out))
    except SyntaxError:  # an import line inside a string: parse the whole module instead
        return ast.parse(text)


def _imported(tree: ast.AST, package: str, names: dict[str, str]) -> set[str]:
    """The modules under the root that a module (in ``package``, dotted) imports: absolute imports with or
    without the :data:`PACKAGE` prefix, and relative ones; ``from x import y`` is module ``x.y`` if that
    is a module, else ``x``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bases = [a.name for a in node.names]
            subs: list[str] = []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = package.split(".") if package else []
                up = up[: len(up) - node.level + 1] if node.level > 1 else up
                bases = [".".join([*up, *([node.module] if node.module else [])])]
            else:
                bases = [node.module or ""]
            subs = [a.name for a in node.names]
        else:
            continue
        for base in bases:
            base = base[len(PACKAGE) + 1 :] if base.startswith(PACKAGE + ".") else "" if base == PACKAGE else base
            hits = [f"{base}.{s}" if base else s for s in subs]
            found.update(h for h in hits if h in names)
            if base in names and not any(h in names for h in hits):
                found.add(base)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Relative path of each module under ``root`` → the relative paths of the modules it imports."""
    names = _module_names(root)
    graph = {}
    for name, rel in names.items():
        package = name if rel.endswith("__init__.py") else name.rpartition(".")[0]
        tree = _import_statements((root / rel).read_text(encoding="utf-8"))
        graph[rel] = {names[m] for m in _imported(tree, package, names)} - {rel}
    return graph


def _reach(start: str, graph: dict[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def closure_fingerprints(root: Path, files: dict[str, str] | None = None) -> dict[str, str]:
    """Relative path of each module → SHA-1 of the sources its compiled kernels may hold: the module
    and what it imports, directly or not.

    Numba resolves a callee named as a global when it compiles the caller and keys the cache entry on
    the caller's own file and bytecode only, so a callee's edit reaches its callers through the
    importers of its module. Functions passed as arguments or captured by a factory's closure are in
    Numba's own cache key (tests/test_cache_fingerprint.py checks both), and the shared driver calls
    the families' functions through first-class function types, so it holds no family's code."""
    graph = import_graph(root)
    files = _file_digests(root) if files is None else files
    return {rel: _digest(files, _reach(rel, graph)) for rel in graph}


def cache_dirs(root: Path) -> list[Path]:
    """Where Numba keeps the compiled kernels of the sources under ``root``: each package's
    ``__pycache__``, or its directory under ``NUMBA_CACHE_DIR`` when that is set (one per package
    directory, in sorted order of the directories)."""
    from numba.core import config
    from numba.core.caching import _CacheLocator

    packages = sorted({p.parent for p in root.rglob("*.py")})
    if config.CACHE_DIR:
        return [Path(config.CACHE_DIR) / _CacheLocator.get_suitable_cache_subpath(str(d / "x.py")) for d in packages]
    return [d / "__pycache__" for d in packages]


def _read_mark(mark: Path) -> dict:
    """``{"tree": fingerprint of every source, "modules": {path: closure fingerprint}}``, or ``{}``."""
    try:
        data = json.loads(mark.read_text())
    except (OSError, ValueError):
        return {}  # none yet, or the whole-tree fingerprint of before: every entry is of unknown sources
    return data if isinstance(data, dict) and isinstance(data.get("modules"), dict) else {}


def drop_stale_cache(root: Path, dirs: list[Path]) -> int:
    """Delete the compiled kernels in ``dirs`` (the cache directories of the package directories under
    ``root``, as :func:`cache_dirs` orders them) of each module whose dependency closure changed since
    they were compiled; returns the files deleted.

    Numba checks a cached function against its own file only: after an edit of a function in another
    file that it calls (a ``git pull``, an editable install), it would load the old callee compiled
    in. The fingerprints of :func:`closure_fingerprints`, kept beside the cache, catch that; an edit of
    one family's module recompiles that family and what shares code with it, not every family. A
    read-only cache is left alone."""
    if not dirs:
        return 0
    mark = dirs[0] / SOURCE_MARK
    files = _file_digests(root)
    tree = _digest(files, files)
    try:
        before = _read_mark(mark)
        if before.get("tree") == tree:
            return 0  # the import graph is parsed only when a source changed
        now = closure_fingerprints(root, files)
        stale = {rel for rel, digest in now.items() if before.get("modules", {}).get(rel) != digest}
        packages = sorted({p.parent for p in root.rglob("*.py")})
        gone = 0
        for package, d in zip(packages, dirs, strict=False):
            for rel in stale:
                path = root / rel
                if path.parent == package:
                    for f in [*d.glob(f"{path.stem}.*.nbi"), *d.glob(f"{path.stem}.*.nbc")]:
                        f.unlink(missing_ok=True)
                        gone += 1
        mark.parent.mkdir(parents=True, exist_ok=True)
        tmp = mark.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"tree": tree, "modules": now}, indent=0, sort_keys=True) + "\n")
        tmp.replace(mark)
        return gone
    except OSError:
        return 0


drop_stale_cache(Path(__file__).resolve().parent, cache_dirs(Path(__file__).resolve().parent))


class DeclaredDispatcher(CPUDispatcher):
    """The dispatcher of ``njit(signatures)``, with those signatures compiled (or loaded from the on-disk
    cache) on first use instead of at decoration: importing a family, listing its systems, compiles nothing.

    First use is anything that needs an overload: a call from Python, typing a call from another kernel,
    a conversion to a first-class function type, reading ``overloads``/``signatures``/``stats``, pickling.
    It then compiles the declared signatures as ``njit`` does and disables compilation, so from there on it
    is the eager dispatcher: the same overloads (the same cache entries) and the same argument conversions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._declared: tuple | None = None  # the signatures still to compile (None: compiled)
        self._compiling_declared = False
        super().__init__(*args, **kwargs)

    @property
    def overloads(self) -> dict:  # type: ignore[override]  # the base's attribute, compiled on first read
        if self._declared is not None:
            self.compile_declared()
        return self.__dict__["_overloads"]

    @overloads.setter
    def overloads(self, value: dict) -> None:
        self.__dict__["_overloads"] = value

    def compile_declared(self) -> None:
        """Compile the declared signatures now (idempotent; thread-safe under Numba's compiler lock)."""
        from numba.core import typeinfer
        from numba.core.compiler_lock import global_compiler_lock

        with global_compiler_lock:
            if self._declared is None or self._compiling_declared:
                return  # compiled, or this thread is compiling them (a recursive kernel's typing)
            self._compiling_declared = True
            try:
                with typeinfer.register_dispatcher(self):
                    for sig in self._declared:
                        super().compile(sig)
                    self._declared = None
                    self.disable_compile()
            finally:
                self._compiling_declared = False

    def compile(self, sig: Any) -> Any:
        self.compile_declared()
        return super().compile(sig)

    def _compile_for_args(self, *args: Any, **kws: Any) -> Any:
        if self._declared is not None:
            self.compile_declared()
            return self  # Numba's C dispatcher calls the result with the arguments: the declared overloads
        return super()._compile_for_args(*args, **kws)

    def get_call_template(self, args: Any, kws: Any) -> Any:
        self.compile_declared()
        return super().get_call_template(args, kws)

    def _reduce_states(self) -> dict:
        self.compile_declared()
        return super()._reduce_states()

    @property
    def stats(self) -> Any:
        self.compile_declared()
        return super().stats


#: process-wide state: every live :class:`DeclaredDispatcher` made (:func:`compile_declared`); weak, so
#: that the kernels a factory makes at run time (a user's dg system, a driver's entry) can be freed
_DECLARED: weakref.WeakSet[DeclaredDispatcher] = weakref.WeakSet()


def _declared(sigs: list, fn: Callable, opts: dict[str, Any]) -> DeclaredDispatcher:
    """What ``njit(sigs, **opts)(fn)`` makes, its signatures left to compile on first use."""
    if extending.is_jitted(fn) or not inspect.isfunction(fn):
        return njit(sigs, **opts)(fn)  # numba's own error message
    options = {k: v for k, v in opts.items() if k != "cache"}
    options["nopython"] = True  # what njit sets
    options.setdefault("boundscheck", None)
    disp = DeclaredDispatcher(py_func=fn, locals={}, targetoptions=options)
    if opts.get("cache"):
        disp.enable_caching()
    disp._declared = tuple(sigs)
    _DECLARED.add(disp)
    return disp


def compile_declared() -> int:
    """Compile (or load from the cache) the declared signatures of every kernel made so far; returns how many
    kernels had them pending (``geosweep serve`` and the compile helpers compile a family at once)."""
    pending = [d for d in list(_DECLARED) if d._declared is not None]
    for d in pending:
        d.compile_declared()
    return len(pending)


def kjit(*args: Any, **kwargs: Any) -> Any:
    """``numba.njit`` with the project's kernel options (see module docstring). Explicit signatures
    (``kjit(sig)``, ``kjit([sig, ...])``) compile on first use (:class:`DeclaredDispatcher`), not here."""
    opts = dict(JIT_OPTIONS)
    opts.update(kwargs)
    sig = args[0] if len(args) == 1 else None
    if sig is not None and not kwargs.get("locals") and not config.DISABLE_JIT:
        if isinstance(sig, list) or sigutils.is_signature(sig):
            sigs = sig if isinstance(sig, list) else [sig]
            return lambda fn: _declared(sigs, fn, opts)
    return njit(*args, **opts)


@contextmanager
def watch_compiles(on_first: Callable[[], None] | None = None) -> Iterator[list[int]]:
    """Count the functions Numba really compiles inside the block (a load from the on-disk cache is
    not a compile); ``on_first()`` runs when the first compile starts. Yields ``[count]``."""
    from numba.core import event

    count = [0]

    class _Notice(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            count[0] += 1
            if count[0] == 1 and on_first is not None:
                on_first()

        def on_end(self, ev: event.Event) -> None:
            pass

    with event.install_listener("numba:compile", _Notice()):
        yield count
