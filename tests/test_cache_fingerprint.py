"""Compiled kernels are never loaded from a cache made from other sources (geosweep.kernels._jit).

Numba checks a cached function against its own source file only, so after an edit of a function
in another file that it calls (a ``git pull`` into an editable install), the caller's cache entry
still holds the old callee. The kernels' cache carries a fingerprint of all their sources and is
dropped when it differs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from geosweep.kernels import _jit

ROOT = Path(__file__).resolve().parent.parent

CALLEE = "from geosweep.kernels._jit import kjit\n\n\n@kjit\ndef f(x):\n    return x + {k}\n"
CALLER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    from geosweep.kernels._jit import drop_stale_cache, kjit

    if sys.argv[1] == "guarded":
        here = Path(__file__).resolve().parent
        drop_stale_cache(here, [here / "__pycache__"])

    from callee import f


    @kjit
    def g(x):
        return f(x)


    print(g(1))
    """
)


def _run(pkg: Path, mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = f"{pkg}{os.pathsep}{ROOT}"
    out = subprocess.run([sys.executable, str(pkg / "caller.py"), mode], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.strip().splitlines()[-1])


def test_a_caller_cached_before_its_callee_changed_is_recompiled(tmp_path):
    for mode in ("plain", "guarded"):
        pkg = tmp_path / mode
        pkg.mkdir()
        (pkg / "callee.py").write_text(CALLEE.format(k=1))
        (pkg / "caller.py").write_text(CALLER)
        assert _run(pkg, mode) == 2  # compiled and cached
        (pkg / "callee.py").write_text(CALLEE.format(k=2))  # only the callee's file changes
        expected = 2 if mode == "plain" else 3
        assert _run(pkg, mode) == expected, mode  # Numba alone loads the stale caller; the guard recompiles


def test_the_cache_is_dropped_only_when_the_sources_change(tmp_path):
    src, cache = tmp_path / "src", tmp_path / "src" / "__pycache__"
    cache.mkdir(parents=True)
    (src / "a.py").write_text("x = 1\n")
    for name in ("a.f-1.py311.nbi", "a.f-1.py311.1.nbc", "a.cpython-311.pyc"):
        (cache / name).write_text("")
    assert _jit.drop_stale_cache(src, [cache]) == 2  # no fingerprint yet: compiled from unknown sources
    assert sorted(p.name for p in cache.iterdir()) == ["a.cpython-311.pyc", _jit.SOURCE_MARK]
    (cache / "a.f-1.py311.nbi").write_text("")
    assert _jit.drop_stale_cache(src, [cache]) == 0  # same sources: kept
    assert (cache / "a.f-1.py311.nbi").exists()
    (src / "a.py").write_text("x = 2\n")
    assert _jit.drop_stale_cache(src, [cache]) == 1
    assert not (cache / "a.f-1.py311.nbi").exists()


def test_the_kernels_cache_names_the_sources_it_was_compiled_from():
    root = Path(_jit.__file__).resolve().parent
    dirs = _jit.cache_dirs(root)
    assert {d.name for d in dirs} == {"__pycache__"} or os.environ.get("NUMBA_CACHE_DIR")
    assert (dirs[0] / _jit.SOURCE_MARK).read_text().strip() == _jit.source_fingerprint(root)
