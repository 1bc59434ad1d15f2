"""Shared Numba decorator settings for every kernel.

``cache=True`` keeps compiled code on disk, ``nogil=True`` lets Dask threads run kernels
in parallel, and ``error_model="numpy"`` makes a division by zero produce inf/NaN (which
the integrators detect and report as a status) instead of raising inside compiled code.
No ``fastmath``: reassociation would break reversibility and bitwise reproducibility.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from numba import njit
from numba.core.errors import NumbaExperimentalFeatureWarning

# first-class function types carry the family contract (geosweep.kernels.core.signatures); they work
# and are cached, so the "experimental" notice is noise for users
warnings.filterwarnings("ignore", category=NumbaExperimentalFeatureWarning)

JIT_OPTIONS = {"cache": True, "nogil": True, "error_model": "numpy"}

#: the file, in each cache directory of the kernels, naming the kernels' sources its entries were compiled from
SOURCE_MARK = "geosweep-kernels-source.sha1"


def source_fingerprint(root: Path) -> str:
    """SHA-1 of every ``*.py`` under ``root`` (relative paths and contents, sorted)."""
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_dirs(root: Path) -> list[Path]:
    """Where Numba keeps the compiled kernels of the sources under ``root``: each package's
    ``__pycache__``, or its directory under ``NUMBA_CACHE_DIR`` when that is set."""
    from numba.core import config
    from numba.core.caching import _CacheLocator

    packages = sorted({p.parent for p in root.rglob("*.py")})
    if config.CACHE_DIR:
        return [Path(config.CACHE_DIR) / _CacheLocator.get_suitable_cache_subpath(str(d / "x.py")) for d in packages]
    return [d / "__pycache__" for d in packages]


def drop_stale_cache(root: Path, dirs: list[Path]) -> int:
    """Delete the compiled kernels in ``dirs`` unless they were compiled from the sources now under
    ``root``; returns the files deleted.

    Numba checks a cached function against its own file only: after an edit of a function in
    another file that it calls (a ``git pull``, an editable install), it would load the old callee
    compiled in. The fingerprint of all the kernels' sources, kept beside the cache, catches that.
    A read-only cache is left alone."""
    mark = dirs[0] / SOURCE_MARK if dirs else None
    if mark is None:
        return 0
    now = source_fingerprint(root)
    try:
        if mark.exists() and mark.read_text().strip() == now:
            return 0
        gone = 0
        for d in dirs:
            for f in [*d.glob("*.nbi"), *d.glob("*.nbc")]:
                f.unlink(missing_ok=True)
                gone += 1
        mark.parent.mkdir(parents=True, exist_ok=True)
        tmp = mark.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(now + "\n")
        tmp.replace(mark)
        return gone
    except OSError:
        return 0


drop_stale_cache(Path(__file__).resolve().parent, cache_dirs(Path(__file__).resolve().parent))


def kjit(*args, **kwargs):
    """``numba.njit`` with the project's kernel options (see module docstring)."""
    opts = dict(JIT_OPTIONS)
    opts.update(kwargs)
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
